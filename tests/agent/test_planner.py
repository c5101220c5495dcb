"""The offline planner's decisions on one tool result at a time (its whole runs are in test_planner_builds.py)."""

from __future__ import annotations

import json

from crossbuild.models.base import Message
from crossbuild.models.planner import Planner
from crossbuild.models.planner.recipe import _looked_up


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


def test_a_failed_verdict_takes_only_fixes_whose_exact_symptom_a_test_printed():
    """fmt in the sample: its chrono test failed under qemu and an allocator entry, matched by words alone, had
    the whole project built again as C++20, which no longer built its tests."""
    related = {"verify": {"reasons": ["ctest test chrono-test failed under qemu"]}, "kb": [
        {"id": "allocator-rebinds-to-std-allocator", "fit": "related", "actions": [
            {"kind": "cmake_args", "args": ["-DCMAKE_CXX_STANDARD=20"], "when": "cmake"}]}]}
    planner = Planner()
    planner.state.system, planner.state.phase = "cmake", "finishing"
    planner._observe(Message("tool", "finish refused", name="finish", is_error=True, data=related))
    assert planner.state.extra["cmake_args"] == [] and planner.state.phase == "blocked"
    exact = {**related, "kb": [{**related["kb"][0], "fit": "fix"}]}
    planner = Planner()
    planner.state.system, planner.state.phase = "cmake", "finishing"
    planner.state.recipe = [{"argv": ["cmake", "-S", "src", "-B", "build"], "cwd": ".", "phase": "configure",
                             "env": {}}]
    planner._observe(Message("tool", "finish refused", name="finish", is_error=True, data=exact))
    assert planner.state.extra["cmake_args"] == ["-DCMAKE_CXX_STANDARD=20"] and planner.state.phase == "steps"


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


CMAKE_RECIPE = [{"argv": ["cmake", "-S", "src", "-B", "build"], "cwd": ".", "phase": "configure", "env": {}},
                {"argv": ["cmake", "--build", "build", "--parallel", "2"], "cwd": ".", "phase": "build", "env": {}},
                {"argv": ["cmake", "--install", "build"], "cwd": ".", "phase": "install", "env": {}}]
TESTS_FAIL = {"log": ".xbuild/logs/0002-cmake.log", "kb": [{"id": "tests-or-examples-fail-to-build", "actions": [
    {"kind": "disable_option", "pattern": "(^|_)(BUILD_)?(TESTS?|TESTING|EXAMPLES?)$", "turns_tests_off": True}]}]}
TARGETS = [{"name": "png_static", "type": "STATIC_LIBRARY", "paths": ["png.c"]},
           {"name": "pngfix", "type": "EXECUTABLE", "paths": ["contrib/tools/pngfix.c"]},
           {"name": "pnggetset", "type": "EXECUTABLE", "paths": ["contrib/libtests/pnggetset.c"]}]


def _cmake_planner(steps_done: int = 1) -> Planner:
    planner = Planner()
    planner._observe(Message("tool", "status", name="build_status", data={"build_system": "cmake",
                                                                           "recipe": CMAKE_RECIPE}))
    for _ in range(steps_done):
        planner._decide()
        planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    if planner.state.tests_on == "" and steps_done:  # configured: it asks whether the tests are built
        assert _called(planner._decide()) == ("build_status", {})
        planner._observe(Message("tool", "status", name="build_status", data={"options": {"BUILD_TESTING": "ON"}}))
    return planner


def test_tests_off_by_default_are_turned_on_and_the_project_configured_again():
    """A configured CMake project whose own tests are off by default (its name's switch, or BUILD_TESTING) is
    configured again with them on; a vendored subproject's switch and one needing CUDA are left alone."""
    planner = _cmake_planner(steps_done=0)
    configure = _called(planner._decide())[1]["command"]
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    assert _called(planner._decide()) == ("build_status", {})
    planner._observe(Message("tool", "status", name="build_status", data={"cmake_projects": ["absl"], "options": {
        "ABSL_BUILD_TESTING": "OFF", "BUILD_TESTING": "OFF", "BENCHMARK_ENABLE_TESTING": "OFF",
        "ABSL_CUDA_TEST": "OFF", "ABSL_SKIP_TESTS": "OFF", "BUILD_SHARED_LIBS": "OFF"}}))
    again = _called(planner._decide())[1]["command"]
    assert again == configure + " -DABSL_BUILD_TESTING=ON -DBUILD_TESTING=ON"
    assert "tests turned on (off by default): -DABSL_BUILD_TESTING=ON -DBUILD_TESTING=ON" in planner.state.notes
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    # configured with them on: did the tests look for something the tests-off configure did not?
    assert _called(planner._decide()) == ("build_status", {})
    planner._observe(Message("tool", "status", name="build_status", data={"not_found": []}))
    assert _called(planner._decide())[1]["command"] == "cmake --build build --parallel 2"  # asked once only


