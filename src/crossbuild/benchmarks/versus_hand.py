"""`crossbuild bench-versus-hand`: the time `crossbuild build` takes to VERIFIED against the same build done by hand,
on real projects, alternating in one run. By hand is what a user types with `crossbuild env`'s toolchain: the
standard configure, build and install of the project's build system (-Werror dropped up front, as the planner ends
up doing) and its own test command under the target's emulator (ctest and meson test through the toolchain's
emulator setting), on a machine with qemu-user-binfmt (the build sandbox's registration stands in for it: `make
check` starts target programs). crossbuild's phases are its run's record (trace/phases.py, as `runs show` prints
them). Prints figures; asserts nothing."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from crossbuild.agent.events import outcome_from
from crossbuild.env import recipes, sandbox, workspace
from crossbuild.env.recipes import BuildStep
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation.targets import Target
from crossbuild.proof import target_run
from crossbuild.trace.phases import command_phase, run_phases

BUILD_TIMEOUT_S = 3600.0


@dataclass
class Round:
    hand: dict[str, float]  # seconds per phase: configure, build, install, test
    crossbuild: dict[str, float]  # seconds per phase, as `runs show` has them
    hand_s: float
    crossbuild_s: float
    hand_tests_passed: bool
    status: str  # crossbuild's outcome: verified, failed, ...
    proof: str | None


@dataclass
class ProjectBench:
    name: str
    system: str
    rounds: list[Round] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(r.crossbuild_s for r in self.rounds) / statistics.median(
            r.hand_s for r in self.rounds)

    def median(self, side: str, phase: str) -> float:
        return statistics.median(getattr(r, side).get(phase, 0.0) for r in self.rounds)


def run(projects: list[tuple[str, str, str]], target: Target, *, rounds: int = 3, progress=print
        ) -> list[ProjectBench]:
    """PROJECTS: (name, source, build system) each."""
    results = []
    with tempfile.TemporaryDirectory(prefix="crossbuild-versus-hand-") as tmp_s:
        tmp = Path(tmp_s)
        for name, source, system in projects:
            progress(f"{name} ({system}): preparing {source}")
            pristine = workspace.prepare(source, tmp / name / "pristine").src
            bench = ProjectBench(name, system)
            for i in range(rounds):
                hand_first = i % 2 == 0  # alternating: neither side always meets a warmer cache
                where = tmp / name / f"round-{i}"
                done: dict[str, object] = {}
                for side in (("hand", "crossbuild") if hand_first else ("crossbuild", "hand")):
                    done[side] = (by_hand(pristine, system, target, where / "hand") if side == "hand"
                                  else with_crossbuild(pristine, target, where / "crossbuild"))
                hand_phases, hand_s, passed = done["hand"]
                cb_phases, cb_s, status, proof = done["crossbuild"]
                bench.rounds.append(Round(hand_phases, cb_phases, hand_s, cb_s, passed, status, proof))
                progress(f"  round {i + 1}: by hand {hand_s:.1f}s (tests {'passed' if passed else 'failed'}), "
                         f"crossbuild {cb_s:.1f}s ({status}, {proof}), ratio {cb_s / hand_s:.2f}")
                shutil.rmtree(where, ignore_errors=True)
            results.append(bench)
    return results


def by_hand(pristine: Path, system: str, target: Target, root: Path) -> tuple[dict[str, float], float, bool]:
    """The project built, installed and tested as a user would by hand: (seconds per phase, total, whether its
    tests passed)."""
    shutil.copytree(pristine, root / "src", symlinks=True)
    tc = Toolchain.for_target(target, root, prefix=root / "prefix").materialise()
    env = {**tc.env.as_dict(), "CROSSBUILD_NO_WERROR": "1"}
    steps = [*recipes.steps_for(system, tc), test_step(system, root)]
    # a machine with qemu-user-binfmt: a build that runs what it built (bzip2's default goal runs its tests) and
    # `make check` start target programs as they would there
    box = sandbox.for_toolchain(tc).starting_target_programs(target_run.exec_handler(target, root))
    phases: dict[str, float] = {}
    passed = True
    start = time.monotonic()
    for n, step in enumerate(steps):
        testing = step is steps[-1]
        began = time.monotonic()
        res = box.run(step.argv, cwd=root / step.cwd, env={**env, **dict(step.env)},
                      log_path=root / "logs" / f"{n}.log")
        phase = command_phase(" ".join(step.argv))
        phases[phase] = phases.get(phase, 0.0) + time.monotonic() - began
        if not res.ok:
            if not testing:
                raise RuntimeError(f"by hand, `{' '.join(step.argv)}` failed (log {res.log_path}): the project "
                                   "does not build with the standard steps, so it cannot be a baseline")
            passed = False
    return phases, time.monotonic() - start, passed


def test_step(system: str, root: Path) -> BuildStep:
    """The project's own test command, as its build system runs it."""
    if system == "cmake":
        return BuildStep(("ctest", "--test-dir", "build", "--output-on-failure"), phase="check")
    if system == "meson":
        return BuildStep(("meson", "test", "-C", "build"), phase="check")
    folder = recipes.output_dir(system)
    text = "\n".join(recipes.makefile_texts(root, folder))
    goal = "check" if re.search(r"^check\s*:", text, re.MULTILINE) or system == "autotools" else "test"
    return BuildStep(("make", "-C", folder, goal), phase="check")


