"""`crossbuild serve`: the web page. Runs list, a run's whole story streamed live over SSE from the trace (the same
events the CLI renders; a reconnecting browser resumes from its Last-Event-ID), builds started and cancelled from
the page, statistics and evaluation reports. Every request passes `Guard` first."""

from __future__ import annotations

import json
import sqlite3
import statistics
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from jinja2 import Environment, PackageLoader, select_autoescape
from markdown_it import MarkdownIt
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from crossbuild import __version__, kb
from crossbuild.foundation import bearer, safefs
from crossbuild.foundation.targets import TARGETS
from crossbuild.trace import runs as trace_runs
from crossbuild.trace import store as trace_store
from crossbuild.trace.timeline import Cursor, events_after
from crossbuild.web.builds import Builds, Refused

POLL_S = 0.25  # how often a live stream looks for new records
LOG_PAGE = 64 << 10
COOKIE = "crossbuild_token"
LOGS = ".xbuild/logs/"  # the only folder a log link may point into: crossbuild writes it, builds cannot


@dataclass
class ServeConfig:
    db: Path
    builds: Builds
    token: str | None = None  # demanded of every request when set (always, when bound beyond loopback)
    hosts: frozenset[str] = frozenset()  # Host headers this server answers without a token (DNS rebinding)
    reports: list[Path] = field(default_factory=list)  # folders of `crossbuild eval run` results


def create_app(config: ServeConfig) -> Starlette:
    pages = Pages(config)
    routes = [
        Route("/", pages.index), Route("/runs/{run_id}", pages.run), Route("/runs/{run_id}/events", pages.events),
        Route("/runs/{run_id}/log/{row:int}", pages.log), Route("/stats", pages.stats),
        Route("/reports/{name}/", pages.report), Route("/reports/{name}/{file}", pages.report_file),
        Route("/api/runs", pages.api_runs), Route("/api/builds", pages.api_start, methods=["POST"]),
        Route("/api/builds/{run_id}/cancel", pages.api_cancel, methods=["POST"]), Route("/login", pages.login),
        Mount("/static", StaticFiles(packages=[("crossbuild.web", "static")]), name="static"),
    ]

    @asynccontextmanager
    async def lifespan(_app: Starlette):
        yield
        await anyio.to_thread.run_sync(config.builds.shutdown)  # the page's builds end with the server

    app = Starlette(routes=routes, lifespan=lifespan)
    return Guard(app, token=config.token, hosts=config.hosts)


class Guard:
    """Before any route: a Host header this server answers to (a DNS-rebinding page names another), the token when
    one is set (bearer header, or the cookie /login sets), and for anything that changes state a JSON request from
    this server's own page (a cross-site form cannot send one)."""

    def __init__(self, app: Any, *, token: str | None, hosts: frozenset[str]):
        self.app, self.token, self.hosts = app, token, hosts

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refused = self._refusal(request)
        if refused is not None:
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, request: Request) -> Response | None:
        host = request.headers.get("host", "").lower()
        if self.token is None and host not in self.hosts:
            return PlainTextResponse(f"unknown Host {host!r}: open this server by the address it printed", 421)
        if self.token is not None and request.url.path != "/login":
            auth = request.headers.get("authorization", "")
            given = auth[7:] if auth.lower().startswith("bearer ") else request.cookies.get(COOKIE)
            if not bearer.matches(given, self.token):
                return PlainTextResponse("this server needs its token: open the /login?token=... address it "
                                         "printed at start, or send Authorization: Bearer TOKEN", 401)
        if request.method not in ("GET", "HEAD"):
            origin = urlsplit(request.headers.get("origin", "")).netloc.lower()
            if origin != host:
                return JSONResponse({"error": "refused: a request that changes something must come from this "
                                              "server's own page"}, 403)
            if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
                return JSONResponse({"error": "send JSON (Content-Type: application/json)"}, 415)
        return None


