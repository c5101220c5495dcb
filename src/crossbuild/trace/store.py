"""The record of every run in SQLite: runs, model calls, tool calls and knowledge-base attachments. WAL mode, so
concurrent runs can share one database; append-only migrations run on every open."""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HEARTBEAT_S = 10.0  # a running run's record is touched this often; runs.py reads a much older one as interrupted
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = []
migration = MIGRATIONS.append


def _statements(db: sqlite3.Connection, sql: str) -> None:
    """Run DDL statements one by one: executescript would COMMIT the migration's transaction half-way."""
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement)


@migration
def m001_initial(db: sqlite3.Connection) -> None:
    _statements(db, """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY, started_at REAL NOT NULL, finished_at REAL, source TEXT, target TEXT, model TEXT,
        config_json TEXT, version TEXT, prompt_hash TEXT, workspace TEXT, status TEXT, stop_reason TEXT,
        message TEXT, verify_json TEXT, wall_s REAL, steps INTEGER DEFAULT 0, tool_calls INTEGER DEFAULT 0,
        input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0, cached_tokens INTEGER DEFAULT 0,
        cost_usd REAL
    );
    CREATE TABLE model_calls (
        id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id), step INTEGER, started_at REAL,
        model TEXT, request_hash TEXT, new_messages_json TEXT, response_json TEXT, text TEXT, tool_calls_json TEXT,
        finish_reason TEXT, input_tokens INTEGER, output_tokens INTEGER, cached_tokens INTEGER, latency_s REAL,
        error TEXT
    );
    CREATE TABLE tool_calls (
        id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id), step INTEGER, seq INTEGER, call_id TEXT,
        name TEXT, raw_arguments TEXT, parsed_arguments_json TEXT, ok INTEGER, error_type TEXT, message TEXT,
        result_json TEXT, duration_s REAL, log_path TEXT, fingerprint TEXT, started_at REAL
    );
    CREATE TABLE kb_attachments (
        id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id), tool_call_id INTEGER, entry_id TEXT,
        score REAL, how TEXT
    );
    CREATE INDEX tool_calls_run ON tool_calls(run_id);
    CREATE INDEX model_calls_run ON model_calls(run_id);
    """)


@migration
def m002_cache_write_tokens(db: sqlite3.Connection) -> None:
    """Anthropic bills prompt-cache writes apart from reads; both are part of input_tokens."""
    _statements(db, """
    ALTER TABLE runs ADD COLUMN cache_write_tokens INTEGER DEFAULT 0;
    ALTER TABLE model_calls ADD COLUMN cache_write_tokens INTEGER DEFAULT 0
    """)


@migration
def m003_liveness_and_resumptions(db: sqlite3.Connection) -> None:
    """The process that runs a run and its heartbeat, so a run whose process is gone shows as interrupted; and
    each resumption of an interrupted run."""
    _statements(db, """
    ALTER TABLE runs ADD COLUMN pid INTEGER;
    ALTER TABLE runs ADD COLUMN host TEXT;
    ALTER TABLE runs ADD COLUMN heartbeat_at REAL;
    CREATE TABLE resumptions (
        id INTEGER PRIMARY KEY, run_id TEXT NOT NULL REFERENCES runs(id), at REAL, pid INTEGER, host TEXT,
        replayed_turns INTEGER, replayed_calls INTEGER
    )
    """)


def default_path() -> Path:
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "crossbuild" / "runs.db"


def migrate(db: sqlite3.Connection) -> None:
    """Apply the migrations not applied yet, all in one write transaction: processes that open a new database at
    the same moment wait for the first (busy_timeout) and then find the work done."""
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at REAL)")
        done = {r[0] for r in db.execute("SELECT name FROM _migrations")}
        for m in MIGRATIONS:
            if m.__name__ not in done:
                m(db)
                db.execute("INSERT INTO _migrations VALUES (?, ?)", (m.__name__, time.time()))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _switch_to_wal(db: sqlite3.Connection, patience_s: float = 30.0) -> None:
    """Turn WAL on, waiting for other processes that do the same. SQLite does not call the busy handler here: the
    switch upgrades the pragma's own read lock, and waiting while holding it could deadlock, so a process that
    opens a new database beside others gets "database is locked" at once (measured: 53 of 1800 opens by six
    processes). Retrying from scratch drops the read lock each time."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01 + random.random() * 0.05)


def connect(path: str | Path) -> sqlite3.Connection:
    path = Path(path)
    if str(path) != ":memory:":
        path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), timeout=30, check_same_thread=False, isolation_level=None)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA busy_timeout=30000")  # before anything that may wait for another process
    _switch_to_wal(db)
    migrate(db)
    return db


def connect_readonly(path: str | Path) -> sqlite3.Connection:
    """A reader's connection to a database `connect` made: no migrations, so no write lock is taken (the web
    page opens one per request while builds write)."""
    db = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=30, check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA busy_timeout=30000")
    return db


def new_run_id() -> str:
    """Sortable by time, unique across processes."""
    return f"{time.strftime('%Y%m%d%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


def canonical_arguments(raw: str | None) -> str:
    """A tool call's arguments with keys sorted, so the same call made twice compares equal; broken JSON as sent."""
    try:
        return json.dumps(json.loads(raw or "{}"), sort_keys=True)
    except (json.JSONDecodeError, RecursionError):
        return (raw or "").strip()