def test_a_test_framework_only_the_tests_looked_for_is_built_and_the_project_configured_again():
    """With its tests on, the configure passed but the cache records lookups the tests-off configure never made
    (libyang's CMocka, whose absence only turns its tests off again): each is built as a dependency, once."""
    planner = _cmake_planner(steps_done=0)
    configure = _called(planner._decide())[1]["command"]
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    planner._decide()
    planner._observe(Message("tool", "status", name="build_status", data={
        "options": {"ENABLE_TESTS": "OFF"}, "test_variables": ["ENABLE_TESTS"], "not_found": ["PCRE2_DIR"]}))
    assert _called(planner._decide())[1]["command"] == configure + " -DENABLE_TESTS=ON"
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    assert _called(planner._decide()) == ("build_status", {})
    planner._observe(Message("tool", "status", name="build_status", data={
        "not_found": ["PCRE2_DIR", "CMOCKA_INCLUDE_DIR", "CMOCKA_LIBRARY", "VALGRIND_PROGRAM"]}))
    assert _called(planner._decide()) == ("build_dependency", {"name": "CMOCKA"})
    planner._observe(Message("tool", "built", name="build_dependency", data={"name": "CMOCKA"}))
    assert _called(planner._decide())[1]["command"] == configure + " -DENABLE_TESTS=ON"
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    assert _called(planner._decide())[1]["command"] == "cmake --build build --parallel 2"


def test_tests_that_fail_to_build_are_built_apart_from_the_library_first_and_said():
    """A test program fails to build: before any option turns the tests off, the other targets are built by name
    (build_status reads them from build.ninja); the library is built, and the note says the tests were not."""
    planner = _cmake_planner()
    assert _called(planner._decide())[1]["command"] == "cmake --build build --parallel 2"
    planner._observe(Message("tool", "[exit=1] cmake --build build", name="run_command", is_error=True,
                             data=TESTS_FAIL))
    assert planner.state.extra["cmake_args"] == [] and not planner.state.pending_disable
    assert _called(planner._decide()) == ("build_status", {})
    planner._observe(Message("tool", "status", name="build_status", data={"cmake_targets": TARGETS}))
    # from a clean folder: the failed whole build's test programs must not stay behind
    assert _called(planner._decide())[1]["command"] == "rm -rf build"
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    assert _called(planner._decide())[1]["command"].startswith("cmake -S src -B build")
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    assert _called(planner._decide())[1]["command"] == \
        "cmake --build build --parallel 2 --target png_static pngfix"
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    planner._decide()
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))  # installed
    name, args = _called(planner._decide())
    assert name == "finish" and args["status"] == "built"
    assert "tests not built: tests-or-examples-fail-to-build: built the other targets by name, without the test " \
           "and example targets pnggetset (their build failed: .xbuild/logs/0002-cmake.log)" in args["summary"]


NINJA_TARGETS = [{**t, "output": t["name"], "built": False} for t in TARGETS] + [
    {"name": "hash_test", "type": "EXECUTABLE", "paths": ["test/hash_test.cc"], "output": "bin/hash_test",
     "built": False},
    {"name": "chars_test", "type": "EXECUTABLE", "paths": ["test/chars_test.cc"], "output": "bin/chars_test",
     "built": False}]


def _built(*names: str) -> list[dict]:
    return [{**t, "built": t["name"] in names} for t in NINJA_TARGETS]


