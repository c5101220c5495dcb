"""`crossbuild build` with the offline planner on CMake projects whose tests are off unless asked for, as a user
runs it: the verdict is `tested` only when the project's own tests ran on the target, so the planner turns them on."""

from __future__ import annotations

import pytest

from tests.agent.test_planner_builds import _build, _project


@pytest.mark.slow
def test_tests_behind_a_variable_no_option_declares_are_turned_on_and_run_on_the_target(tmp_path):
    """libgd's top CMakeLists.txt says `if (BUILD_TEST) ENABLE_TESTING()` and declares no BUILD_TEST option:
    nothing in the CMake cache names the switch, and the build was `exercised` by crossbuild's probes alone. The
    planner reads the if() around enable_testing(), configures again with it on, and the tests run on the
    target."""
    src = _project(tmp_path / "gdlike", {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.13)\nproject(gdlike C)\n"
                          "add_library(gdlike STATIC gdlike.c)\ninstall(TARGETS gdlike DESTINATION lib)\n"
                          "if (BUILD_TEST)\n\tENABLE_TESTING()\n\tadd_subdirectory(tests)\nendif (BUILD_TEST)\n",
        "gdlike.c": "int gdlike_area(int w, int h) { return w * h; }\n",
        "tests/CMakeLists.txt": "add_executable(area area.c)\ntarget_link_libraries(area gdlike)\n"
                                "add_test(NAME area COMMAND area)\n",
        "tests/area.c": "int gdlike_area(int, int);\nint main(void) { return gdlike_area(3, 4) == 12 ? 0 : 1; }\n",
    })
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "tests turned on (off by default): -DBUILD_TEST:BOOL=ON" in out["message"], out["message"]
    verdict = out["verify"]
    assert verdict["proof"] == "tested" and verdict["harness"] == "ctest", verdict.get("proof_why")
    runs = {r_["path"]: r_ for r_ in verdict["smoke_runs"]}
    assert runs["area"]["passed"] and runs["area"]["on_target"], runs


FIND_CMOCKA = """find_path(CMOCKA_INCLUDE_DIR NAMES cmocka.h)
find_library(CMOCKA_LIBRARY NAMES cmocka)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CMocka DEFAULT_MSG CMOCKA_LIBRARY CMOCKA_INCLUDE_DIR)
"""
UNIT = """#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
int yanglike_depth(const char *path);
static void depth_counts_slashes(void **state) { (void)state; assert_int_equal(yanglike_depth("/a/b/c"), 3); }
int main(void) {
    const struct CMUnitTest tests[] = { cmocka_unit_test(depth_counts_slashes) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
"""


@pytest.mark.slow
def test_a_test_framework_the_project_drops_its_tests_without_is_built_and_the_tests_run(tmp_path):
    """libyang: ENABLE_TESTS is an option of its own (off in a Release build, named after no project), and with it
    on, `find_package(CMocka)` failing only says "Disabling tests because of missing CMocka" and sets ENABLE_TESTS
    OFF: the configure passes, no test is built. The planner turns the option on, reads the lookups that failed
    only with the tests on from the cache, builds CMocka (Debian's cmocka) as a dependency and configures again;
    the unit test runs on the target. (glibc: Debian's cmocka 1.1.5 takes __WORDSIZE for 32 on any other C library
    but x86_64's, and its uintptr_t then clashes with musl's; 1.1.6 fixed that.)"""
    src = _project(tmp_path / "yanglike", {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.13)\nproject(yanglike C)\n"
                          "list(APPEND CMAKE_MODULE_PATH ${CMAKE_SOURCE_DIR}/CMakeModules)\n"
                          "option(ENABLE_TESTS \"Build tests\" OFF)\n"
                          "add_library(yanglike STATIC yanglike.c)\ninstall(TARGETS yanglike DESTINATION lib)\n"
                          "if(ENABLE_TESTS)\n  find_package(CMocka)\n  if(NOT CMOCKA_FOUND)\n"
                          "    message(STATUS \"Disabling tests because of missing CMocka\")\n"
                          "    set(ENABLE_TESTS OFF)\n  endif()\nendif()\n"
                          "if(ENABLE_TESTS OR ENABLE_PERF_TESTS)\n  enable_testing()\n"
                          "  add_executable(utest_depth utest_depth.c)\n"
                          "  target_include_directories(utest_depth PRIVATE ${CMOCKA_INCLUDE_DIR})\n"
                          "  target_link_libraries(utest_depth yanglike ${CMOCKA_LIBRARY})\n"
                          "  add_test(NAME utest_depth COMMAND utest_depth)\nendif()\n",
        "CMakeModules/FindCMocka.cmake": FIND_CMOCKA,
        "yanglike.c": "int yanglike_depth(const char *p) { int n = 0; for (; *p; p++) n += *p == '/'; return n; }\n",
        "utest_depth.c": UNIT,
    })
    # a prefix of its own: the shared one may hold cmocka from an earlier run, and nothing would be missing
    r, out = _build(tmp_path, str(src), "aarch64-linux-gnu", "--prefix", str(tmp_path / "prefix"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "tests turned on (off by default): -DENABLE_TESTS=ON" in out["message"], out["message"]
    assert "the tests looked for CMOCKA" in out["message"], out["message"]
    verdict = out["verify"]
    assert verdict["proof"] == "tested", verdict.get("proof_why")
    runs = {r_["path"]: r_ for r_ in verdict["smoke_runs"]}
    assert runs["utest_depth"]["passed"] and runs["utest_depth"]["on_target"], runs
