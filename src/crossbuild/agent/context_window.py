"""Keeping the conversation within the model's context window."""

from __future__ import annotations

from crossbuild.models.base import Message

KEEP_RECENT = 8  # tool results kept whole while the budget allows


def compact(messages: list[Message], budget_chars: int) -> None:
    """Old tool outputs shrink to their first line and the log path (the logs stay on disk), oldest first, until
    the conversation is well under BUDGET_CHARS. The latest results stay whole as long as the budget allows."""
    total = sum(len(m.text) for m in messages)
    if total <= budget_chars:
        return
    tool_messages = [m for m in messages if m.role == "tool"]
    for keep in (KEEP_RECENT, 2):
        for m in tool_messages[:-keep]:
            if total <= budget_chars * 0.7:
                return
            if not m.data.get("compacted") and len(m.text) > 300:
                first = m.text.splitlines()[0][:200]
                log = m.data.get("log")
                before = len(m.text)
                m.text = f"{first}\n[older output compacted" + (f"; full log: {log}]" if log else "]")
                m.data = {**m.data, "compacted": True}
                total -= before - len(m.text)
