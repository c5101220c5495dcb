"""run.json keeps the whole list of a folder's cells and every commit that ran them, across resumed runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import crossbuild
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


def test_a_cells_build_imports_the_crossbuild_the_runner_runs_whatever_pythonpath_says(tmp_path):
    """An evaluation run from a worktree with `PYTHONPATH=src` (relative): each cell's build runs in the cell's own
    folder, where `src` names nothing, and imported the installed crossbuild, another commit than the one every
    row names. The cell's build imports the runner's own package."""
    copy = tmp_path / "worktree" / "src"
    shutil.copytree(Path(crossbuild.__file__).parent, copy / "crossbuild",
                    ignore=shutil.ignore_patterns("__pycache__"))
    cell_folder = tmp_path / "cell"
    cell_folder.mkdir()
    probe = ("import subprocess, sys\n"
             "from crossbuild.evaluation import runner\n"
             "env = runner.cell_environment(runner.RunConfig())\n"
             "print(subprocess.run([sys.executable, '-c', 'import crossbuild; print(crossbuild.__file__)'],\n"
             f"                     env=env, cwd={str(cell_folder)!r}, capture_output=True, text=True).stdout)\n")
    r = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path / "worktree",
                       env={**os.environ, "PYTHONPATH": "src"}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert Path(r.stdout.strip()).resolve() == (copy / "crossbuild" / "__init__.py").resolve(), r.stdout
