"""Reading the trace: the list of runs, the whole story of one run, and the statistics used to improve the tools
(per-tool call counts and failure rates, repeated calls, permission denials, KB attachments, steps, tokens, time)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crossbuild.trace.store import HEARTBEAT_S, canonical_arguments

STALE_S = 6 * HEARTBEAT_S  # no heartbeat for this long: the process is gone or stuck, whatever its pid says

# an unfinished run's counts so far, from its recorded calls (the runs row gets them only when the run ends)
_SO_FAR = ("CASE WHEN finished_at IS NULL THEN (SELECT COALESCE(MAX(step), 0) FROM model_calls m "
           "WHERE m.run_id = runs.id) ELSE steps END AS steps, "
           "CASE WHEN finished_at IS NULL THEN (SELECT COUNT(*) FROM tool_calls t WHERE t.run_id = runs.id) "
           "ELSE tool_calls END AS tool_calls, "
           "CASE WHEN finished_at IS NULL THEN heartbeat_at - started_at ELSE wall_s END AS wall_s")


def _matching(*, target: str | None, model: str | None, source: str | None) -> tuple[list[str], list[str]]:
    """SQL conditions (and their parameters) for runs of TARGET, of MODEL, and whose source contains SOURCE (as
    written: no wildcards)."""
    where, params = ["1"], []
    for col, value in (("target", target), ("model", model)):
        if value:
            where.append(f"{col} = ?")
            params.append(value)
    if source:
        where.append("instr(source, ?) > 0")
        params.append(source)
    return where, params


def list_runs(db: sqlite3.Connection, limit: int = 20, *, status: str | None = None, target: str | None = None,
              model: str | None = None, source: str | None = None) -> list[dict[str, Any]]:
    """The latest runs, newest first, optionally only those with STATUS (as shown: an interrupted run is recorded
    as running), TARGET, MODEL, or SOURCE as part of their source."""
    where, params = _matching(target=target, model=model, source=source)
    if status:
        where.append("status = ?")
        params.append("running" if status == "interrupted" else status)
    rows = db.execute("SELECT id, source, target, model, status, stop_reason, pid, host, heartbeat_at, started_at, "
                      f"input_tokens + output_tokens AS tokens, cost_usd, {_SO_FAR} FROM runs "
                      f"WHERE {' AND '.join(where)} ORDER BY started_at DESC LIMIT ?", (*params, limit)).fetchall()
    found = [_with_live_status(dict(r)) for r in rows]
    return [r for r in found if r["status"] == status] if status else found


def find_run(db: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    rows = db.execute(f"SELECT *, {_SO_FAR}, (SELECT COUNT(*) FROM resumptions r WHERE r.run_id = runs.id) AS "
                      "resumptions FROM runs WHERE id = ? OR id LIKE ? ORDER BY started_at DESC LIMIT 2",
                      (run_id, run_id + "%")).fetchall()
    if len(rows) != 1:
        return None
    run = _with_live_status(dict(zip(rows[0].keys(), tuple(rows[0]), strict=True)))  # the later of two names wins
    return run | {"sandbox": sandbox_of(run)}


def sandbox_of(run: dict[str, Any]) -> str | None:
    """The sandbox a run's builds had ("bubblewrap" | "none"), from its recorded configuration."""
    try:
        config = json.loads(run.get("config_json") or "{}")
    except json.JSONDecodeError:
        return None
    return config.get("sandbox") if isinstance(config, dict) else None


def _with_live_status(run: dict[str, Any]) -> dict[str, Any]:
    """A run recorded as running whose process is gone, or that has not beaten its heartbeat for a minute, is
    shown as interrupted: a SIGKILL, a power cut or an OOM kill leaves no finished record behind."""
    if run["status"] != "running":
        return run
    beat = run.get("heartbeat_at")
    gone = run.get("host") == socket.gethostname() and not _process_alive(run.get("pid"))
    if beat is None or gone or time.time() - beat > STALE_S:
        run["status"] = "interrupted"
    return run


