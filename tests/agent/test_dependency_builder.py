"""What the dependency builder refuses before building anything: the project's own targets and itself."""

from __future__ import annotations

import json

import pytest

from crossbuild.agent.dependency_builder import DependencyBuilder, _own_target
from crossbuild.foundation.targets import parse_target
from crossbuild.tools import default_toolset
from crossbuild.tools.context import RunContext
from tests.conftest import cb, forget_cached_dependencies


def test_a_library_the_project_builds_itself_is_not_a_dependency(tmp_path):
    # libpng's contrib test links -lpng_shared, the project's own target: building "png_shared" as a dependency
    # (or turning PNG_SHARED off for want of it) would be wrong
    src = tmp_path / "ws" / "src"
    (src / "lib").mkdir(parents=True)
    (src / "CMakeLists.txt").write_text("project(p C)\nadd_subdirectory(lib)\n")
    (src / "lib" / "CMakeLists.txt").write_text("add_library(png_shared SHARED png.c)\n")
    ctx = RunContext.create(tmp_path / "ws", parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix",
                            sandbox_backend="none", dependency_builder=DependencyBuilder(project="libpng1.6"))
    r = default_toolset().dispatch(ctx, "build_dependency", json.dumps({"name": "png_shared"}))
    assert not r.ok and "is the project's own (src/lib/CMakeLists.txt)" in r.message
    r = default_toolset().dispatch(ctx, "build_dependency", json.dumps({"name": "PNG"}))
    assert not r.ok and "which is what is being built here" in r.message
    assert r.data["own_files"] is True


def test_an_alias_or_imported_name_for_another_projects_target_is_not_the_projects_own(tmp_path):
    """benchmark's `add_library(gtest ALIAS GTest::gtest)` names Debian's googletest: build_dependency("GTest") had
    been refused as "the project's own", and a model was told to turn the tests off instead."""
    src = tmp_path / "ws" / "src"
    src.mkdir(parents=True)
    (src / "CMakeLists.txt").write_text("project(b CXX)\nfind_package(GTest CONFIG REQUIRED)\n"
                                        "add_library(gtest ALIAS GTest::gtest)\n"
                                        "add_library(zstd SHARED IMPORTED)\nadd_library(bench src/b.cc)\n")
    assert _own_target(tmp_path / "ws", "GTest") is None and _own_target(tmp_path / "ws", "zstd") is None
    assert _own_target(tmp_path / "ws", "bench") == "src/CMakeLists.txt"


def test_a_header_the_project_ships_is_not_a_dependency_but_a_bundled_copy_of_another_projects_is(tmp_path):
    src = tmp_path / "ws" / "src"
    (src / "lib").mkdir(parents=True)
    (src / "third_party" / "zlib").mkdir(parents=True)
    (src / "lib" / "vp.h").write_text("int vp(void);\n")
    (src / "third_party" / "zlib" / "zlib.h").write_text("/* a bundled copy */\n")
    ctx = RunContext.create(tmp_path / "ws", parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix",
                            sandbox_backend="none", dependency_builder=DependencyBuilder())
    r = default_toolset().dispatch(ctx, "build_dependency", json.dumps({"name": "vp.h"}))
    assert not r.ok and r.data["own_files"] and "vp.h is the project's own (src/lib/vp.h)" in r.message
    assert _own_target(tmp_path / "ws", "zlib.h") is None
    assert _own_target(tmp_path / "ws", "lib/vp.h") == "src/lib/vp.h"


def test_a_library_a_debian_patch_removed_is_a_dependency_though_quilt_keeps_its_old_copy(tmp_path):
    """spdlog: Debian's use-external-fmt.patch deletes the bundled fmt; quilt keeps the deleted files under .pc/."""
    old = tmp_path / "ws" / "src" / ".pc" / "use-external-fmt.patch" / "include" / "spdlog" / "fmt"
    old.mkdir(parents=True)
    (old / "fmt.h").write_text("/* bundled fmt, removed by the patch */\n")
    # spdlog's own wrapper stays: a header in a folder named after fmt includes the real one
    wrapper = tmp_path / "ws" / "src" / "include" / "spdlog" / "fmt"
    wrapper.mkdir(parents=True)
    (wrapper / "fmt.h").write_text("#include <fmt/core.h>\n")
    assert _own_target(tmp_path / "ws", "fmt") is None
    assert _own_target(tmp_path / "ws", "spdlog/fmt/fmt.h") == "src/include/spdlog/fmt/fmt.h"


