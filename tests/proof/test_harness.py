"""The project's own harness runs its tests on the target (`crossbuild quick`, as a user runs it): CTest, automake's
`make check` and `meson test`, each giving its tests the arguments and scripts the project wrote, with every target
program a script starts handed to qemu by the sandbox's binfmt registration. Also: CTest's console as a real CTest
prints it, read test by test."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from crossbuild.proof import harness, harness_tie, target_run
from crossbuild.proof import harness_records as records
from tests.conftest import cb

TARGET = "aarch64-linux-musl"

LIBRARY = "int hsum(int a, int b) { return a + b; }\n"
TOOL = """#include <stdio.h>
#include <stdlib.h>
int hsum(int, int);
int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: hsumtool A B\\n"); return 2; }
    printf("%d\\n", hsum(atoi(argv[1]), atoi(argv[2])));
    return 0;
}
"""
# like libarchive's test programs: bare, it prints its usage; its harness gives it its arguments
CHECK = """#include <stdio.h>
#include <stdlib.h>
int hsum(int, int);
int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: check_sum A B SUM\\n"); return 2; }
    return hsum(atoi(argv[1]), atoi(argv[2])) == atoi(argv[3]) ? 0 : 1;
}
"""
# a script round trip (xz's, brotli's): the shell is the build machine's, the program it starts the target's
ROUNDTRIP = """#!/bin/sh
out=$("$1" 20 22) || exit 1
[ "$out" = "$2" ] || { echo "roundtrip: expected $2, got $out"; exit 1; }
"""
CMAKE = """cmake_minimum_required(VERSION 3.16)
project(hsum C)
enable_testing()
add_library(hsum hsum.c)
add_executable(hsumtool tool.c)
target_link_libraries(hsumtool hsum)
add_executable(check_sum check_sum.c)
target_link_libraries(check_sum hsum)
add_test(NAME direct COMMAND check_sum 2 3 5)
add_test(NAME script COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/roundtrip.sh $<TARGET_FILE:hsumtool> EXPECTED)
install(TARGETS hsum hsumtool)
"""


def _quick(src: Path, ws: Path, *extra: str) -> dict:
    r = cb("quick", str(src), "-t", TARGET, "-w", str(ws), "--json", *extra)
    out = r.stdout
    report = json.loads(out[out.index("\n{") + 1:] if not out.startswith("{") else out)
    report["exit"] = r.returncode
    return report


def _cmake_project(tmp_path: Path, expected: str) -> Path:
    src = tmp_path / "hsum"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(CMAKE.replace("EXPECTED", expected))
    (src / "hsum.c").write_text(LIBRARY)
    (src / "tool.c").write_text(TOOL)
    (src / "check_sum.c").write_text(CHECK)
    (src / "roundtrip.sh").write_text(ROUNDTRIP)
    return src


@pytest.mark.slow
def test_ctest_runs_the_projects_tests_with_their_arguments_and_scripts_on_the_target(tmp_path):
    report = _quick(_cmake_project(tmp_path, "42"), tmp_path / "ws", "--system", "cmake")
    assert report["exit"] == 0 and report["ok"], report["reasons"]
    assert report["harness"] == "ctest"
    runs = {r["path"]: r for r in report["smoke_runs"]}
    assert set(runs) == {"direct", "script"}, runs
    # the script passing means the shell (the build machine's) started the aarch64 program it was given: binfmt
    assert all(r["passed"] and r["harness"] == "ctest" for r in runs.values()), runs
    assert report["proof"] == "tested" and report["proof_counts"]["passed"] == 2, report["proof_counts"]


@pytest.mark.slow
def test_a_script_test_that_fails_on_the_target_is_a_failure_with_its_message(tmp_path):
    report = _quick(_cmake_project(tmp_path, "43"), tmp_path / "ws", "--system", "cmake")
    script = next(r for r in report["smoke_runs"] if r["path"] == "script")
    assert not script["passed"] and "roundtrip: expected 43, got 42" in script["why"], script
    assert report["proof"] != "tested"


# jsoncpp's two reader tests: each writes its results into the same file of one folder and reads them back
SHARES_A_FILE = """#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* each says it started, then waits (at most 8 s) for its sibling to have started too: side by side, the one that
   wrote first reads its sibling's word back; alone, it reads its own */
