"""OpenTelemetry export of runs, following the GenAI semantic conventions: an `invoke_agent crossbuild` span per
run, a `chat {model}` span per model call and an `execute_tool {name}` span per tool call under it, with the
recorded timings, token usage, errors, knowledge-base attachments and the verifier's verdict.

One code path for both uses: `RunSpans` turns trace records into spans as they come, so exporting a recorded run
(`crossbuild runs export`) feeds it the rows from the database, and a live run (OTEL_EXPORTER_OTLP_ENDPOINT set) is
fed each row as the trace writes it. Tool arguments and results leave the machine only with `include_content`.
Needs the `otel` extra (opentelemetry-sdk and its OTLP/HTTP exporter)."""

from __future__ import annotations

import base64
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

from crossbuild.trace import runs as trace_runs

AGENT = "crossbuild"
MAX_CONTENT = 8192  # characters of a tool's arguments or result put on a span, when content is included


class OtelUnavailable(RuntimeError):
    """The OpenTelemetry packages are not installed."""


def _sdk():
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        raise OtelUnavailable("OpenTelemetry export needs the otel extra: pip install 'crossbuild[otel]'") from None
    return trace, Resource, TracerProvider


def _ns(seconds: float | None) -> int | None:
    return int(seconds * 1e9) if seconds is not None else None


def _provider_and_model(name: str) -> tuple[str, str]:
    """"openai:gpt-4o" -> (openai, gpt-4o); "auto(anthropic:x)" -> (anthropic, x); the planner is crossbuild's."""
    if name.startswith("auto(") and name.endswith(")"):
        name = name[5:-1]
    provider, sep, model = name.partition(":")
    return (provider, model) if sep else (AGENT, name)


class RunSpans:
    """The spans of one run, made from its trace records as they come (run start, model calls, tool calls, end)."""

    def __init__(self, tracer: Any, run: dict[str, Any], *, include_content: bool = False):
        trace, _, _ = _sdk()
        self._trace = trace
        self.tracer = tracer
        self.include_content = include_content
        provider, model = _provider_and_model(run.get("model") or "")
        self.root = tracer.start_span(f"invoke_agent {AGENT}", kind=trace.SpanKind.INTERNAL,
                                      start_time=_ns(run.get("started_at")), attributes={
                                          "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT,
                                          "gen_ai.provider.name": provider, "gen_ai.request.model": model,
                                          "gen_ai.conversation.id": run["id"],
                                          "crossbuild.source": run.get("source") or "",
                                          "crossbuild.target": run.get("target") or "",
                                          "crossbuild.version": run.get("version") or ""})
        self._parent = trace.set_span_in_context(self.root)

    def model_call(self, row: dict[str, Any]) -> None:
        provider, model = _provider_and_model(row.get("model") or "")
        end = row["started_at"]  # the trace records a model call when its answer has come
        calls = json.loads(row.get("tool_calls_json") or "[]")
        span = self.tracer.start_span(f"chat {model}", context=self._parent, kind=self._trace.SpanKind.CLIENT,
                                      start_time=_ns(end - (row.get("latency_s") or 0.0)), attributes={
                                          "gen_ai.operation.name": "chat", "gen_ai.provider.name": provider,
                                          "gen_ai.request.model": model,
                                          "gen_ai.response.finish_reasons": [row.get("finish_reason") or ""],
                                          "gen_ai.usage.input_tokens": row.get("input_tokens") or 0,
                                          "gen_ai.usage.output_tokens": row.get("output_tokens") or 0,
                                          "gen_ai.usage.cache_read.input_tokens": row.get("cached_tokens") or 0,
                                          "gen_ai.usage.cache_creation.input_tokens":
                                              row.get("cache_write_tokens") or 0,
                                          "crossbuild.step": row.get("step") or 0,
                                          "crossbuild.tool_calls": [c.get("name", "") for c in calls]})
        if row.get("error"):
            span.set_attribute("error.type", "provider_error")
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(row["error"])[:500]))
        span.end(end_time=_ns(end))

    def tool_call(self, row: dict[str, Any]) -> None:
        end = row["started_at"]  # recorded when the call has finished
        result = json.loads(row.get("result_json") or "{}")
        span = self.tracer.start_span(f"execute_tool {row['name']}", context=self._parent,
                                      kind=self._trace.SpanKind.INTERNAL,
                                      start_time=_ns(end - (row.get("duration_s") or 0.0)), attributes={
                                          "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": row["name"],
                                          "gen_ai.tool.call.id": row.get("call_id") or "",
                                          "gen_ai.tool.type": "function", "crossbuild.step": row.get("step") or 0})
        if not row.get("ok"):
            span.set_attribute("error.type", row.get("error_type") or "tool_error")
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, (row.get("message") or "")[:500]))
        if row.get("fingerprint"):
            span.set_attribute("crossbuild.error_fingerprint", row["fingerprint"])
        for k in (result.get("data") or {}).get("kb") or []:
            span.add_event("crossbuild.kb_attached", {"crossbuild.kb.entry": k.get("id", ""),
                                                      "crossbuild.kb.score": float(k.get("score") or 0.0),
                                                      "crossbuild.kb.how": k.get("how", "")}, timestamp=_ns(end))
        if self.include_content:
            span.set_attribute("gen_ai.tool.call.arguments", (row.get("raw_arguments") or "")[:MAX_CONTENT])
            span.set_attribute("gen_ai.tool.call.result", (row.get("message") or "")[:MAX_CONTENT])
        span.end(end_time=_ns(end))

    def finish(self, run: dict[str, Any]) -> None:
        verify = json.loads(run.get("verify_json") or "null") or {}
        status = run.get("status") or "unknown"
        self.root.set_attributes({"crossbuild.status": status, "crossbuild.stop_reason": run.get("stop_reason") or "",
                                  "crossbuild.steps": run.get("steps") or 0,
                                  "crossbuild.tool_calls": run.get("tool_calls") or 0,
                                  "gen_ai.usage.input_tokens": run.get("input_tokens") or 0,
                                  "gen_ai.usage.output_tokens": run.get("output_tokens") or 0})
        if run.get("cost_usd") is not None:
            self.root.set_attribute("crossbuild.cost_usd", float(run["cost_usd"]))
        if verify:
            self.root.add_event("crossbuild.verify", {"crossbuild.verify.ok": bool(verify.get("ok")),
                                                      "crossbuild.verify.reasons": [str(r)[:300] for r in
                                                                                    verify.get("reasons") or []][:20]},
                                timestamp=_ns(run.get("finished_at")))
        if status != "verified":
            self.root.set_attribute("error.type", run.get("stop_reason") or status)
            self.root.set_status(self._trace.Status(self._trace.StatusCode.ERROR, (run.get("message") or "")[:500]))
        self.root.end(end_time=_ns(run.get("finished_at") or run.get("heartbeat_at")))


