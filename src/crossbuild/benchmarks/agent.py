"""`crossbuild bench-agent`: what the agent loop costs on a real build. The same commands the planner ran are typed
"by hand" (plain subprocess, same BuildEnv, no sandbox, no loop) in a fresh copy; the ratio of wall times, the tool
calls, and the loop's own overhead per step (wall time minus the commands' time) are printed. Not a test."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from crossbuild.agent.events import Event
from crossbuild.agent.session import BuildRequest, build
from crossbuild.env import workspace
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation.targets import Target
from crossbuild.models import ModelConfig


@dataclass
class AgentBench:
    agent_build_s: list[float] = field(default_factory=list)  # run start -> finish call (the build itself)
    agent_total_s: list[float] = field(default_factory=list)  # whole `crossbuild build`, verification included
    by_hand_s: list[float] = field(default_factory=list)
    tool_calls: int = 0
    steps: int = 0
    overhead_per_step_ms: list[float] = field(default_factory=list)
    verified: bool = False
    commands: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(self.agent_build_s) / statistics.median(self.by_hand_s)

    @property
    def total_ratio(self) -> float:
        return statistics.median(self.agent_total_s) / statistics.median(self.by_hand_s)


def run(target: Target, *, source: str = "debian:zlib", repeats: int = 3, engine: str = "native",
        progress=print) -> AgentBench:
    result = AgentBench()
    with tempfile.TemporaryDirectory(prefix="crossbuild-bench-agent-") as tmp_s:
        tmp = Path(tmp_s)
        pristine = workspace.prepare(source, tmp / "pristine").src
        for i in range(repeats):
            marks: dict[str, float] = {}
            tool_time = [0.0]

            def on_event(e: Event, marks=marks, tool_time=tool_time) -> None:
                if e.kind == "run_started":
                    marks["start"] = time.monotonic()
                elif e.kind == "tool_call" and e.data["name"] == "finish":
                    marks["finish"] = time.monotonic()
                elif e.kind == "tool_result" and e.data["name"] != "finish":
                    tool_time[0] += e.data["duration_s"]

            ws = tmp / f"agent-{i}"
            req = BuildRequest(source=str(pristine), target=target, workspace_dir=ws, db=tmp / "runs.db",
                               prefix=tmp / f"prefix-{i}", model=ModelConfig(engine=engine))
            t0 = time.monotonic()
            outcome, ctx = build(req, on_event=on_event)
            total = time.monotonic() - t0
            build_s = marks.get("finish", time.monotonic()) - marks["start"]
            result.agent_total_s.append(total)
            result.agent_build_s.append(build_s)
            result.verified = outcome.ok
            result.tool_calls, result.steps = outcome.tool_calls, outcome.steps
            result.overhead_per_step_ms.append(1000 * (build_s - tool_time[0]) / max(1, outcome.steps))
            commands = [(c.argv, c.cwd, c.env) for c in ctx.commands]
            result.commands = [" ".join(a) + f"   (in {cwd})" for a, cwd, _ in commands]
            hand = _by_hand(pristine, target, commands, old_root=ctx.root, new_root=tmp / f"hand-{i}",
                            prefix=tmp / f"prefix-{i}")
            result.by_hand_s.append(hand)
            progress(f"  run {i + 1}: agent {build_s:.2f}s (total with verification {total:.2f}s), "
                     f"by hand {hand:.2f}s, {outcome.tool_calls} tool calls, {outcome.status}")
    return result


def _by_hand(pristine: Path, target: Target, commands, *, old_root: Path, new_root: Path, prefix: Path) -> float:
    shutil.copytree(pristine, new_root / "src", symlinks=True)
    tc = Toolchain.for_target(target, new_root, prefix=prefix).materialise()
    env = tc.env.as_dict()
    start = time.monotonic()
    for argv, cwd, extra in commands:
        argv = [a.replace(str(old_root), str(new_root)) for a in argv]
        extra = {k: v.replace(str(old_root), str(new_root)) for k, v in extra.items()}
        subprocess.run(argv, cwd=new_root / cwd, env={**env, **extra}, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return time.monotonic() - start
