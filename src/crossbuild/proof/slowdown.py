"""How much slower the emulator runs a target's programs than the build machine runs its own: measured once per
emulator on this machine, cached, and multiplied into test programs' time limits (smoke.py).

One small CPU-bound C program (integer hashing and floating-point work, ~0.3 s here) is built statically with the
pinned zig for the target's architecture (its musl variant: zig links glibc only dynamically, and the emulator's
speed is the architecture's, not the C library's) and for the build machine, both are run three times and the
fastest runs compared; the factor is clamped to [1, 20]. It is kept per qemu binary (every target of one
architecture shares it) in `<cache>/emulation-slowdown.json`, beside the musl loaders, with the figures behind it,
and measured again when that qemu binary changes. A target whose programs run without an emulator (Windows ones are
only scanned) has factor 1, and so has one whose measurement failed: the cache records why, and the measurement is
tried again a day later.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

from crossbuild.env import zigcache
from crossbuild.foundation import host
from crossbuild.foundation.targets import TARGETS, Target
from crossbuild.proof.target_run import qemu_command, runner_argv

MIN_FACTOR, MAX_FACTOR = 1.0, 20.0
RUNS = 3
RETRY_FAILED_S = 86400.0  # a failed measurement (zig or qemu broken then) is tried again after a day
_RUN_TIMEOUT_S = 120.0  # one run of the program: ~0.3 s natively, ~6 s at the largest factor
# The same result on every machine (it is printed, so the work cannot be left out; built without fused
# multiply-adds, which round otherwise): compared as a check that the emulated program really ran.
PROGRAM = r"""#include <stdio.h>
int main(void) {
    unsigned long long h = 1469598103934665603ULL;
    double x = 0.5, y = 0.0;
    for (unsigned long long i = 0; i < 100000000ULL; i++) {
        h = (h ^ i) * 1099511628211ULL;
        x = x * 1.000000119 + (double)(h >> 56) * 0.00390625;
        if (x > 1000.0) { y += x; x -= 1000.0; }
    }
    printf("%llu %.3f %.3f\n", h, x, y);
    return 0;
}
"""


class MeasureError(RuntimeError):
    """The slowdown could not be measured (zig could not build the program, or it did not run alike)."""


def cache_file() -> Path:
    return host.cache_root() / "emulation-slowdown.json"


def factor(target: Target) -> float:
    """How many times longer TARGET's programs take here than the build machine's own: 1.0 when they run without
    an emulator or the measurement failed (its cache entry says why)."""
    entry = measurement(target)
    return float(entry["factor"]) if entry else 1.0


def measurement(target: Target) -> dict | None:
    """The cached measurement for TARGET's emulator (taken now when there is none, or it is stale): its factor,
    the fastest native and emulated runs, the program's target, the qemu binary, and `why` when it failed. None
    when TARGET's programs run without an emulator."""
    prefix, _ = qemu_command(target)
    if target.is_windows or target.qemu is None or prefix is None:
        return None  # nothing of it runs here, or not under qemu
    qemu, path = prefix[0], cache_file()
    with host.exclusive(path.with_name(f".{target.qemu}.lock")):  # verifiers in parallel measure it once
        entry = _read(path).get(target.qemu)
        if not _current(entry, qemu):
            entry = _measure(target, qemu)
            with host.exclusive(path.with_name(f".{path.name}.lock")):  # other emulators' entries are kept
                entries = _read(path)
                entries[target.qemu] = entry
                _write(path, entries)
    return entry


def _current(entry: object, qemu: str) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("factor"), (int, float)):
        return False
    if entry.get("qemu") != qemu or entry.get("qemu_mtime") != _mtime(qemu):
        return False
    return not entry.get("why") or time.time() - float(entry.get("at", 0)) < RETRY_FAILED_S


def _measure(target: Target, qemu: str) -> dict:
    program = _program_target(target)
    entry = {"factor": 1.0, "qemu": qemu, "qemu_mtime": _mtime(qemu), "program": program.name if program else None,
             "at": round(time.time(), 3), "why": None}
    native = TARGETS.get(f"{platform.machine()}-linux-musl")
    try:
        if program is None or native is None:
            raise MeasureError(f"no static musl target for {target.arch} or for this machine ({platform.machine()})")
        with tempfile.TemporaryDirectory(prefix="crossbuild-slowdown-") as tmp:
            scratch = Path(tmp)
            (scratch / "work.c").write_text(PROGRAM)
            here = _build(native, scratch, "work-native")
            there = here if program == native else _build(program, scratch, "work-target")
            argv, why = runner_argv(program, there, dynamic=False)
            if argv is None:
                raise MeasureError(why)
            native_s, emulated_s = _fastest([str(here)], argv, scratch)
    except (MeasureError, zigcache.WarmError, OSError, subprocess.SubprocessError) as e:
        entry["why"] = f"not measured: {e}"[:400]
        return entry
    entry.update(native_s=round(native_s, 4), emulated_s=round(emulated_s, 4),
                 factor=round(min(MAX_FACTOR, max(MIN_FACTOR, emulated_s / native_s)), 2))
    return entry


def _program_target(target: Target) -> Target | None:
    """The static musl target of TARGET's architecture, which its emulator runs as it runs TARGET's programs."""
    return TARGETS.get("arm-linux-musleabihf" if target.arch == "arm" else f"{target.arch}-linux-musl")


def _build(target: Target, scratch: Path, name: str) -> Path:
    """The program built statically for TARGET in crossbuild's shared zig cache (warmed first, as for builds)."""
    zig = host.zig_executable()
    if zig is None:
        raise MeasureError("zig is not installed: `pip install ziglang`")
    shared = host.zig_cache_dir(target.zig_target)
    zigcache.warm(target, shared=shared, zig=zig)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "LC_ALL": "C", "ZIG_GLOBAL_CACHE_DIR": str(shared),
           "ZIG_LOCAL_CACHE_DIR": str(scratch / "zig-local")}
    with zigcache.writing(shared):
        argv = [str(zig), "cc", "-target", target.zig_target, "-O2", "-ffp-contract=off", "-static", "work.c",
                "-o", name]
        r = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise MeasureError(f"zig cc for {target.zig_target} failed: {r.stderr.strip()[-300:]}")
    return scratch / name


def _fastest(native: list[str], emulated: list[str], cwd: Path) -> tuple[float, float]:
    """The fastest of RUNS runs of each (interleaved, so a busy moment of the machine weighs on both)."""
    times: dict[str, list[float]] = {"native": [], "emulated": []}
    outputs: dict[str, set[str]] = {"native": set(), "emulated": set()}
    for _ in range(RUNS):
        for kind, argv in (("native", native), ("emulated", emulated)):
            start = time.perf_counter()
            r = subprocess.run(argv, cwd=cwd, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                               timeout=_RUN_TIMEOUT_S)
            times[kind].append(time.perf_counter() - start)
            if r.returncode != 0:
                raise MeasureError(f"the {kind} run exited {r.returncode}: {(r.stderr or r.stdout).strip()[-200:]}")
            outputs[kind].add(r.stdout.strip())
    if len(outputs["native"] | outputs["emulated"]) != 1:
        raise MeasureError(f"the runs printed different results: {sorted(outputs['native'] | outputs['emulated'])}")
    return min(times["native"]), min(times["emulated"])


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, entries: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