def _tracer_provider(processor: Any):
    _, Resource, TracerProvider = _sdk()
    provider = TracerProvider(resource=Resource.create({"service.name": AGENT}))
    provider.add_span_processor(processor)
    return provider


def otlp_exporter(url: str | None = None):
    """An OTLP/HTTP (protobuf) exporter to URL (the collector's base address or its /v1/traces endpoint), or to
    OTEL_EXPORTER_OTLP_ENDPOINT and the other standard OTEL_* variables when URL is None."""
    _sdk()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if url is None:
        return OTLPSpanExporter()
    return OTLPSpanExporter(endpoint=url if url.rstrip("/").endswith("/v1/traces") else url.rstrip("/") + "/v1/traces")


class _FileExporter:
    """Spans as OTLP/JSON lines (one ExportTraceServiceRequest per batch, ids in hex as OTLP/JSON has them): the
    format the OpenTelemetry Collector's file receiver reads."""

    def __init__(self, path: Path):
        self.path = path
        self.spans = 0

    def export(self, spans):
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        data = MessageToDict(encode_spans(spans))
        for rs in data.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            span[key] = base64.b64decode(span[key]).hex()
        with open(self.path, "a") as f:
            f.write(json.dumps(data) + "\n")
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def export_run(db: sqlite3.Connection, run_id: str, *, url: str | None = None, file: Path | None = None,
               include_content: bool = False) -> tuple[str, int]:
    """Send one recorded run's spans to an OTLP/HTTP URL or append them to FILE, in one request; returns (run id,
    span count). Raises ConnectionError when the collector does not take them."""
    run = trace_runs.find_run(db, run_id)
    if run is None:
        raise KeyError(f"no single run matches {run_id!r}: see crossbuild runs list")
    _sdk()
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    collected = InMemorySpanExporter()
    provider = _tracer_provider(SimpleSpanProcessor(collected))
    spans = RunSpans(provider.get_tracer(AGENT), run, include_content=include_content)
    for record in trace_runs.records(db, run["id"]):
        (spans.model_call if record["kind"] == "model" else spans.tool_call)(record)
    spans.finish(run)
    finished = collected.get_finished_spans()
    exporter = _FileExporter(file) if file is not None else otlp_exporter(url)
    quiet = logging.getLogger("opentelemetry.exporter")
    level, quiet.level = quiet.level, logging.CRITICAL  # its retries' warnings; the one-line error below says it
    try:
        result = exporter.export(finished)
    finally:
        quiet.setLevel(level)
        exporter.shutdown()
    if result != SpanExportResult.SUCCESS:
        raise ConnectionError(f"the collector at {url} did not take the spans (is it running, and is that its "
                              "OTLP/HTTP address, usually port 4318?)")
    return run["id"], len(finished)


class LiveExport:
    """Trace listener for a live run: each record becomes a span as it is written; spans leave in batches."""

    def __init__(self, exporter: Any = None, *, include_content: bool = False):
        _sdk()  # OtelUnavailable, not an ImportError, when the extra is missing
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.provider = _tracer_provider(BatchSpanProcessor(exporter or otlp_exporter()))
        self.include_content = include_content
        self.runs: dict[str, RunSpans] = {}

    def run_started(self, run: dict[str, Any]) -> None:
        self.runs[run["id"]] = RunSpans(self.provider.get_tracer(AGENT), run, include_content=self.include_content)

    def model_call(self, run_id: str, row: dict[str, Any]) -> None:
        if run_id in self.runs:
            self.runs[run_id].model_call(row)

    def tool_call(self, run_id: str, row: dict[str, Any]) -> None:
        if run_id in self.runs:
            self.runs[run_id].tool_call(row)

    def run_finished(self, run: dict[str, Any]) -> None:
        spans = self.runs.pop(run["id"], None)
        if spans is not None:
            spans.finish(run)
            self.provider.force_flush()

    def close(self) -> None:
        self.provider.shutdown()