def with_crossbuild(pristine: Path, target: Target, root: Path) -> tuple[dict[str, float], float, str, str | None]:
    """`crossbuild build` of the same source with the planner: (seconds per phase, total, status, proof level)."""
    root.mkdir(parents=True)
    argv = [sys.executable, "-m", "crossbuild", "build", str(pristine), "-t", target.name, "-m", "planner",
            "-w", str(root / "ws"), "--prefix", str(root / "prefix"), "--db", str(root / "runs.db"), "--no-config",
            "--json"]
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, cwd=root)
    took = time.monotonic() - start
    outcome = outcome_from(proc.stdout)
    if outcome is None:
        raise RuntimeError(f"crossbuild build gave no outcome (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    db = sqlite3.connect(root / "runs.db")
    db.row_factory = sqlite3.Row
    try:
        phases = run_phases(db, outcome["run_id"])
    finally:
        db.close()
    # the command's own start and the workspace's preparation (the source copied, Debian's hints read, the
    # toolchain written) are outside the run's record
    phases["before the run"] = round(max(0.0, took - (outcome.get("wall_s") or took)), 1)
    return phases, took, outcome["status"], (outcome.get("verify") or {}).get("proof")


def report(results: list[ProjectBench], target: Target, commit: str) -> str:
    """The figures as a Markdown page."""
    lines = [f"# Time to VERIFIED against the same build by hand ({target.name}, commit {commit})", "",
             "| project | system | rounds | by hand (median s) | crossbuild (median s) | ratio | crossbuild outcome |",
             "|---|---|---|---|---|---|---|"]
    for b in results:
        outcomes = sorted({f"{r.status} ({r.proof})" for r in b.rounds})
        lines.append(f"| {b.name} | {b.system} | {len(b.rounds)} | {statistics.median(r.hand_s for r in b.rounds):.1f}"
                     f" | {statistics.median(r.crossbuild_s for r in b.rounds):.1f} | {b.ratio:.2f} | "
                     f"{', '.join(outcomes)} |")
    lines += ["", "Median seconds per phase (by hand | crossbuild):", ""]
    for b in results:
        hand = {p: b.median("hand", p) for p in sorted({p for r in b.rounds for p in r.hand})}
        cb = {p: b.median("crossbuild", p) for p in sorted({p for r in b.rounds for p in r.crossbuild},
                                                           key=lambda p: (p.startswith("verdict"), p))}
        lines.append(f"- {b.name}: by hand {json.dumps({k: round(v, 1) for k, v in hand.items()})}; crossbuild "
                     f"{json.dumps({k: round(v, 1) for k, v in cb.items()})}")
    return "\n".join(lines) + "\n"
