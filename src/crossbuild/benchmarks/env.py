"""`crossbuild bench`: the overhead of the build-env layer and the verifier's scan rate, measured on real zlib.

Not a test: it prints figures. Overhead = wall time of zlib's configure+make through BuildEnv + sandbox, divided
by the same commands run by hand (plain subprocess, same environment a user gets from `crossbuild env --shell`).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from crossbuild.env import sandbox, workspace
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation.targets import Target
from crossbuild.proof.artifacts import scan_tree

ZLIB_STEPS = [["./configure"], ["make", "-j2"]]


@dataclass
class BenchResult:
    sandboxed_s: list[float]
    by_hand_s: list[float]
    backend: str
    scan_artifacts: int
    scan_seconds: float

    @property
    def overhead(self) -> float:
        return statistics.median(self.sandboxed_s) / statistics.median(self.by_hand_s)

    @property
    def scan_rate(self) -> float:
        return self.scan_artifacts / self.scan_seconds if self.scan_seconds else 0.0


def _fresh_copy(pristine: Path, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(pristine, dest, symlinks=True)
    return dest


def run(target: Target, source: str = "debian:zlib", repeats: int = 3, scan_copies: int = 40,
        progress=print) -> BenchResult:
    root = Path(tempfile.mkdtemp(prefix="crossbuild-bench-"))
    try:
        ws = workspace.prepare(source, root / "ws")
        tc = Toolchain.for_target(target, ws.root).materialise()
        env = tc.env.as_dict()
        box = sandbox.for_toolchain(tc)
        tree = ws.root / "tree"
        # warm zig's cache for this target and flags so neither side pays the one-off libc build
        _fresh_copy(ws.src, tree)
        for argv in ZLIB_STEPS:
            subprocess.run(argv, cwd=tree, env=env, capture_output=True, check=True)
        sandboxed, by_hand = [], []
        for i in range(repeats):
            for mode in (("sandbox", "hand") if i % 2 == 0 else ("hand", "sandbox")):
                _fresh_copy(ws.src, tree)
                start = time.perf_counter()
                if mode == "sandbox":
                    failed = box.run_steps([(argv, tree, env) for argv in ZLIB_STEPS], log_dir=tc.logs,
                                           stem=f"bench-{i}")
                    if failed:
                        raise RuntimeError(f"{failed[0]} failed in the sandbox; log {failed[1].log_path}")
                else:
                    for argv in ZLIB_STEPS:
                        subprocess.run(argv, cwd=tree, env=env, capture_output=True, check=True)
                elapsed = time.perf_counter() - start
                (sandboxed if mode == "sandbox" else by_hand).append(elapsed)
                progress(f"  repeat {i + 1} {mode:8s} {elapsed:6.2f} s")
        big = root / "scan"
        for k in range(scan_copies):
            shutil.copytree(tree, big / f"copy{k:03d}", symlinks=True)
        start = time.perf_counter()
        found = scan_tree(big).artifacts
        scan_s = time.perf_counter() - start
        return BenchResult(sandboxed, by_hand, box.backend, len(found), scan_s)
    finally:
        shutil.rmtree(root, ignore_errors=True)