def test_a_cancelled_call_stops_waiting_for_another_runs_build_of_the_same_dependency(tmp_path):
    """Another run holds zlib's build lock (its build may take an hour): a build_dependency call cancelled while it
    waits ends at once and says why, instead of keeping its session cancelled until that build is over."""
    import threading
    import time

    from crossbuild.env import dependency_cache as deps

    src = tmp_path / "ws" / "src"
    src.mkdir(parents=True)
    ctx = RunContext.create(tmp_path / "ws", parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix",
                            sandbox_backend="none", dependency_builder=DependencyBuilder())
    held, release = threading.Event(), threading.Event()

    def other_run() -> None:
        with deps.build_lock("aarch64-linux-musl", "zlib"):
            held.set()
            release.wait(60)

    threading.Thread(target=other_run, daemon=True).start()
    assert held.wait(10)
    try:
        threading.Timer(0.5, ctx.cancel.set).start()
        start = time.monotonic()
        # a version nobody cached: the call reaches the lock
        r = default_toolset().dispatch(ctx, "build_dependency", json.dumps({"name": "ZLIB",
                                                                            "version": "0.0-never-built"}))
        assert time.monotonic() - start < 10
        assert not r.ok and "cancelled while another run was building zlib for aarch64-linux-musl" in r.message
    finally:
        release.set()


def test_a_dependency_whose_own_suite_failed_in_part_is_provided_and_said_unless_it_crashed_or_mostly_failed():
    """libxml2 for aarch64: every binary fits, the clean rebuild passed, and 4 of its 5 CTest tests passed; runtest,
    one CTest test holding 508 cases, had one error under qemu. A consumer needs the library, and its own verdict
    stands on its own tests: libxml2 is provided, with what failed. A crash, a failing artifact or a suite that
    mostly failed still refuses it."""
    from crossbuild.proof.partial_suite import tests_alone_failed
    from crossbuild.proof.smoke import SmokeRun
    from crossbuild.proof.verify import VerifyReport

    def report(passed, failed, triage="failed", artifact_ok=True):
        runs = [SmokeRun(path=f"ok{i}", command=[], passed=True, harness="ctest") for i in range(passed)]
        runs += [SmokeRun(path=f"bad{i}", command=[], passed=False, harness="ctest", triage=triage, why="failed")
                 for i in range(failed)]
        return VerifyReport(target="aarch64-linux-musl", root="build",
                            reasons=[f"bad{i} failed" for i in range(failed)],
                            artifacts=[{"path": "libxml2.so", "ok": artifact_ok}], smoke_runs=runs,
                            rebuild={"ok": True})

    said = tests_alone_failed(report(4, 1))
    assert said and said.startswith("4 passed, 1 failed: ctest test bad0")
    assert tests_alone_failed(report(2, 2)) is None  # half of them failed
    assert tests_alone_failed(report(9, 1, triage="crashed")) is None
    assert tests_alone_failed(report(9, 1, artifact_ok=False)) is None


@pytest.mark.slow
def test_a_dependency_with_a_few_failing_tests_is_provided_without_building_it_for_the_build_machine(tmp_path):
    """One of a dependency's five CTest tests fails on the target the way it would anywhere (a wrong expected sum):
    the library is provided with that failure said, at once: the build for the build machine that could call it
    the project's own (the dependency's own dependencies built for that machine first: minutes each in a chain)
    would change only how it is said."""
    src = tmp_path / "sources" / "sums"
    src.mkdir(parents=True)
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(sums C)\nenable_testing()\n"
        "add_library(sums STATIC sums.c)\nadd_executable(sumtest sumtest.c)\ntarget_link_libraries(sumtest sums)\n"
        "foreach(n 1 2 3 4)\n  math(EXPR m \"${n} + 1\")\n  add_test(NAME add${n} COMMAND sumtest ${n} ${m})\n"
        "endforeach()\nadd_test(NAME wrong COMMAND sumtest 5 7)\n"
        "install(TARGETS sums)\ninstall(FILES sums.h DESTINATION include)\n")
    (src / "sums.h").write_text("int sums_inc(int a);\n")
    (src / "sums.c").write_text('#include "sums.h"\nint sums_inc(int a) { return a + 1; }\n')
    (src / "sumtest.c").write_text('#include <stdio.h>\n#include <stdlib.h>\n#include "sums.h"\n'
                                   'int main(int c, char **v) { if (c != 3) return 2;\n'
                                   '  if (sums_inc(atoi(v[1])) != atoi(v[2])) { puts("sum mismatch"); return 1; }\n'
                                   '  return 0; }\n')
    try:
        r = cb("deps", "build", "sums", "-t", "aarch64-linux-musl", "--dep-source", f"sums={src}", "--prefix",
               str(tmp_path / "prefix"), "--json", cwd=tmp_path, timeout=1800)
        [row] = json.loads(r.stdout)
        assert row["ok"], row["message"]
        assert "its own tests on the target: 4 passed, 1 failed" in row["message"], row["message"]
        assert "ctest test wrong" in row["message"] and "build machine" not in row["message"], row["message"]
        archive = (tmp_path / "prefix" / "aarch64-linux-musl" / "lib" / "libsums.a").read_bytes()
        assert b"\x7fELF\x02\x01\x01" in archive and b"\xb7\x00" in archive  # EM_AARCH64: the target's, provided
    finally:
        forget_cached_dependencies(tmp_path / "sources")
