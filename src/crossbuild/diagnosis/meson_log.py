"""A failed `meson setup` read from Meson's own records: its error's location (`src/meson.build:12:4: ERROR: ...`),
the statement there (the dependency(), find_library() or has_header() it calls, an error() after a lookup), the
if/elif/else blocks around it, and the project's options file: the feature or boolean option that governs the call
(`required: get_option('tls')`, `if get_option('x11')`) with the argument that turns it off."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from crossbuild.diagnosis.model import Diagnosis, Switch, offered
from crossbuild.foundation import safefs

FILE_MAX_BYTES = 2 << 20
_ERROR = re.compile(r"^(?P<file>[^\s:][^:\n]*?meson\.build):(?P<line>\d+):\d+: ERROR: (?P<message>.*)$",
                    re.MULTILINE)
_OPTION_CALL = re.compile(r"\boption\(\s*'([^'\n]{1,200})'")
_TYPE = re.compile(r"\btype\s*:\s*'(\w+)'")
_GET_OPTION = re.compile(r"(\bnot\s+)?get_option\(\s*'([^']+)'\s*\)(\.(?:enabled|allowed|disabled|auto)\(\))?")
_REQUIRED_BY = re.compile(r"required\s*:\s*(not\s+)?get_option\(\s*'([^']+)'\s*\)")
_LOOKUP = re.compile(r"\b(dependency|find_library|has_header|check_header)\(\s*'([^']+)'")
_ASSIGNED = re.compile(r"^\s*(\w+)\s*=\s*dependency\(\s*'([^']+)'", re.MULTILINE)
# `bison = find_program('bison', 'win_bison', required: false)`: the variable and the names, in order
_PROGRAM = re.compile(r"^\s*(\w+)\s*=\s*find_program\(\s*((?:'[\w.+-]+'\s*,\s*)*'[\w.+-]+')", re.MULTILINE)
_COMPARED = re.compile(r"get_option\([^)]*\)(\.\w+\(\))?\s*[=!]=|[=!]=\s*(not\s+)?get_option\(")
_BLOCK = re.compile(r"^\s*(if|elif|else|endif|foreach|endforeach)\b(.*)$")
_TRIPLE = re.compile(r"'''.*?'''", re.DOTALL)  # the only strings that span lines
_SINGLE = re.compile(r"'(?:\\.|[^'\\\n])*'")
LINE_MAX = 4096


@dataclass(frozen=True)
class _Branch:
    line: int
    condition: str
    held: bool


def read(root: Path, log: str, *, cwd: str, source: str) -> Diagnosis | None:
    """The diagnosis of the `meson setup` whose output is LOG, run in ROOT/CWD for the project in ROOT/SOURCE;
    None when Meson's error has no location in the project's files."""
    m = _ERROR.search(log)
    if not m:
        return None
    rel = os.path.normpath(os.path.join(cwd, m["file"]) if not m["file"].startswith("/") else
                           os.path.relpath(m["file"], root))
    text = safefs.read_text_or_none(root, rel, max_bytes=FILE_MAX_BYTES) if not rel.startswith("..") else None
    if text is None:
        return None
    line = int(m["line"][:9])
    lines = _code_lines(text)
    statement = _statement(lines, line)
    # a subproject's get_option() reads its own options, not the top-level file's
    options = {} if "subprojects/" in rel else _options(root, source)
    branches = _branches(lines, line)
    missing = [name for kind, name in _LOOKUP.findall(statement)]
    assigned = dict((var, name) for var, name in _ASSIGNED.findall(text))
    found_programs = {var: re.findall(r"'([\w.+-]+)'", names) for var, names in _PROGRAM.findall(text)}
    programs: list[str] = []
    for b in branches:  # `if not tls_dep.found()` ... error(): what tls_dep (or a find_program) looked for
        tested = re.findall(r"\b(\w+)\.found\(\)", b.condition)
        missing += [assigned[var] for var in tested if var in assigned]
        programs += [name for var in tested for name in found_programs.get(var, [])]
    switches: dict[str, Switch] = {}
    for negated, name in _REQUIRED_BY.findall(statement):
        _add(switches, options, name, not negated, f"`required: get_option('{name}')` at {rel}:{line}")
    for b in branches:
        # only values that are certain: none from an `or` that held, or an `and` that did not; none from a
        # comparison (get_option('a') == false) or a condition that goes on over more lines
        code = _SINGLE.sub("''", b.condition)
        if re.search(r"\bor\b" if b.held else r"\band\b", code) or _COMPARED.search(code) \
                or code.count("(") != code.count(")"):
            continue
        for negated, name, method in _GET_OPTION.findall(b.condition):
            on = (not negated) != (method == ".disabled()")  # the value that led here, when the branch held
            _add(switches, options, name, on if b.held else not on,
                 f"`if {b.condition.strip()[:100]}` at {rel}:{b.line}" + ("" if b.held else ", which was false"))
    return Diagnosis(system="meson", failed=" ".join(statement.split())[:200], where=f"{rel}:{line}",
                     message=m["message"][:300], missing=tuple(dict.fromkeys(missing)),
                     programs=tuple(dict.fromkeys(programs)),
                     switches=tuple(switches.values()), record="Meson's error location and options")


def _add(switches: dict[str, Switch], options: dict[str, str], name: str, on: bool, why: str) -> None:
    kind = options.get(name)
    if name in switches or kind not in ("feature", "boolean") or not offered(name, "false"):
        return
    value = ("disabled" if on else "enabled") if kind == "feature" else ("false" if on else "true")
    switches[name] = Switch(name=name, value="", arg=f"-D{name}={value}", why=why)


def _options(root: Path, source: str) -> dict[str, str]:
    """The project's options and their types, from meson.options or meson_options.txt."""
    for name in ("meson.options", "meson_options.txt"):
        text = safefs.read_text_or_none(root, f"{source}/{name}", max_bytes=FILE_MAX_BYTES)
        if text:
            found = {}
            for m in _OPTION_CALL.finditer(text):  # each call's own text, up to its closing parenthesis
                end = text.find(")", m.end(), m.end() + 2000)
                if kind := _TYPE.search(text, m.end(), end if end > 0 else m.end() + 2000):
                    found.setdefault(m[1], kind[1])
            return found
    return {}


