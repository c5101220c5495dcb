"""OpenTelemetry export as an observability user meets it: a real OTLP/HTTP receiver on loopback (protobuf decoded
with the OpenTelemetry protocol package) takes `crossbuild runs export` and a live `crossbuild build`, and the
span tree it receives is checked: invoke_agent over chat and execute_tool spans, GenAI attributes, timings."""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from crossbuild.trace.store import Trace
from tests.conftest import EXAMPLE, cb


class Receiver:
    """An OTLP/HTTP trace receiver: POST /v1/traces with an ExportTraceServiceRequest, as a collector takes it."""

    def __init__(self):
        self.requests: list[ExportTraceServiceRequest] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                outer.requests.append(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[dict]:
        out = []
        for request in self.requests:
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        attrs = {a.key: _value(a.value) for a in s.attributes}
                        out.append({"name": s.name, "trace": s.trace_id.hex(), "id": s.span_id.hex(),
                                    "parent": s.parent_span_id.hex(), "start": s.start_time_unix_nano,
                                    "end": s.end_time_unix_nano, "attrs": attrs, "status": s.status.code,
                                    "events": [e.name for e in s.events]})
        return out

    def close(self):
        self.server.shutdown()


def _value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind)


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def _recorded_run(db: Path) -> str:
    """A run as the loop records it: two model turns, a passing and a failing tool call with knowledge attached."""
    t = Trace(db)
    t.start_run(run_id="r1", source="./proj", target="aarch64-linux-musl", model="openai:gpt-4o", config={},
                version="t", prompt_hash="h", workspace="/w")
    t.model_call("r1", step=1, model="openai:gpt-4o", request_hash="a", new_messages=[], response=None, text="",
                 tool_calls=[{"id": "c1", "name": "run_command", "arguments": "{}"}], finish_reason="tool_calls",
                 input_tokens=1200, output_tokens=40, cached_tokens=1000, latency_s=2.5)
    t.tool_call("r1", step=1, seq=1, call_id="c1", name="run_command", raw_arguments='{"command": "make"}',
                parsed={"command": "make"}, fingerprint="undefined reference to <sym>",
                result={"ok": False, "error_type": "command_failed", "message": "[exit=2] make", "duration_s": 4.0,
                        "data": {"kb": [{"id": "missing-libm", "score": 0.9, "how": "fingerprint"}]}})
    t.model_call("r1", step=2, model="openai:gpt-4o", request_hash="b", new_messages=[], response=None, text="",
                 tool_calls=[{"id": "c2", "name": "build_status", "arguments": "{}"}], finish_reason="tool_calls",
                 input_tokens=1500, output_tokens=20, cached_tokens=1200, latency_s=1.0)
    t.tool_call("r1", step=2, seq=2, call_id="c2", name="build_status", raw_arguments="{}", parsed={},
                fingerprint=None, result={"ok": True, "message": "target: aarch64", "duration_s": 0.1, "data": {}})
    t.finish_run("r1", status="failed", stop_reason="gave_up", message="blocked", verify=None, wall_s=9.0, steps=2,
                 tool_calls=2, input_tokens=2700, output_tokens=60, cached_tokens=2200, cost_usd=0.01)
    # the times a real run of this shape records (each call is recorded when it has ended)
    t0 = 1_790_000_000.0
    t.db.execute("UPDATE runs SET started_at=?, finished_at=? WHERE id='r1'", (t0, t0 + 9.0))
    for table, step, end in (("model_calls", 1, 2.5), ("tool_calls", 1, 6.5), ("model_calls", 2, 7.5),
                             ("tool_calls", 2, 7.6)):
        t.db.execute(f"UPDATE {table} SET started_at=? WHERE step=?", (t0 + end, step))
    t.close()
    return "r1"


def _tree(spans: list[dict]) -> tuple[dict, list[dict], list[dict]]:
    roots = [s for s in spans if not s["parent"]]
    assert len(roots) == 1, spans
    root = roots[0]
    children = [s for s in spans if s["parent"]]
    assert all(s["parent"] == root["id"] and s["trace"] == root["trace"] for s in children)
    return (root, [s for s in children if s["attrs"]["gen_ai.operation.name"] == "chat"],
            [s for s in children if s["attrs"]["gen_ai.operation.name"] == "execute_tool"])


