"""The shared C++ runtime's builder (env/cxx_runtime.py) when zig cannot give it: said, remembered, never cached as
whole. (Its success is tried where a user meets it: tests/agent/test_cxx_runtime.py.)"""

from __future__ import annotations

import pytest

from crossbuild.env import cxx_runtime
from crossbuild.foundation.targets import parse_target


def test_a_zig_that_cannot_build_the_runtime_is_said_once_and_not_retried(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSBUILD_CACHE_DIR", str(tmp_path / "cache"))
    calls = tmp_path / "calls"
    broken_zig = tmp_path / "zig"  # prints one runtime command of three, then fails, as a broken install might
    broken_zig.write_text(f'#!/bin/sh\necho x >> {calls}\n'
                          'echo "zig clang /z/lib/libcxx/src/new.cpp -fvisibility=hidden -c" >&2\nexit 1\n')
    broken_zig.chmod(0o755)
    target = parse_target("aarch64-linux-musl")
    with pytest.raises(cxx_runtime.RuntimeBuildError, match="exited 1, without commands for lib/libcxxabi/src"):
        cxx_runtime.build(target, broken_zig)
    with pytest.raises(cxx_runtime.RuntimeBuildError, match="exited 1"):
        cxx_runtime.build(target, broken_zig)
    assert calls.read_text() == "x\n"  # the second call read the remembered failure
    assert cxx_runtime.available(target, broken_zig) is None and cxx_runtime.identity(target.name) is None
    assert not cxx_runtime.path(target).exists()
