"""run_command on a failed CMake configure: the result carries the diagnosis read from CMake's trace of the same
configure run again in the sandbox, for a model as text and for the planner as data."""

from __future__ import annotations

import json
import shlex
import shutil
import time

import pytest

from crossbuild import kb
from crossbuild.env import workspace
from crossbuild.foundation.targets import parse_target
from crossbuild.tools import default_toolset
from crossbuild.tools.context import RunContext
from tests.diagnosis.test_cmake_trace import GADGET, TLS_FILE


def _project(ctx, files):
    shutil.rmtree(ctx.root / "src")
    for rel, text in files.items():
        (ctx.root / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx.root / "src" / rel).write_text(text)


def test_a_failed_configure_says_what_failed_where_and_which_switch_governs_it(ctx, call):
    _project(ctx, {"CMakeLists.txt": GADGET, "cmake/tls.cmake": TLS_FILE})
    r = call("run_command", {"command": "cmake -S src -B build"})
    assert not r.ok
    d = r.data["diagnosis"]
    assert d["where"] == "src/cmake/tls.cmake:5" and d["missing"] == ["gadget-nonexistent-tls"]
    assert [s["arg"] for s in d["switches"]] == ["-DGADGET_SECURE_TRANSPORT=OFF"]
    text = r.render()
    assert "governed by GADGET_SECURE_TRANSPORT" in text and "-DGADGET_SECURE_TRANSPORT=OFF" in text
    assert 'build_dependency(name="gadget-nonexistent-tls")' in r.hint
    # the rerun is no build step: one command recorded, and its trace is not left in the build folder
    assert [c.argv for c in ctx.commands] == [["cmake", "-S", "src", "-B", "build"]]
    assert not (ctx.root / "build" / "CMakeFiles" / "crossbuild-configure-trace.json").exists()


def test_a_dependency_that_cannot_be_built_is_answered_with_the_projects_switch_that_builds_without_it(ctx, call):
    """Issue 37: where a dependency cannot be had, the result names an alternative the project accepts, read from
    the failed configure's own records, not a guess at option names."""
    from crossbuild.agent.dependency_builder import DependencyBuilder

    _project(ctx, {"CMakeLists.txt": GADGET, "cmake/tls.cmake": TLS_FILE})
    ctx.dependency_builder = DependencyBuilder()
    assert not call("run_command", {"command": "cmake -S src -B build"}).ok
    r = call("build_dependency", {"name": "gadget-nonexistent-tls"})
    assert not r.ok
    assert r.hint.startswith("the project builds without it: configure again with -DGADGET_SECURE_TRANSPORT=OFF "
                             "(they govern "), r.hint
    assert "src/cmake/tls.cmake:5" in r.hint
    # a name the diagnosis did not look for gets the general advice
    r = call("build_dependency", {"name": "another-nonexistent-library"})
    assert not r.ok and "WITH_/ENABLE_/USE_" in r.hint
    # a call no switch governs: the project requires it, and the hint does not say to turn it off
    _project(ctx, {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(needs C)\n"
                                     "find_package(GadgetNonexistentCore REQUIRED)\n"})
    assert not call("run_command", {"command": "cmake -S src -B build2"}).ok
    r = call("build_dependency", {"name": "GadgetNonexistentCore"})
    assert r.hint.startswith("the project requires it: no switch in its files governs "
                             "find_package(GadgetNonexistentCore REQUIRED) at src/CMakeLists.txt:3"), r.hint
    assert "turn off" not in r.hint


