"""The benchmark commands: each prints figures, none asserts a time."""

from __future__ import annotations

import statistics

import typer

from crossbuild.cli.common import console, err, fail, target_from
from crossbuild.env import workspace

app = typer.Typer()


@app.command()
def bench(
    target: str = typer.Option("aarch64-linux-musl", "--target", "-t"),
    source: str = typer.Option("debian:zlib", "--source", help="A project whose ./configure && make builds it."),
    repeats: int = typer.Option(3, "--repeats", min=1),
    scan_copies: int = typer.Option(40, "--scan-copies", min=1, help="Copies of the build tree for the scan test."),
) -> None:
    """Measure the sandbox+BuildEnv overhead on a real build, and the verifier's scan rate."""
    from crossbuild.benchmarks import env as bench_mod

    t = target_from(target)
    console.print(f"building {source} for {t.name}: {repeats} repeats per mode, alternating")
    try:
        result = bench_mod.run(t, source=source, repeats=repeats, scan_copies=scan_copies, progress=console.print)
    except (workspace.SourceError, RuntimeError, OSError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    for label, times in ((f"sandboxed ({result.backend})", result.sandboxed_s), ("by hand", result.by_hand_s)):
        runs = ", ".join(f"{x:.2f}" for x in times)
        console.print(f"{label:24s} median {statistics.median(times):.2f} s  (runs: {runs})")
    console.print(f"[bold]overhead ratio: {result.overhead:.3f}[/] (goal <= 1.10)")
    console.print(f"[bold]verifier scan: {result.scan_artifacts} artifacts in {result.scan_seconds:.2f} s = "
                  f"{result.scan_rate:.0f} artifacts/s[/]")


@app.command("bench-tools")
def bench_tools(calls: int = typer.Option(20_000, "--calls", min=100)) -> None:
    """Measure tool dispatch overhead (p50/p99 µs per call) and the size of each schema set."""
    from crossbuild.benchmarks import tools as tools_bench

    r = tools_bench.run(calls)
    console.print(f"dispatch of a no-op tool (parse + validate + authorize), {r.calls} calls: "
                  f"[bold]p50 {r.p50_us:.1f} µs[/], p99 {r.p99_us:.1f} µs (goal: p50 < 200 µs)")
    for name, chars in r.schema_chars.items():
        console.print(f"schema set {name:14s} {chars:6d} characters")
    console.print(f"tool descriptions total   {r.description_chars:6d} characters")


@app.command("bench-agent")
def bench_agent(
    target: str = typer.Option("aarch64-linux-musl", "--target", "-t"),
    source: str = typer.Option("debian:zlib", "--source"),
    repeats: int = typer.Option(3, "--repeats", min=1),
    engine: str = typer.Option("native", "--engine", help="native | langgraph"),
) -> None:
    """Measure the agent loop on a real build: `crossbuild build` (planner) vs the same commands typed by hand."""
    if engine not in ("native", "langgraph"):
        fail(f"--engine {engine!r}: choose native or langgraph")
    from crossbuild.benchmarks import agent as agent_bench

    t = target_from(target)
    console.print(f"crossbuild build {source} -t {t.name} with the planner ({engine} engine), {repeats} runs, each "
                  "against the same commands typed by hand")
    try:
        r = agent_bench.run(t, source=source, repeats=repeats, engine=engine, progress=console.print)
    except (workspace.SourceError, RuntimeError, OSError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    console.print("commands the planner ran: " + "; ".join(r.commands), markup=False, highlight=False)
    console.print(f"[bold]agent build / by hand: {r.ratio:.3f}[/] (goal <= 1.15; medians "
                  f"{statistics.median(r.agent_build_s):.2f}s vs {statistics.median(r.by_hand_s):.2f}s)")
    console.print(f"whole crossbuild build incl. verification (clean rebuild + qemu runs) / by hand: "
                  f"{r.total_ratio:.3f}")
    console.print(f"tool calls: {r.tool_calls}, steps: {r.steps}, loop overhead per step (excluding the commands): "
                  f"{statistics.median(r.overhead_per_step_ms):.1f} ms; verified: {r.verified}")


@app.command("bench-web")
def bench_web(calls: int = typer.Option(500, "--calls", min=1), repeats: int = typer.Option(5, "--repeats", min=1),
              ) -> None:
    """Measure how fast `crossbuild serve` serves a run of CALLS tool calls: the page, and its whole event stream."""
    from crossbuild.web import bench as web_bench

    r = web_bench.run(calls, repeats)
    console.print(f"a run of {r.calls} tool calls ({r.events} events), {repeats} reads over loopback:")
    console.print(f"  run page:           median {r.page_median_ms:.1f} ms (runs: "
                  + ", ".join(f"{x:.1f}" for x in r.page_ms) + ")")
    console.print(f"  [bold]page + whole story (event stream to its end): median "
                  f"{r.page_median_ms + r.stream_median_ms:.1f} ms[/] (goal < 200 ms; stream runs: "
                  + ", ".join(f"{x:.1f}" for x in r.stream_ms) + ")")


# one project of each build system, each buildable with its standard steps and with a test suite
VERSUS_HAND = ("corpus/dev/json-c.toml", "corpus/population/serd.toml", "corpus/dev-sample/ivykis.toml",
               "corpus/dev/bzip2.toml")


@app.command("bench-versus-hand")
def bench_versus_hand(
    manifests: list[str] = typer.Argument(None, help="Project manifests (default: a CMake, a Meson, an autotools "
                                                     "and a plain-Make project of the corpora)."),
    target: str = typer.Option("aarch64-linux-musl", "--target", "-t"),
    rounds: int = typer.Option(3, "--rounds", min=1),
    out: str = typer.Option(None, "--out", help="Also write the figures to this Markdown file."),
) -> None:
    """Time to VERIFIED with `crossbuild build` against the same build, install and tests by hand, alternating."""
    import subprocess
    from pathlib import Path

    from crossbuild.benchmarks import versus_hand
    from crossbuild.evaluation.corpus import CorpusError, load

    t = target_from(target)
    try:
        projects = [p for m in manifests or VERSUS_HAND for p in load(m)]
    except CorpusError as e:
        fail(str(e))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    console.print(f"{len(projects)} projects for {t.name}, {rounds} rounds each, by hand and crossbuild alternating")
    try:
        results = versus_hand.run([(p.name, p.source_spec(), p.build_system) for p in projects], t, rounds=rounds,
                                  progress=console.print)
    except (workspace.SourceError, RuntimeError, OSError, subprocess.SubprocessError) as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    text = versus_hand.report(results, t, commit or "unknown")
    console.print(text, markup=False, highlight=False)
    ratios = [b.ratio for b in results]
    console.print(f"[bold]median ratio over the projects: {statistics.median(ratios):.2f}[/] (goal <= 1.15)")
    if out:
        Path(out).write_text(text + f"\nMedian ratio over the projects: {statistics.median(ratios):.2f}\n")
