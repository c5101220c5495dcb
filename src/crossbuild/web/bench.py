"""`crossbuild bench-web`: how fast the web page serves a long run. A run of N tool calls is recorded through the
real trace writer, served by the real app under uvicorn on loopback, and read as a browser reads it: the page,
then its whole event stream until the end."""

from __future__ import annotations

import json
import socket
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from crossbuild import __version__
from crossbuild.foundation import settings
from crossbuild.tools.paths import HostRoots
from crossbuild.trace.store import Trace, new_run_id


def record_run(db: Path, calls: int, workspace: Path, *, target: str = "aarch64-linux-musl") -> str:
    """A finished run of CALLS run_command calls, one per model turn, each with a result of about 2 KB and a log;
    every tenth fails with a knowledge-base entry attached. Returns its id."""
    trace = Trace(db)
    run_id = new_run_id()
    trace.start_run(run_id=run_id, source="bench:web", target=target, model="planner", config={},
                    version=__version__, prompt_hash="bench", workspace=str(workspace))
    for i in range(calls):
        step, failed = i + 1, i % 10 == 9
        arguments = json.dumps({"command": f"make -C part{i}", "cwd": "build"})
        trace.model_call(run_id, step=step, model="planner", request_hash="bench", new_messages=[], response=None,
                         text="", tool_calls=[{"id": f"call-{i}", "name": "run_command", "arguments": arguments}],
                         finish_reason="tool_calls", input_tokens=0, output_tokens=0, cached_tokens=0,
                         latency_s=0.001)
        kb = [{"id": "werror", "title": "Warnings are errors (-Werror)", "score": 9.0, "how": "fingerprint",
               "actions": []}] if failed else []
        message = (f"[exit={2 if failed else 0}] make -C part{i}  (0.5s)\n"
                   + "".join(f"  CC part{i}/file{j}.o\n" for j in range(100)))
        result = {"ok": not failed, "error_type": "command_failed" if failed else None, "message": message,
                  "hint": None, "duration_s": 0.5, "data": {"log": f".xbuild/logs/{i:04d}-make.log", "kb": kb}}
        row = trace.tool_call(run_id, step=step, seq=step, call_id=f"call-{i}", name="run_command",
                              raw_arguments=arguments, parsed=json.loads(arguments), result=result, fingerprint=None)
        for k in kb:
            trace.kb_attachment(run_id, row, k["id"], k["score"], k["how"])
    verify = {"ok": True, "target": target, "reasons": [], "artifacts": [
        {"path": f"part{i}/libpart{i}.a", "kind": "static_library", "format": "ar", "machine": "EM_AARCH64",
         "ok": True} for i in range(50)], "smoke_runs": [], "rebuild": {"ok": True}}
    trace.finish_run(run_id, status="verified", stop_reason="verified", message="bench", verify=verify,
                     wall_s=float(calls), steps=calls, tool_calls=calls, input_tokens=0, output_tokens=0,
                     cached_tokens=0, cost_usd=None)
    trace.close()
    return run_id


@dataclass
class WebBench:
    calls: int
    events: int
    page_ms: list[float]
    stream_ms: list[float]

    @property
    def page_median_ms(self) -> float:
        return statistics.median(self.page_ms)

    @property
    def stream_median_ms(self) -> float:
        return statistics.median(self.stream_ms)


def run(calls: int = 500, repeats: int = 5) -> WebBench:
    import uvicorn

    from crossbuild.web.app import ServeConfig, create_app
    from crossbuild.web.builds import Builds

    with tempfile.TemporaryDirectory(prefix="crossbuild-bench-web-") as tmp:
        db = Path(tmp) / "runs.db"
        run_id = record_run(db, calls, Path(tmp) / "ws")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        builds = Builds(settings=settings.load({}, use_files=False), roots=HostRoots([Path(tmp)]),
                        runs_dir=Path(tmp) / "runs", db=db)
        app = create_app(ServeConfig(db=db, builds=builds, hosts=frozenset({f"127.0.0.1:{port}"})))
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        page_ms, stream_ms, events = [], [], 0
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                for _ in range(repeats + 1):  # the first round warms the templates and SQLite's page cache
                    start = time.perf_counter()
                    client.get(f"/runs/{run_id}").raise_for_status()
                    page = (time.perf_counter() - start) * 1000
                    start = time.perf_counter()
                    events = 0
                    with client.stream("GET", f"/runs/{run_id}/events") as r:
                        for line in r.iter_lines():
                            if line.startswith("event: "):
                                events += 1
                                if line == "event: end":
                                    break
                    page_ms.append(page)
                    stream_ms.append((time.perf_counter() - start) * 1000)
        finally:
            server.should_exit = True
            thread.join(10)
        return WebBench(calls=calls, events=events, page_ms=page_ms[1:], stream_ms=stream_ms[1:])