int main(int argc, char **argv) {
    const char *sibling = strcmp(argv[1], "first") == 0 ? "second.started" : "first.started";
    char mine[64];
    snprintf(mine, sizeof mine, "%s.tmp", argv[1]);
    FILE *f = fopen(mine, "w");
    fputs(argv[1], f);
    fclose(f);
    rename(mine, "shared.actual");  /* whole words only: the last one written wins */
    snprintf(mine, sizeof mine, "%s.started", argv[1]);
    fclose(fopen(mine, "w"));
    for (int i = 0; i < 80 && access(sibling, F_OK) != 0; i++) usleep(100000);
    usleep(500000);
    char back[64] = {0};
    f = fopen("shared.actual", "r");
    fgets(back, sizeof back, f);
    fclose(f);
    if (strcmp(back, argv[1]) != 0) { printf("expected %s, read %s\\n", argv[1], back); return 1; }
    return 0;
}
"""
RACE_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(race C)
enable_testing()
add_executable(writes_back writes_back.c)
add_test(NAME first COMMAND writes_back first WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
add_test(NAME second COMMAND writes_back second WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
add_test(NAME third COMMAND writes_back third WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
install(TARGETS writes_back)
"""


@pytest.mark.slow
def test_tests_that_race_on_a_shared_file_when_run_side_by_side_are_not_counted_when_they_pass_alone(tmp_path):
    src = tmp_path / "race"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(RACE_CMAKE)
    (src / "writes_back.c").write_text(SHARES_A_FILE)
    report = _quick(src, tmp_path / "ws", "--system", "cmake")
    runs = {r["path"]: r for r in report["smoke_runs"]}
    # side by side, one of the two read the other's words back: alone it passes twice, and is listed, not counted
    alone = [r for r in runs.values() if (r["why"] or "").startswith("passed twice when run again alone")]
    assert len(alone) == 1 and not alone[0]["passed"] and alone[0]["triage"] == "environment", {
        p: (r["passed"], r["why"], r["output_tail"][-200:]) for p, r in runs.items()}
    assert report["proof_counts"]["passed"] == 2 and report["proof_counts"]["not_counted"] == 1, runs
    assert report["proof"] == "tested", (report["proof_why"], runs)


# libzip's preload test: the script preloads a target library into the target program it starts, and any word on
# stderr fails it (the host loader's complaint about a foreign LD_PRELOAD, under a dynamic qemu, would)
PRELOAD_CMAKE = CMAKE.replace("add_library(hsum hsum.c)", "add_library(hsum SHARED hsum.c)  # a dynamic hsumtool")
PRELOAD_CMAKE = PRELOAD_CMAKE.replace("add_test(NAME direct", """add_library(hello SHARED hello.c)
add_test(NAME preload COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/preload.sh $<TARGET_FILE:hsumtool> $<TARGET_FILE:hello>)
add_test(NAME direct""")
PRELOAD_SH = """#!/bin/sh
out=$(LD_PRELOAD="$2" "$1" 20 22 2>stderr.txt) || { cat stderr.txt; exit 1; }
[ ! -s stderr.txt ] || { echo "unexpected stderr:"; cat stderr.txt; exit 1; }
[ "$out" = "$(printf 'preloaded\\n42')" ] || { echo "expected the preloaded greeting, got: $out"; exit 1; }
"""
HELLO = '#include <stdio.h>\n__attribute__((constructor)) static void hello(void) { puts("preloaded"); }\n'


@pytest.mark.slow
def test_a_library_a_test_preloads_into_its_target_program_reaches_only_the_targets_loader(tmp_path):
    src = _cmake_project(tmp_path, "42")
    (src / "CMakeLists.txt").write_text(PRELOAD_CMAKE.replace("EXPECTED", "42"))
    (src / "preload.sh").write_text(PRELOAD_SH)
    (src / "hello.c").write_text(HELLO)
    report = _quick(src, tmp_path / "ws", "--system", "cmake")
    runs = {r["path"]: r for r in report["smoke_runs"]}
    assert runs["preload"]["passed"], (runs["preload"]["why"], runs["preload"]["output_tail"])
    assert report["proof"] == "tested", report["proof_why"]


