"""A recorded command's phase, read from its words (what `runs show` sums per phase)."""

from __future__ import annotations

import pytest

from crossbuild.trace.phases import command_phase


@pytest.mark.parametrize("command, phase", [
    ("cmake -S src -B build -DCMAKE_BUILD_TYPE=Release", "configure"),
    ("../src/configure --prefix=/x --host=aarch64-linux-musl", "configure"),
    ("CFLAGS=-O2 ./configure --host=riscv64-linux-musl", "configure"),
    ("meson setup build src --cross-file=x.ini", "configure"),
    ("autoreconf -fi", "configure"),
    ("mkdir -p build && cd build && ../configure", "configure"),
    ("cmake --build build -j2", "build"),
    ("make -j1", "build"),
    ("make -C build V=1 all", "build"),
    ("ninja -C build", "build"),
    ("meson compile -C build", "build"),
    ("cmake --install build", "install"),
    ("make install", "install"),
    ("make -C build DESTDIR=/s install", "install"),
    ("meson install -C build", "install"),
    ("make check TESTS=", "test"),
    ("ctest --test-dir build", "test"),
    ("meson test -C build", "test"),
    ("rm -rf build", "other commands"),
    ("cmake -E make_directory build", "other commands"),
    ("sed -i 's/a/b/' x 'unterminated", "other commands"),
    ("", "other commands"),
])
def test_a_commands_phase_is_read_from_its_words(command, phase):
    assert command_phase(command) == phase