def test_a_ninja_build_keeps_going_and_leaves_out_only_the_tests_that_did_not_build():
    """One test program newer libc++ rejects: the build keeps going (ninja -k 0), and the targets that built are
    built by name, the tests among them; only the one that did not is left out, and said."""
    planner = _cmake_planner()
    planner._decide()
    planner._observe(Message("tool", "[exit=1] cmake --build build", name="run_command", is_error=True,
                             data=TESTS_FAIL))
    assert _called(planner._decide()) == ("build_status", {})
    planner._observe(Message("tool", "status", name="build_status", data={"cmake_targets": _built("png_static")}))
    assert _called(planner._decide())[1]["command"] == "cmake --build build --parallel 2 -- -k 0"
    planner._observe(Message("tool", "[exit=1]", name="run_command", is_error=True, data=TESTS_FAIL))
    assert _called(planner._decide()) == ("build_status", {})
    planner._observe(Message("tool", "status", name="build_status", data={
        "cmake_targets": _built("png_static", "pngfix", "pnggetset", "hash_test")}))
    # no clean folder: every target that was built is named again
    assert _called(planner._decide())[1]["command"] == \
        "cmake --build build --parallel 2 --target png_static pngfix pnggetset hash_test"
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    assert _called(planner._decide())[1]["command"] == "cmake --install build"
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    name, args = _called(planner._decide())
    assert "tests not built: tests-or-examples-fail-to-build: 1 test or example targets did not build and were " \
           "left out, chars_test (their build failed: .xbuild/logs/0002-cmake.log)" in args["summary"]
    assert planner.state.recipe == [CMAKE_RECIPE[0], {**CMAKE_RECIPE[1], "argv": [
        *CMAKE_RECIPE[1]["argv"], "--target", "png_static", "pngfix", "pnggetset", "hash_test"]}, CMAKE_RECIPE[2]]


def test_when_the_tests_that_built_break_the_build_by_name_all_tests_are_left_out():
    """A test that built but whose build step fails again (a post-build run): every test and example is left out,
    from a clean folder, as before."""
    planner = _cmake_planner()
    planner._decide()
    planner._observe(Message("tool", "[exit=1]", name="run_command", is_error=True, data=TESTS_FAIL))
    planner._decide()
    planner._observe(Message("tool", "status", name="build_status", data={"cmake_targets": _built()}))
    planner._decide()
    planner._observe(Message("tool", "[exit=1]", name="run_command", is_error=True, data=TESTS_FAIL))
    planner._decide()
    planner._observe(Message("tool", "status", name="build_status", data={
        "cmake_targets": _built("pngfix", "hash_test")}))  # png_static is outside `all`: named all the same
    assert _called(planner._decide())[1]["command"] == \
        "cmake --build build --parallel 2 --target png_static pngfix hash_test"
    planner._observe(Message("tool", "[exit=1]", name="run_command", is_error=True, data=TESTS_FAIL))
    assert _called(planner._decide())[1]["command"] == "rm -rf build"
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    planner._decide()
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    assert _called(planner._decide())[1]["command"] == "cmake --build build --parallel 2 --target png_static pngfix"


def test_when_the_library_fails_without_its_tests_too_the_tests_are_turned_off_and_said():
    """The targets built apart fail as well (the install of a left-out example, here): the whole build again, with
    the options the entry names turned off, and the note says which turned the tests off (not the examples')."""
    planner = _cmake_planner()
    planner._decide()
    planner._observe(Message("tool", "[exit=1]", name="run_command", is_error=True, data=TESTS_FAIL))
    planner._decide()
    planner._observe(Message("tool", "status", name="build_status", data={"cmake_targets": TARGETS}))
    planner._decide()
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    planner._decide()
    planner._observe(Message("tool", "[exit=1] cmake --install build", name="run_command", is_error=True, data={}))
    assert planner.state.recipe == CMAKE_RECIPE  # the whole build again
    assert _called(planner._decide()) == ("build_status", {})  # which options the pattern names
    planner._observe(Message("tool", "status", name="build_status", data={"options": {
        "BUILD_TESTING": "ON", "BUILD_EXAMPLES": "ON", "BUILD_SHARED_LIBS": "ON"}}))
    assert planner.state.extra["cmake_args"] == ["-DBUILD_TESTING=OFF", "-DBUILD_EXAMPLES=OFF"]
    assert "tests not built: tests-or-examples-fail-to-build: -DBUILD_TESTING=OFF" in planner.state.notes
    assert _called(planner._decide()) == ("run_command", {"command": "rm -rf build"})


