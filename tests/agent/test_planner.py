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


def test_a_makefile_that_runs_an_unset_libtool_gets_one_for_the_target_and_debian_rules_header():
    """lua5.4 as Debian patches it: its Makefile runs $(LIBTOOL), which only debian/rules sets, and its luaconf.h
    includes a header only debian/rules writes. The planner makes a libtool for the target in the source folder
    (the build machine's own links with its gcc) and writes the header as the rules do, not as a dependency."""
    planner = Planner()
    planner.tools = {"build_dependency": None}
    make = {"argv": ["make", "-j2", "CC=/ws/.xbuild/bin/zcc"], "cwd": "src", "phase": "build", "env": {}}
    header = '#define DEB_HOST_MULTIARCH "aarch64-linux-musl"\n'
    planner._observe(Message("tool", "status", name="build_status", data={
        "build_system": "make", "recipe": [make], "workspace": "/ws",
        "configure_args": ["--host=aarch64-linux-musl", "--build=x86_64-pc-linux-gnu"],
        "debian_files": {"src/src/lua5.4-deb-multiarch.h": header}}))
    assert _called(planner._decide())[1]["command"].startswith("make -j2")
    unset = {"kb": [{"id": "libtool-variable-unset", "actions": [{"kind": "cross_libtool"}]}]}
    planner._observe(Message("tool", "failed", name="run_command", is_error=True, data=unset))
    name, args = _called(planner._decide())
    assert (name, args["path"]) == ("write_file", "src/crossbuild-libtool/configure.ac")
    assert "LT_INIT" in args["content"]
    planner._observe(Message("tool", "written", name="write_file", data={}))
    made = []
    for _ in range(2):
        name, args = _called(planner._decide())
        made.append((args["command"], args["cwd"]))
        planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    assert made == [("autoreconf -fi", "src/crossbuild-libtool"),
                    ("./configure --host=aarch64-linux-musl --build=x86_64-pc-linux-gnu", "src/crossbuild-libtool")]
    assert _called(planner._decide())[1]["command"].endswith("LIBTOOL=/ws/src/crossbuild-libtool/libtool")
    missing = {"kb": [{"id": "header-not-found", "actions": [{"kind": "dependency", "name": "lua5.4-deb-multiarch"}]}]}
    planner._observe(Message("tool", "failed", name="run_command", is_error=True, data=missing))
    # build_status names it below the package root (the workspace's src/), lua's own src/ folder
    assert _called(planner._decide()) == ("write_file", {"path": "src/src/lua5.4-deb-multiarch.h",
                                                         "content": header})
    planner._observe(Message("tool", "written", name="write_file", data={}))
    # the libtool is made once: the restart goes straight to make
    assert _called(planner._decide())[1]["command"].startswith("make -j2")
    assert planner.state.pending_deps == []
    assert any("wrote src/src/lua5.4-deb-multiarch.h as debian/rules does" in n for n in planner.state.notes)
