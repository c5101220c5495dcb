"""What turns a build's tests off (issue 34, "No tests switched off to pass"), read from the recorded steps' argv:
test options turned off, named targets or goals that leave the tests out; never examples, documentation or
benchmarks alone."""

from __future__ import annotations

import pytest

from crossbuild.env.ninja_targets import cmake_targets
from crossbuild.env.recipes import BuildStep
from crossbuild.proof import tests_off  # its tests_switched_off by name would be collected as a test
from crossbuild.proof.tests_off import split_targets, turns_tests_off

CMAKE = ("cmake", "-S", "src", "-B", "build", "-DCMAKE_BUILD_TYPE=Release")


def _steps(*argvs: tuple[str, ...], cwd: str = ".") -> list[BuildStep]:
    return [BuildStep(argv, cwd) for argv in argvs]


@pytest.mark.parametrize("arg", ["-DBUILD_TESTING=OFF", "-DFOO_BUILD_TESTS:BOOL=OFF", "-Dtests=false",
                                 "-Dtests=disabled", "-Dbuild_tests=false", "--disable-tests", "--without-tests",
                                 "--disable-check", "--without-check", "--enable-tests=no", "--disable-unit-tests",
                                 "TESTS=", "check_PROGRAMS=", "-DBUILD_TESTING=", "-DFOO_ENABLE_TESTING=0",
                                 "-DSKIP_TESTS=ON", "-DBUILD_EXAMPLES_AND_TESTS=OFF"])
def test_an_argument_that_turns_tests_off(arg):
    assert turns_tests_off(arg)


@pytest.mark.parametrize("arg", ["-DBUILD_EXAMPLES=OFF", "-DENABLE_DOCS=OFF", "--disable-static",
                                 "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_BENCHMARKS=OFF", "-Dexamples=false",
                                 "--disable-examples", "-DBUILD_EXTRAS=OFF", "-DBUILD_TESTING=ON", "--enable-tests",
                                 "-DSKIP_TESTS=OFF", "--disable-latest", "-DUSE_LATEST=OFF", "--disable-checking",
                                 # stops running the tests while building, not building them (jsoncpp)
                                 "-DJSONCPP_WITH_POST_BUILD_UNITTEST=OFF", "-DHAVE_TESTS=0", "CC=zcc",
                                 # only the tests that need the network, which no sandboxed build has (libgit2)
                                 "-DDISABLE_ONLINE_TESTS=ON", "-DENABLE_NETWORK_TESTS=OFF", "--disable-network-tests"])
def test_an_argument_that_leaves_the_tests_built(arg):
    assert not turns_tests_off(arg)


def test_the_reason_names_the_argument_and_its_step():
    steps = _steps((*CMAKE, "-DBUILD_EXAMPLES=OFF", "-DBUILD_TESTING=OFF"), ("cmake", "--build", "build"))
    assert tests_off.tests_switched_off(steps) == "tests not built: -DBUILD_TESTING=OFF (configure step)"
    meson = _steps(("meson", "setup", "build", "src", "-D", "tests=false"), ("meson", "compile", "-C", "build"))
    assert tests_off.tests_switched_off(meson) == "tests not built: -Dtests=false (configure step)"
    configure = _steps(("../src/configure", "--prefix=/x", "--disable-tests", "--disable-static"),
                       ("make", "-j2", "TESTS="), cwd="build")
    assert tests_off.tests_switched_off(configure) == ("tests not built: --disable-tests (configure step); "
                                                       "TESTS= (build step)")


def test_a_build_that_keeps_its_tests_has_no_reason():
    assert tests_off.tests_switched_off(_steps((*CMAKE, "-DBUILD_EXAMPLES=OFF", "-DENABLE_DOCS=OFF"),
                                     ("cmake", "--build", "build", "--parallel", "2"))) is None
    # automake's way to build the check programs and run none of them: the verifier runs them
    assert tests_off.tests_switched_off(_steps(("../src/configure", "--disable-static"), ("make", "-j2"),
                                     ("make", "-j2", "check", "TESTS="), cwd="build")) is None
    # turned on again later: the last setting counts
    assert tests_off.tests_switched_off(_steps((*CMAKE, "-DBUILD_TESTING=OFF"), (*CMAKE, "-DBUILD_TESTING=ON"))) is None


