"""Windows test programs run under Wine (Debian's wine64), each workspace with a prefix of its own that the verdict
throws away: a Windows build is `tested` when its tests pass there, and refused when one fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cb

pytestmark = pytest.mark.slow  # real zig, real Wine

PROJECT = """cmake_minimum_required(VERSION 3.16)
project(winprobe C)
include(CTest)
add_executable(test_env test_env.c)
add_test(NAME test_env COMMAND test_env)
add_executable(test_answer test_answer.c)
add_test(NAME test_answer COMMAND test_answer)
"""
# a Windows API call Wine implements, and what it answers: the program ran on Windows' ABI, not natively
TEST_ENV = r"""#include <windows.h>
#include <stdio.h>
int main(void) {
    char dir[MAX_PATH];
    if (!GetWindowsDirectoryA(dir, sizeof dir)) return 2;
    printf("windows directory: %s\n", dir);
    return dir[1] == ':' ? 0 : 1;
}
"""


def _verdict(r):
    return json.loads(r.stdout[r.stdout.index("\n{") + 1:] if not r.stdout.startswith("{") else r.stdout)


def test_a_windows_test_that_fails_under_wine_refuses_the_build_and_one_that_passes_proves_it(tmp_path):
    src = tmp_path / "winprobe"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(PROJECT)
    (src / "test_env.c").write_text(TEST_ENV)
    (src / "test_answer.c").write_text("int main(void){return 41 + 1 == 42 ? 3 : 0;}\n")  # fails: exit 3
    r = cb("quick", str(src), "-t", "x86_64-windows-gnu", "--system", "cmake", "-w", str(tmp_path / "ws"), "--json")
    assert r.returncode != 0
    report = _verdict(r)
    assert not report["ok"] and report["harness"] == "ctest"
    assert any("test_answer failed under Wine" in reason for reason in report["reasons"]), report["reasons"]
    ran = {run["path"]: run for run in report["smoke_runs"]}
    assert ran["test_env"]["passed"] and "windows directory: C:\\windows" in ran["test_env"]["output_tail"]

    (src / "test_answer.c").write_text("int main(void){return 41 + 1 == 42 ? 0 : 3;}\n")
    r = cb("quick", str(src), "-t", "x86_64-windows-gnu", "--system", "cmake", "-w", str(tmp_path / "ws2"), "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    report = _verdict(r)
    assert report["proof"] == "tested" and report["proof_counts"]["passed"] == 2, report["proof_counts"]
    # each workspace's prefix was its own and is gone; the user's ~/.wine was never made
    for ws in ("ws", "ws2"):
        assert not (tmp_path / ws / ".scratch" / "wine").exists()
    assert not (Path.home() / ".wine").exists()
