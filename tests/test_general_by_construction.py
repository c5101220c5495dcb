"""The planner, the verifier and the tools are general by construction: no project of the development corpus or of
the development sample is named by the code (a key, a regex, a path, a special case), only by data that maps names
(env/packages.toml), by the knowledge base's fixtures, and in prose (docstrings, comments, help text examples). A
rule that only matches one project's message does not count towards success on projects nobody tuned for."""

from __future__ import annotations

import io
import re
import tokenize
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a benchmark names the project it times (`crossbuild bench` builds zlib by default): data, not a decision
ALLOWED = {"src/crossbuild/cli/bench.py", "src/crossbuild/benchmarks"}


def _project_names() -> set[str]:
    names = set()
    for folder in ("corpus/dev", "corpus/dev-sample"):
        for f in (ROOT / folder).glob("*.toml"):
            names.add(tomllib.loads(f.read_text())["name"].lower())
    return names


def _code_literals(path: Path) -> list[tuple[int, str]]:
    """The string literals of PATH's code (adjacent ones joined, as Python joins them), without docstrings."""
    out: list[tuple[int, str]] = []
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
              if t.type not in (tokenize.COMMENT, tokenize.NL)]
    i = 0
    while i < len(tokens):
        if tokens[i].type != tokenize.STRING:
            i += 1
            continue
        j = i
        while j < len(tokens) and tokens[j].type == tokenize.STRING:
            j += 1
        statement_start = i == 0 or tokens[i - 1].type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        if not (statement_start and tokens[j].type in (tokenize.NEWLINE, tokenize.ENDMARKER)):  # not a docstring
            out.append((tokens[i].start[0], "".join(t.string for t in tokens[i:j])))
        i = j
    return out


def test_no_project_of_the_corpus_is_named_by_the_code():
    names = _project_names()
    assert len(names) > 60  # both corpora were read
    word = re.compile(r"(?<![\w.+-])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
                      + r")(?![\w+-])", re.IGNORECASE)
    found = []
    for path in sorted((ROOT / "src" / "crossbuild").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED or any(rel.startswith(a + "/") for a in ALLOWED):
            continue
        for line, literal in _code_literals(path):
            # prose (help text, messages with examples) has spaces; a key, a regex or a path has none
            if not re.search(r"\s", literal.strip("'\"rbfRBF")) and (m := word.search(literal)):
                found.append(f"{rel}:{line}: {m.group(1)} in {literal[:80]}")
    assert not found, "\n".join(found)
