"""search_knowledge, build_status and verify through dispatch."""

from __future__ import annotations

import shlex

import pytest

from crossbuild.proof import tests_off
from crossbuild.tools.context import RunContext


def test_search_knowledge_finds_the_entry_and_stays_quiet_otherwise(call):
    r = call("search_knowledge", {"query": "CMake Error: Could NOT find ZLIB (missing: ZLIB_LIBRARY)"})
    assert r.ok and r.data["matches"][0]["id"] == "cmake-package-not-found"
    assert "build_dependency" in r.message
    r = call("search_knowledge", {"query": "the weather in Lisbon is sunny today"})
    assert r.ok and r.data["matches"] == []


def test_search_knowledge_says_how_far_each_match_is_trusted(call):
    # the exact line a model copies from FindOpenSSL (a comma, not "(missing:", after the name): its symptom
    r = call("search_knowledge", {"query": "Could NOT find OpenSSL, try to set the path to OpenSSL root folder in "
                                           "the system variable OPENSSL_ROOT_DIR (missing: OPENSSL_CRYPTO_LIBRARY "
                                           "OPENSSL_INCLUDE_DIR)"})
    assert [(m["id"], m["fit"]) for m in r.data["matches"]] == [("cmake-package-not-found", "fix")]
    assert r.message.startswith("matches its exact symptom (right 99% of the time):")
    # the first line of the same error, without the package's name: related or weaker, and said so
    r = call("search_knowledge", {"query": "CMake Error at /usr/share/cmake-3.25/Modules/"
                                           "FindPackageHandleStandardArgs.cmake:230 (message):"})
    assert r.data["matches"] and r.data["matches"][0]["id"] == "cmake-package-not-found", r.data
    assert r.data["matches"][0]["fit"] in ("related", "weak") and "check it fits" in r.message \
        or "read it as a lead only" in r.message


def test_build_status_before_and_after_a_command(ctx, call):
    r = call("build_status")
    assert r.ok and r.data["build_system"] == "cmake" and "not configured yet" in r.message
    # one command line per step, the recipe's own, and what the environment already gives said once
    configure = next(step for step in r.data["recipe"] if step["phase"] == "configure")
    assert f"  configure: {shlex.join(configure['argv'])}" in r.message.splitlines()
    assert "toolchain already in its environment" in r.message and "CMAKE_TOOLCHAIN_FILE" in r.message
    assert "for autotools instead: ../src/configure --host=aarch64-linux-musl" in r.message
    # options before the first configure: read from the CMake files, and said to be their defaults
    assert r.data["options"] == {"BUILD_SHARED_LIBS": "OFF"} and "declared in its CMake files" in r.message
    call("run_command", {"command": "ls src"})
    r = call("build_status")
    assert r.data["commands"] == 1 and "[exit=0] ls src" in r.message


def test_verify_rejects_an_empty_build(call):
    r = call("verify", {"path": "build", "run_tests": False})
    assert not r.ok and "NOT VERIFIED" in r.message and "nothing was built" in r.message
    assert r.error_type == "not_verified"  # a refused verdict, not a command that failed
    status = call("build_status").message
    assert "last verdict (build): NOT VERIFIED" in status and "call verify when the build has finished" not in status


@pytest.mark.slow
def test_an_outside_agent_can_build_and_verify_with_the_tools(ctx, call):
    """The whole job through the tools alone, as an MCP client would do it: configure, build, verify + rebuild."""
    r = call("run_command", {"command": "cmake -S src -B build -DCMAKE_BUILD_TYPE=Release"})
    assert r.ok, r.render()
    r = call("run_command", {"command": "cmake --build build -j2", "timeout": 900})
    assert r.ok, r.render()
    r = call("build_status")
    assert "CMake configured" in r.message and r.data["artifacts_for_target"] >= 2
    r = call("verify", {"path": "build", "rebuild": True})
    assert r.ok, r.render()
    assert r.data["rebuild"]["ok"] and any(s["passed"] for s in r.data["smoke_runs"])
    assert not r.data["rebuild"]["reused"]
    logs = sorted((ctx.root / ".xbuild" / "rebuild" / ".xbuild" / "logs").iterdir())

    # asked again with nothing changed: the second build is compared again, not made again
    r = call("verify", {"path": "build", "rebuild": True})
    assert r.ok and r.data["rebuild"]["ok"] and r.data["rebuild"]["reused"], r.render()
    assert "clean rebuild: passed (the last verify's, made from the same steps, edits and prefix" in r.message
    assert sorted((ctx.root / ".xbuild" / "rebuild" / ".xbuild" / "logs").iterdir()) == logs
    # an edited file (or a dependency put into the prefix) is a new input: made again
    r = call("edit_file", {"path": "src/CMakeLists.txt", "edits": [{"old": "project(", "new": "# edited\nproject("}]})
    assert r.ok, r.render()
    r = call("verify", {"path": "build", "rebuild": True, "run_tests": False})
    assert r.data["rebuild"]["ok"] and not r.data["rebuild"]["reused"], r.render()
    (ctx.prefix / "include").mkdir(parents=True, exist_ok=True)
    (ctx.prefix / "include" / "dep.h").write_text("#define DEP 1\n")
    r = call("verify", {"path": "build", "rebuild": True, "run_tests": False})
    assert r.data["rebuild"]["ok"] and not r.data["rebuild"]["reused"], r.render()