def test_named_cmake_targets_without_a_whole_build_leave_the_tests_out():
    split = _steps(CMAKE, ("cmake", "--build", "build", "--parallel", "2", "--target", "png_shared", "pngfix"))
    assert tests_off.tests_switched_off(split) == ("tests not built: only the targets png_shared pngfix were built "
                                         "(cmake --build build --target)")
    assert tests_off.tests_switched_off([*split, *_steps(("cmake", "--build", "build"))]) is None
    assert tests_off.tests_switched_off(_steps(("cmake", "--build", "build", "--target", "install"))) is None


def test_make_goals_that_leave_out_the_default_goals_test_goal(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src/Makefile").write_text("all: libbz2.a bzip2 bzip2recover test\n\ntest: bzip2\n\t./bzip2 -t x\n")
    named = _steps(("make", "-j2", "CC=zcc", "libbz2.a", "bzip2", "bzip2recover"),
                   ("make", "install", "PREFIX=/x"), cwd="src")
    assert tests_off.tests_switched_off(named) is None  # the goals alone do not say what the default goal had
    assert tests_off.tests_switched_off(named, root=tmp_path) == (
        "tests not built: make libbz2.a bzip2 bzip2recover instead of `all` leaves out test (build step in src)")
    assert tests_off.tests_switched_off(_steps(("make", "-j2", "CC=zcc"), cwd="src"), root=tmp_path) is None


def test_the_targets_built_apart_are_the_libraries_and_programs_not_the_tests_or_examples(tmp_path):
    (tmp_path / "build").mkdir()
    (tmp_path / "build/build.ninja").write_text("""
# Object build statements for STATIC_LIBRARY target png_static
build CMakeFiles/png_static.dir/png.c.o: C_COMPILER__png_static_Release /w/src/png.c
# Link build statements for STATIC_LIBRARY target png_static
build libpng.a: C_STATIC_LIBRARY_LINKER__png_static_Release CMakeFiles/png_static.dir/png.c.o
# Object build statements for EXECUTABLE target pngfix
build CMakeFiles/pngfix.dir/contrib/tools/pngfix.c.o: C_COMPILER__pngfix_Release /w/src/contrib/tools/pngfix.c
# Object build statements for EXECUTABLE target pnggetset
build CMakeFiles/pnggetset.dir/contrib/libtests/pnggetset.c.o: C_COMPILER__pnggetset_Release /w/src/x.c
# Object build statements for EXECUTABLE target runner
build tests/CMakeFiles/runner.dir/main.c.o: C_COMPILER__runner_Release /w/src/tests/main.c
# Object build statements for SHARED_LIBRARY target png
build CMakeFiles/png.dir/png.c.o: C_COMPILER__png_Release /w/src/png.c
build CMakeFiles/png.dir/tests/helpers.c.o: C_COMPILER__png_Release /w/src/tests/helpers.c
# Utility command for edit_cache
""")
    targets = cmake_targets(tmp_path)
    assert [(t["name"], t["type"]) for t in targets] == [("png_static", "STATIC_LIBRARY"), ("pngfix", "EXECUTABLE"),
                                                         ("pnggetset", "EXECUTABLE"), ("runner", "EXECUTABLE"),
                                                         ("png", "SHARED_LIBRARY")]
    assert targets[3]["paths"] == ["tests/main.c"]
    # a library with one test helper among its sources stays in
    assert split_targets(targets) == (["png_static", "pngfix", "png"], ["pnggetset", "runner"])
    assert cmake_targets(tmp_path, "elsewhere") == []


def test_named_targets_that_hold_tests_by_their_sources_do_not_leave_the_tests_out(tmp_path):
    """The finer split names every target that built, tests included: a test told by its sources' folder
    (libpng's pngvalid, in contrib/libtests/) counts as a test named, read from build.ninja."""
    (tmp_path / "build").mkdir()
    (tmp_path / "build/build.ninja").write_text(
        "# Object build statements for STATIC_LIBRARY target png_static\n"
        "build CMakeFiles/png_static.dir/png.c.o: C_COMPILER__png_static_Release /w/src/png.c\n"
        "# Object build statements for EXECUTABLE target pngvalid\n"
        "build CMakeFiles/pngvalid.dir/contrib/libtests/pngvalid.c.o: C_COMPILER__pngvalid_Release /w/src/x.c\n")
    named = _steps(CMAKE, ("cmake", "--build", "build", "--target", "png_static", "pngvalid"))
    assert tests_off.tests_switched_off(named, root=tmp_path) is None
    assert tests_off.tests_switched_off(named) is not None  # without the workspace, the names alone decide
    only_library = _steps(CMAKE, ("cmake", "--build", "build", "--target", "png_static"))
    assert tests_off.tests_switched_off(only_library, root=tmp_path) == (
        "tests not built: only the targets png_static were built (cmake --build build --target)")