AUTOMAKE = """lib_LIBRARIES = libamsum.a
libamsum_a_SOURCES = amsum.c
bin_PROGRAMS = amsumtool
amsumtool_SOURCES = tool.c
amsumtool_LDADD = libamsum.a
check_PROGRAMS = t_sum
t_sum_LDADD = libamsum.a
TESTS = t_sum roundtrip.sh skipped.sh
EXTRA_DIST = roundtrip.sh skipped.sh
"""
CONFIGURE = """AC_INIT([amsum], [1.0])
AM_INIT_AUTOMAKE([foreign])
AC_PROG_CC
AC_PROG_RANLIB
AC_CONFIG_FILES([Makefile])
AC_OUTPUT
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("autoreconf") is None, reason="needs autotools (scripts/setup.sh)")
def test_make_check_runs_automakes_tests_and_reads_each_result(tmp_path):
    src = tmp_path / "amsum"
    src.mkdir()
    (src / "configure.ac").write_text(CONFIGURE)
    (src / "Makefile.am").write_text(AUTOMAKE)
    (src / "amsum.c").write_text(LIBRARY.replace("hsum", "amsum"))
    (src / "tool.c").write_text(TOOL.replace("hsum", "amsum"))
    (src / "t_sum.c").write_text("int amsum(int, int);\nint main(void) { return amsum(2, 3) == 5 ? 0 : 1; }\n")
    (src / "roundtrip.sh").write_text('#!/bin/sh\n[ "$(./amsumtool 20 22)" = 42 ]\n')
    (src / "skipped.sh").write_text("#!/bin/sh\necho 'needs a terminal'\nexit 77\n")
    for script in ("roundtrip.sh", "skipped.sh"):
        (src / script).chmod(0o755)
    report = _quick(src, tmp_path / "ws", "--system", "autotools")
    assert report["ok"] and report["harness"] == "make check", report["reasons"]
    runs = {r["path"]: r for r in report["smoke_runs"]}
    assert set(runs) == {"t_sum", "roundtrip.sh", "skipped.sh"}, runs
    assert runs["t_sum"]["passed"] and runs["roundtrip.sh"]["passed"]
    assert runs["skipped.sh"]["skipped"] == "make check: SKIP"
    assert report["proof"] == "tested" and report["proof_counts"]["ran"] == 2, report["proof_counts"]


@pytest.mark.slow
def test_meson_test_runs_the_projects_tests_and_honours_should_fail(tmp_path):
    src = tmp_path / "mssum"
    src.mkdir()
    (src / "meson.build").write_text(
        "project('mssum', 'c')\nlib = static_library('mssum', 'mssum.c', install: true)\n"
        "t = executable('t_sum', 't_sum.c', link_with: lib)\n"
        "test('sum', t)\ntest('refuses_arguments', t, args: ['x'], should_fail: true)\n")
    (src / "mssum.c").write_text(LIBRARY.replace("hsum", "mssum"))
    (src / "t_sum.c").write_text("int mssum(int, int);\n"
                                 "int main(int c, char **v) { return c == 1 && mssum(2, 3) == 5 ? 0 : 1; }\n")
    report = _quick(src, tmp_path / "ws", "--system", "meson")
    assert report["ok"] and report["harness"] == "meson test", report["reasons"]
    assert {r["path"]: r["passed"] for r in report["smoke_runs"]} == {"mssum:sum": True,
                                                                       "mssum:refuses_arguments": True}
    assert report["proof"] == "tested"


STATUSES = """cmake_minimum_required(VERSION 3.16)
project(statuses NONE)
enable_testing()
add_test(NAME good COMMAND sh -c "sleep 0.3; echo fine")
add_test(NAME bad COMMAND sh -c "sleep 0.1; echo 'assertion failed: x == 1'; sleep 0.4; exit 3")
add_test(NAME segv COMMAND sh -c "kill -SEGV $$")
add_test(NAME slow COMMAND sh -c "sleep 5")
add_test(NAME skipme COMMAND sh -c "exit 77")
set_tests_properties(skipme PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME missing COMMAND /nonexistent/prog)
add_test(NAME off COMMAND sh -c "exit 0")
set_tests_properties(off PROPERTIES DISABLED TRUE)
"""


@pytest.mark.skipif(shutil.which("ctest") is None, reason="needs cmake")
def test_ctests_console_is_read_test_by_test(tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(STATUSES)
    subprocess.run(["cmake", "-S", tmp_path, "-B", tmp_path / "b"], check=True, capture_output=True)
    # side by side, as the verifier runs them: each line is told apart by its test's number
    console = subprocess.run(["ctest", "--test-dir", tmp_path / "b", "-j3", "--timeout", "1",
                              "--verbose"], capture_output=True, text=True).stdout
    found, unfinished = records.ctest(records.lines_of(console))
    runs = {r.path: r for r in found}
    assert unfinished == []
    assert sorted(runs) == ["bad", "good", "missing", "off", "segv", "skipme", "slow"]
    assert runs["good"].passed and not runs["bad"].passed
    assert runs["good"].output_tail == "fine" and "assertion failed: x == 1" in runs["bad"].output_tail
    assert runs["segv"].exit_code == -11 and runs["slow"].stopped == "timeout"
    assert runs["skipme"].skipped == "ctest: Skipped" and runs["off"].skipped == "ctest: Not Run (Disabled)"
    assert runs["missing"].skipped.startswith("ctest: Not Run") and "Could not find" in runs["missing"].output_tail
    cut = console[:console.index("Test #1: good")]  # the harness stopped before `good` reported
    assert "good" in records.ctest(records.lines_of(cut))[1]
    for name in ("bad", "segv", "slow"):
        r = runs[name]
        r.harness = "ctest"
        harness._judge(r, 1.0, 1.0, tmp_path)
    assert (runs["bad"].triage, runs["segv"].triage, runs["slow"].triage) == ("failed", "crashed", "failed")
    assert "assertion failed" in runs["bad"].why


def test_automake_results_and_meson_logs_are_read_from_the_build_folder(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "a.trs").write_text(":test-result: PASS\n:global-test-result: PASS\n")
    (tmp_path / "tests" / "b.trs").write_text(":test-result: PASS\n:test-result: FAIL\n")
    (tmp_path / "tests" / "b.log").write_text("ok 1 one\nnot ok 2 two: expected 3, got 4\n")
    (tmp_path / "tests" / "c.trs").write_text(":test-result: SKIP\n")
    (tmp_path / "tests" / "d.trs").write_text(":test-result: XPASS\n")
    runs = {r.path: r for r in records.automake(tmp_path, 0.0, [])}
    assert runs["tests/a"].passed and runs["tests/c"].skipped
    assert not runs["tests/b"].passed and "expected 3, got 4" in runs["tests/b"].output_tail
    assert not runs["tests/d"].passed and "XPASS" in runs["tests/d"].why
    # written before the harness started: another run's
    assert records.automake(tmp_path, 4e9, ["PASS: console_only"])[0].path == "console_only"
    (tmp_path / "meson-logs").mkdir()
    (tmp_path / "meson-logs" / "testlog.json").write_text(
        '{"name": "p:ok", "result": "OK", "returncode": 0}\nnot json\n[1]\n'
        '{"name": "p:hang", "result": "TIMEOUT", "returncode": -15, "stdout": "waiting"}\n'
        '{"name": "p:odd", "result": "OK", "duration": "abc"}\n' + "[" * 200_000 + "\n"
        '{"name": "p:long", "result": "OK", "env": {"A": "' + "x" * 9000 + '"}}\n')
    meson = {r.path: r for r in records.meson(tmp_path, 0.0)}
    assert meson["p:ok"].passed and meson["p:hang"].stopped == "timeout"
    assert set(meson) == {"p:ok", "p:hang", "p:odd", "p:long"}


def test_perls_test_harness_on_a_goals_console_is_read_file_by_file():
    """OpenSSL's `make test` (Perl's Test::Harness): one run per test file, its output with it, the summary's
    failures failed whatever the file's own line said; without a `Result:` line it is no Test::Harness console."""
    console = records.lines_of(
        "make depend && make _tests\n"
        "00-prep_fipsmodule_cnf.t .......... skipped: FIPS module config file only supported in a fips build\n"
        "01-test_abort.t ................... ok\n"
        "02-test_errstr.t .................. \n"
        "not ok 3 - match 'Previous owner died' (80000082) with one of ( 'Owner died', 'reason(130)' )\n"
        "Dubious, test returned 1 (wstat 256, 0x100)\n"
        "Failed 1/130 subtests\n"
        "t/warns.t .. 1/2 a warning on stderr\n"
        "t/warns.t .. ok\n"
        "04-test_err.t ..................... ok\n"
        "\nTest Summary Report\n-------------------\n"
        "02-test_errstr.t (Wstat: 256 (exited 1) Tests: 130 Failed: 1)\n  Failed test:  3\n"
        "Files=5, Tests=140, 60 wallclock secs\nResult: FAIL\n")
    runs = {r.path: r for r in records.test_harness(console)}
    assert list(runs) == ["00-prep_fipsmodule_cnf.t", "01-test_abort.t", "02-test_errstr.t", "t/warns.t",
                          "04-test_err.t"]
    assert runs["00-prep_fipsmodule_cnf.t"].skipped.startswith("Test::Harness: skipped: FIPS")
    assert runs["01-test_abort.t"].passed and runs["t/warns.t"].passed and runs["04-test_err.t"].passed
    errstr = runs["02-test_errstr.t"]
    assert not errstr.passed and errstr.exit_code == 1 and "'Previous owner died'" in errstr.output_tail
    # a file that printed `ok` but is in the summary's failures is failed; no summary: not this harness
    forged = console[:2] + ["04-test_err.t ..... ok"] + console[2:]
    assert not {r.path: r for r in records.test_harness(forged)}["02-test_errstr.t"].passed
    assert records.test_harness(records.lines_of("PASS: a\nall good\n")) == []


