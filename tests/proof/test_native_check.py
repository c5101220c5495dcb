"""The tricky parts of the build-machine check: renaming the recorded steps for another target, and telling the same
failure from another one. `crossbuild build` meets the whole check in tests/agent/test_planner_builds.py."""

from __future__ import annotations

from crossbuild.env.recipes import BuildStep
from crossbuild.foundation.targets import parse_target
from crossbuild.proof.native_check import _compare, build_machine_target, only_targets
from crossbuild.proof.second_build import _renamer
from crossbuild.proof.smoke import SmokeRun

X86 = parse_target("x86_64-linux-musl")


def test_a_workspace_path_that_holds_the_targets_name_is_renamed_whole():
    rename = _renamer({"/e/work/glog-riscv64-linux-musl-r1/ws": "/e/work/glog-riscv64-linux-musl-r1/ws/.xbuild/native",
                       "/cache/prefix/riscv64-linux-musl": "/n/.xbuild/no-dependencies",
                       "riscv64-linux-musl": "x86_64-linux-musl"})
    assert rename("-DCMAKE_INSTALL_PREFIX=/e/work/glog-riscv64-linux-musl-r1/ws/install") == \
        "-DCMAKE_INSTALL_PREFIX=/e/work/glog-riscv64-linux-musl-r1/ws/.xbuild/native/install"
    assert rename("--host=riscv64-linux-musl --prefix=/cache/prefix/riscv64-linux-musl/lib") == \
        "--host=x86_64-linux-musl --prefix=/n/.xbuild/no-dependencies/lib"


def test_the_build_machine_target_keeps_the_c_library_and_is_none_for_itself_and_windows():
    assert build_machine_target(parse_target("aarch64-linux-musl")).name == "x86_64-linux-musl"
    assert build_machine_target(parse_target("arm-linux-gnueabihf")).name == "x86_64-linux-gnu"
    assert build_machine_target(parse_target("x86_64-linux-musl")) is None
    assert build_machine_target(parse_target("x86_64-windows-gnu")) is None


def _failed(tail: str, code: int = 1) -> SmokeRun:
    return SmokeRun(path="t/logging_unittest", command=[], exit_code=code, output_tail=tail, triage="failed",
                    why=f"exit {code}")


def test_the_same_failure_with_other_numbers_and_paths_is_the_projects():
    run = _failed("Check failed: /ws/src/a.cc:10 expected 0x7fff1234 got 4")
    _compare(run, _failed("Check failed: /n/.xbuild/native/src/a.cc:12 expected 0x55aa got 5"), X86)
    assert run.triage == "project" and not run.failed
    assert run.why.startswith("fails the same way built for the build machine (x86_64-linux-musl: exit 1, \"Check")
    assert run.outcome().startswith("ran, not counted (exit 1): fails the same way")


def test_the_same_failure_printed_in_another_order_is_the_projects():
    """CMake's stdout and stderr interleave differently from run to run (glog's cmake_package_config_generate)."""
    error = "CMake Error at CMakeLists.txt:4 (find_package):\n  Could not find a package configuration file"
    run = _failed(f"-- Detecting CXX compile features - done\n{error}\n-- Configuring incomplete, errors occurred!")
    _compare(run, _failed(f"-- Configuring incomplete, errors occurred!\nSee also /n/x.log\n{error}"), X86)
    assert run.triage == "project", run.why
    run = _failed(f"{error}\n-- Configuring incomplete, errors occurred!")
    _compare(run, _failed("-- Configuring incomplete, errors occurred!"), X86)  # the target's reason is not there
    assert run.failed


def test_a_reason_only_one_run_printed_is_another_failure_even_with_a_shared_summary():
    """A hostile review's cases: the target's reason must be printed there and the build machine's here."""
    run = _failed("got 3.0000001 want 3\n1 of 20 tests failed")
    _compare(run, _failed("Error: cannot open fixture\n1 of 20 tests failed"), X86)
    assert run.failed
    run = _failed("check 1: expected 4 got 5")
    _compare(run, _failed("Error: cannot open fixture\ncheck 1: expected 4 got 4"), X86)
    assert run.failed


def test_another_failure_there_or_a_pass_there_still_blocks_and_says_so():
    run = _failed("expected alignment 8, got 4")
    _compare(run, _failed("mismatch in the golden file"), X86)
    assert run.failed and "built for x86_64-linux-musl it fails otherwise" in run.why
    run = _failed("expected alignment 8, got 4", code=1)
    _compare(run, _failed("expected alignment 8, got 4", code=2), X86)
    assert run.failed
    run = _failed("expected alignment 8, got 4")
    _compare(run, SmokeRun(path=run.path, command=[], exit_code=0, passed=True), X86)
    assert run.failed and run.why.endswith("; it passes built for x86_64-linux-musl")
    run = _failed("expected alignment 8, got 4")
    _compare(run, None, X86)
    assert run.failed and "not reproduced for x86_64-linux-musl: the program was not built" in run.why
    crashed = SmokeRun(path=run.path, command=[], exit_code=-11, triage="crashed", why="killed by signal 11",
                       output_tail="expected alignment 8, got 4")
    run = _failed("expected alignment 8, got 4")
    _compare(run, crashed, X86)
    assert run.failed


def test_the_steps_that_build_only_some_targets_name_them_and_install_nothing():
    steps = [BuildStep(("cmake", "-S", "src", "-B", "build"), phase="configure"),
             BuildStep(("cmake", "--build", "build", "--parallel", "2", "--target", "fmt", "gtest", "--", "-k", "0")),
             BuildStep(("cmake", "--build", "build")),
             BuildStep(("cmake", "--install", "build"), phase="install"),
             BuildStep(("cmake", "--install", "build")),
             BuildStep(("cmake", "--build", "build", "--target", "install"))]
    assert [s.argv for s in only_targets(steps, ["chrono-test"])] == [
        ("cmake", "-S", "src", "-B", "build"),
        ("cmake", "--build", "build", "--parallel", "2", "--target", "chrono-test", "--", "-k", "0"),
        ("cmake", "--build", "build", "--target", "chrono-test")]
