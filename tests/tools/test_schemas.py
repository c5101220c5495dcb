"""Schemas generated from the pydantic models for OpenAI (plain, strict), Anthropic and MCP."""

from __future__ import annotations

import json

import jsonschema

from crossbuild.tools.schemas import anthropic_tools, input_schema, mcp_annotations, openai_tools, strict_schema


def _walk_objects(node):
    if isinstance(node, dict):
        if node.get("type") == "object":
            yield node
        for v in node.values():
            yield from _walk_objects(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk_objects(v)


def test_strict_schemas_follow_openai_rules(tools):
    for spec in openai_tools(tools, strict=True):
        fn = spec["function"]
        assert fn["strict"] is True
        for obj in _walk_objects(fn["parameters"]):
            assert obj["additionalProperties"] is False
            assert sorted(obj["required"]) == sorted(obj.get("properties", {}))
        text = json.dumps(fn["parameters"])
        assert "$ref" not in text and '"default"' not in text and '"title"' not in text


def test_optional_fields_are_nullable_in_strict_and_optional_in_plain(tools):
    plain, strict = input_schema(tools["read_file"]), strict_schema(tools["read_file"])
    assert plain["required"] == ["path"] and plain["properties"]["offset"]["default"] == 1
    assert strict["properties"]["offset"]["type"] == ["integer", "null"]
    assert strict["properties"]["path"]["type"] == "string"


def test_schemas_accept_what_dispatch_accepts(tools):
    """A call valid for the schema validates in pydantic too (null = default in strict mode)."""
    for t in tools.tools.values():
        jsonschema.Draft202012Validator.check_schema(input_schema(t))
        jsonschema.Draft202012Validator.check_schema(strict_schema(t))
    strict = strict_schema(tools["read_file"])
    jsonschema.validate({"path": "src/x", "offset": None, "limit": None}, strict)
    plain = input_schema(tools["run_command"])
    jsonschema.validate({"command": "make"}, plain)
    try:
        jsonschema.validate({"command": "make", "shell": True}, plain)
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("unknown fields must be refused by the schema too")


def test_anthropic_and_mcp_metadata(tools):
    specs = {s["name"]: s for s in anthropic_tools(tools)}
    assert set(specs) == set(tools.names())
    assert specs["edit_file"]["input_schema"]["properties"]["edits"]["items"]["required"] == ["old", "new"]
    assert mcp_annotations(tools["read_file"])["readOnlyHint"] is True
    assert mcp_annotations(tools["run_command"])["destructiveHint"] is True
    assert mcp_annotations(tools["list_files"])["idempotentHint"] is True


def test_descriptions_say_limits_and_how_to_continue(tools):
    assert "offset=b+1" in tools["read_file"].description
    assert "[exit=N]" in tools["run_command"].description and "3600" in tools["run_command"].description
    for t in tools.tools.values():
        assert len(t.description) > 150, t.name