def messages_hash(messages: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


class Trace:
    """Writes one run's record. Thread-safe; every write is committed at once, so a crash loses nothing."""

    def __init__(self, path: str | Path, listener: Any = None):
        self.path = Path(path)
        self.db = connect(path)
        self._lock = threading.Lock()
        self.listener = listener  # told of each record as it is written (otel.LiveExport); never fails a run
        self.listener_error: str | None = None

    def _tell(self, method: str, *args: Any) -> None:
        if self.listener is None:
            return
        try:
            getattr(self.listener, method)(*args)
        except Exception as e:  # an exporter's fault must not end a build
            self.listener_error = f"{type(e).__name__}: {e}"

    def _row(self, table: str, key: str, value: Any) -> dict[str, Any]:
        with self._lock:
            row = self.db.execute(f"SELECT * FROM {table} WHERE {key} = ?", (value,)).fetchone()
        return dict(row) if row else {}

    def close(self) -> None:
        self.db.close()

    def _exec(self, sql: str, params: tuple) -> sqlite3.Cursor:
        with self._lock:
            return self.db.execute(sql, params)

    def start_run(self, *, run_id: str, source: str, target: str, model: str, config: dict[str, Any], version: str,
                  prompt_hash: str, workspace: str) -> None:
        now = time.time()
        self._exec("INSERT INTO runs (id, started_at, source, target, model, config_json, version, prompt_hash, "
                   "workspace, status, pid, host, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?)",
                   (run_id, now, source, target, model, _json(config), version, prompt_hash, workspace,
                    os.getpid(), socket.gethostname(), now))
        if self.listener is not None:
            self._tell("run_started", self._row("runs", "id", run_id))

    def resume_run(self, run_id: str, *, replayed_turns: int, replayed_calls: int) -> None:
        """The run is running again, in this process; the resumption is kept apart."""
        now = time.time()
        self._exec("UPDATE runs SET status='running', finished_at=NULL, stop_reason=NULL, pid=?, host=?, "
                   "heartbeat_at=? WHERE id=?", (os.getpid(), socket.gethostname(), now, run_id))
        self._exec("INSERT INTO resumptions (run_id, at, pid, host, replayed_turns, replayed_calls) "
                   "VALUES (?, ?, ?, ?, ?, ?)", (run_id, now, os.getpid(), socket.gethostname(), replayed_turns,
                                                 replayed_calls))
        if self.listener is not None:
            self._tell("run_started", self._row("runs", "id", run_id))

    def heartbeat(self, run_id: str) -> None:
        self._exec("UPDATE runs SET heartbeat_at=? WHERE id=?", (time.time(), run_id))

    @contextmanager
    def alive(self, run_id: str, every_s: float = HEARTBEAT_S) -> Iterator[None]:
        """Beat the run's heartbeat from a thread while the block runs (a tool call can take an hour)."""
        done = threading.Event()

        def beat() -> None:
            while not done.wait(every_s):
                try:
                    self.heartbeat(run_id)
                except sqlite3.Error:
                    continue  # a busy database: the next beat will do
        thread = threading.Thread(target=beat, name="trace-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    def model_call(self, run_id: str, *, step: int, model: str, request_hash: str, new_messages: list[dict],
                   response: Any, text: str, tool_calls: list[dict], finish_reason: str, input_tokens: int,
                   output_tokens: int, cached_tokens: int, latency_s: float, error: str | None = None,
                   cache_write_tokens: int = 0) -> None:
        cur = self._exec("INSERT INTO model_calls (run_id, step, started_at, model, request_hash, new_messages_json, "
                   "response_json, text, tool_calls_json, finish_reason, input_tokens, output_tokens, cached_tokens, "
                   "cache_write_tokens, latency_s, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (run_id, step, time.time(), model, request_hash, _json(new_messages), _json(response), text,
                    _json(tool_calls), finish_reason, input_tokens, output_tokens, cached_tokens, cache_write_tokens,
                    latency_s, error))
        if self.listener is not None:
            self._tell("model_call", run_id, self._row("model_calls", "id", cur.lastrowid))

    def tool_call(self, run_id: str, *, step: int, seq: int, call_id: str, name: str, raw_arguments: str,
                  parsed: Any, result: dict[str, Any], fingerprint: str | None) -> int:
        data = result.get("data") or {}
        cur = self._exec(
            "INSERT INTO tool_calls (run_id, step, seq, call_id, name, raw_arguments, parsed_arguments_json, ok, "
            "error_type, message, result_json, duration_s, log_path, fingerprint, started_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, step, seq, call_id, name, raw_arguments, _json(parsed), int(bool(result.get("ok"))),
             result.get("error_type"), result.get("message"), _json(result), result.get("duration_s"),
             data.get("log"), fingerprint, time.time()))
        if self.listener is not None:
            self._tell("tool_call", run_id, self._row("tool_calls", "id", cur.lastrowid))
        return int(cur.lastrowid or 0)

    def kb_attachment(self, run_id: str, tool_call_id: int, entry_id: str, score: float, how: str) -> None:
        self._exec("INSERT INTO kb_attachments (run_id, tool_call_id, entry_id, score, how) VALUES (?, ?, ?, ?, ?)",
                   (run_id, tool_call_id, entry_id, score, how))

    def finish_run(self, run_id: str, *, status: str, stop_reason: str, message: str, verify: Any, wall_s: float,
                   steps: int, tool_calls: int, input_tokens: int, output_tokens: int, cached_tokens: int,
                   cost_usd: float | None, cache_write_tokens: int = 0) -> None:
        self._exec("UPDATE runs SET finished_at=?, status=?, stop_reason=?, message=?, verify_json=?, wall_s=?, "
                   "steps=?, tool_calls=?, input_tokens=?, output_tokens=?, cached_tokens=?, cache_write_tokens=?, "
                   "cost_usd=? WHERE id=?",
                   (time.time(), status, stop_reason, message, _json(verify), wall_s, steps, tool_calls,
                    input_tokens, output_tokens, cached_tokens, cache_write_tokens, cost_usd, run_id))
        if self.listener is not None:
            self._tell("run_finished", self._row("runs", "id", run_id))