def test_arguments_and_goals_that_turn_tests_off_are_said():
    planner = _cmake_planner(steps_done=0)
    planner.tools = {}
    planner._decide()
    missing_gtest = {"kb": [{"id": "test-only-dependency-missing", "actions": [
        {"kind": "cmake_args", "args": ["-DBUILD_TESTING=OFF"], "when": "cmake", "turns_tests_off": True}]}]}
    planner._observe(Message("tool", "[exit=1] cmake -S src", name="run_command", is_error=True, data=missing_gtest))
    assert planner.state.split == ""  # nothing to build apart when configuring fails
    assert "tests not built: test-only-dependency-missing: -DBUILD_TESTING=OFF" in planner.state.notes
    planner = Planner()
    planner._observe(Message("tool", "status", name="build_status", data={"build_system": "make", "recipe": [
        {"argv": ["make", "-j2"], "cwd": "src", "phase": "build", "env": {}}]}))
    planner._decide()
    runs_tests = {"kb": [{"id": "build-runs-target-binary", "actions": [
        {"kind": "skip_test_goals", "turns_tests_off": True}]}]}
    planner._observe(Message("tool", "[exit=2] make", name="run_command", is_error=True, data=runs_tests))
    assert _called(planner._decide()) == ("build_status", {})
    planner._observe(Message("tool", "status", name="build_status", data={"make_goals": {
        "default": "all", "prerequisites": ["libbz2.a", "bzip2", "test"], "essential": ["libbz2.a", "bzip2"],
        "has_recipe": False}}))
    assert "tests not built: build-runs-target-binary: make's test goals test left out" in planner.state.notes


def test_a_test_switch_a_fix_turned_off_is_never_turned_on_again():
    """fmt: its googletest is missing, so a fix turned FMT_TEST off before the first configure that passed; the
    tests-on look that follows leaves it off (turning it on failed the same configure again)."""
    planner = _cmake_planner(steps_done=0)
    planner.state.extra["cmake_args"] += ["-DBUILD_TESTING=OFF", "-DFMT_TEST=OFF"]
    planner._decide()
    planner._observe(Message("tool", "[exit=0]", name="run_command", data={}))
    assert _called(planner._decide()) == ("build_status", {})
    planner._observe(Message("tool", "status", name="build_status", data={"cmake_projects": ["FMT"], "options": {
        "FMT_TEST": "OFF", "BUILD_TESTING": "OFF", "FMT_DOC": "OFF"}}))
    assert _called(planner._decide())[1]["command"] == "cmake --build build --parallel 2"
    assert not any(n.startswith("tests turned on") for n in planner.state.notes)


def _configure_failed(planner, diagnosis, kb=()):
    data = {"exit_code": 1, "log": ".xbuild/logs/0001-cmake.log", "kb": list(kb), "diagnosis": diagnosis}
    planner._observe(Message("tool", "[exit=1] cmake -S src -B build", name="run_command", is_error=True, data=data))


def test_a_diagnosis_is_searched_dependency_first_then_its_switches_innermost_first_tests_last():
    """The same configure failure, round after round: what the call looked for is built once; then each switch
    around it, the narrowest first, the one that turns the tests off only when nothing else is left."""
    planner = Planner()
    planner.tools = {"build_dependency": None}
    planner.state.system, planner.state.phase = "cmake", "steps"
    planner.state.recipe = [{"argv": ["cmake", "-S", "src", "-B", "build"], "cwd": ".", "phase": "configure",
                             "env": {}}]
    switches = [{"name": "BUILD_TESTING", "value": "ON", "arg": "-DBUILD_TESTING=OFF", "why": "`if(BUILD_TESTING)`"},
                {"name": "BUILD_SHARED_LIBS", "value": "ON", "arg": "-DBUILD_SHARED_LIBS=OFF", "why": "`if(...)`"},
                {"name": "WITH_NET", "value": "ON", "arg": "-DWITH_NET=OFF", "why": "`if(WITH_NET)`"},
                {"name": "NET_TLS", "value": "ON", "arg": "-DNET_TLS=OFF", "why": "`if(NET_TLS)`"}]
    diagnosis = {"failed": "find_package(GnuTLS REQUIRED)", "where": "src/net/CMakeLists.txt:9",
                 "missing": ["GnuTLS"], "switches": switches}
    _configure_failed(planner, diagnosis)
    assert _called(planner._decide()) == ("build_dependency", {"name": "GnuTLS"})
    planner.state.phase = "steps"
    _configure_failed(planner, diagnosis)  # built, and the same call still fails
    assert planner.state.extra["cmake_args"] == ["-DNET_TLS=OFF"]
    for expected in (["-DNET_TLS=OFF", "-DWITH_NET=OFF"], ["-DNET_TLS=OFF", "-DWITH_NET=OFF", "-DBUILD_TESTING=OFF"]):
        _configure_failed(planner, diagnosis)
        assert planner.state.extra["cmake_args"] == expected  # never BUILD_SHARED_LIBS: how it is built
    assert any(n.startswith("tests not built: diagnosis: -DBUILD_TESTING=OFF") for n in planner.state.notes)
    _configure_failed(planner, diagnosis)
    assert planner.state.phase == "blocked"


