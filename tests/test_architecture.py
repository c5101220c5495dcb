"""The package tree is the layer diagram: import-linter's contracts (pyproject.toml) hold, modules stay small
enough to read, or say in their docstring why they are not, and docs/architecture.md names every module (and no
module that is gone). And no test module binds a top-level name twice (the later one would replace the earlier)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "crossbuild"
MAX_LINES = 350
ARCHITECTURE = SRC.parents[1] / "docs" / "architecture.md"
# a module path in backticks, relative to src/crossbuild/: `proof/exercise.py`, `mcp_server.py`
DOC_MODULE = re.compile(r"`((?:[A-Za-z_][A-Za-z0-9_]*/)*[A-Za-z_][A-Za-z0-9_]*\.py)`")


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


def test_architecture_doc_names_every_module_and_only_real_ones():
    modules = {str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
               if p.name not in ("__init__.py", "__main__.py") and "__pycache__" not in p.parts}
    named = {m for m in DOC_MODULE.findall(ARCHITECTURE.read_text()) if not m.startswith("tests/")}
    missing = sorted(modules - named)
    assert not missing, "docs/architecture.md does not name these modules (add a line for each): " \
        + ", ".join(missing)
    gone = sorted(m for m in named if not (SRC / m).is_file())
    assert not gone, "docs/architecture.md names modules that do not exist under src/crossbuild/: " + ", ".join(gone)


def _top_level_names(tree: ast.Module) -> list[tuple[str, ast.stmt]]:
    """Each module-level binding of a test module: functions, classes and plain assignments."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.append((node.name, node))
        elif isinstance(node, ast.Assign):
            out += [(target.id, node) for target in node.targets if isinstance(target, ast.Name)]
    return out


def test_no_test_module_binds_a_top_level_name_twice():
    """A second fixture or test of the same name silently replaces the first: the earlier tests then run on the
    later text (a Makefile constant defined twice made another test build the wrong project), or never run. A name
    built up from itself (`X = X.replace(...)`) is one binding."""
    twice = []
    for path in sorted((SRC.parents[1] / "tests").rglob("test_*.py")):
        seen: set[str] = set()
        for name, node in _top_level_names(ast.parse(path.read_text())):
            builds_on_itself = isinstance(node, ast.Assign) and any(
                isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))
            if name in seen and not builds_on_itself:
                twice.append(f"{path.relative_to(SRC.parents[1])}: {name}")
            seen.add(name)
    assert not twice, "names bound twice at a test module's top level: " + "; ".join(twice)
