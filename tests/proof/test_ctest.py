"""Where CTest runs a project's test programs, read from the CTestTestfile.cmake files a real CMake wrote."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from crossbuild.proof import ctest

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")

PROJECT = """cmake_minimum_required(VERSION 3.16)
project(t NONE)
enable_testing()
set(CMAKE_CROSSCOMPILING_EMULATOR "{emulator}")
add_test(NAME in_source COMMAND {build}/prog_a WORKING_DIRECTORY ${{CMAKE_SOURCE_DIR}}/fixtures)
add_test(NAME "quoted name" COMMAND {build}/prog_b --flag "two words")
set_tests_properties("quoted name" PROPERTIES WORKING_DIRECTORY ${{CMAKE_SOURCE_DIR}})
add_test(NAME outside COMMAND {build}/prog_c WORKING_DIRECTORY /etc)
add_test(NAME through_link COMMAND {build}/prog_d WORKING_DIRECTORY ${{CMAKE_SOURCE_DIR}}/linked)
add_test(NAME plain COMMAND {build}/prog_e)
add_subdirectory(sub)
"""


def test_working_dirs_come_from_cmakes_own_files_and_stay_inside_the_tree(tmp_path):
    src, build = tmp_path / "src", tmp_path / "build"
    (src / "fixtures").mkdir(parents=True)
    (src / "sub").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", src / "linked")
    emulator = tmp_path / ".xbuild" / "bin" / "target-run"
    (src / "CMakeLists.txt").write_text(PROJECT.format(emulator=emulator, build=build))
    (src / "sub" / "CMakeLists.txt").write_text(
        f"add_test(NAME nested COMMAND {build}/sub/prog_f WORKING_DIRECTORY ${{CMAKE_CURRENT_SOURCE_DIR}})\n")
    subprocess.run(["cmake", "-S", src, "-B", build], check=True, capture_output=True)
    found = ctest.working_dirs(tmp_path)
    assert found == {build / "prog_a": src / "fixtures", build / "prog_b": src, build / "sub" / "prog_f": src / "sub"}
