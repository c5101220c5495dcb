"""`crossbuild build` with the offline planner on code written against glibc's headers, which declare more through
their own includes than musl's: the name's header is included first in every compile, whatever the build system."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tests.agent.test_planner_builds import _build, _project

# glibc's <stdlib.h> brings <sys/types.h> (ulong) and its <dirent.h> brings <limits.h> (PATH_MAX); musl's do not
_LIBRARY = """#include <stdlib.h>
#include <string.h>
#include <dirent.h>
int widest(void) { ulong size = PATH_MAX; return (int)size; }
"""
_TEST = """int widest(void);
int main(void) { return widest() >= 256 ? 0 : 1; }
"""


@pytest.mark.slow
def test_names_glibcs_headers_declare_in_passing_are_included_first_for_musl(tmp_path):
    src = _project(tmp_path / "widest", {
        "meson.build": "project('widest', 'c')\n"
                       "lib = library('widest', 'widest.c', install: true)\n"
                       "test('widest', executable('test_widest', 'test_widest.c', link_with: lib))\n",
        "widest.c": _LIBRARY, "test_widest.c": _TEST})
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert out.get("status") == "verified", r.stdout[-3000:] + r.stderr[-2000:]
    assert out["verify"]["proof"] == "tested", out["verify"]["proof_why"]
    # both names, whether they show in one round or two: each header is added to the ones before
    assert "applied musl-bsd-types-undeclared" in out["message"] and "applied musl-limits-undeclared" in out["message"]
    conn = sqlite3.connect(tmp_path / "runs.db")
    envs = [json.loads(a).get("env") or {} for (a,) in conn.execute(
        "SELECT parsed_arguments_json FROM tool_calls WHERE run_id=? AND name='run_command'", (out["run_id"],))]
    assert {"sys/types.h limits.h", "limits.h sys/types.h"} & {e.get("CROSSBUILD_FORCE_INCLUDE") for e in envs}