def test_a_dependency_that_cannot_be_built_takes_the_diagnosed_switch_whoever_asked_for_it():
    """The knowledge base asked for the dependency (its pattern matched first); when it cannot be built, the switch
    read from the trace is taken, not one guessed from the dependency's name."""
    planner = Planner()
    planner.tools = {"build_dependency": None}
    planner.state.system, planner.state.phase = "cmake", "steps"
    planner.state.recipe = [{"argv": ["cmake", "-S", "src", "-B", "build"], "cwd": ".", "phase": "configure",
                             "env": {}}]
    kb = [{"id": "cmake-message-dependency-not-found", "actions": [{"kind": "dependency", "name": "libfrob"}]}]
    diagnosis = {"failed": "pkg_check_modules(F REQUIRED libfrob)", "where": "src/CMakeLists.txt:4",
                 "missing": ["libfrob"], "switches": [
                     {"name": "GADGET_X", "value": "ON", "arg": "-DGADGET_X=OFF", "why": "`if(GADGET_X)`"}]}
    _configure_failed(planner, diagnosis, kb)
    assert _called(planner._decide()) == ("build_dependency", {"name": "libfrob"})
    planner._observe(Message("tool", "libfrob: not in Debian's index", name="build_dependency", is_error=True,
                             data={"name": "libfrob"}))
    assert planner.state.extra["cmake_args"] == ["-DGADGET_X=OFF"] and not planner.state.pending_disable
    assert "built without libfrob: GADGET_X=OFF (`if(GADGET_X)`)" in planner.state.notes


def test_an_alternative_configure_went_on_past_is_built_when_the_nearest_cannot_be():
    """Configure looked for several crypto backends, went on past each and then stopped: the one it looked for last
    cannot be built, so the next it went on past is built instead (any one may do), without a configure between,
    and only when none can be had is the feature given up."""
    planner = Planner()
    planner.tools = {"build_dependency": None}
    planner.state.system, planner.state.phase = "autotools", "steps"
    planner.state.recipe = [{"argv": ["../src/configure"], "cwd": "build", "phase": "configure", "env": {}}]
    diagnosis = {"failed": 'as_fn_error $? "At least one crypto library should exist"', "where": "src/configure:9",
                 "missing": ["libgnutls"], "alternatives": ["libgcrypt", "openssl"], "switches": []}
    _configure_failed(planner, diagnosis)
    assert _called(planner._decide()) == ("build_dependency", {"name": "libgnutls"})
    for failed, nxt in (("libgnutls", "libgcrypt"), ("libgcrypt", "openssl")):
        planner._observe(Message("tool", f"{failed}: failed", name="build_dependency", is_error=True,
                                 data={"name": failed}))
        assert _called(planner._decide()) == ("build_dependency", {"name": nxt})
        assert not planner.state.pending_disable
    planner._observe(Message("tool", "openssl: failed", name="build_dependency", is_error=True,
                             data={"name": "openssl"}))
    assert planner.state.pending_disable  # none of them: built without the feature, as before
    assert any("building openssl instead" in n for n in planner.state.notes)


def test_with_no_fix_left_the_sources_other_build_system_is_tried_debians_choice_first():
    planner = Planner()
    status = {"build_system": "cmake", "other_build_systems": ["meson", "configure", "autotools"],
              "debian_rules": {"system": "meson"}, "recipe": [
                  {"argv": ["cmake", "-S", "src", "-B", "build"], "cwd": ".", "phase": "configure", "env": {}}]}
    planner._observe(Message("tool", "status", name="build_status", data=status))
    for expected in ("meson", "configure", "autotools"):
        planner.state.phase = "steps"
        _configure_failed(planner, None)
        assert _called(planner._decide()) == ("build_status", {"system": expected})
        planner.state.pending_switch = None
    planner.state.phase = "steps"
    _configure_failed(planner, None)
    assert planner.state.phase == "blocked"  # every system was tried


