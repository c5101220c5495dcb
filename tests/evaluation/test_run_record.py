"""run.json keeps the whole list of a folder's cells and every commit that ran them, across resumed runs."""

from __future__ import annotations

import json
import subprocess

from crossbuild.evaluation import run_record


def test_a_resumed_run_with_fewer_cells_keeps_the_full_list(tmp_path):
    path = tmp_path / "run.json"
    run_record.write(path, ["aarch64-linux-musl"], 1, ["zlib", "bzip2", "xz-utils"], {"model": "planner"}, "abc1234",
                     "corpus/dev-sample")
    run_record.write(path, ["aarch64-linux-musl", "riscv64-linux-musl"], 1, ["bzip2"], {"model": "planner"},
                     "def5678+dirty")
    meta = json.loads(path.read_text())
    assert meta["projects"] == ["zlib", "bzip2", "xz-utils"]
    assert meta["targets"] == ["aarch64-linux-musl", "riscv64-linux-musl"]
    assert meta["commit"] == "def5678+dirty" and meta["commits"] == ["abc1234", "def5678+dirty"]
    assert meta["corpus"] == "corpus/dev-sample"  # what the figures estimate, kept by a resume that omits it
    path.write_text("not json")
    run_record.write(path, ["aarch64-linux-musl"], 2, ["zlib"], {}, None)  # a damaged record starts again
    assert json.loads(path.read_text())["projects"] == ["zlib"]


def test_the_commit_is_this_checkout_s():
    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True,
                          cwd=run_record.__file__.rsplit("/src/", 1)[0]).stdout.strip()
    assert run_record.source_commit().split("+")[0] == head
