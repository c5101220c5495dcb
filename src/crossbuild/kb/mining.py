"""Learning from runs: group the failed build commands in the trace by error fingerprint and show the groups no
knowledge-base entry matched, with their run ids and the command that finally worked, so new entries are written
from evidence. Nothing is added to the knowledge base automatically."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field

from crossbuild.kb.base import KnowledgeBase


@dataclass
class MinedGroup:
    fingerprint: str
    count: int = 0
    runs: list[str] = field(default_factory=list)
    example: str = ""
    fixed_by: list[str] = field(default_factory=list)  # the command that worked later in the same run


def mine(db: sqlite3.Connection, kb: KnowledgeBase, *, min_count: int = 1) -> list[MinedGroup]:
    rows = db.execute(
        "SELECT t.id, t.run_id, t.raw_arguments, t.message, t.fingerprint FROM tool_calls t WHERE t.name = "
        "'run_command' AND t.ok = 0 AND t.fingerprint IS NOT NULL AND NOT EXISTS (SELECT 1 FROM kb_attachments k "
        "WHERE k.tool_call_id = t.id) ORDER BY t.id").fetchall()
    groups: dict[str, MinedGroup] = {}
    for row_id, run_id, raw, message, fp in rows:
        if kb.search(fp, limit=1):  # an entry written since then matches it now
            continue
        g = groups.setdefault(fp, MinedGroup(fp))
        g.count += 1
        if run_id not in g.runs:
            g.runs.append(run_id)
        g.example = g.example or (message or "")[:600]
        program = _program(raw)
        later = db.execute("SELECT raw_arguments FROM tool_calls WHERE run_id = ? AND id > ? AND name = "
                           "'run_command' AND ok = 1 ORDER BY id", (run_id, row_id)).fetchall()
        for (later_raw,) in later:
            if _program(later_raw) == program:
                cmd = json.loads(later_raw).get("command", "")
                if cmd not in g.fixed_by:
                    g.fixed_by.append(cmd)
                break
    return sorted((g for g in groups.values() if g.count >= min_count), key=lambda g: -g.count)


def _program(raw: str | None) -> str:
    try:
        return (json.loads(raw or "{}").get("command") or "").split(" ", 1)[0]
    except (json.JSONDecodeError, AttributeError):
        return ""
