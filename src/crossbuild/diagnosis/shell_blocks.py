"""The if/case blocks of a generated `configure` script around a line, and the option variables their conditions
test. config.log gives an error's line in the script (`configure:12345: error: ...`); which `--with-X` or
`--enable-X` led there is read from the blocks around that line.

Hand-written: a shell parser is not needed to find the block keywords of autoconf's regular output; here-documents
(the help text) and quoted strings are skipped so their words are never taken for keywords."""

from __future__ import annotations

import re
from dataclasses import dataclass

_KEYWORD = re.compile(r"(?:^|(?<=[\s;&|(){}]))(if|elif|else|fi|case|esac)(?=$|[\s;&|)])")
_HEREDOC = re.compile(r"(?<!<)<<(?!<)-?\s*\\?['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")  # not a <<< here-string
LINE_MAX = 4096  # a longer line is never one of autoconf's conditions: its keywords are not read
_OPTION_VARIABLE = re.compile(r"\$\{?(with|enable)_([A-Za-z0-9_]+)")


@dataclass(frozen=True)
class Condition:
    line: int
    text: str  # the condition as written: `test "x$with_zlib" != xno`, or a case's subject
    held: bool  # the branch taken (the last one before the line), or an earlier one that was not
    kind: str = "if"  # if, elif or case


def enclosing_conditions(text: str, line: int) -> list[Condition]:
    """The conditions of the if/elif/case blocks that enclose LINE, outermost first."""
    raw_lines = text.splitlines()
    stack: list[tuple[str, list[tuple[int, str]]]] = []
    for n, code in enumerate(_code_lines(raw_lines[:line - 1]), 1):
        for m in _KEYWORD.finditer(code):
            word = m.group(1)
            if word in ("if", "case"):
                stack.append((word, [(n, _condition(raw_lines[n - 1], word))]))
            elif word in ("elif", "else") and stack and stack[-1][0] == "if":
                stack[-1][1].append((n, _condition(raw_lines[n - 1], word) if word == "elif" else ""))
            elif (word, stack[-1][0] if stack else "") in (("fi", "if"), ("esac", "case")):
                stack.pop()
    found = []
    for kind, branches in stack:
        for i, (n, cond) in enumerate(branches):
            if cond:
                found.append(Condition(n, cond, i == len(branches) - 1, "case" if kind == "case" else
                                       "elif" if i else "if"))
    return found


def safe_case_values(text: str, case_line: int) -> list[str]:
    """The literal values a `case` block starting on CASE_LINE accepts without stopping configure (its items whose
    commands call no as_fn_error), in the block's order."""
    lines = text.splitlines()
    indent = len(lines[case_line - 1]) - len(lines[case_line - 1].lstrip())
    body: list[str] = []
    for raw in lines[case_line:case_line + 400]:
        if raw.strip() == "esac" and len(raw) - len(raw.lstrip()) <= indent:
            break
        body.append(raw)
    values = []
    for item in "\n".join(body).split(";;"):
        pattern, paren, commands = item.strip().partition(")")
        if paren and "as_fn_error" not in commands:
            values += [v.strip() for v in pattern.lstrip("(").split("|")
                       if v.strip() and not re.search(r"[*?\[\]$\"']", v)]
    return values


def _code_lines(lines: list[str]) -> list[str]:
    """LINES with what is not code blanked: comments, the insides of quotes (which may span lines, as an error
    message does) and here-documents (the help text)."""
    out: list[str] = []
    quote = ""  # the quote open at the end of the last line
    heredoc = None
    for raw in lines:
        if len(raw) > LINE_MAX and not quote:
            out.append("")
            continue
        if heredoc:
            heredoc = None if raw.strip() == heredoc else heredoc
            out.append("")
            continue
        code: list[str] = []
        i = 0
        while i < len(raw):
            c = raw[i]
            if quote:
                if c == "\\" and quote == '"':
                    i += 1
                elif c == quote:
                    quote = ""
                    code.append(c)
            elif c == "\\":  # an escaped character is itself, never a quote
                code.append(raw[i:i + 2])
                i += 1
            elif c in "'\"`":
                quote = c
                code.append(c)
            elif c == "#" and (i == 0 or raw[i - 1] in " \t;"):
                break
            else:
                code.append(c)
            i += 1
        line = "".join(code)
        if not quote and "<<" in line and (m := _HEREDOC.search(raw)):  # its word may be quoted: read it raw
            heredoc = m.group(1)
        out.append(line)
    return out


def _condition(raw: str, word: str) -> str:
    """The text after WORD on its line, up to `then` or `in` (a case's subject)."""
    after = re.split(rf"(?:^|[\s;]){word}\s", raw, maxsplit=1)[-1]
    return re.split(r";\s*then\b|\s+then\b|\s+in\s*$", after, maxsplit=1)[0].strip()


def option_variables(condition: str) -> list[tuple[str, str]]:
    """The configure options a condition tests: [("with", "zlib")] for `test "x$with_zlib" != xno`."""
    return [(m.group(1), m.group(2)) for m in _OPTION_VARIABLE.finditer(condition)]