def _code_lines(text: str) -> list[str]:
    """TEXT's lines as code: multi-line strings blanked (line numbers kept), comments cut, over-long lines empty;
    single-line strings kept, so get_option('x') and dependency('x') are still read."""
    text = _TRIPLE.sub(lambda s: "''" + "\n" * s.group(0).count("\n"), text)
    out = []
    for raw in text.splitlines():
        if len(raw) > LINE_MAX:
            out.append("")
            continue
        blanked = _SINGLE.sub(lambda s: "'" + " " * (len(s.group(0)) - 2) + "'", raw)
        cut = blanked.find("#")
        out.append(raw[:cut] if cut >= 0 else raw)
    return out


def _statement(lines: list[str], line: int) -> str:
    """The statement that starts on LINE, through its balanced parentheses."""
    out, depth = [], 0
    for raw in lines[line - 1:line + 40]:
        out.append(raw)
        code = _SINGLE.sub("''", raw)
        depth += code.count("(") - code.count(")")
        if depth <= 0:
            break
    return "\n".join(out)


def _branches(lines: list[str], line: int) -> list[_Branch]:
    """The if/elif/else branches that enclose LINE, outermost first, each condition with whether it held."""
    stack: list[tuple[str, list[tuple[int, str]]]] = []
    for n, raw in enumerate(lines[:line - 1], 1):
        m = _BLOCK.match(raw)
        if not m:
            continue
        word, rest = m.groups()
        if word in ("if", "foreach"):
            stack.append((word, [(n, rest)]))
        elif word in ("elif", "else") and stack and stack[-1][0] == "if":
            stack[-1][1].append((n, rest if word == "elif" else ""))
        elif word in ("endif", "endforeach") and stack:
            stack.pop()
    found = []
    for kind, branches in stack:
        if kind == "if":
            found += [_Branch(n, cond, i == len(branches) - 1) for i, (n, cond) in enumerate(branches) if cond]
    return found
