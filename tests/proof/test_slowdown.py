"""The emulator's slowdown, measured for real, and the test programs' time limits it scales (issue 34)."""

from __future__ import annotations

import json
import time

import pytest

from crossbuild.foundation import host
from crossbuild.foundation.targets import parse_target
from crossbuild.proof import slowdown
from crossbuild.proof.verify import verify
from tests.proof.test_verify import zcc

pytestmark = pytest.mark.slow  # real zig builds and qemu runs

AARCH64 = parse_target("aarch64-linux-musl")


def test_the_slowdown_of_qemu_is_measured_once_and_cached(tmp_path, monkeypatch):
    cache = tmp_path / "emulation-slowdown.json"
    monkeypatch.setattr(slowdown, "cache_file", lambda: cache)
    started = time.monotonic()
    factor = slowdown.factor(AARCH64)
    took = time.monotonic() - started
    entry = json.loads(cache.read_text())["qemu-aarch64"]
    print(f"\nslowdown of qemu-aarch64: x{factor} (native {entry.get('native_s')} s, emulated "
          f"{entry.get('emulated_s')} s, measured in {took:.1f} s)")
    assert entry["why"] is None and entry["program"] == "aarch64-linux-musl", entry
    assert 1 < factor <= 20 and entry["factor"] == factor
    # every target of that emulator shares it, read from the cache without running anything again
    again = time.monotonic()
    assert slowdown.factor(parse_target("aarch64-linux-gnu")) == factor
    assert time.monotonic() - again < 1 and json.loads(cache.read_text())["qemu-aarch64"]["at"] == entry["at"]
    # programs that run under no emulator here are not scaled
    assert slowdown.factor(parse_target("x86_64-windows-gnu")) == 1.0


def test_a_failed_measurement_is_recorded_and_not_scaled(tmp_path, monkeypatch):
    cache = tmp_path / "emulation-slowdown.json"
    monkeypatch.setattr(slowdown, "cache_file", lambda: cache)
    monkeypatch.setattr(host, "zig_executable", lambda: None)
    assert slowdown.factor(AARCH64) == 1.0
    assert json.loads(cache.read_text())["qemu-aarch64"]["why"] == "not measured: zig is not installed: `pip " \
                                                                   "install ziglang`"


def test_a_test_program_that_needs_more_time_under_emulation_passes_with_the_scaled_limit(tmp_path, monkeypatch):
    """A program that takes longer than the base limit but less than the limit scaled by the measured slowdown
    passes; with the limit unscaled the same program is a failure reported as a timeout."""
    factor = slowdown.factor(AARCH64)
    assert factor >= 1.5, f"qemu-aarch64 measured x{factor}: too close to native to test the scaling"
    base = 1.0
    takes_ms = int(base * (1 + factor) / 2 * 1000)  # halfway between the base limit and the scaled one
    root = tmp_path / "tree"
    (root / "t").mkdir(parents=True)
    (root / "slow.c").write_text('#include <stdio.h>\n#include <time.h>\nint main(void){puts("working");'
                                 f'fflush(stdout);struct timespec t={{{takes_ms // 1000}, {takes_ms % 1000}000000L}};'
                                 'nanosleep(&t, 0);puts("done");return 0;}\n')
    zcc(str(host.zig_executable()), "aarch64-linux-musl", ["-O1", "slow.c", "-o", "t/test_slowish"], root)
    (root / "slow.c").unlink()

    report = verify(root, AARCH64, smoke_timeout_s=base)
    [run] = report.smoke_runs
    assert run.passed and report.ok and report.proof == "tested", (run, report.reasons)
    assert base < run.duration_s < base * factor, run

    monkeypatch.setattr(slowdown, "factor", lambda target: 1.0)
    report = verify(root, AARCH64, smoke_timeout_s=base)
    [run] = report.smoke_runs
    assert not report.ok and run.failed and run.stopped == "timeout", run
    assert run.why == "timed out after 1s (limit not scaled); last output: working", run.why
