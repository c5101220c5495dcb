"""A project with no test suite, built and verified as a user does (`crossbuild quick`): its executables are
started, its shared library loaded with every export resolved, its static library linked whole, all on the
target under qemu, and the verdict says `exercised`; a product that crashes on the target keeps it at `built`, and
the default bar (`--require exercised`) then refuses it with exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cb, outcome_of

CMAKE = """cmake_minimum_required(VERSION 3.10)
project(greet C)
add_library(greet SHARED greet.c)
add_library(greet_static STATIC greet.c)
set_target_properties(greet_static PROPERTIES OUTPUT_NAME greet)
add_executable(greet-cli cli.c)
target_link_libraries(greet-cli greet)
add_executable(greet-recover recover.c)
add_executable(greet-filter filter.c)
add_library(greet_main STATIC greet_main.c)
include(CheckTypeSize)
check_type_size("long double" LONG_DOUBLE)
if(WITH_CRASH)
  add_executable(greet-crash crash.c)
endif()
"""
LIBRARY = """#include <stdio.h>
int greet_add(int a, int b) { return a + b; }
const char *greet_version(void) { return "1.0"; }
int greet_counter = 3;
"""
CLI = """#include <stdio.h>
#include <string.h>
int greet_add(int, int);
const char *greet_version(void);
int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        printf("greet %s (%d)\\n", greet_version(), greet_add(2, 3));
        return 0;
    }
    fprintf(stderr, "usage: greet-cli --version\\n");
    return 2;
}
"""
RECOVER = """#include <stdio.h>
int main(int argc, char **argv) {
    fprintf(stderr, "greet-recover 1.0: extracts greetings\\n%s: usage is `%s damaged-file'.\\n", argv[0], argv[0]);
    return 1;
}
"""
FILTER = """#include <stdio.h>
int main(void) {
    if (getchar() == EOF) { fprintf(stderr, "greet-filter: empty input, not a greeting\\n"); return 1; }
    return 0;
}
"""
MAIN_LIBRARY = """#include <stdio.h>
int main(int argc, char **argv) { printf("greet_main: %d arguments\\n", argc - 1); return 0; }
"""
CRASH = """int main(int argc, char **argv) { volatile int *p = (int *)(long)(argc - 1); return *p; }
"""


def _project(tmp_path: Path, crash: bool) -> Path:
    src = tmp_path / "greet"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(CMAKE.replace("if(WITH_CRASH)", "if(TRUE)" if crash else "if(FALSE)"))
    (src / "greet.c").write_text(LIBRARY)
    (src / "cli.c").write_text(CLI)
    (src / "crash.c").write_text(CRASH)
    (src / "recover.c").write_text(RECOVER)
    (src / "filter.c").write_text(FILTER)
    (src / "greet_main.c").write_text(MAIN_LIBRARY)
    return src


def _report(stdout: str) -> dict:
    return json.loads(stdout[stdout.index("\n{") + 1:] if not stdout.startswith("{") else stdout)


@pytest.mark.slow
def test_a_project_without_tests_is_exercised_on_the_target(tmp_path):
    src = _project(tmp_path, crash=False)
    r = cb("quick", str(src), "-t", "aarch64-linux-musl", "--system", "cmake", "-w", str(tmp_path / "ws"), "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = _report(r.stdout)
    assert report["ok"] and report["smoke_runs"] == []
    assert report["proof"] == "exercised", (report["proof"], report["proof_why"], report["probe_runs"])
    assert report["proof_why"].startswith("no test program was built")
    probes = {Path(p["path"]).name: p for p in report["probe_runs"]}
    # CheckTypeSize's LONG_DOUBLE.bin is a configure check in CMakeFiles/, checked for the target but never started
    assert any(a["path"].endswith("LONG_DOUBLE.bin") for a in report["artifacts"]), "the check is scanned"
    assert not any("CMakeFiles" in p["path"] for p in report["probe_runs"])
    assert probes["greet-cli"]["passed"] and probes["greet-cli"]["checked"] == "ran `greet-cli --version`: exit 0"
    shared = next(p for name, p in probes.items() if name.startswith("libgreet.so"))
    # greet_add, greet_version and greet_counter, at least: each was resolved by dlsym on the target
    assert shared["passed"] and "dlsym of its" in shared["checked"], shared
    assert int(shared["checked"].split("its ")[1].split()[0]) >= 3
    assert probes["libgreet.a"]["passed"] and probes["libgreet.a"]["checked"].startswith("linked whole")
    assert probes["greet-recover"]["passed"] and "printed its usage (exit 1)" in probes["greet-recover"]["checked"]
    assert probes["greet-filter"]["passed"] and "exited normally with its own error (exit 1: \"greet-filter: empty" \
        in probes["greet-filter"]["checked"], probes["greet-filter"]
    # an archive that defines main() is a program's entry (gtest_main): linked whole as the program and started
    assert probes["libgreet_main.a"]["passed"], probes["libgreet_main.a"]
    assert "as the program (it defines main()), then ran `" in probes["libgreet_main.a"]["checked"]
    counts = report["proof_counts"]
    assert counts["probes_run"] == counts["probes_passed"] == 6, counts


@pytest.mark.slow
def test_a_product_that_crashes_on_the_target_keeps_the_verdict_at_built(tmp_path):
    src = _project(tmp_path, crash=True)
    ws = tmp_path / "ws"
    r = cb("quick", str(src), "-t", "aarch64-linux-musl", "--system", "cmake", "-w", str(ws), "--json")
    report = _report(r.stdout)
    assert report["ok"] and report["proof"] == "built", (report["proof"], report["proof_why"])
    crash = next(p for p in report["probe_runs"] if p["path"].endswith("greet-crash"))
    assert not crash["passed"] and "signal" in crash["why"].lower(), crash
    assert "greet-crash" in report["proof_why"] and "1 of 7 probes did not pass" in report["proof_why"]
    assert r.returncode == 1, "the default bar is exercised"
    # the user may accept less, and says so
    r = cb("verify", str(ws / "build"), "-t", "aarch64-linux-musl", "--require", "built")
    assert r.returncode == 0 and "built:" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


BROKEN_TESTS_PROJECT = """cmake_minimum_required(VERSION 3.10)
project(counted C)
add_library(counted STATIC counted.c)
add_executable(example_counted example.c)
target_link_libraries(example_counted counted)
add_executable(counted_test tests/counted_test.c)
target_link_libraries(counted_test counted)
"""


@pytest.mark.slow
def test_tests_switched_off_by_a_fix_cannot_make_the_verdict_tested(tmp_path):
    """The project's test program cannot be built (its harness header is missing from the release): the planner
    builds the targets that build by name without it (the example among them), and the build verifies: the
    library runs on the target (linked whole into a probe), but the verdict names what left the tests out and stays
    below `tested`."""
    src = tmp_path / "counted"
    (src / "tests").mkdir(parents=True)
    (src / "CMakeLists.txt").write_text(BROKEN_TESTS_PROJECT)
    (src / "counted.c").write_text("int counted(int n) { return n + 1; }\n")
    (src / "example.c").write_text('#include <stdio.h>\nint counted(int);\nint main(void) {\n'
                                   '    printf("%d\\n", counted(41));\n    return counted(41) == 42 ? 0 : 1;\n}\n')
    (src / "tests" / "counted_test.c").write_text('#include "harness_not_shipped.h"\nint main(void) { return 0; }\n')
    r = cb("build", str(src), "-t", "aarch64-linux-musl", "-w", str(tmp_path / "ws"), "--db",
           str(tmp_path / "runs.db"), "--prefix", str(tmp_path / "prefix"), "--json", cwd=tmp_path, timeout=3000)
    out = outcome_of(r.stdout)
    report = out["verify"]
    assert out["status"] == "verified", out["message"]
    # the example that builds is built and may run; the test that does not is named, never run
    assert "counted_test" in out["message"] and all(r["path"] != "counted_test" for r in report["smoke_runs"])
    assert [(p["path"], p["passed"]) for p in report["probe_runs"]] == [("libcounted.a", True)]
    assert report["proof"] == "exercised", (report["proof"], report["proof_why"])
    assert report["proof_why"].startswith("tests not built: "), report["proof_why"]
    assert r.returncode == 0 and out["meets_requirement"]


INSTALLS_ITS_TOOL = """cmake_minimum_required(VERSION 3.10)
project(served C)
add_executable(served-cli cli.c)
# a test helper the install leaves out, which waits for a client (miniupnpc's minihttptestserver)
add_executable(httpserver server.c)
install(TARGETS served-cli)
"""
# answers --version at once, unless the folder it runs in holds WAIT: then it waits, as a server would
WAITS_WHEN_TOLD = """#include <stdio.h>
#include <unistd.h>
int main(void) {
    if (access("WAIT", F_OK) == 0) sleep(3600);
    printf("served 1.0\\n");
    return 0;
}
"""
SERVES = "#include <unistd.h>\nint main(void) { sleep(3600); return 0; }\n"


@pytest.mark.slow
def test_the_products_are_what_the_install_installs_and_a_waiting_one_is_stopped_soon(tmp_path):
    from crossbuild.env import sandbox, workspace
    from crossbuild.env.toolchain import Toolchain
    from crossbuild.foundation.targets import TARGETS
    from crossbuild.proof.verify import verify

    src = tmp_path / "served"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(INSTALLS_ITS_TOOL)
    (src / "cli.c").write_text(WAITS_WHEN_TOLD)
    (src / "server.c").write_text(SERVES)
    ws = tmp_path / "ws"
    r = cb("quick", str(src), "-t", "aarch64-linux-musl", "--system", "cmake", "-w", str(ws), "--json")
    report = _report(r.stdout)
    assert r.returncode == 0 and report["proof"] == "exercised", (report["proof"], report["proof_why"])
    # the helper the install leaves out is built and checked for the target, never started as a product
    assert any(a["path"] == "httpserver" for a in report["artifacts"])
    assert [p["path"] for p in report["probe_runs"]] == ["served-cli"], report["probe_runs"]
    # a product that does not answer a harmless invocation: one short limit (10 s x the slowdown, capped by the
    # limit of a test), then no other invocation
    (ws / "build" / "WAIT").write_text("")
    target = TARGETS["aarch64-linux-musl"]
    tc = Toolchain.for_target(target, workspace.enclosing(ws / "build")).materialise(warm=("c",))
    verdict = verify(ws / "build", target, toolchain=tc, box=sandbox.for_toolchain(tc), smoke_timeout_s=2.0)
    [probe] = verdict.probe_runs
    assert not probe.passed and probe.checked == "ran `served-cli --version`", probe
    assert "timed out" in probe.why and probe.duration_s < 60, probe
    assert verdict.proof == "built"
