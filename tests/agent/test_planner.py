"""The offline planner's decisions on one tool result at a time (its whole runs are in test_planner_builds.py)."""

from __future__ import annotations

import json

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


def _called(turn) -> tuple[str, dict]:
    call = turn.tool_calls[0]
    return call.name, json.loads(call.arguments)


def test_a_repacked_source_switches_to_its_other_build_system_and_a_missing_tool_is_provided():
    """re2 as Debian ships it: CMake names a generated file the repack removed; the source's other build system is
    its Makefile (not the configure the entry names), which gets debian/rules' REBUILD_TABLES=1; a generator that
    fails for want of a data file gets it provided, and the empty output it left is removed before make runs
    again."""
    planner = Planner()
    planner.tools = {"provide_build_tool": None, "build_dependency": None}
    make_recipe = [{"argv": ["make", "-j2"], "cwd": "src", "phase": "build", "env": {}}]
    status = {"build_system": "cmake", "other_build_systems": ["make"], "recipe": [
        {"argv": ["cmake", "-S", "src", "-B", "build"], "cwd": ".", "phase": "configure", "env": {}}],
        "debian_rules": {"build_args": ["REBUILD_TABLES=1"], "configure_args": []}}
    planner._observe(Message("tool", "status", name="build_status", data=status))
    repack = {"kb": [{"id": "debian-repack-missing-file", "actions": [
        {"kind": "switch_system", "system": "configure", "when": "cmake"}]}]}
    planner._observe(Message("tool", "failed", name="run_command", is_error=True, data=repack))
    assert _called(planner._decide()) == ("build_status", {"system": "make"})
    planner._observe(Message("tool", "status", name="build_status", data={
        **status, "build_system": "make", "other_build_systems": ["cmake"], "recipe": make_recipe}))
    assert planner.state.extra["make_args"] == ["REBUILD_TABLES=1"]
    data_missing = {"kb": [{"id": "build-machine-data-missing", "actions": [
        {"kind": "build_tool", "name": "/usr/share/unicode/CaseFolding.txt"}]}]}
    planner._observe(Message("tool", "failed", name="run_command", is_error=True, data=data_missing))
    assert _called(planner._decide()) == ("provide_build_tool", {"name": "/usr/share/unicode/CaseFolding.txt"})
    planner._observe(Message("tool", "provided", name="provide_build_tool", data={
        "name": "/usr/share/unicode/CaseFolding.txt", "package": "unicode-data", "added": ["unicode-data 15"],
        "already": False}))
    name, args = _called(planner._decide())
    assert name == "run_command" and args["command"] == "find src -type f -size 0 -newer .xbuild/pristine"
    planner._observe(Message("tool", "[exit=0] find src ...\nsrc/re2/unicode_casefold.cc\n../etc/passwd\n"
                                     "[full log: .xbuild/logs/0004-find.log (1 lines)]", name="run_command", data={}))
    assert _called(planner._decide()) == ("run_command", {"command": "rm -f -- src/re2/unicode_casefold.cc"})
    planner._observe(Message("tool", "[exit=0] rm", name="run_command", data={}))
    name, args = _called(planner._decide())
    assert args["command"].startswith("make -j2") and args["command"].endswith("REBUILD_TABLES=1")
