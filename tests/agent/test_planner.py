"""The offline planner's decisions on one tool result at a time (its whole runs are in test_planner_builds.py)."""

from __future__ import annotations

from crossbuild.models.base import Message
from crossbuild.models.planner import Planner


def test_a_failed_verdicts_knowledge_never_turns_the_projects_tests_off():
    """After a verdict only compile fixes are taken, and of an entry's arguments none that drops the tests."""
    planner = Planner()
    planner.state.system, planner.state.phase = "cmake", "finishing"
    planner.state.recipe = [{"argv": ["cmake", "-S", "src", "-B", "build"], "cwd": ".", "phase": "configure",
                             "env": {}}]
    verdict = {"verify": {"reasons": ["smoke run test_x failed under qemu (exit 1)"]}, "kb": [
        {"id": "test-only-dependency-missing", "actions": [
            {"kind": "cmake_args", "args": ["-DBUILD_TESTING=OFF"], "when": "cmake"},
            {"kind": "cmake_args", "args": ["-DFOO_BUILD_TESTS:BOOL=OFF", "-DFOO_NO_BUILTIN=ON"]}]}]}
    planner._observe(Message("tool", "finish refused", name="finish", is_error=True, data=verdict))
    assert planner.state.extra["cmake_args"] == ["-DFOO_NO_BUILTIN=ON"]
    assert planner.state.phase == "steps"  # built again with what was left
    only_tests = {**verdict, "kb": [{"id": "t", "actions": [{"kind": "meson_args", "args": ["-Dtests=false"]}]}]}
    planner = Planner()
    planner.state.system, planner.state.phase = "meson", "finishing"
    planner._observe(Message("tool", "finish refused", name="finish", is_error=True, data=only_tests))
    assert planner.state.extra["meson_args"] == [] and planner.state.phase == "blocked"


def test_the_makefiles_cross_switch_is_taken_once_whenever_make_runs_the_build():
    """Not for CMake; taken after a switch from CMake to the project's configure; never twice."""
    status = {"build_system": "cmake", "make_cross_switches": ["CROSS_BUILDING=yes"], "recipe": [
        {"argv": ["cmake", "-S", "src", "-B", "build"], "cwd": ".", "phase": "configure", "env": {}}]}
    planner = Planner()
    planner._observe(Message("tool", "status", name="build_status", data=status))
    assert planner.state.extra["make_args"] == []
    configure = {**status, "build_system": "configure", "recipe": [
        {"argv": ["../src/configure"], "cwd": "build", "phase": "configure", "env": {}}]}
    for _ in range(2):
        planner.state.phase = "switching"
        planner._observe(Message("tool", "status", name="build_status", data=configure))
        assert planner.state.system == "configure" and planner.state.phase == "steps"
    assert planner.state.extra["make_args"] == ["CROSS_BUILDING=yes"]