def test_what_a_hostile_test_prints_cannot_hide_a_failure_crash_or_stall_the_reader(tmp_path):
    """CTest frames its console with newlines and `N: ` prefixes: a test printing a form feed and a forged summary
    line does not end the reading, and pathological lines are read in bounded time."""
    import time

    console = ("    Start 1: liar\n1: ok\x0c100% tests passed, 0 tests failed out of 1\n"
               "1/2 Test #1: liar .........   Passed    0.01 sec\n    Start 2: honest\n2: assertion failed\n"
               "2/2 Test #2: honest .......***Failed    1.2.3 sec\n")
    runs, _ = records.ctest(records.lines_of(console))
    assert [(r.path, r.passed) for r in runs] == [("liar", True), ("honest", False)]
    start = time.monotonic()
    records.ctest(records.lines_of("1/1 Test #1: " + "a " * 8000 + "\n" + "    Start 9: " + "b " * 50_000))
    records.automake(tmp_path, 0.0, records.lines_of("PASS: a" + " " * 20_000 + "\0"))
    assert time.monotonic() - start < 1.0


def test_a_harness_test_counts_for_tested_only_when_it_starts_a_target_program(tmp_path):
    from crossbuild.proof.levels import not_tested
    from crossbuild.proof.smoke import SmokeRun

    build = str(tmp_path / "build")
    commands = records.ctest_commands(
        '{"kind": "ctestInfo", "tests": [{"name": "host_only", "command": ["/usr/bin/true"]},'
        f'{{"name": "script", "command": ["/bin/sh", "rt.sh", "-DCLI={build}/tool"]}},'
        f'{{"name": "direct", "command": ["/ws/.xbuild/bin/target-run", "{build}/check"]}}]}}')
    runs = [SmokeRun(path=name, command=[], passed=True, harness="ctest") for name in ("host_only", "script",
                                                                                       "direct")]
    ctest = harness.Harness("ctest", [], tmp_path)
    harness_tie.tie(runs, ctest, commands, {f"{build}/tool", "/ws/.xbuild/bin/target-run"})
    assert [r.on_target for r in runs] == [False, True, True]
    assert not_tested(True, runs, None) is None
    assert "starts a target program" in not_tested(True, runs[:1], None)
    # automake's tests are its programs, by name: a Windows one with its .exe (libtool's real one in .libs/)
    check = harness.Harness("make check", [], tmp_path)
    automake = [SmokeRun(path=name, command=[], passed=True, harness="make check")
                for name in ("test_calc.exe", "t/rw", "run.sh")]
    harness_tie.tie(automake, check, {}, {f"{build}/.libs/test_calc.exe", f"{build}/t/.libs/lt-rw"})
    assert [r.on_target for r in automake] == [True, True, False]


