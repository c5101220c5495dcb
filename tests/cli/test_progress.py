"""How `crossbuild build` shows a run as it happens, as a script or a CI job meets it: JSON Lines on stdout, and
GitHub Actions groups and annotations."""

from __future__ import annotations

import json

import pytest

from tests.conftest import EXAMPLE, cb, outcome_of


def test_an_unknown_progress_mode_is_one_line(tmp_path):
    r = cb("build", str(EXAMPLE), "-t", "aarch64-linux-musl", "--progress", "fancy", "--db", str(tmp_path / "r.db"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: --progress 'fancy': choose one of auto, tty, plain, json"]
    assert not (tmp_path / "r.db").exists()


@pytest.mark.slow
def test_json_streams_one_object_per_event_and_ends_with_the_outcome(tmp_path):
    r = cb("build", str(EXAMPLE), "-t", "aarch64-linux-musl", "-w", str(tmp_path / "ws"), "--db",
           str(tmp_path / "runs.db"), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    events = [json.loads(line) for line in r.stdout.splitlines()]  # every line is one JSON object
    assert all(set(e) == {"event", "time", "data"} for e in events)
    kinds = [e["event"] for e in events]
    # the workspace's preparation says its phases, then the run; the long calls say what they are doing
    first = kinds.index("workspace_prepared")
    assert first > 0 and set(kinds[:first]) == {"progress"} and kinds[-2:] == ["finished", "outcome"]
    assert events[0]["data"]["message"] == f"copying {EXAMPLE}"
    phases = [e["data"]["phase"] for e in events[first:] if e["event"] == "progress"]
    assert any(p.startswith("clean rebuild: ") for p in phases), phases
    assert "reading every artifact's format and architecture" in phases
    counted = [e["data"] for e in events if e["event"] == "progress" and e["data"].get("total")]
    assert any(d["phase"].startswith("test programs") or "ctest" in d["phase"] for d in counted), phases
    assert all(0 < d["done"] <= d["total"] and d["message"].endswith(f"{d['done']} of {d['total']}")
               for d in counted)
    for kind in ("run_started", "tool_call", "tool_result", "verify"):
        assert kind in kinds
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    outcome = outcome_of(r.stdout)
    assert outcome["status"] == "verified" and outcome["workspace"] == str(tmp_path / "ws")
    results = [e["data"] for e in events if e["event"] == "tool_result" and e["data"]["name"] == "run_command"]
    assert results and all(d["log"].startswith(".xbuild/logs/") for d in results)


NEEDS_FROBNICATE = """\
cmake_minimum_required(VERSION 3.16)
project(feat C)
option(FEAT_WITH_FROBNICATE "Frobnicate the output" ON)
if(FEAT_WITH_FROBNICATE)
  find_package(Frobnicate REQUIRED)
endif()
add_executable(feat main.c)
"""


@pytest.mark.slow
def test_in_github_actions_each_command_is_a_group_and_a_failed_run_an_error_annotation(tmp_path):
    project = tmp_path / "feat"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(NEEDS_FROBNICATE)
    (project / "main.c").write_text("int main(void){return 0;}\n")
    r = cb("build", str(project), "-t", "aarch64-linux-musl", "-w", str(tmp_path / "ws"), "--db",
           str(tmp_path / "runs.db"), "--keep-features", "--progress", "plain", cwd=tmp_path,
           env={"GITHUB_ACTIONS": "true"})
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    lines = r.stdout.splitlines()
    opened = [i for i, line in enumerate(lines) if line.startswith("::group::step ")]
    assert opened and all("::endgroup::" in lines[i:] for i in opened)
    first = opened[0]
    assert "run_command failed: .xbuild/logs/" in lines[first]
    assert any("Frobnicate" in line for line in lines[first:lines.index("::endgroup::", first)])
    (error,) = [line for line in lines if line.startswith("::error ")]
    assert error.startswith("::error title=crossbuild failed::gave_up: ")
    assert "knowledge: cmake-package-not-found" in error and "\n" not in error
