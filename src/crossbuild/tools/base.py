"""The tool contract: `Tool` specs, structured `ToolResult`s, and `dispatch` — parse, validate, authorize, run.

Models only propose calls; `dispatch` decides what runs. Every call gets exactly one `ToolResult`, whatever the
model sent, and an unexpected exception in our code is reported as `internal` (the loop stops), never as the model's
mistake.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ValidationError

from crossbuild.foundation import safefs
from crossbuild.tools.context import RunContext


class ErrorType(StrEnum):
    """Why a call failed; the loop, the trace and the tests read these, never the message text."""

    INVALID_JSON = "invalid_json"
    INVALID_ARGUMENTS = "invalid_arguments"
    UNKNOWN_TOOL = "unknown_tool"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    COMMAND_FAILED = "command_failed"
    NOT_VERIFIED = "not_verified"  # the verifier judged the build and refused it: its reasons say why
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    INTERNAL = "internal"


@dataclass
class ToolResult:
    ok: bool
    message: str  # what the model reads (already within the tool's output budget)
    error_type: ErrorType | None = None
    hint: str | None = None  # how to continue; rendered after the message
    data: dict[str, Any] = field(default_factory=dict)  # for the program: exit code, log path, diff stats, ...
    duration_s: float = 0.0
    # a failed build command: its first error line reduced to its shape, so a loop can see the same failure return
    fingerprint: str | None = None

    @property
    def internal(self) -> bool:
        """A bug in crossbuild, not the model's doing: the loop must stop."""
        return self.error_type == ErrorType.INTERNAL

    def render(self) -> str:
        """The text a model sees."""
        text = self.message if self.ok else f"Error ({self.error_type}): {self.message}"
        if self.hint:
            text += f"\nHint: {self.hint}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "error_type": self.error_type, "message": self.message, "hint": self.hint,
                "data": self.data, "duration_s": round(self.duration_s, 6)}


class ToolFailure(Exception):
    """Raised inside a tool for an expected failure; dispatch turns it into a ToolResult."""

    error_type = ErrorType.COMMAND_FAILED

    def __init__(self, message: str, hint: str | None = None, **data: Any):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.data = data


class PermissionDenied(ToolFailure):
    error_type = ErrorType.PERMISSION_DENIED


class NotFound(ToolFailure):
    error_type = ErrorType.NOT_FOUND


class BadArguments(ToolFailure):
    """Arguments that pass the schema but make no sense (offset past the end, an ambiguous edit)."""

    error_type = ErrorType.INVALID_ARGUMENTS


class ToolArgs(BaseModel):
    """Base of every tool's arguments: strict types ("3" is not 3, true is not 1), unknown fields refused."""

    model_config = {"strict": True, "extra": "forbid"}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str  # what it does, when to use it and when not, its limits, how to continue
    args: type[ToolArgs]
    run: Callable[[RunContext, Any, Any], ToolResult]  # (ctx, args, authorized) -> result
    authorize: Callable[[RunContext, Any], Any] | None = None  # (ctx, args) -> what run may touch; raises
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    changes_files: bool = False  # a successful call edits the project: repeating a build after it is progress


