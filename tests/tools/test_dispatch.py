"""dispatch with raw argument strings exactly as models send them: the three layers and structured results."""

from __future__ import annotations

from crossbuild.tools.base import Tool, ToolArgs, Toolset


def test_invalid_json_gives_the_parser_reason(call):
    r = call("read_file", raw='{"path": "src/CMakeLists.txt"')
    assert not r.ok and r.error_type == "invalid_json"
    assert "line 1 column" in r.message and "JSON object" in r.hint


def test_arguments_that_are_not_an_object(call):
    for raw, kind in (('["src"]', "array"), ('"src"', "string"), ("3", "number")):
        r = call("read_file", raw=raw)
        assert r.error_type == "invalid_json" and kind in r.message, raw


def test_schema_errors_are_listed_together_with_the_valid_fields(call):
    r = call("read_file", raw='{"offset": "3", "limit": true, "colour": "red"}')
    assert r.error_type == "invalid_arguments"
    problems = r.data["problems"]
    assert any(p.startswith("path: required") for p in problems)
    assert any(p.startswith("offset:") and "integer" in p for p in problems)  # "3" is not 3
    assert any(p.startswith("limit:") for p in problems)  # true is not 1
    assert any(p.startswith("colour: unknown field") for p in problems)
    assert "path: str" in r.hint and "offset?: int" in r.hint


def test_out_of_range_and_nested_errors(call):
    r = call("list_files", {"depth": 99})
    assert r.error_type == "invalid_arguments" and "less than or equal to 6" in r.message
    r = call("edit_file", {"path": "src/CMakeLists.txt", "edits": [{"old": "x"}]})
    assert r.error_type == "invalid_arguments" and "edits.0.new: required" in r.message


def test_null_means_default_for_strict_schemas(call):
    r = call("read_file", {"path": "src/CMakeLists.txt", "offset": None, "limit": None})
    assert r.ok and r.data["first"] == 1


def test_unknown_tool_lists_the_real_ones(call):
    r = call("bash", {"command": "ls"})
    assert r.error_type == "unknown_tool" and "run_command" in r.hint and "read_file" in r.hint


def test_an_exception_in_our_code_is_internal_not_the_models_fault(ctx):
    def broken(ctx, args, auth):
        raise KeyError("bug")

    class NoArgs(ToolArgs):
        pass

    ts = Toolset([Tool(name="broken", description="d", args=NoArgs, run=broken)])
    r = ts.dispatch(ctx, "broken", "{}")
    assert not r.ok and r.internal and r.error_type == "internal"
    assert "not caused by your arguments" in r.message
    assert "KeyError" in r.data["traceback"]


def test_success_is_a_field_not_text(call):
    r = call("run_command", {"command": "grep -c error src/CMakeLists.txt"})
    assert not r.ok and r.data["exit_code"] == 1  # grep found nothing: the text says nothing about success
    r = call("run_command", {"command": "true"})
    assert r.ok and r.data["exit_code"] == 0