def test_a_dependency_a_projects_own_find_module_names_in_capitals_is_named_as_build_dependency_takes_it(ctx, call):
    """czmq's Findlibzmq.cmake is found as find_package(LIBZMQ): Debian's index knows no `LIBZMQ`, it knows the
    pkg-config name `libzmq`. A model told build_dependency(name="LIBZMQ") lost a call on it."""
    _project(ctx, {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(consumer C)\n"
                          "list(APPEND CMAKE_MODULE_PATH ${CMAKE_CURRENT_SOURCE_DIR})\nfind_package(LIBZMQ REQUIRED)\n",
        "FindLIBZMQ.cmake": "find_path(LIBZMQ_INCLUDE_DIRS NAMES zmq.h)\nfind_library(LIBZMQ_LIBRARIES NAMES zmq)\n"
                            "include(FindPackageHandleStandardArgs)\n"
                            "find_package_handle_standard_args(LIBZMQ DEFAULT_MSG LIBZMQ_LIBRARIES\n"
                            "                                  LIBZMQ_INCLUDE_DIRS)\n"})
    r = call("run_command", {"command": "cmake -S src -B build"})
    assert not r.ok and r.data["diagnosis"]["missing"] == ["libzmq"], r.data.get("diagnosis")
    assert 'build_dependency(name="libzmq")' in r.hint


