"""Property-based: arbitrary JSON and strings fed to dispatch never raise, always give a ToolResult, and never touch
anything outside the workspace."""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crossbuild.tools.base import ErrorType, ToolResult

NAMES = st.sampled_from(["list_files", "read_file", "write_file", "edit_file", "run_command", "search_knowledge",
                         "build_status", "nope", ""])
PATHISH = st.one_of(
    st.sampled_from(["..", "../demo-backup/secret.txt", "/etc/passwd", "src/../../outside.txt", "~/.ssh/id_rsa",
                     "src/.env", "src", "build/x", "/", "", "\0", "src/CMakeLists.txt", "../demo-backup/new"]),
    st.text(max_size=40),
)
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
                           | PATHISH, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c,
                                                                                          max_size=3), max_leaves=8)
ARGS = st.fixed_dictionaries({}, optional={
    "path": PATHISH, "content": st.text(max_size=30), "offset": JSON_VALUES, "limit": JSON_VALUES, "depth": JSON_VALUES,
    "edits": st.lists(st.fixed_dictionaries({"old": PATHISH, "new": st.text(max_size=10)}), max_size=2),
    "command": st.one_of(st.text(max_size=60), st.builds(lambda a, p: f"{a} {p}", st.sampled_from(
        ["cat", "ls", "touch", "rm -f", "cp src/CMakeLists.txt", "mkdir -p", "cmake -DX=", "ln -s"]), PATHISH)),
    "cwd": PATHISH, "query": st.text(max_size=30), "timeout": JSON_VALUES, "junk": JSON_VALUES})
RAW = st.one_of(ARGS.map(json.dumps), st.text(max_size=80), JSON_VALUES.map(json.dumps), st.binary(max_size=40))


def _outside_state(tmp_path):
    """Size and mtime of everything under tmp_path except the workspace and the prefix (where tools may write)."""
    inside = (str(tmp_path / "w" / "demo") + os.sep, str(tmp_path / "prefix") + os.sep)
    out = {}
    for dirpath, dirnames, filenames in os.walk(tmp_path):
        # not into the folders tools may write: the workspace's zig cache layer alone holds thousands of links
        dirnames[:] = [d for d in dirnames if not (os.path.join(dirpath, d) + os.sep).startswith(inside)]
        for n in filenames + dirnames:
            p = os.path.join(dirpath, n)
            if not (p + os.sep).startswith(inside):
                st_ = os.lstat(p)
                out[p] = (st_.st_size, st_.st_mtime_ns)
    return out


def test_the_outside_check_can_fail(ctx, tmp_path):
    before = _outside_state(tmp_path)
    assert str(tmp_path / "w" / "demo-backup" / "secret.txt") in before
    (tmp_path / "w" / "demo-backup" / "new.txt").write_text("x")
    assert _outside_state(tmp_path) != before


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES, raw=RAW)
def test_dispatch_never_raises_and_never_leaves_the_workspace(ctx, tools, tmp_path, name, raw):
    before = _outside_state(tmp_path)
    result = tools.dispatch(ctx, name, raw)
    assert isinstance(result, ToolResult)
    assert result.error_type in (None, *ErrorType)
    assert result.ok == (result.error_type is None)
    assert not result.internal, result.data.get("traceback")
    assert "backup secret" not in result.message and "outside secret" not in result.message
    assert "root:x:0:0" not in result.message
    assert _outside_state(tmp_path) == before
