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