def test_a_configure_that_fails_without_a_located_error_or_succeeds_has_no_diagnosis(ctx, call):
    _project(ctx, {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(ok NONE)\n"})
    assert "diagnosis" not in call("run_command", {"command": "cmake -S src -B build"}).data
    assert "diagnosis" not in call("run_command", {"command": "cmake --build build --target nosuch"}).data


def test_a_project_that_plants_a_link_in_the_traces_place_writes_nothing_outside(ctx, call, tmp_path):
    """The first configure makes the trace's file a link to a host file; the rerun must not write through it."""
    victim = tmp_path / "outside.txt"
    before = victim.read_text()
    _project(ctx, {"CMakeLists.txt": f"""cmake_minimum_required(VERSION 3.16)
project(evil NONE)
file(CREATE_LINK {victim} ${{CMAKE_BINARY_DIR}}/CMakeFiles/crossbuild-configure-trace.json SYMBOLIC)
file(CREATE_LINK {victim} ${{CMAKE_BINARY_DIR}}/planted SYMBOLIC)
message(FATAL_ERROR "stop")
"""})
    r = call("run_command", {"command": "cmake -S src -B build"})
    assert not r.ok
    assert (ctx.root / "build" / "planted").readlink() == victim  # the link was planted
    assert victim.read_text() == before


@pytest.mark.slow
@pytest.mark.parametrize(("source", "failed", "missing", "switches"), [
    ("debian:libssh", "find_package(ZLIB REQUIRED)", ["ZLIB"],
     [("WITH_ZLIB", "-DWITH_ZLIB=OFF", "src/DefineOptions.cmake")]),
    ("debian:libxml2", "find_package(LibLZMA REQUIRED)", ["LibLZMA"],
     [("LIBXML2_WITH_LZMA", "-DLIBXML2_WITH_LZMA=OFF", "src/CMakeLists.txt")]),
    # one of several backends is required and none is switched off: those it tried, in its order
    ("debian:libssh2", "message(FATAL_ERROR No suitable cryptography backend found.)",
     ["OpenSSL", "libgcrypt", "mbedTLS"], []),  # as build_dependency resolves them
])
def test_real_projects_configured_without_their_dependencies_are_diagnosed(tmp_path, source, failed, missing,
                                                                           switches):
    """Debian's sources configured for the target with an empty prefix: the failing call, what it looked for, and
    the project's own switch around it (declared in another file for libssh)."""
    root = tmp_path / "ws"
    workspace.prepare(source, root)
    (root / "build").mkdir()
    ctx = RunContext.create(root, parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix", kb=kb.load())
    r = default_toolset().dispatch(ctx, "run_command", json.dumps({"command": "cmake -S src -B build"}))
    d = r.data["diagnosis"]
    assert (d["failed"], d["missing"]) == (failed, missing)
    assert [(s["name"], s["arg"], s["declared"].split(":")[0]) for s in d["switches"]] == switches


@pytest.mark.slow
@pytest.mark.parametrize(("source", "message", "switch"), [
    # the option's own action sets another variable (OPT_SSL=$withval), which the condition tests
    ("debian:curl", "select TLS backend(s) or disable TLS with --without-ssl.", ("--with-ssl", "--without-ssl")),
    # an option whose value chooses: a value its case accepts without stopping
    ("debian:avahi", "Linux distribution autodetection failed", ("--with-distro", "--with-distro=none")),
])
def test_real_autoconf_configures_are_diagnosed_from_config_log(tmp_path, source, message, switch):
    """Debian's sources configured with their autoconf script for the target, the standard recipe's steps up to
    the failed configure; the option is read from the script's blocks around config.log's error line."""
    d = _configured(tmp_path, source, "autotools")
    assert d["record"] == "config.log"
    assert d["message"].startswith(message)
    assert [(s["name"], s["arg"]) for s in d["switches"]] == [switch]


@pytest.mark.slow
@pytest.mark.parametrize(("source", "failed", "missing"), [
    ("debian:libnice", "gio_dep = dependency('gio-2.0',", "gio-2.0"),  # its fallback subproject needs the internet
    ("debian:jose", "zlib = dependency('zlib')", "zlib"),
])
def test_real_meson_setups_are_diagnosed_from_the_error_location(tmp_path, source, failed, missing):
    d = _configured(tmp_path, source, "meson")
    assert d["failed"].startswith(failed) and d["missing"] == [missing] and d["switches"] == []


def _configured(tmp_path, source, system):
    """The diagnosis of SOURCE's SYSTEM recipe run for the target up to its failed configure."""
    root = tmp_path / "ws"
    workspace.prepare(source, root)
    ctx = RunContext.create(root, parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix", kb=kb.load())
    tools = default_toolset()
    recipe = tools.dispatch(ctx, "build_status", json.dumps({"system": system})).data["recipe"]
    for step in recipe[:[s["phase"] for s in recipe].index("configure") + 1]:
        r = tools.dispatch(ctx, "run_command", json.dumps({"command": shlex.join(step["argv"]), "cwd": step["cwd"],
                                                           "env": step.get("env") or {}}))
    assert not r.ok
    return r.data["diagnosis"]


def test_a_build_folder_that_is_a_link_loop_costs_the_diagnosis_not_the_result(ctx, call):
    """The configure replaces its build folder with a link to itself: the command's result still comes back."""
    _project(ctx, {"CMakeLists.txt": """cmake_minimum_required(VERSION 3.16)
project(loop NONE)
execute_process(COMMAND sh -c "cd '${CMAKE_BINARY_DIR}/..' && mv build build.old && ln -s build build")
message(FATAL_ERROR "x")
"""})
    r = call("run_command", {"command": "cmake -S src -B build"})
    assert not r.ok and r.error_type == "command_failed" and r.data["exit_code"] != 0
    assert (ctx.root / "build").is_symlink()  # the loop was made


def test_a_fifo_in_the_traces_place_does_not_stall_the_rerun(ctx, call):
    _project(ctx, {"CMakeLists.txt": """cmake_minimum_required(VERSION 3.16)
project(stall NONE)
execute_process(COMMAND mkfifo ${CMAKE_BINARY_DIR}/CMakeFiles/crossbuild-configure-trace.json)
message(FATAL_ERROR "stop here")
"""})
    start = time.monotonic()
    r = call("run_command", {"command": "cmake -S src -B build"})
    assert not r.ok and r.data["diagnosis"]["message"] == "stop here"
    assert time.monotonic() - start < 60  # a blocked open would wait for the rerun's whole limit


def test_records_made_to_be_slow_to_read_are_read_quickly(ctx, call, tmp_path):
    """config.log lines and a configure script built for quadratic matching: read in moments, not hours."""
    (ctx.root / "src" / "configure").write_text("#!/bin/sh\n"
                                                + "printf 'configure:1: checking x%100000sy\\n' ' ' >> config.log\n"
                                                + "echo 'configure:9: error: stop' >> config.log\nexit 1\n"
                                                + "if" + " " * 100000 + "x\n" * 9)
    (ctx.root / "src" / "configure").chmod(0o755)
    start = time.monotonic()
    r = call("run_command", {"command": "./configure", "cwd": "src"})
    assert not r.ok and r.data["diagnosis"]["message"] == "stop"
    assert time.monotonic() - start < 20
