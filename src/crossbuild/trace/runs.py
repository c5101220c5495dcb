"""Reading the trace: the list of runs, the whole story of one run, and the statistics used to improve the tools
(per-tool call counts and failure rates, repeated calls, permission denials, KB attachments, steps, tokens, time)."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from crossbuild.trace.store import canonical_arguments


def list_runs(db: sqlite3.Connection, limit: int = 20) -> list[dict[str, Any]]:
    rows = db.execute("SELECT id, source, target, model, status, stop_reason, steps, tool_calls, wall_s, "
                      "input_tokens + output_tokens AS tokens, cost_usd FROM runs ORDER BY started_at DESC LIMIT ?",
                      (limit,)).fetchall()
    return [dict(r) for r in rows]


def find_run(db: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    rows = db.execute("SELECT * FROM runs WHERE id = ? OR id LIKE ? ORDER BY started_at DESC LIMIT 2",
                      (run_id, run_id + "%")).fetchall()
    if len(rows) != 1:
        return None
    return dict(rows[0])


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
    where, params = ["finished_at IS NOT NULL"], []
    for col, value in (("model", model), ("target", target)):
        if value:
            where.append(f"{col} = ?")
            params.append(value)
    if source:
        where.append("source LIKE ?")
        params.append(f"%{source}%")
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
    out = []
    for r in rows:
        try:
            out.append(str(json.loads(r["raw_arguments"] or "{}").get("command", "")))
        except (json.JSONDecodeError, AttributeError):
            continue
    return out


def model_turns(db: sqlite3.Connection, run_id: str) -> tuple[list[tuple[str, str]], str | None]:
    """A run's successful model turns as (text, tool_calls_json), in order, and its workspace."""
    rows = db.execute("SELECT text, tool_calls_json FROM model_calls WHERE run_id=? AND error IS NULL ORDER BY id",
                      (run_id,)).fetchall()
    ws = db.execute("SELECT workspace FROM runs WHERE id=?", (run_id,)).fetchone()
    return [(r["text"], r["tool_calls_json"]) for r in rows], (ws["workspace"] if ws else None)
