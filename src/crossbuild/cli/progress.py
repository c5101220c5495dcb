"""How `crossbuild build` shows a run as it happens: lines and a spinner at a terminal, the same lines without the
spinner in a log, one JSON object per event for scripts (JSON Lines), and, inside GitHub Actions, each command's log
tail as a collapsible group and the stop reason as an error annotation. Every form renders the same `Event`s."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from rich.markup import escape

from crossbuild.agent.events import Event
from crossbuild.cli.common import console
from crossbuild.foundation import safefs

MODES = ("auto", "tty", "plain", "json")
LOG_TAIL_LINES = 40


def renderer(mode: str, *, environ: dict[str, str] | None = None):
    """The renderer for --progress MODE (auto: tty at a terminal, plain otherwise), wrapped for GitHub Actions when
    $GITHUB_ACTIONS is true and the output is not JSON."""
    environ = os.environ if environ is None else environ
    if mode == "auto":
        mode = "tty" if console.is_terminal else "plain"
    inner = JsonLines() if mode == "json" else LiveProgress(spinner=mode == "tty")
    if mode != "json" and environ.get("GITHUB_ACTIONS") == "true":
        return GitHubActions(inner)
    return inner


class LiveProgress:
    """A line per step and tool call; at a terminal also a spinner with the running command (SPINNER)."""

    def __init__(self, spinner: bool = True):
        self.spinner = spinner
        self.start = time.monotonic()
        self.status = None
        self.call = ""  # the running call, as the spinner shows it
        self.phase = ""  # the last phase a log was told (counts change too often for a log)

    def __call__(self, e: Event) -> None:
        d = e.data
        t = f"[dim]{time.monotonic() - self.start:6.1f}s[/]"
        if e.kind == "unsandboxed":
            console.print(f"[bold red]warning: {escape(d['message'])}[/]", highlight=False)
        elif e.kind == "workspace_prepared" and d["left_out"]:
            shown = ", ".join(d["left_out"][:8]) + (f" and {len(d['left_out']) - 8} more" if len(d["left_out"]) > 8
                                                    else "")
            console.print(f"[yellow]not copied into the workspace:[/] {escape(shown)}", highlight=False)
        elif e.kind == "resuming":
            console.print(f"resuming run [bold]{d['run_id']}[/] in {escape(d['workspace'])}: replaying {d['turns']} "
                          f"model turns and {d['calls']} finished tool calls from the trace", highlight=False)
            for line in d.get("not_taken") or []:  # the stored run's settings are data; these come from now
                console.print(f"[yellow]not taken from the stored run:[/] {escape(line)} (give it again on the "
                              "command line to use it)", highlight=False)
        elif e.kind == "replay_done":
            how = f"it diverged: {d['diverged']}" if d["diverged"] else "continuing live"
            console.print(f"{t}     replayed {d['turns']} turns and {d['calls']} tool calls; {escape(how)}")
        elif e.kind == "run_started":
            console.print(f"run [bold]{d['run_id']}[/] · model {d['model']} · target {d['target']} · {d['workspace']}"
                          + (" · [bold red]no sandbox[/]" if d.get("sandbox") == "none" else ""))
        elif e.kind == "tool_call":
            args = d["arguments"]
            try:
                parsed = json.loads(args)
                shown = parsed.get("command") or parsed.get("path") or parsed.get("query") or ""
            except (json.JSONDecodeError, AttributeError):
                shown = args[:80]
            self.call = f"step {d['step']}: {d['name']} {shown}"[:150]
            self._show(self.call)
        elif e.kind == "progress":
            if self.spinner:
                self._show(f"{self.call} · {d['message']}"[:200] if self.call else d["message"][:200])
            elif d["phase"] != self.phase:
                self.phase = d["phase"]
                console.print(f"{t}     [dim]{escape(d['phase'][:160])}[/]", highlight=False)
        elif e.kind == "tool_result":
            self._stop_spinner()
            mark = "[green]✓[/]" if d["ok"] else f"[red]✗ {d['error_type']}[/]"
            mark += " [dim](replayed)[/]" if d.get("replayed") else ""
            console.print(f"{t} {d['step']:>3} {d['name']:<16} {mark} {escape(d['summary'])}", highlight=False)
        elif e.kind == "model_text":
            console.print(f"{t}     [italic]{escape(d['text'][:300])}[/]", highlight=False)
        elif e.kind == "kb_attached":
            console.print(f"{t}     [yellow]knowledge:[/] {d['entry']} — {escape(d['title'])}", highlight=False)
        elif e.kind == "nudge":
            console.print(f"{t}     [yellow]no progress:[/] {escape(d['why'])}", highlight=False)
        elif e.kind in ("budget_note", "note"):
            console.print(f"[yellow]note:[/] {escape(d['message'])}", highlight=False)
        elif e.kind == "provider_retry":
            console.print(f"{t}     [yellow]provider retry {d['attempt']}[/] ({d['reason']}), waiting {d['delay_s']}s")
        elif e.kind == "verify":
            console.print(f"{t}     verify {d['output_dir']}: " + ("[green]VERIFIED[/]" if d["ok"] else
                                                                     "[red]not verified[/]"))
        elif e.kind == "finished":
            self._stop_spinner()

    def close(self) -> None:
        self._stop_spinner()

    def _show(self, text: str) -> None:
        if not self.spinner:
            return
        if self.status is None:
            self.status = console.status(escape(text))
            self.status.start()
        else:
            self.status.update(escape(text))

    def _stop_spinner(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


class JsonLines:
    """One JSON object per line and event: {"event": KIND, "time": UNIX_SECONDS, "data": {...}}; the last line of a
    run is {"event": "outcome", ...} with the outcome and the workspace."""

    def __call__(self, e: Event) -> None:
        self.write(e.kind, e.data, e.at)

    def outcome(self, data: dict[str, Any]) -> None:
        self.write("outcome", data, time.time())

    @staticmethod
    def write(kind: str, data: dict[str, Any], at: float) -> None:
        sys.stdout.write(json.dumps({"event": kind, "time": round(at, 3), "data": data}, default=str) + "\n")
        sys.stdout.flush()

    def close(self) -> None:
        pass


class GitHubActions:
    """Workflow commands around another renderer: every run_command's log tail in a `::group::`, and a run that
    ends unverified as an `::error::` naming its stop reason and the knowledge entry attached last."""

    def __init__(self, inner):
        self.inner = inner
        self.root: str | None = None
        self.knowledge: str | None = None

    def __call__(self, e: Event) -> None:
        self.inner(e)
        d = e.data
        if e.kind == "unsandboxed":
            print(f"::warning title=crossbuild without a sandbox::{_escape(d['message'])}", flush=True)
        elif e.kind == "workspace_prepared" and self.root is None:
            self.root = d["root"]
        elif e.kind == "kb_attached":
            self.knowledge = f"{d['entry']}: {d['title']}"
        elif e.kind == "tool_result" and d.get("log") and self.root:
            tail = _log_tail(self.root, d["log"])
            if tail is not None:
                print(f"::group::step {d['step']} {d['name']} {'ok' if d['ok'] else 'failed'}: {d['log']}")
                print(tail)
                print("::endgroup::", flush=True)
        elif e.kind == "finished" and d.get("status") != "verified":
            message = f"{d.get('stop_reason')}: {str(d.get('message') or '')[:1500]}"
            if self.knowledge:
                message += f" (knowledge: {self.knowledge})"
            print(f"::error title=crossbuild {_escape(str(d.get('status')))}::{_escape(message)}", flush=True)

    def close(self) -> None:
        self.inner.close()

    def outcome(self, data: dict[str, Any]) -> None:
        pass


def _log_tail(root: str, rel: str) -> str | None:
    """The last lines of a command's log (crossbuild writes logs under .xbuild/, which builds cannot write; read
    without following links all the same)."""
    try:
        text = safefs.read_text(root, rel, max_bytes=8 << 20)
    except (OSError, ValueError):
        return None
    return "\n".join(text.splitlines()[-LOG_TAIL_LINES:])


def _escape(text: str) -> str:
    """GitHub's escaping for a workflow command's data."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
