"""`crossbuild build` with the offline planner on real projects, as a user runs it (the CLI, --json), verified:
the bundled example and Debian's zlib, json-c and libpng1.6 (which needs zlib cross-built into the prefix first),
for aarch64-linux-musl and riscv64-linux-musl."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.conftest import EXAMPLE, cb

TARGETS = ["aarch64-linux-musl", "riscv64-linux-musl"]


def _build(tmp_path, source, target, *extra):
    r = cb("build", source, "-t", target, "-w", str(tmp_path / "ws"), "--db", str(tmp_path / "runs.db"), "--json",
           *extra, cwd=tmp_path, timeout=3000)
    out = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    return r, out


def _dependency_calls(db, run_id):
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT result_json FROM tool_calls WHERE run_id=? AND name='build_dependency'",
                        (run_id,)).fetchall()
    return [json.loads(r[0]) for r in rows]


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", [str(EXAMPLE), "debian:zlib", "debian:json-c"])
def test_planner_cross_builds_and_verifies(tmp_path, source, target):
    r, out = _build(tmp_path, source, target)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["ok"]
    assert out["verify"]["rebuild"]["ok"]
    machines = {a.get("machine") for a in out["verify"]["artifacts"] if a["kind"] != "unknown"}
    assert machines == {{"aarch64-linux-musl": "EM_AARCH64", "riscv64-linux-musl": "EM_RISCV"}[target]}


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_libpng_needs_zlib_cross_built_into_the_prefix_first(tmp_path, target):
    prefix = tmp_path / "prefix"
    r, out = _build(tmp_path, "debian:libpng1.6", target, "--prefix", str(prefix))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified"
    deps_calls = _dependency_calls(tmp_path / "runs.db", out["run_id"])
    assert deps_calls and deps_calls[0]["ok"] and deps_calls[0]["data"]["source"] == "zlib"
    assert (prefix / "include" / "zlib.h").is_file() and (prefix / "lib" / "libz.a").is_file()
    assert (prefix / "lib" / "pkgconfig" / "zlib.pc").is_file()

    # a second project needing zlib for the same target reuses the cached build
    second = tmp_path / "second"
    second.mkdir()
    r, out = _build(second, "debian:libpng1.6", target, "--prefix", str(tmp_path / "prefix2"))
    assert out.get("status") == "verified", r.stdout[-2000:]
    again = _dependency_calls(second / "runs.db", out["run_id"])[0]
    assert again["data"]["cached"] is True and again["data"]["seconds"] < 5


MAKEFILE_RUNS_ITS_TESTS = """\
# like bzip2's: the default goal runs the program it just built, which cannot run on the build machine
all: libdemo.a demo test

libdemo.a: demo_lib.o
\t$(AR) rcs $@ demo_lib.o

demo: main.o libdemo.a
\t$(CC) -o demo main.o -L. -ldemo

test: demo
\t./demo > out.txt
\tgrep -q 42 out.txt
"""


@pytest.mark.slow
def test_a_makefile_whose_default_goal_runs_target_programs_is_built_without_its_test_goal(tmp_path):
    project = tmp_path / "demo"
    project.mkdir()
    (project / "Makefile").write_text(MAKEFILE_RUNS_ITS_TESTS)
    (project / "demo_lib.c").write_text("int answer(void){return 42;}\n")
    (project / "main.c").write_text('#include <stdio.h>\nint answer(void);\nint main(void){printf("%d\\n", answer());'
                                    "return 0;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["rebuild"]["ok"]
    assert "built make goals libdemo.a demo instead of `all`" in out["message"]
    kinds = {a["path"]: a["kind"] for a in out["verify"]["artifacts"]}
    assert kinds["demo"] == "executable" and kinds["libdemo.a"] == "static_library"