class Pages:
    def __init__(self, config: ServeConfig):
        self.config = config
        self.templates = Environment(loader=PackageLoader("crossbuild.web", "templates"),
                                     autoescape=select_autoescape(["html"]))
        self.templates.filters["seconds"] = lambda s: f"{s or 0:.1f}s"
        self.templates.globals["median"] = lambda xs: statistics.median(xs) if xs else 0
        self.knowledge = kb.load()
        self.markdown = MarkdownIt("commonmark", {"html": False}).enable("table")

    # ---- helpers ------------------------------------------------------------------------------------------------

    def _page(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = self.templates.get_template(template).render(version=__version__, **values)
        return HTMLResponse(html, status)

    def _read(self, fn, *args: Any) -> Any:
        """FN(connection, *ARGS) on a read-only connection of its own (requests run in threads)."""
        if not self.config.db.exists():
            return fn(None, *args)
        db = trace_store.connect_readonly(self.config.db)
        try:
            return fn(db, *args)
        finally:
            db.close()

    # ---- pages ------------------------------------------------------------------------------------------------

    async def index(self, request: Request) -> HTMLResponse:
        filters = _filters(request, ("status", "target", "model", "source"))
        rows = await anyio.to_thread.run_sync(self._read, _runs_list, filters)
        return self._page("index.html", runs=rows, filters=filters, targets=list(TARGETS),
                          model=self.config.builds.settings.settings.model)

    async def api_runs(self, request: Request) -> JSONResponse:
        filters = _filters(request, ("status", "target", "model", "source"))
        return JSONResponse(await anyio.to_thread.run_sync(self._read, _runs_list, filters))

    async def run(self, request: Request) -> HTMLResponse:
        run_id = request.path_params["run_id"]
        run = await anyio.to_thread.run_sync(self._read, _find, run_id)
        build = self.config.builds.get(run_id)
        if run is None and build is None:
            return self._page("missing.html", 404, what=f"run {run_id}")
        if run is None:  # started here, still preparing its workspace
            run = {"id": run_id, "source": build.source, "target": build.target, "model": build.model,
                   "status": "preparing", "workspace": None, "sandbox": self.config.builds.sandbox_backend}
        return self._page("run.html", run=run, cancellable=build is not None and build.running)

    async def events(self, request: Request) -> EventSourceResponse:
        run_id = request.path_params["run_id"]
        start = Cursor.parse(request.headers.get("last-event-id") or request.query_params.get("after"))
        return EventSourceResponse(self._stream(request, run_id, start), ping=10)

    async def _stream(self, request: Request, run_id: str, cursor: Cursor):
        # where the run's source came from, said once a page: a stream that resumes after an event has said it
        said_preparing = cursor != Cursor()
        progress: str | None = None
        while not await request.is_disconnected():
            found, cursor, run = await anyio.to_thread.run_sync(self._read, _timeline, run_id, cursor)
            if run is not None and not said_preparing:  # a page opened after the workspace was prepared
                said_preparing = True
                yield {"event": "preparing", "data": json.dumps({"source": run.get("source")})}
            if found:  # one chunk per poll: a long run's replay in a few writes, not one per event
                yield b"".join(ServerSentEvent(id=e.id, event=e.kind, data=json.dumps(
                    self._shown(e.kind, e.data), default=str)).encode() for e in found)
            started = self.config.builds.get(run_id)  # a build this server runs says what its call is doing now
            if started is not None and started.progress != progress:
                progress = started.progress
                yield {"event": "progress", "data": json.dumps({"message": progress})}
            if run is None:
                build = self.config.builds.get(run_id)
                if build is None:
                    yield {"event": "missing", "data": json.dumps({"message": f"no run {run_id} is recorded"})}
                    return
                if build.error and not build.running:
                    yield {"event": "failed_to_start", "data": json.dumps({"message": build.error})}
                    return
                if not said_preparing:
                    said_preparing = True
                    yield {"event": "preparing", "data": json.dumps({"source": build.source})}
            elif cursor.done:
                yield {"event": "end", "data": "{}"}
                return
            await anyio.sleep(POLL_S)

    def _shown(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        """The event as the page shows it: knowledge entries with their cause and fix."""
        if kind == "tool_result" and data.get("kb"):
            data = {**data, "kb": [{**k, **self._entry(k.get("id"))} for k in data["kb"]]}
        return data

    def _entry(self, entry_id: str | None) -> dict[str, str]:
        entry = self.knowledge.get(entry_id or "")
        return {"cause": entry.cause, "fix": entry.fix} if entry else {}

    async def log(self, request: Request) -> JSONResponse:
        """A page of the log of one tool call: ?offset=N, LOG_PAGE bytes, and where the next page starts."""
        run_id, row = request.path_params["run_id"], request.path_params["row"]
        try:
            offset = max(0, int(request.query_params.get("offset", "0")))
        except ValueError:
            return JSONResponse({"error": "offset must be a number of bytes"}, 400)
        found = await anyio.to_thread.run_sync(self._read, _log_of, run_id, row)
        if found is None:
            return JSONResponse({"error": f"tool call {row} of run {run_id} has no log"}, 404)
        root, rel = found
        try:
            data, total = await anyio.to_thread.run_sync(
                lambda: safefs.read_page(root, rel, offset=offset, size=LOG_PAGE))
        except OSError as e:  # gone, or no longer a regular file: nothing is followed
            return JSONResponse({"error": f"the log cannot be read: {e.strerror or e}"}, 410)
        end = offset + len(data)
        return JSONResponse({"path": rel, "offset": offset, "text": data.decode("utf-8", errors="replace"),
                             "next_offset": end if end < total else None, "size": total})

    async def stats(self, request: Request) -> HTMLResponse:
        filters = _filters(request, ("model", "target", "source", "since"))
        s = await anyio.to_thread.run_sync(self._read, _stats, filters)
        tools = sorted(s.tools.items(), key=lambda kv: -kv[1]["calls"])  # the most used first, as `runs stats`
        return self._page("stats.html", stats=s, tools=tools, filters=filters, reports=self._reports())

    def _reports(self) -> list[str]:
        return sorted(d.name for root in self.config.reports if root.is_dir() for d in root.iterdir()
                      if d.is_dir() and not d.is_symlink() and (d / "REPORT.md").is_file())

    def _report_dir(self, name: str) -> Path | None:
        for root in self.config.reports:
            if name in self._reports() and (root / name / "REPORT.md").is_file():
                return root / name
        return None

    async def report(self, request: Request) -> HTMLResponse:
        name = request.path_params["name"]
        folder = self._report_dir(name)
        if folder is None:
            return self._page("missing.html", 404, what=f"evaluation report {name}")
        text = safefs.read_text(folder, "REPORT.md", max_bytes=4 << 20)  # its plots are relative links: name/
        return self._page("report.html", name=name, body=self.markdown.render(text))

    async def report_file(self, request: Request) -> Response:
        name, file = request.path_params["name"], request.path_params["file"]
        folder = self._report_dir(name)
        if folder is None or not file.endswith(".png") or "/" in file or file.startswith("."):
            return PlainTextResponse("no such plot", 404)
        try:
            data = safefs.read_bytes(folder, file, max_bytes=16 << 20)
        except OSError:
            return PlainTextResponse("no such plot", 404)
        return Response(data, media_type="image/png")

    # ---- actions ----------------------------------------------------------------------------------------------

    async def api_start(self, request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": "the body is not JSON: send {\"source\": ..., \"target\": ...}"}, 400)
        if not isinstance(body, dict) or not all(isinstance(body.get(k, ""), str) for k in ("source", "target",
                                                                                            "model")):
            return JSONResponse({"error": "send an object with strings: source, target and (optional) model"}, 400)
        try:
            build = await anyio.to_thread.run_sync(lambda: self.config.builds.start(
                body.get("source", ""), body.get("target", ""), body.get("model")))
        except Refused as e:
            return JSONResponse({"error": str(e)}, 400)
        return JSONResponse({"run_id": build.run_id, "url": f"/runs/{build.run_id}"}, 201)

    async def api_cancel(self, request: Request) -> JSONResponse:
        run_id = request.path_params["run_id"]
        if self.config.builds.get(run_id) is None:
            return JSONResponse({"error": f"run {run_id} was not started by this server: cancel it where it runs "
                                          "(Ctrl-C)"}, 404)
        if not self.config.builds.cancel(run_id):
            return JSONResponse({"error": f"run {run_id} is not running"}, 409)
        return JSONResponse({"cancelling": run_id})

    async def login(self, request: Request) -> Response:
        given = request.query_params.get("token")
        if self.config.token is None:
            return RedirectResponse("/", 303)
        if not bearer.matches(given, self.config.token):
            return PlainTextResponse("wrong token", 401)
        response = RedirectResponse("/", 303)
        response.set_cookie(COOKIE, self.config.token, httponly=True, samesite="strict")
        return response


def _filters(request: Request, names: tuple[str, ...]) -> dict[str, str]:
    return {n: v.strip()[:200] for n in names if (v := request.query_params.get(n, "")).strip()}


def _runs_list(db: sqlite3.Connection | None, filters: dict[str, str]) -> list[dict[str, Any]]:
    return trace_runs.list_runs(db, 200, **filters) if db is not None else []


def _find(db: sqlite3.Connection | None, run_id: str) -> dict[str, Any] | None:
    return trace_runs.find_run(db, run_id) if db is not None else None


def _timeline(db: sqlite3.Connection | None, run_id: str, cursor: Cursor):
    return events_after(db, run_id, cursor) if db is not None else ([], cursor, None)


def _stats(db: sqlite3.Connection | None, filters: dict[str, str]) -> trace_runs.Stats:
    return trace_runs.stats(db, **filters) if db is not None else trace_runs.Stats()


def _log_of(db: sqlite3.Connection | None, run_id: str, row: int) -> tuple[Path, str] | None:
    """The run's workspace and the log's path in it, when the tool call has one under .xbuild/logs/."""
    if db is None:
        return None
    found = db.execute("SELECT r.workspace, t.log_path FROM tool_calls t JOIN runs r ON r.id = t.run_id "
                       "WHERE t.id = ? AND t.run_id = ?", (row, run_id)).fetchone()
    if found is None or not found["workspace"] or not found["log_path"]:
        return None
    rel = str(found["log_path"])
    if not rel.startswith(LOGS) or ".." in Path(rel).parts:
        return None
    return Path(found["workspace"]), rel
