"""`crossbuild eval run | report | compare | corpus generate`: the evaluation harness on real projects."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from crossbuild.cli.common import console, err, fail, require_sandbox, target_from

eval_app = typer.Typer(help="Evaluate crossbuild on a pinned corpus of real projects.", no_args_is_help=True)


@eval_app.command("run")
def eval_run(
    corpus_dir: Path = typer.Argument(..., help="A folder of project manifests (corpus/dev) or one manifest."),
    targets: str = typer.Option("aarch64-linux-musl", "--targets", help="Comma-separated targets."),
    model: str = typer.Option("planner", "--model", "-m"),
    repeats: int = typer.Option(1, "--repeats", min=1),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Cells run at once."),
    out: Path = typer.Option(..., "--out", help="Results folder, e.g. results/dev-planner."),
    only: str = typer.Option(None, "--only", help="Comma-separated project names."),
    max_steps: int = typer.Option(60, "--max-steps", min=1),
    build_jobs: int = typer.Option(1, "--build-jobs", min=1, help="Parallel compile jobs inside each build."),
    cell_timeout: float = typer.Option(3600, "--cell-timeout", help="Seconds before a cell is killed."),
    executor: str = typer.Option("local", "--executor", help="local | ray"),
    address: str = typer.Option(None, "--address", help="Ray cluster address (default: start a local Ray)."),
    sandbox_backend: str = typer.Option("auto", "--sandbox"),
    source_hints: bool = typer.Option(True, "--source-hints/--no-source-hints", help="--no-source-hints: every "
                                      "workspace without the source's packaging (debian/) and its patches, as "
                                      "upstream ships it."),
) -> None:
    """Run every (project, target, repeat) cell as an isolated `crossbuild build`; resumable."""
    from crossbuild.evaluation import corpus, runner

    target_list = [t.strip() for t in targets.split(",") if t.strip()]
    for t in target_list:
        target_from(t)
    if executor not in ("local", "ray"):
        raise typer.BadParameter("use local or ray", param_hint="--executor")
    require_sandbox(sandbox_backend)  # said once here, not as every cell's error
    try:
        projects = corpus.load(corpus_dir, only.split(",") if only else None)
    except corpus.CorpusError as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    config = runner.RunConfig(model=model, max_steps=max_steps, jobs_per_build=build_jobs, timeout_s=cell_timeout,
                              sandbox=sandbox_backend, source_hints=source_hints)
    counts = {"pass": 0, "done": 0}
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("passed {task.fields[passed]}"), TimeElapsedColumn(), TextColumn("ETA"),
                  TimeRemainingColumn(), console=console) as progress:
        task = progress.add_task("cells", total=None, passed=0)

        def on_plan(total: int, already: int) -> None:
            progress.update(task, total=total, completed=already)
            if already:
                console.print(f"resuming: {already} of {total} cells already finished")

        def on_row(row: dict) -> None:
            counts["done"] += 1
            counts["pass"] += 1 if row.get("strict_success") else 0
            progress.update(task, advance=1, passed=counts["pass"])
            mark = "[green]PASS[/]" if row.get("strict_success") else f"[red]{row.get('status')}[/]"
            progress.console.print(f"{mark} {row['project']} {row['target']} r{row.get('repeat')} "
                                   f"({row.get('stop_reason') or row.get('error', '')[:80]}, "
                                   f"{row.get('wall_s', 0):.0f}s)")

        try:
            results = runner.run(projects, target_list, out, config=config, repeats=repeats, jobs=jobs,
                                 executor=executor, address=address, on_row=on_row, on_plan=on_plan,
                                 corpus=str(corpus_dir if corpus_dir.is_dir() else corpus_dir.parent))
        except corpus.CorpusError as e:
            err.print(f"[red]error:[/] {e}")
            raise typer.Exit(2) from None
    console.print(f"results: {results}; report: crossbuild eval report {out}")


@eval_app.command("report")
def eval_report(results_dir: Path = typer.Argument(...),
                command: str = typer.Option(None, "--command", help="The command that made the results, for the "
                                                                   "report's header.")) -> None:
    """Write REPORT.md (+ PNG plots) into the results folder and print it."""
    from crossbuild.evaluation.report import build_report

    try:
        report = build_report(results_dir, command=command)
    except FileNotFoundError as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from None
    (results_dir / "REPORT.md").write_text(report.markdown)
    console.print(report.markdown, markup=False, highlight=False)
    console.print(f"written: {results_dir / 'REPORT.md'}" + "".join(f", {p}" for p in report.plots))


@eval_app.command("compare")
def eval_compare(a: Path = typer.Argument(...), b: Path = typer.Argument(...)) -> None:
    """Cell by cell: rescued, regressed, both failed, step deltas; and whether the difference exceeds the noise."""
    from crossbuild.evaluation.report import compare

    for d in (a, b):
        if not (d / "results.jsonl").is_file():
            err.print(f"[red]error:[/] {d}/results.jsonl does not exist")
            raise typer.Exit(2)
    console.print(compare(a, b).text(), markup=False, highlight=False)


corpus_app = typer.Typer(help="Corpus manifests generated from Debian's own indices.", no_args_is_help=True)
eval_app.add_typer(corpus_app, name="corpus")


@corpus_app.command("generate")
def corpus_generate(
    out: Path = typer.Option(..., "--out", help="Folder for the manifests and index.json, e.g. corpus/population."),
    sample: int = typer.Option(None, "--sample", min=1, help="Write only a stratified random sample of N projects."),
    seed: int = typer.Option(None, "--seed", min=0, help="The sample's random seed (with --sample)."),
) -> None:
    """The population of Debian 12 C/C++ libraries the README's rule admits, as pinned manifests (or a sample)."""
    from crossbuild.evaluation import population
    from crossbuild.foundation import host

    if (sample is None) != (seed is None):
        fail("--sample and --seed go together: give both (a sample is drawn reproducibly from its seed)")
    say = lambda line: err.print(line, markup=False, highlight=False)  # noqa: E731
    try:
        population.check_out(out)
        pop = population.generate(population.Indices.from_apt(say), host.cache_root() / "population", say)
    except population.PopulationError as e:
        fail(str(e))
    for line in pop.skipped:
        say(f"skipped {line}")
    try:
        written = population.write(pop, out, n=sample, seed=seed or 0)
    except population.PopulationError as e:
        fail(str(e))
    systems = ", ".join(f"{k} {v}" for k, v in pop.breakdown("build_system").items())
    console.print(f"population: {len(pop.members)} source packages ({systems}); {len(pop.skipped)} skipped as "
                  "unavailable", markup=False, highlight=False)
    console.print(f"written: {len(written)} manifests and {population.INDEX} to {out}", markup=False, highlight=False)


def command_line() -> str:
    return "crossbuild " + shlex.join(sys.argv[1:])