class Toolset:
    """The tools one run (or one MCP session) offers, by name."""

    def __init__(self, tools: list[Tool]):
        self.tools: dict[str, Tool] = {t.name: t for t in tools}

    def __contains__(self, name: str) -> bool:
        return name in self.tools

    def __getitem__(self, name: str) -> Tool:
        return self.tools[name]

    def names(self) -> list[str]:
        return list(self.tools)

    def is_read_only(self, name: str) -> bool:
        return name in self.tools and self.tools[name].read_only

    def dispatch(self, ctx: RunContext, name: Any, raw_arguments: Any) -> ToolResult:
        """Run one call exactly as a model sent it. Never raises (an internal error becomes `internal`)."""
        start = time.perf_counter()
        try:
            result = self._dispatch(ctx, name, raw_arguments)
        except Exception as e:  # a bug in crossbuild: flag it, keep the traceback for the trace, not the model
            result = ToolResult(
                ok=False, error_type=ErrorType.INTERNAL,
                message=f"crossbuild hit an internal error running {name!r}; this is not caused by your arguments "
                        "and the run will stop.",
                data={"exception": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        result.duration_s = time.perf_counter() - start
        return result

    def _dispatch(self, ctx: RunContext, name: Any, raw_arguments: Any) -> ToolResult:
        if not isinstance(name, str) or name not in self.tools:
            return ToolResult(ok=False, error_type=ErrorType.UNKNOWN_TOOL,
                              message=f"there is no tool named {str(name)[:80]!r}.",
                              hint=f"the tools are: {', '.join(self.tools)}")
        tool = self.tools[name]
        # 1. parse
        parsed = parse_arguments(raw_arguments)
        if isinstance(parsed, ToolResult):
            return parsed
        # 2. schema
        try:
            args = tool.args.model_validate(_drop_nulls(parsed, tool.args), strict=True)
        except ValidationError as e:
            return _schema_error(tool, e)
        # 3. authorization, then 4. run: expected failures are results
        try:
            authorized = tool.authorize(ctx, args) if tool.authorize else None
            return tool.run(ctx, args, authorized)
        except ToolFailure as f:
            return ToolResult(ok=False, error_type=f.error_type, message=f.message, hint=f.hint, data=f.data)
        except safefs.UnsafePath as e:  # a path the build turned into a link or special file under our feet
            return ToolResult(ok=False, error_type=ErrorType.PERMISSION_DENIED,
                              message=f"{e.filename} is {e.strerror}; crossbuild does not follow links or open "
                                      "special files a build left in the workspace.",
                              hint="work with regular files inside the workspace")


def parse_arguments(raw: Any) -> dict[str, Any] | ToolResult:
    """Raw arguments as a model sends them: a JSON object as text (OpenAI), or an already-decoded object."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        return ToolResult(ok=False, error_type=ErrorType.INVALID_JSON,
                          message=f"arguments must be a JSON object, got {type(raw).__name__}.")
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as e:
        reason = f"{e.msg} at line {e.lineno} column {e.colno}" if isinstance(e, json.JSONDecodeError) else str(e)
        return ToolResult(ok=False, error_type=ErrorType.INVALID_JSON,
                          message=f"arguments are not valid JSON: {reason}.",
                          hint="send the arguments as one JSON object, e.g. {\"path\": \"src/CMakeLists.txt\"}; "
                               "escape quotes and newlines inside strings.")
    if not isinstance(value, dict):
        return ToolResult(ok=False, error_type=ErrorType.INVALID_JSON,
                          message=f"arguments must be a JSON object, got a JSON {_json_kind(value)}.",
                          hint="wrap the arguments in {...} with one key per field.")
    return value


def _json_kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")


def _drop_nulls(obj: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """Strict schemas make every field required and optional ones nullable: null means "use the default"."""
    fields = model.model_fields
    return {k: v for k, v in obj.items() if not (v is None and k in fields and not fields[k].is_required())}


def _schema_error(tool: Tool, e: ValidationError) -> ToolResult:
    fields = tool.args.model_fields
    problems = []
    for err in e.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        kind = err["type"]
        if kind == "missing":
            problems.append(f"{loc}: required field is missing")
        elif kind == "extra_forbidden":
            problems.append(f"{loc}: unknown field")
        else:
            got = err.get("input")
            shown = json.dumps(got)[:60] if _jsonable(got) else type(got).__name__
            problems.append(f"{loc}: {err['msg']} (got {shown})")
    valid = ", ".join(f"{n}{'' if f.is_required() else '?'}: {_type_name(f.annotation)}" for n, f in fields.items())
    return ToolResult(ok=False, error_type=ErrorType.INVALID_ARGUMENTS,
                      message=f"{tool.name} arguments are invalid:\n- " + "\n- ".join(problems),
                      hint=f"valid fields (? = optional): {valid}",
                      data={"problems": problems})


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def _type_name(annotation: Any) -> str:
    name = getattr(annotation, "__name__", None)
    return name if name and not str(annotation).startswith("typing") else str(annotation).replace("typing.", "")
