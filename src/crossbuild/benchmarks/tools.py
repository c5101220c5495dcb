"""`crossbuild bench-tools`: dispatch overhead (parse + validate + authorize + a no-op tool, no trace) in µs per
call, and the size of each schema set. Not a test: it prints figures."""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from crossbuild.foundation.targets import parse_target
from crossbuild.tools import default_toolset, paths
from crossbuild.tools.base import Tool, ToolArgs, ToolResult, Toolset
from crossbuild.tools.context import RunContext
from crossbuild.tools.schemas import anthropic_tools, input_schema, openai_tools


class NoopArgs(ToolArgs):
    path: str = "."


def _authorize(ctx: RunContext, args: NoopArgs):
    return paths.resolve(ctx, args.path)


NOOP = Tool(name="noop", description="does nothing", args=NoopArgs, authorize=_authorize,
            run=lambda ctx, args, real: ToolResult(ok=True, message="ok"), read_only=True)


@dataclass
class ToolBench:
    calls: int
    p50_us: float
    p99_us: float
    schema_chars: dict[str, int]
    description_chars: int


def run(calls: int = 20_000) -> ToolBench:
    with tempfile.TemporaryDirectory(prefix="crossbuild-bench-") as tmp:
        root = Path(tmp) / "ws"
        (root / "src").mkdir(parents=True)
        ctx = RunContext.create(root, parse_target("aarch64-linux-musl"), prefix=Path(tmp) / "prefix",
                                sandbox_backend="none")
        toolset = Toolset([NOOP])
        raw = json.dumps({"path": "src"})
        for _ in range(500):  # warm-up
            toolset.dispatch(ctx, "noop", raw)
        samples = []
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            result = toolset.dispatch(ctx, "noop", raw)
            samples.append((time.perf_counter_ns() - t0) / 1000)
            assert result.ok
    samples.sort()
    ts = default_toolset()
    sets = {"openai": openai_tools(ts), "openai-strict": openai_tools(ts, strict=True),
            "anthropic": anthropic_tools(ts),
            "mcp": [{"name": t.name, "description": t.description, "inputSchema": input_schema(t)}
                    for t in ts.tools.values()]}
    return ToolBench(calls=calls, p50_us=statistics.median(samples), p99_us=samples[int(len(samples) * 0.99)],
                     schema_chars={k: len(json.dumps(v)) for k, v in sets.items()},
                     description_chars=sum(len(t.description) for t in ts.tools.values()))
