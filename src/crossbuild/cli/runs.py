"""`crossbuild runs ...`: read the trace of past runs."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import typer
from rich.table import Table

from crossbuild.cli.common import console, err, fail, open_trace, print_table
from crossbuild.proof.levels import Proof
from crossbuild.trace import phases
from crossbuild.trace import runs as runs_mod

runs_app = typer.Typer(help="The record of past runs (SQLite trace).", no_args_is_help=True)


@runs_app.command("list")
def runs_list(db: Path = typer.Option(None, "--db"), limit: int = typer.Option(20, "--limit", "-n"),
              as_json: bool = typer.Option(False, "--json")) -> None:
    """The most recent runs."""
    rows = runs_mod.list_runs(open_trace(db), limit)
    if as_json:
        console.print_json(json.dumps(rows))
        return
    table = Table(title="runs")
    for col in ("id", "source", "target", "model", "status", "stop", "steps", "calls", "time", "tokens"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["id"], r["source"], r["target"], r["model"], r["status"], r["stop_reason"] or "",
                      str(r["steps"]), str(r["tool_calls"]), f"{r['wall_s'] or 0:.1f}s", str(r["tokens"] or 0))
    print_table(table)


@runs_app.command("show")
def runs_show(run_id: str = typer.Argument(..., help="A run id (or a unique prefix)."),
              db: Path = typer.Option(None, "--db"), as_json: bool = typer.Option(False, "--json")) -> None:
    """The whole story of a run: every model turn and tool call, with results and knowledge attached."""
    conn = open_trace(db)
    run = runs_mod.find_run(conn, run_id)
    if run is None:
        err.print(f"[red]error:[/] no single run matches {run_id!r}; see crossbuild runs list")
        raise typer.Exit(2)
    events = runs_mod.story(conn, run["id"])
    seconds = phases.run_phases(conn, run["id"])
    if as_json:
        console.print_json(json.dumps({"run": run, "events": events, "seconds": seconds}, default=str))
        return
    console.print(f"[bold]run {run['id']}[/]: {run['source']} → {run['target']} with {run['model']} "
                  f"(crossbuild {run['version']})")
    console.print(f"workspace {run['workspace']}; status [bold]{run['status']}[/] ({run['stop_reason']}); "
                  f"{run['steps']} steps, {run['tool_calls']} tool calls, {run['wall_s'] or 0:.1f}s, "
                  f"{(run['input_tokens'] or 0) + (run['output_tokens'] or 0)} tokens"
                  + (f"; resumed {run['resumptions']}×" if run["resumptions"] else ""))
    if run["sandbox"] == "none":
        console.print("[bold red]no sandbox[/]: this run's builds ran on the host, unisolated (--sandbox none)")
    elif run["sandbox"]:
        console.print(f"sandbox: {run['sandbox']}")
    for e in events:
        if e["kind"] == "model":
            calls = json.loads(e["tool_calls_json"] or "[]")
            names = ", ".join(c["name"] for c in calls) or "no tool calls"
            line = f"[cyan]step {e['step']}[/] model → {names}"
            if e["error"]:
                line += f" [red]error: {e['error']}[/]"
            console.print(line)
            if e["text"]:
                console.print(f"    {e['text'][:500]}", markup=False, highlight=False)
        else:
            mark = "ok" if e["ok"] else f"FAILED ({e['error_type']})"
            console.print(f"    {e['name']} {e['raw_arguments'][:200]} → {mark}", markup=False, highlight=False)
            first = (e["message"] or "").splitlines()[:1]
            if first:
                console.print(f"      {first[0][:200]}", markup=False, highlight=False)
            if e["kb"]:
                console.print(f"      knowledge attached: {e['kb']}", markup=False, highlight=False)
    if run["status"] == "interrupted":
        console.print(f"interrupted: its process ({run['pid'] or 'unknown'} on {run['host'] or 'an unknown host'}) "
                      "is gone. Continue it where it stopped with: crossbuild build --resume " + run["id"]
                      + (f" --db {db}" if db else ""), markup=False, highlight=False)
    else:
        console.print(f"outcome: {run['message'] or ''}"[:2000], markup=False, highlight=False)
        verdict = json.loads(run["verify_json"] or "null") or {}
        if verdict.get("ok"):  # what ran on the target
            level = Proof(verdict.get("proof"), verdict.get("proof_counts") or {}, verdict.get("proof_why"))
            console.print(f"proof: {level.phrase() if level.level else 'not recorded (a run from before levels)'}",
                          markup=False, highlight=False)
    if seconds:
        console.print("time per phase: " + ", ".join(f"{k} {v:.1f}s" for k, v in seconds.items()), markup=False,
                      highlight=False)


@runs_app.command("stats")
def runs_stats(db: Path = typer.Option(None, "--db"), model: str = typer.Option(None, "--model"),
               target: str = typer.Option(None, "--target"), source: str = typer.Option(None, "--source"),
               since: str = typer.Option(None, "--since", help="Run id or date prefix, e.g. 20261130."),
               as_json: bool = typer.Option(False, "--json")) -> None:
    """Per-tool call counts and failure rates, repeated calls, denials, knowledge attachments, steps, tokens, time."""
    s = runs_mod.stats(open_trace(db), model=model, target=target, source=source, since=since)
    if as_json:
        console.print_json(json.dumps(s.__dict__, default=lambda o: dict(o) if isinstance(o, dict) else str(o)))
        return
    if not s.runs:
        console.print("no finished runs match")
        return
    console.print(f"[bold]{s.runs} runs[/]: " + ", ".join(f"{k} {v}" for k, v in s.by_status.most_common())
                  + " · stop reasons: " + ", ".join(f"{k} {v}" for k, v in s.by_stop.most_common()))
    table = Table(title="tool calls")
    for col in ("tool", "calls", "failed", "failure rate", "errors", "time"):
        table.add_column(col)
    for name, t in sorted(s.tools.items(), key=lambda kv: -kv[1]["calls"]):
        errors = ", ".join(f"{k} {v}" for k, v in t["errors"].most_common(3))
        table.add_row(name, str(t["calls"]), str(t["failed"]), f"{t['failed'] / t['calls']:.0%}", errors,
                      f"{t['time_s']:.1f}s")
    print_table(table)
    console.print(f"repeated identical calls: {s.repeated_calls} · permission denials: {s.permission_denials}")
    kb = ", ".join(f"{k} {v} (in verified runs {s.kb_in_verified_runs[k]})" for k, v in s.kb_attachments.most_common())
    console.print(f"knowledge-base attachments: {sum(s.kb_attachments.values())}" + (f" — {kb}" if kb else ""))

    def med(xs):
        return statistics.median(xs) if xs else 0

    console.print(f"per run: median steps {med(s.steps):.0f} (max {max(s.steps)}), median tokens {med(s.tokens):.0f} "
                  f"(total {sum(s.tokens)}), median time {med(s.wall_s):.1f}s (total {sum(s.wall_s):.1f}s), "
                  f"cost ${s.cost_usd:.4f}")


@runs_app.command("export")
def runs_export(run_id: str = typer.Argument(..., help="A run id (or a unique prefix)."),
                otlp: str = typer.Option(None, "--otlp", help="OTLP/HTTP collector, e.g. http://127.0.0.1:4318 "
                                         "(Jaeger, Phoenix, an OpenTelemetry Collector)."),
                file: Path = typer.Option(None, "--file", help="Append the spans to this file as OTLP/JSON lines."),
                include_content: bool = typer.Option(False, "--include-content", help="Also put each tool call's "
                                                     "arguments and result on its span (they may hold paths and "
                                                     "build output)."),
                db: Path = typer.Option(None, "--db")) -> None:
    """Export a recorded run as OpenTelemetry spans (GenAI conventions): invoke_agent, chat, execute_tool."""
    if (otlp is None) == (file is None):
        fail("say where the spans go: --otlp URL or --file FILE (one of them)")
    if otlp is not None and not otlp.startswith(("http://", "https://")):
        fail(f"--otlp {otlp!r}: give the collector's http:// or https:// address, e.g. http://127.0.0.1:4318")
    from crossbuild.trace import otel

    try:
        found, count = otel.export_run(open_trace(db), run_id, url=otlp, file=file, include_content=include_content)
    except otel.OtelUnavailable as e:
        fail(str(e))
    except KeyError as e:
        fail(str(e.args[0]))
    except (ConnectionError, OSError) as e:
        fail(str(e))
    console.print(f"exported run {found}: {count} spans to {otlp or file}")