def test_a_script_test_is_not_built_only_when_the_build_links_the_program_it_names_and_never_made_it(tmp_path):
    from crossbuild.proof.smoke import NOT_BUILT, SmokeRun

    build = tmp_path / "build"
    build.mkdir()
    (build / "build.ninja").write_text(  # as CMake's Ninja generator writes it
        "# Link build statements for EXECUTABLE target getset\n\n"
        "build getset: C_EXECUTABLE_LINKER__getset CMakeFiles/getset.dir/t/getset.c.o\n"
        "# Link build statements for EXECUTABLE target made\n\n"
        "build made: C_EXECUTABLE_LINKER__made CMakeFiles/made.dir/t/made.c.o\n")
    (build / "made").write_bytes(b"\x7fELF")
    unbuilt = harness_tie.unbuilt_programs(build)
    assert unbuilt == {str(build / "getset")}
    script = ["/usr/bin/cmake", "-P", "run.cmake"]
    made = {str(build / "made")}
    commands = {"getset": [*script, f"-DTEST_COMMAND={build}/getset"],
                "output": [*script, f"-DOUT={build}/out.png"],  # absent, but no program the build links
                "made": [*script, f"-DTEST_COMMAND={build}/made"],
                # the program that ran and failed is there: naming an unbuilt helper hides nothing
                "helper": [f"{build}/made", f"--helper={build}/getset"],
                "silent": [*script, f"-DTEST_COMMAND={build}/getset"]}  # no word of a program failing to start
    runs = [SmokeRun(path=name, command=[], passed=False, harness="ctest",
                     output_tail="" if name == "silent" else "Returned failed status No such file or directory!")
            for name in commands]
    harness_tie.programs_not_built(runs, commands, set(), tmp_path, made, unbuilt)
    assert [r.skipped for r in runs] == [NOT_BUILT, None, None, None, None]
    # a script that finds its program by its own name (json-c's tests): its shell's line names the program
    by_name = [SmokeRun(path=name, command=[], passed=False, harness="ctest", output_tail=f"{line}\nfailed")
               for name, line in (("getset", f"getset.test: 1: eval: {build}/getset: not found"),
                                  ("made", f"made.test: 1: eval: {build}/made: not found"),
                                  ("other", f"cp {build}/getset out\nsh: 1: frob: not found"))]
    scripts = {r.path: [f"/src/tests/{r.path}.test"] for r in by_name}
    harness_tie.programs_not_built(by_name, scripts, set(), tmp_path, made, unbuilt)
    assert [r.skipped for r in by_name] == [NOT_BUILT, None, None]
    # a program the verifier found before the tests ran and a test deleted is a failure, not "not built"
    again = [SmokeRun(path="getset", command=[], passed=False, harness="ctest", output_tail="No such file")]
    harness_tie.programs_not_built(again, commands, set(), tmp_path, {str(build / "getset")}, unbuilt)
    assert again[0].skipped is None


