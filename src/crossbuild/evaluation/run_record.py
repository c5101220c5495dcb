"""What a results folder records of the runs made into it: the commit of the crossbuild source that ran (in
run.json and in every row), and run.json's lists of cells, kept whole across resumed runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from crossbuild import __version__


def source_commit() -> str | None:
    """The commit of the crossbuild source that runs (`+dirty` when its tracked files differ from it), or None
    outside a git checkout: what every report row and run.json names."""
    package = Path(__file__).resolve().parents[1]
    tree = package.parents[1]
    if package != tree / "src" / "crossbuild":  # installed, not a checkout: a repository around it is another's
        return None
    try:
        head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short=7", "HEAD"], capture_output=True,
                              text=True, timeout=30)
        dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def write(path: Path, targets: list[str], repeats: int, projects: list[str], config: dict[str, Any],
          commit: str | None, corpus: str | None = None) -> None:
    """run.json: what this folder's cells are, kept whole across resumed runs (a resume with --only adds to the
    lists, never shrinks them), with every commit that ran cells here."""
    try:
        before = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        before = {}
    before = before if isinstance(before, dict) else {}

    def merged(key: str, now: list[Any]) -> list[Any]:
        old = before.get(key)
        return list(dict.fromkeys([*(old if isinstance(old, list) else []), *now]))
    prev = before.get("repeats")
    path.write_text(json.dumps({"targets": merged("targets", targets),
                                "repeats": max(repeats, prev if isinstance(prev, int) else 0),
                                "projects": merged("projects", projects), "config": config,
                                "crossbuild_version": __version__, "commit": commit,
                                "corpus": corpus or before.get("corpus"),
                                "commits": merged("commits", [commit] if commit else [])}, indent=1))
