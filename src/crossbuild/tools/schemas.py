"""JSON Schemas of the tools for each protocol, generated from the pydantic argument models (never written twice):
OpenAI function calling (plain and strict), Anthropic tool use, MCP inputSchema."""

from __future__ import annotations

import copy
from typing import Any

from crossbuild.tools.base import Tool, Toolset


def input_schema(tool: Tool) -> dict[str, Any]:
    """The plain JSON Schema of a tool's arguments: references inlined, titles dropped, no extra fields."""
    raw = tool.args.model_json_schema()
    defs = raw.pop("$defs", {})
    schema = _clean(_inline(raw, defs))
    schema.setdefault("properties", {})
    schema["type"] = "object"
    schema["additionalProperties"] = False
    return schema


def strict_schema(tool: Tool) -> dict[str, Any]:
    """OpenAI strict mode: every object closed, every field required, optional fields nullable (null = default)."""
    return _strictify(input_schema(tool))


def openai_tools(toolset: Toolset, *, strict: bool = False) -> list[dict[str, Any]]:
    out = []
    for t in toolset.tools.values():
        fn: dict[str, Any] = {"name": t.name, "description": t.description,
                              "parameters": strict_schema(t) if strict else input_schema(t)}
        if strict:
            fn["strict"] = True
        out.append({"type": "function", "function": fn})
    return out


def anthropic_tools(toolset: Toolset) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": input_schema(t)}
            for t in toolset.tools.values()]


def mcp_annotations(tool: Tool) -> dict[str, bool]:
    return {"readOnlyHint": tool.read_only, "destructiveHint": tool.destructive, "idempotentHint": tool.idempotent,
            "openWorldHint": False}


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            merged = {**copy.deepcopy(defs[ref.removeprefix("#/$defs/")]), **{k: v for k, v in node.items()
                                                                              if k != "$ref"}}
            return _inline(merged, defs)
        return {k: _inline(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _clean(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _clean(v) for k, v in node.items() if k != "title"}
        if out.get("type") == "object" and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def _strictify(node: Any) -> Any:
    if isinstance(node, list):
        return [_strictify(v) for v in node]
    if not isinstance(node, dict):
        return node
    node = {k: _strictify(v) for k, v in node.items() if k != "default"}
    if node.get("type") == "object":
        props = node.get("properties", {})
        required = set(node.get("required", []))
        for name, prop in props.items():
            if name not in required:
                props[name] = _nullable(prop)
        node["required"] = list(props)
        node["additionalProperties"] = False
    return node


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    t = prop.get("type")
    if isinstance(t, str):
        return {**prop, "type": [t, "null"]}
    if isinstance(t, list):
        return prop if "null" in t else {**prop, "type": [*t, "null"]}
    return {"anyOf": [prop, {"type": "null"}]}
