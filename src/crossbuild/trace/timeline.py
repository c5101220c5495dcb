"""A run's story as the events the CLI renders (model_text, tool_call, tool_result, kb_attached, verify, finished),
read from the trace, each with an id to continue after: what the web page streams live and replays, for runs
started anywhere (the page, the CLI, MCP, an evaluation)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from crossbuild.trace.runs import find_run

MAX_MESSAGE_CHARS = 20_000  # a tool result's text on the page; the whole log is paged separately
ENDED = ("verified", "failed", "cancelled", "error", "interrupted")


@dataclass(frozen=True)
class Cursor:
    """How far a reader has got: every model-call row up to MODEL and tool-call row up to TOOL delivered whole,
    plus the first SKIP events of the next row; DONE once the run's end was delivered. Written as an SSE id."""

    model: int = 0
    tool: int = 0
    skip: int = 0
    done: bool = False

    def __str__(self) -> str:
        return f"{self.model}.{self.tool}.{self.skip}{'.end' if self.done else ''}"

    @classmethod
    def parse(cls, text: str | None) -> Cursor:
        """An id this module wrote; anything else (a browser's stale or forged Last-Event-ID) starts over."""
        parts = (text or "").strip().split(".")
        try:
            model, tool, skip = (int(p) for p in parts[:3])
        except ValueError:
            return cls()
        if min(model, tool, skip) < 0 or len(parts) > 4 or (len(parts) == 4 and parts[3] != "end"):
            return cls()
        return cls(model, tool, skip, len(parts) == 4)


@dataclass
class TimelineEvent:
    id: str
    kind: str
    data: dict[str, Any]
    at: float


def events_after(db: sqlite3.Connection, run_id: str, cursor: Cursor = Cursor()) -> tuple[list[TimelineEvent],
                                                                                          Cursor, dict | None]:
    """The events of RUN_ID after CURSOR, the cursor after them, and the run's row (None: no such run). The run is
    read first: once it has ended, every row it wrote is there, so its end is never sent before its last call."""
    run = find_run(db, run_id)
    if run is None or cursor.done:
        return [], cursor, run
    rows = [("model", dict(r)) for r in db.execute(
        "SELECT id, step, started_at, text, tool_calls_json, error FROM model_calls WHERE run_id=? AND id>? "
        "ORDER BY id", (run["id"], cursor.model))]
    # SQLite picks the few fields shown out of each result (whose text is in `message` already): decoding every
    # result whole in Python was most of a long run's replay
    rows += [("tool", dict(r)) for r in db.execute(
        "SELECT id, step, started_at, call_id, name, raw_arguments, ok, error_type, message, duration_s, "
        "log_path, json_extract(result_json, '$.hint') AS hint, json_extract(result_json, '$.data.kb') AS kb, "
        "CASE WHEN name = 'verify' THEN json_extract(result_json, '$.data') END AS verify "
        "FROM tool_calls WHERE run_id=? AND id>? ORDER BY id", (run["id"], cursor.tool))]
    rows.sort(key=lambda kr: (kr[1]["started_at"] or 0, kr[0] == "tool", kr[1]["id"]))
    out: list[TimelineEvent] = []
    for n, (kind, row) in enumerate(rows):
        made = _model_events(row) if kind == "model" else _tool_events(row)
        before = cursor
        cursor = Cursor(row["id"], cursor.tool) if kind == "model" else Cursor(cursor.model, row["id"])
        for j, (name, data) in enumerate(made):
            if n == 0 and j < before.skip:
                continue  # delivered before the reader lost its connection
            at = cursor if j == len(made) - 1 else Cursor(before.model, before.tool, j + 1)
            out.append(TimelineEvent(str(at), name, data, row["started_at"] or 0.0))
    if run["status"] in ENDED:
        cursor = Cursor(cursor.model, cursor.tool, 0, True)
        out.append(TimelineEvent(str(cursor), "finished", _finished(run), run.get("finished_at") or 0.0))
    return out, cursor, run


def _model_events(row: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    step = row["step"]
    if row["error"]:
        return [("note", {"step": step, "message": f"the model call failed: {row['error']}"})]
    made: list[tuple[str, dict[str, Any]]] = []
    if row["text"]:
        made.append(("model_text", {"step": step, "text": row["text"]}))
    for call in _loads(row["tool_calls_json"], []):
        made.append(("tool_call", {"step": step, "id": call.get("id"), "name": call.get("name"),
                                   "arguments": call.get("arguments")}))
    return made


def _tool_events(row: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    step = row["step"]
    kb = [k for k in _loads(row["kb"], []) if isinstance(k, dict)] if row["kb"] else []
    made: list[tuple[str, dict[str, Any]]] = [("kb_attached", {"step": step, "entry": k.get("id"),
                                                               "title": k.get("title")}) for k in kb]
    message = row["message"] or ""
    made.append(("tool_result", {
        "step": step, "id": row["call_id"], "name": row["name"], "ok": bool(row["ok"]),
        "error_type": row["error_type"], "summary": message.partition("\n")[0][:200],
        "duration_s": row["duration_s"], "log": row["log_path"], "replayed": False, "row": row["id"],
        "arguments": row["raw_arguments"], "message": message[:MAX_MESSAGE_CHARS],
        "truncated": len(message) > MAX_MESSAGE_CHARS, "hint": row["hint"], "kb": kb}))
    data = _loads(row["verify"], {})
    if isinstance(data, dict) and "ok" in data:
        path = _loads(row["raw_arguments"], {})
        made.append(("verify", {"step": step, "ok": bool(data["ok"]), "reasons": (data.get("reasons") or [])[:10],
                                "counts": data.get("counts") or {},
                                "output_dir": path.get("path") if isinstance(path, dict) else None}))
    return made


def _finished(run: dict[str, Any]) -> dict[str, Any]:
    return {"status": run["status"], "stop_reason": run["stop_reason"], "message": run["message"],
            "steps": run["steps"], "tool_calls": run["tool_calls"], "wall_s": run["wall_s"],
            "cost_usd": run["cost_usd"], "verify": _loads(run.get("verify_json"), None)}


def _loads(text: str | None, default: Any) -> Any:
    try:
        value = json.loads(text) if text else default
    except (json.JSONDecodeError, RecursionError):
        return default
    return default if value is None else value