def test_build_status_names_the_projects_own_cmake_projects_and_not_vendored_ones(ctx, call):
    """googletest declares gtest and gmock in its own folders: their test switches are the project's; leveldb's
    third_party/benchmark is someone else's (its switch stays off)."""
    src = ctx.root / "src"
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(top-distribution NONE)\n"
        "add_subdirectory(inner)\nadd_subdirectory(third_party/bench)\n")
    for folder, name in (("inner", "gtest"), ("third_party/bench", "benchmark")):
        (src / folder).mkdir(parents=True)
        (src / folder / "CMakeLists.txt").write_text(
            f"project({name} NONE)\noption({name}_build_tests \"tests\" OFF)\n")
    r = call("run_command", {"command": "cmake -S src -B build"})
    assert r.ok, r.render()
    data = call("build_status").data
    assert data["cmake_projects"] == ["top-distribution", "gtest"]
    assert tests_off.tests_off_by_default(data["options"], data["cmake_projects"]) == ["gtest_build_tests"]


def test_build_status_names_the_variables_the_top_cmake_file_needs_true_to_build_the_tests(ctx, call):
    """libgd: `if (BUILD_TEST) ENABLE_TESTING()` with no option() declaring BUILD_TEST, so the cache has no entry
    to find; libyang: `if(ENABLE_TESTS OR ENABLE_PERF_TESTS)` around enable_testing(), ENABLE_TESTS an
    option of its own named after no project. A negated skip switch, a variable compared, a checker's switch, a
    benchmark's and an examples folder are not such variables."""
    src = ctx.root / "src"
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(gd C)\noption(ENABLE_PNG \"png\" OFF)\n"
        "option(GD_TESTS \"tests\" OFF)\nif (BUILD_TEST)\n\tENABLE_TESTING()\nendif (BUILD_TEST)\n"
        "if(WITH_CHECKS AND NOT WIN32)\n  add_subdirectory(tests)\nendif()\n"
        "if(GD_TESTS)\n  add_test(NAME a COMMAND a)\nendif()\nif(NOT NO_TESTS)\n  add_test(NAME b COMMAND b)\nendif()\n"
        "if(TEST_LEVEL GREATER 1)\n  add_test(NAME c COMMAND c)\nendif()\n"
        "if(ENABLE_VALGRIND_TESTS)\n  add_test(NAME d COMMAND d)\nendif()\n"
        "if(BUILD_EXAMPLES)\n  add_subdirectory(examples)\nendif()\n"
        "option(ENABLE_TESTS \"tests\" OFF)\nif(ENABLE_TESTS OR ENABLE_PERF_TESTS)\n  enable_testing()\n"
        "endif()\n"
        # dmlc-core: a folder below a test folder, behind a switch declared by the project's own macro
        "if(GOOGLE_TEST)\n  add_subdirectory(test/unittest)\nendif()\n"
        "if(WITH_TOOLS)\n  add_subdirectory(tools/contest)\nendif()\n")
    r = call("run_command", {"command": "cmake -S src -B build"})
    assert r.ok, r.render()
    assert call("build_status").data["test_variables"] == ["BUILD_TEST", "WITH_CHECKS", "GD_TESTS", "ENABLE_TESTS",
                                                           "GOOGLE_TEST"]


def test_the_dependencies_a_session_provided_are_remembered_by_a_reopened_workspace(ctx):
    ctx.record_dependency("ZLIB", None)
    ctx.record_dependency("GTest", "1.12.1-0.2")
    ctx.record_dependency("ZLIB", None)
    with open(ctx.xbuild / "dependencies.jsonl", "a") as f:
        f.write('{"name": "cut off by a cr\n["not", "a", "record"]\n')
    again = RunContext.create(ctx.root, ctx.target, prefix=ctx.toolchain.prefix)
    assert again.dependencies == [("ZLIB", None), ("GTest", "1.12.1-0.2")]
