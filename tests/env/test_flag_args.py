"""Flag variables given twice on one command line are combined: each build system keeps only the last one."""

from __future__ import annotations

from crossbuild.env.flag_args import combined


def test_two_fixes_flags_for_one_variable_become_one_argument_in_order():
    # libdigidoc: the second -DCMAKE_C_FLAGS replaced the first, and the first error came back
    argv = ["cmake", "-S", "src", "-B", "build", "-DCMAKE_C_FLAGS=-Wno-error=implicit-function-declaration",
            "-DX=1", "-DCMAKE_C_FLAGS:STRING=-Wno-error=incompatible-pointer-types -Wno-error=int-conversion",
            "-DCMAKE_CXX_FLAGS=-fno-builtin"]
    assert combined(argv) == [
        "cmake", "-S", "src", "-B", "build",
        "-DCMAKE_C_FLAGS=-Wno-error=implicit-function-declaration -Wno-error=incompatible-pointer-types "
        "-Wno-error=int-conversion", "-DX=1", "-DCMAKE_CXX_FLAGS=-fno-builtin"]
    configure = ["../src/configure", "--host=aarch64-linux-musl", "CFLAGS=-O2 -Wno-error=implicit-int",
                 "CPPFLAGS=-D_LARGEFILE64_SOURCE", "CFLAGS=-O2 -Wno-error=int-conversion"]
    assert combined(configure) == ["../src/configure", "--host=aarch64-linux-musl",
                                   "CFLAGS=-O2 -Wno-error=implicit-int -Wno-error=int-conversion",
                                   "CPPFLAGS=-D_LARGEFILE64_SOURCE"]
    meson = ["meson", "setup", "build", "src", "-Dcpp_args=-fno-builtin", "-Dcpp_std=gnu++20",
             "-Dcpp_args=-DX=1,-fno-builtin"]
    assert combined(meson) == ["meson", "setup", "build", "src", "-Dcpp_args=-fno-builtin,-DX=1",
                               "-Dcpp_std=gnu++20"]


def test_arguments_that_are_no_flag_variables_or_given_once_are_left_as_they_are():
    argv = ["cmake", "-DCMAKE_C_FLAGS_RELEASE=-O2", "-DCMAKE_C_FLAGS=", "-DFOO=a", "-DFOO=b",
            "-Dc_args=['-a', '-b']", "-Dc_args=['-c']", "CC=zcc", "CC=other"]
    assert combined(argv) == argv