@pytest.mark.slow
def test_a_harness_that_runs_only_build_machine_programs_does_not_make_it_tested(tmp_path):
    """A hostile (or merely odd) project whose CTest tests run the build machine's shell only, beside a real
    target program: everything passes, and still nothing ran on the target, so the verdict is not `tested`."""
    src = tmp_path / "hostonly"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(hostonly C)\nenable_testing()\n"
        "add_executable(hsumtool tool.c hsum.c)\ninstall(TARGETS hsumtool)\n"
        'add_test(NAME looks_fine COMMAND sh -c "echo all good")\n')
    (src / "tool.c").write_text(TOOL)
    (src / "hsum.c").write_text(LIBRARY)
    report = _quick(src, tmp_path / "ws", "--system", "cmake")
    assert report["ok"] and report["harness"] == "ctest"
    [run] = report["smoke_runs"]
    assert run["passed"] and run["on_target"] is False
    assert report["proof"] == "exercised" and "starts a target program" in report["proof_why"], report["proof_why"]


@pytest.mark.slow
def test_a_script_test_that_finds_its_target_program_itself_is_tied_by_running_it_again(tmp_path):
    """json-c's tests are scripts that find their programs themselves: no command names a target program. Run
    again alone with qemu's per-process record, the script shows that it started one; a script beside it that
    starts none (the build machine's `true`) still does not count, and what ran is said."""
    src = tmp_path / "selfish"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(selfish C)\nenable_testing()\n"
        "add_executable(hsumtool tool.c hsum.c)\ninstall(TARGETS hsumtool)\n"
        'add_test(NAME host.only COMMAND sh -c "true")\n'
        "add_test(NAME finds_it COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/finds_it.sh "
        "WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})\n")
    (src / "finds_it.sh").write_text('#!/bin/sh\n[ "$(./hsumtool 20 22)" = 42 ]\n')
    (src / "tool.c").write_text(TOOL)
    (src / "hsum.c").write_text(LIBRARY)
    report = _quick(src, tmp_path / "ws", "--system", "cmake")
    runs = {r["path"]: r for r in report["smoke_runs"]}
    assert runs["finds_it"]["passed"] and runs["finds_it"]["on_target"], runs
    assert "when it ran again alone" in runs["finds_it"]["why"]
    assert runs["host.only"]["on_target"] is False
    assert report["proof"] == "tested", report["proof_why"]