def _process_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed process its parent has not reaped yet is a zombie: gone all the same
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def story(db: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """Model turns and tool calls of one run, in order."""
    events: list[tuple[float, int, dict[str, Any]]] = []
    for r in db.execute("SELECT step, started_at, text, tool_calls_json, input_tokens, output_tokens, latency_s, "
                        "error FROM model_calls WHERE run_id=? ORDER BY id", (run_id,)):
        events.append((r["started_at"], 0, {"kind": "model", **dict(r)}))
    for r in db.execute("SELECT t.*, (SELECT group_concat(entry_id, ', ') FROM kb_attachments k WHERE "
                        "k.tool_call_id = t.id) AS kb FROM tool_calls t WHERE run_id=? ORDER BY id", (run_id,)):
        events.append((r["started_at"], 1, {"kind": "tool", **dict(r)}))
    return [e for _, _, e in sorted(events, key=lambda x: (x[0], x[1]))]


def records(db: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """Every model call and tool call of a run as whole rows ("kind": model | tool), in the order they ended."""
    rows = [{"kind": "model", **dict(r)} for r in db.execute("SELECT * FROM model_calls WHERE run_id=?", (run_id,))]
    rows += [{"kind": "tool", **dict(r)} for r in db.execute("SELECT * FROM tool_calls WHERE run_id=?", (run_id,))]
    return sorted(rows, key=lambda r: (r["started_at"] or 0, r["kind"] == "tool", r["id"]))


@dataclass
class Stats:
    runs: int = 0
    by_status: Counter = field(default_factory=Counter)
    by_stop: Counter = field(default_factory=Counter)
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    repeated_calls: int = 0
    permission_denials: int = 0
    kb_attachments: Counter = field(default_factory=Counter)
    kb_in_verified_runs: Counter = field(default_factory=Counter)
    steps: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    cost_usd: float = 0.0


def stats(db: sqlite3.Connection, *, model: str | None = None, target: str | None = None,
          source: str | None = None, since: str | None = None) -> Stats:
    where, params = _matching(target=target, model=model, source=source)
    where.append("finished_at IS NOT NULL")
    if since:
        where.append("id >= ?")
        params.append(since)
    runs = db.execute(f"SELECT * FROM runs WHERE {' AND '.join(where)}", params).fetchall()
    s = Stats(runs=len(runs))
    ids = [r["id"] for r in runs]
    verified = {r["id"] for r in runs if r["status"] == "verified"}
    for r in runs:
        s.by_status[r["status"]] += 1
        s.by_stop[r["stop_reason"]] += 1
        s.steps.append(r["steps"] or 0)
        s.tokens.append((r["input_tokens"] or 0) + (r["output_tokens"] or 0))
        s.wall_s.append(r["wall_s"] or 0.0)
        s.cost_usd += r["cost_usd"] or 0.0
    if not ids:
        return s
    marks = ",".join("?" * len(ids))
    seen: Counter = Counter()
    for t in db.execute(f"SELECT run_id, name, raw_arguments, ok, error_type, duration_s FROM tool_calls "
                        f"WHERE run_id IN ({marks})", ids):
        entry = s.tools.setdefault(t["name"], {"calls": 0, "failed": 0, "errors": Counter(), "time_s": 0.0})
        entry["calls"] += 1
        entry["time_s"] += t["duration_s"] or 0.0
        if not t["ok"]:
            entry["failed"] += 1
            entry["errors"][t["error_type"]] += 1
        if t["error_type"] == "permission_denied":
            s.permission_denials += 1
        key = (t["run_id"], t["name"], canonical_arguments(t["raw_arguments"]))
        seen[key] += 1
        if seen[key] > 1:
            s.repeated_calls += 1
    for k in db.execute(f"SELECT run_id, entry_id FROM kb_attachments WHERE run_id IN ({marks})", ids):
        s.kb_attachments[k["entry_id"]] += 1
        if k["run_id"] in verified:
            s.kb_in_verified_runs[k["entry_id"]] += 1
    return s


def tool_outcomes(db: sqlite3.Connection, run_ids: list[str]) -> tuple[dict[str, list[int]], Counter, Counter]:
    """For a set of runs: per tool [calls, failures]; knowledge entries attached; and attached in verified runs."""
    tools: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    attached: Counter = Counter()
    helped: Counter = Counter()
    if not run_ids:
        return tools, attached, helped
    marks = ",".join("?" * len(run_ids))
    for r in db.execute(f"SELECT name, ok FROM tool_calls WHERE run_id IN ({marks})", run_ids):
        tools[r["name"]][0] += 1
        tools[r["name"]][1] += 0 if r["ok"] else 1
    verified = {r["id"] for r in db.execute(f"SELECT id FROM runs WHERE id IN ({marks}) AND status='verified'",
                                            run_ids)}
    for r in db.execute(f"SELECT run_id, entry_id FROM kb_attachments WHERE run_id IN ({marks})", run_ids):
        attached[r["entry_id"]] += 1
        if r["run_id"] in verified:
            helped[r["entry_id"]] += 1
    return tools, attached, helped


def succeeded_commands(db: sqlite3.Connection, run_id: str) -> list[str]:
    """The command lines of a run's run_command calls that succeeded, in order."""
    rows = db.execute("SELECT raw_arguments FROM tool_calls WHERE run_id=? AND name='run_command' AND ok=1 "
                      "ORDER BY id", (run_id,)).fetchall()
    return [c for r in rows if (c := command_of(r["raw_arguments"])) is not None]


def command_of(raw_arguments: str | None) -> str | None:
    """The command line of a recorded run_command call (its raw arguments as the model sent them); None when they
    are not a JSON object."""
    try:
        return str(json.loads(raw_arguments or "{}").get("command", ""))
    except (json.JSONDecodeError, AttributeError):
        return None


def model_turns(db: sqlite3.Connection, run_id: str) -> tuple[list[tuple[str, str]], str | None]:
    """A run's successful model turns as (text, tool_calls_json), in order, and its workspace."""
    rows = db.execute("SELECT text, tool_calls_json FROM model_calls WHERE run_id=? AND error IS NULL ORDER BY id",
                      (run_id,)).fetchall()
    ws = db.execute("SELECT workspace FROM runs WHERE id=?", (run_id,)).fetchone()
    return [(r["text"], r["tool_calls_json"]) for r in rows], (ws["workspace"] if ws else None)


@dataclass
class Recorded:
    """What an unfinished run left in the trace, for resuming it: its successful model turns and its finished
    tool calls in order, and how long it had run."""

    run: dict[str, Any]
    turns: list[dict[str, Any]]  # step, text, tool_calls_json and the usage columns
    calls: list[dict[str, Any]]  # step, call_id, name, raw_arguments, result_json, fingerprint
    elapsed_s: float


def recorded(db: sqlite3.Connection, run_id: str) -> Recorded | None:
    run = find_run(db, run_id)
    if run is None:
        return None
    turns = [dict(r) for r in db.execute(
        "SELECT step, text, tool_calls_json, input_tokens, output_tokens, cached_tokens, cache_write_tokens "
        "FROM model_calls WHERE run_id=? AND error IS NULL ORDER BY id", (run["id"],))]
    calls = [dict(r) for r in db.execute(
        "SELECT step, call_id, name, raw_arguments, result_json, fingerprint FROM tool_calls WHERE run_id=? "
        "ORDER BY id", (run["id"],))]
    last = run.get("heartbeat_at") or run["started_at"]
    return Recorded(run=run, turns=turns, calls=calls, elapsed_s=max(0.0, last - run["started_at"]))
