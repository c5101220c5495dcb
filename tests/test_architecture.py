"""The package tree is the layer diagram: import-linter's contracts (pyproject.toml) hold, and modules stay small
enough to read, or say in their docstring why they are not."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "crossbuild"
MAX_LINES = 350


def test_layers_and_no_cycles_per_import_linter():
    r = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], capture_output=True,
                       text=True, cwd=SRC.parents[1], timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "2 kept, 0 broken" in r.stdout


def test_long_modules_say_why():
    unexplained = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") <= MAX_LINES:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if "Longer than" not in doc:
            unexplained.append(f"{path.relative_to(SRC)}: {text.count(chr(10))} lines")
    assert not unexplained, "modules over ~350 lines need a 'Longer than ...' reason in their docstring: " \
        + "; ".join(unexplained)