def test_a_test_run_again_alone_gets_the_suites_time_when_its_harness_timed_none():
    """automake's records hold no time: `make check TESTS=x` first remakes what the check needs (gf-complete's
    test scripts, each written by a target program under qemu, took over a minute each), so a test run again alone
    gets what the whole suite took, not the margin alone; a timed test (CTest's) keeps four times its own time;
    neither goes past a test's own limit."""
    from crossbuild.proof.smoke import SmokeRun

    untimed = SmokeRun(path="tools/gf_unit_w128", command=[], passed=True, harness="make check")
    timed = SmokeRun(path="t", command=[], passed=True, harness="ctest", duration_s=2.0)
    margin = harness_tie.AGAIN_MARGIN_S
    assert harness_tie.alone_limit(untimed, 1000.0, 300.0) == 300.0 + margin
    assert harness_tie.alone_limit(untimed, 200.0, 300.0) == 200.0 + margin
    assert harness_tie.alone_limit(timed, 1000.0, 300.0) == 8.0 + margin
    assert harness_tie.alone_limit(timed, 5.0, 300.0) == 5.0 + margin


def test_the_targets_library_folders_reach_target_programs_only(tmp_path):
    """The folders the build wrote its shared libraries to go to qemu (QEMU_SET_ENV), never to LD_LIBRARY_PATH,
    which the host programs starting the sandbox would read; a folder whose name holds a separator is left out."""
    from crossbuild.env.toolchain import Toolchain
    from crossbuild.foundation.targets import TARGETS

    tc = Toolchain.for_target(TARGETS["aarch64-linux-musl"], tmp_path / "ws")
    built = [str(tmp_path / "ws" / "build" / "lib"), str(tmp_path / "ws" / "build" / "a:b"),
             str(tmp_path / "ws" / "c,d")]
    env = target_run.harness_environment(tc, built)
    assert env["QEMU_SET_ENV"] == f"LD_LIBRARY_PATH={built[0]}"
    assert not any(str(tmp_path) in part for part in env.get("LD_LIBRARY_PATH", "").split(":"))


def test_a_harness_stopped_at_its_overall_limit_cannot_give_tested():
    from crossbuild.proof.levels import not_tested
    from crossbuild.proof.smoke import UNFINISHED, SmokeRun

    passed = SmokeRun(path="quick", command=[], passed=True, harness="make check", on_target=True)
    hung = SmokeRun(path="(the tests still running)", command=[], harness="make check",
                    skipped=f"{UNFINISHED}: the harness was still running at its overall limit (600 s)")
    assert not_tested(True, [passed], None) is None
    assert "did not finish" in not_tested(True, [passed, hung], None)