def test_the_finish_message_says_what_each_family_of_remedies_showed():
    planner = Planner()
    planner.tools = {"build_dependency": None}
    planner.state.system, planner.state.phase = "cmake", "steps"
    planner.state.recipe = [{"argv": ["cmake", "-S", "src", "-B", "build"], "cwd": ".", "phase": "configure",
                             "env": {}}]
    planner.state.applied.add(json.dumps({"kind": "dependency", "name": "Frob"}, sort_keys=True))
    diagnosis = {"failed": "find_package(Frob REQUIRED)", "where": "src/CMakeLists.txt:3", "missing": ["Frob"],
                 "switches": [], "record": "CMake's trace"}
    _configure_failed(planner, diagnosis, [{"id": "cmake-package-not-found", "actions": []}])
    assert planner.state.phase == "blocked"
    reason = planner.state.blocked_reason
    assert "knowledge base: entries cmake-package-not-found" in reason
    assert ("diagnosis (CMake's trace): find_package(Frob REQUIRED) at src/CMakeLists.txt:3; looked for Frob; "
            "no switch governs it") in reason
    assert "other build systems: none left in the source" in reason


def test_a_failed_lookups_cache_entry_names_what_it_looked_for():
    assert [_looked_up(e) for e in ("CMOCKA_INCLUDE_DIR", "CMOCKA_LIBRARY", "GTest_DIR", "ZLIB_LIBRARY_RELEASE",
                                     "check_INCLUDE_DIRS", "VALGRIND_PROGRAM", "DOXYGEN_EXECUTABLE", "HAVE_FOO")] \
        == ["CMOCKA", "CMOCKA", "GTest", "ZLIB", "check", None, None, None]


def test_a_build_stopped_for_compiling_for_the_build_machine_is_not_retried_with_the_same_system():
    """qtbase's configure takes the host's g++: run_command stops its make after ten minutes. No flag or retry the
    planner knows makes it take the cross compiler, so the planner says so at once rather than spending ten more
    minutes per round of related fixes (the werror entry matched its -Wall flags); another build system the source
    ships is still tried first."""
    stopped = {"stopped": "wrong_machine", "kb": [{"id": "werror-project-flags", "fit": "related", "actions": [
        {"kind": "env", "env": {"CROSSBUILD_NO_WERROR": "1"}}]}]}
    text = ("[stopped: the build compiles for EM_X86_64, not for aarch64-linux-musl (EM_AARCH64): 240 object files "
            "written since this command started, none for the target] make -j1  (601.3s)")
    for others, expected in (([], "blocked"), (["cmake"], "steps")):
        planner = Planner()
        planner._observe(Message("tool", "status", name="build_status", data={
            "build_system": "configure", "other_build_systems": others, "recipe": [
                {"argv": ["./configure"], "cwd": "src", "phase": "configure", "env": {}},
                {"argv": ["make", "-j1"], "cwd": "src", "phase": "build", "env": {}}]}))
        planner._observe(Message("tool", "[exit=0] ./configure", name="run_command", data={}))
        planner._observe(Message("tool", text, name="run_command", is_error=True, data=stopped))
        assert planner.state.phase == expected, planner.state.phase
        assert planner.state.pending_switch == (others[0] if others else None)  # the source's other system next
        assert planner.state.attempts <= 1 and not planner.state.applied  # no related fix taken
        if expected == "blocked":
            assert planner.state.blocked_reason == (
                "`make -j1` was stopped: the build compiles for EM_X86_64, not for aarch64-linux-musl (EM_AARCH64): "
                "240 object files written since this command started, none for the target")


def test_the_planners_finish_fits_the_finish_tool_however_long_the_verdict():
    """libxkbcommon's verdict listed every failed test: the planner's `finish` summary went past what the tool takes,
    and the call itself was refused (`summary: String should have at most 4000 characters`). The summary keeps its
    start (what failed) and its end (what was tried)."""
    from crossbuild.agent.finish import FinishArgs

    failed = "the build finished but was not verified: " + "; ".join(
        f"meson test test{n} failed under qemu (expected {n}, got {n + 1})" for n in range(200))
    summary = failed + " Tried: applied diagnosis: -Denable-x11=false"
    planner = Planner()
    turn = planner._finish("blocked", summary)
    args = FinishArgs.model_validate(json.loads(turn.tool_calls[0].arguments))
    assert len(summary) > 4000 and len(args.summary) <= 4000
    assert args.summary.startswith("the build finished but was not verified: meson test test0 failed")
    assert args.summary.endswith("Tried: applied diagnosis: -Denable-x11=false")