def test_runs_export_sends_a_recorded_run_as_genai_spans(tmp_path, receiver):
    db = tmp_path / "runs.db"
    _recorded_run(db)
    r = cb("runs", "export", "r1", "--db", str(db), "--otlp", receiver.url)
    assert r.returncode == 0, r.stderr
    root, chats, tools = _tree(receiver.spans())
    assert root["name"] == "invoke_agent crossbuild"
    assert root["attrs"]["crossbuild.status"] == "failed" and root["attrs"]["error.type"] == "gave_up"
    assert [c["name"] for c in chats] == ["chat gpt-4o", "chat gpt-4o"]
    first = chats[0]["attrs"]
    assert (first["gen_ai.provider.name"], first["gen_ai.request.model"], first["gen_ai.usage.input_tokens"],
            first["gen_ai.usage.output_tokens"], first["gen_ai.usage.cache_read.input_tokens"]) == \
        ("openai", "gpt-4o", 1200, 40, 1000)
    assert chats[0]["end"] - chats[0]["start"] == pytest.approx(2.5e9, rel=1e-3)
    failed = next(t for t in tools if t["attrs"]["gen_ai.tool.call.id"] == "c1")
    assert failed["name"] == "execute_tool run_command" and failed["attrs"]["error.type"] == "command_failed"
    assert failed["events"] == ["crossbuild.kb_attached"] and failed["status"] == 2  # STATUS_CODE_ERROR
    assert failed["end"] - failed["start"] == pytest.approx(4.0e9, rel=1e-3)
    assert all("gen_ai.tool.call.arguments" not in t["attrs"] for t in tools)  # content only when asked for
    assert root["start"] <= min(s["start"] for s in chats + tools) and root["end"] >= max(s["end"] for s in tools)

    r = cb("runs", "export", "r1", "--db", str(db), "--otlp", receiver.url + "/v1/traces", "--include-content")
    assert r.returncode == 0, r.stderr
    second = [s for s in receiver.spans() if s["trace"] != root["trace"]]
    assert any(s["attrs"].get("gen_ai.tool.call.arguments") == '{"command": "make"}' for s in second)


def test_runs_export_to_a_file_writes_otlp_json_lines(tmp_path):
    db = tmp_path / "runs.db"
    _recorded_run(db)
    out = tmp_path / "spans.jsonl"
    assert cb("runs", "export", "r1", "--db", str(db), "--file", str(out)).returncode == 0
    spans = [s for line in out.read_text().splitlines() for rs in json.loads(line)["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert len(spans) == 5 and all(len(s["traceId"]) == 32 and len(s["spanId"]) == 16 for s in spans)


def test_runs_export_bad_input_gets_one_line(tmp_path):
    db = tmp_path / "runs.db"
    _recorded_run(db)
    cases = {(): "--otlp URL or --file FILE", ("--otlp", "http://x", "--file", "f"): "--otlp URL or --file FILE",
             ("--otlp", "127.0.0.1:4318"): "http://", ("--otlp", "http://127.0.0.1:9"): "did not take the spans"}
    for args, expected in cases.items():
        r = cb("runs", "export", "r1", "--db", str(db), *args)
        assert r.returncode == 2 and expected in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r)
    r = cb("runs", "export", "nosuch", "--db", str(db), "--file", str(tmp_path / "f"))
    assert r.returncode == 2 and "no single run" in r.stderr


@pytest.mark.slow
def test_a_live_build_exports_its_spans_as_it_runs(tmp_path, receiver):
    r = cb("build", str(EXAMPLE), "-t", "aarch64-linux-musl", "--db", str(tmp_path / "runs.db"), "-w",
           str(tmp_path / "ws"), "--no-config", "--json", env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    outcome = json.loads(r.stdout.splitlines()[-1])["data"]
    root, chats, tools = _tree(receiver.spans())
    assert root["attrs"]["crossbuild.status"] == "verified" and root["attrs"]["gen_ai.conversation.id"] == \
        outcome["run_id"]
    assert len(chats) == outcome["steps"] and len(tools) == outcome["tool_calls"]
    assert {c["attrs"]["gen_ai.provider.name"] for c in chats} == {"crossbuild"}
    assert tools[-1]["attrs"]["gen_ai.tool.name"] == "finish"
    assert all("gen_ai.tool.call.arguments" not in t["attrs"] for t in tools)