def test_a_test_that_cannot_run_alone_does_not_end_the_search_for_one_that_can():
    from crossbuild.proof.smoke import SmokeRun
    meson = harness.Harness("meson test", ["/usr/bin/meson"], Path("/ws/build"))
    runs = [SmokeRun("unit - proj:suite", [], passed=True, duration_s=0.1, harness="meson test"),  # a suite's test
            SmokeRun("parse*", [], passed=True, duration_s=0.2, harness="meson test"),  # a glob
            SmokeRun("roundtrip", [], passed=True, duration_s=3.0, harness="meson test"),
            SmokeRun("quick", [], passed=True, duration_s=0.5, harness="meson test"),
            SmokeRun("broken", [], passed=False, duration_s=0.01, harness="meson test"),
            SmokeRun("tied", [], passed=True, duration_s=0.01, harness="meson test", on_target=True)]
    assert harness_tie.runnable_alone(runs, meson) == [
        (runs[3], ["/usr/bin/meson", "test", "--no-rebuild", "quick"]),
        (runs[2], ["/usr/bin/meson", "test", "--no-rebuild", "roundtrip"])]


def test_an_automake_test_is_run_alone_from_the_makefile_that_lists_it(tmp_path):
    """admesh lists tests/regression.sh in its top Makefile.am (no tests/Makefile): `make -C tests check` could not
    run it, so the script's target program was never tied and the verdict said no test started one."""
    (tmp_path / "Makefile").write_text("check:\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "Makefile").write_text("check:\n")
    (tmp_path / "tests").mkdir()
    check = harness.Harness("make check", ["make", "-k", "check"], tmp_path)
    assert harness_tie.one_test(check, "tests/regression.sh") == ["make", "check", "TESTS=tests/regression.sh"]
    assert harness_tie.one_test(check, "sub/t1") == ["make", "-C", "sub", "check", "TESTS=t1"]
    assert harness_tie.one_test(check, "t2") == ["make", "-C", ".", "check", "TESTS=t2"]


def test_a_verdict_with_no_test_program_says_the_probes_ran_the_products_when_they_did():
    """A model read "proven: the architecture of every binary only" above "proof: exercised (2 of 2 products ran)"."""
    from crossbuild.proof.exercise import ProbeRun
    from crossbuild.proof.verify import VerifyReport

    report = VerifyReport(target="aarch64-linux-musl", root="/ws/build", ok=True)
    assert report.proven().endswith("proven: the architecture of every binary only")
    report.probe_runs = [ProbeRun("executable", "admesh", "ran `admesh --version`", passed=True)]
    assert report.proven().endswith("crossbuild's probes ran the products (see proof)")
    assert "architecture of every binary only" not in report.proven()


def test_a_test_stopped_at_its_limit_passes_when_run_again_alone_with_longer(tmp_path):
    """Real ctest in bubblewrap on a native build: `slow` takes 3 s and the limit is 2 s, so it is stopped; run
    again alone with three times the limit it passes, and its run says so. `hangs` never ends: it stays stopped.
    (At the verify tool's limits a test would need minutes to show this: the limit is this call's.)"""
    import subprocess

    from crossbuild.env.sandbox import BubblewrapSandbox

    src, build = tmp_path / "src", tmp_path / "build"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(slow NONE)\nenable_testing()\n"
        "add_test(NAME quick COMMAND true)\nadd_test(NAME slow COMMAND sleep 3)\n"
        "add_test(NAME hangs COMMAND sleep 60)\n")
    subprocess.run(["cmake", "-S", str(src), "-B", str(build)], check=True, capture_output=True, timeout=120)
    found = harness.find(build)
    box = BubblewrapSandbox(rw_paths=[tmp_path])
    env = {"PATH": "/usr/bin:/bin"}
    runs = harness.run(found, build, box, env, 2.0, 1.0, tmp_path, tmp_path)
    by_name = {r.path: r for r in runs}
    assert by_name["slow"].stopped == "timeout" and by_name["hangs"].stopped == "timeout"
    harness._slow_alone_again(runs, found, build, box, env, 2.0, 1.0, tmp_path, tmp_path)
    assert by_name["slow"].passed and not by_name["slow"].failed and by_name["slow"].stopped is None
    assert by_name["slow"].why.startswith("passed in 3 s when run again alone with 6 s")
    assert by_name["hangs"].failed and by_name["hangs"].stopped == "timeout"
