"""C++ shared libraries share one C++ runtime (env/cxx_runtime.py, zigwrap): an exception a library throws is caught
by the program that calls it, on the target, as with a native toolchain. `crossbuild build` with the planner, as a
user runs it."""

from __future__ import annotations

import io

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from tests.conftest import cb, outcome_of

PROJECT = """cmake_minimum_required(VERSION 3.16)
project(thrower CXX)
enable_testing()
add_library(thrower SHARED thrower.cpp)
add_executable(catches_test catches_test.cpp)
target_link_libraries(catches_test thrower)
add_test(NAME catches_test COMMAND catches_test)
add_executable(alone alone.cpp)
install(TARGETS thrower alone)
"""
THROWER = """#include <stdexcept>
void thrower(int k) {
    if (k == 1) throw std::runtime_error("thrown in the library");
    throw 42;
}
"""
CATCHES = """#include <cstdio>
#include <stdexcept>
void thrower(int k);
int main() {
    int caught = 0;
    try { thrower(1); } catch (const std::runtime_error &e) { caught++; std::puts(e.what()); }
    try { thrower(2); } catch (int v) { caught += v == 42; }
    return caught == 2 ? 0 : 1;
}
"""
ALONE = "#include <string>\nint main(int argc, char **) { return std::string(\"x\").size() == 1 && argc ? 0 : 1; }\n"


def _write(project, cmake: str) -> None:
    project.mkdir()
    for name, text in (("CMakeLists.txt", cmake), ("thrower.cpp", THROWER), ("catches_test.cpp", CATCHES),
                       ("alone.cpp", ALONE)):
        (project / name).write_text(text)


def _build(tmp_path, project):
    r = cb("build", str(project), "-t", "aarch64-linux-musl", "-w", str(tmp_path / "ws"), "--db",
           str(tmp_path / "runs.db"), "--json", cwd=tmp_path, timeout=3000)
    out = outcome_of(r.stdout)
    assert out["status"] == "verified", r.stdout[-3000:] + r.stderr[-2000:]
    return out["verify"]


def _needed(path) -> list[str]:
    elf = ELFFile(io.BytesIO(path.read_bytes()))
    return [tag.needed for section in elf.iter_sections() if isinstance(section, DynamicSection)
            for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]


@pytest.mark.slow
def test_an_exception_thrown_in_a_shared_library_is_caught_by_its_caller_on_the_target(tmp_path):
    _write(tmp_path / "thrower", PROJECT)
    verdict = _build(tmp_path, tmp_path / "thrower")
    assert verdict["proof"] == "tested", verdict["proof_why"]
    runs = {run["path"]: run for run in verdict["smoke_runs"]}
    assert runs["catches_test"]["passed"], runs["catches_test"]
    build = tmp_path / "ws" / "build"
    assert "libc++_shared.so" in _needed(build / "libthrower.so")
    assert "libc++_shared.so" in _needed(build / "catches_test")
    assert verdict["needs_runtime"].endswith("/musl-sysroot/aarch64/lib/libc++_shared.so"), verdict["needs_runtime"]
    # a program that links no C++ shared library keeps zig's static runtime: it runs without ours
    assert "libc++_shared.so" not in _needed(build / "alone")


@pytest.mark.slow
def test_without_tests_a_program_using_the_library_runs_on_the_target_with_the_shared_runtime(tmp_path):
    """No test suite: the verifier's own probes start the installed program that links the library and load the
    library itself (exercised); both need the runtime beside the target's loader."""
    cmake = PROJECT.replace("enable_testing()\n", "").replace("add_test(NAME catches_test COMMAND catches_test)\n",
                                                               "").replace("catches_test", "catcher")
    _write(tmp_path / "thrower", cmake.replace("install(TARGETS thrower alone)", "install(TARGETS thrower catcher)"))
    (tmp_path / "thrower" / "catches_test.cpp").rename(tmp_path / "thrower" / "catcher.cpp")
    verdict = _build(tmp_path, tmp_path / "thrower")
    assert verdict["proof"] == "exercised", verdict["proof_why"]
    probes = {run["path"]: run for run in verdict["probe_runs"]}
    assert probes["catcher"]["passed"] and probes["libthrower.so"]["passed"], probes
    assert "libc++_shared.so" in _needed(tmp_path / "ws" / "install" / "bin" / "catcher")


GEOMETRY = """#include <string>
static const std::string &unit() { static const std::string u("m2"); return u; }  // a guarded static
extern "C" const char *area_unit(void) { return unit().c_str(); }
"""
# libtool's C tag, as madlib's libtool links its library: C++ objects in a convenience archive, the library
# itself linked with $(CC); gcc leaves the C++ runtime's names for the consumer's libstdc++ to answer
C_TAG_MAKEFILE = """PREFIX ?= /usr/local
all: libgeo.so
geometry.o: geometry.cpp
\t$(CXX) -fPIC -O2 -c geometry.cpp -o geometry.o
libgeoconv.a: geometry.o
\t$(AR) rc libgeoconv.a geometry.o
libgeo.so: libgeoconv.a
\t$(CC) -shared -Wl,--whole-archive libgeoconv.a -Wl,--no-whole-archive -lm -Wl,-soname,libgeo.so -o libgeo.so
install: all
\tmkdir -p $(PREFIX)/lib
\tcp libgeo.so $(PREFIX)/lib/
"""


@pytest.mark.slow
def test_a_library_of_cxx_code_linked_by_the_c_driver_loads_on_the_target(tmp_path):
    """The library's probe (dlopen with RTLD_NOW, as musl always binds) finds the C++ runtime's names it uses."""
    project = tmp_path / "geo"
    project.mkdir()
    (project / "geometry.cpp").write_text(GEOMETRY)
    (project / "Makefile").write_text(C_TAG_MAKEFILE)
    verdict = _build(tmp_path, project)
    probes = {run["path"]: run for run in verdict["probe_runs"]}
    library = next(run for path, run in probes.items() if path.endswith("libgeo.so"))
    assert library["passed"], probes
    assert verdict["proof"] == "exercised", verdict["proof_why"]
    assert "libc++_shared.so" in _needed(tmp_path / "ws" / "install" / "lib" / "libgeo.so")
