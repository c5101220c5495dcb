"""The block structure of a CMake file: which if()/elseif()/else() branches enclose a line, and the variables their
conditions test. CMake's trace says which commands ran, but not where a block ends (a false branch and every
endif() are never traced), so the branches are read from the file itself.

Hand-written: only command names, arguments and lines are needed (comments, quoted and bracket arguments, nested
parentheses), and the maintained CMake parsers on PyPI are formatters that pull in far more."""

from __future__ import annotations

import re
from dataclasses import dataclass

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPEN_PAREN = re.compile(r"[ \t]*\(")
_BRACKET_OPEN = re.compile(r"\[(=*)\[")
_UNQUOTED = re.compile(r'(?:\\.|[^\s()#"\\])+')
_OPENS = {"if": "endif", "foreach": "endforeach", "while": "endwhile", "function": "endfunction",
          "macro": "endmacro", "block": "endblock"}
_CLOSES = set(_OPENS.values())
# words of a condition that are not variables: operators, constants, and the tests whose operand is not a switch
_UNARY = {"NOT", "DEFINED", "COMMAND", "POLICY", "TARGET", "TEST", "EXISTS", "IS_DIRECTORY", "IS_SYMLINK",
          "IS_ABSOLUTE", "IS_READABLE", "IS_WRITABLE", "IS_EXECUTABLE"}
_BINARY = {"AND", "OR", "STREQUAL", "EQUAL", "LESS", "GREATER", "LESS_EQUAL", "GREATER_EQUAL", "STRLESS",
           "STRGREATER", "STRLESS_EQUAL", "STRGREATER_EQUAL", "VERSION_EQUAL", "VERSION_LESS", "VERSION_GREATER",
           "VERSION_LESS_EQUAL", "VERSION_GREATER_EQUAL", "MATCHES", "IN_LIST", "IS_NEWER_THAN", "PATH_EQUAL"}
_CONSTANT = re.compile(r"^(ON|OFF|TRUE|FALSE|YES|NO|Y|N|IGNORE|NOTFOUND|-?\d+(\.\d+)*|.*-NOTFOUND)$", re.I)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Command:
    name: str  # lower case, as CMake compares them
    line: int
    args: tuple[str, ...]  # quoted arguments keep their quotes, so a condition tells "X" from X; ( and ) apart


@dataclass(frozen=True)
class Branch:
    """The branch of one if() block that encloses a line: its command (if, elseif or else), and each condition's
    command with whether it held (True) or must have been false to get here (the earlier branches)."""
    kind: str
    line: int
    conditions: tuple[tuple[Command, bool], ...]


def commands(text: str) -> list[Command]:
    """Every command invocation in a CMake file, in order, with the line it starts on."""
    found: list[Command] = []
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            i, line = _skip_comment(text, i, line)
        elif m := _IDENT.match(text, i):  # a word: a command when ( follows, else skipped whole (never re-scanned)
            if paren := _OPEN_PAREN.match(text, m.end()):
                start = line
                args, i, line = _arguments(text, paren.end(), line)
                found.append(Command(m.group(0).lower(), start, tuple(args)))
            else:
                i = m.end()
        else:
            line += c == "\n"
            i += 1
    return found


def _skip_comment(text: str, i: int, line: int) -> tuple[int, int]:
    if m := _BRACKET_OPEN.match(text, i + 1):
        end = text.find(f"]{m.group(1)}]", m.end())
        end = len(text) if end < 0 else end + len(m.group(1)) + 2
    else:
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
    return end, line + text.count("\n", i, end)


def _arguments(text: str, i: int, line: int) -> tuple[list[str], int, int]:
    """The arguments from just after a command's ( to its ): (arguments, index after the ), line there)."""
    args: list[str] = []
    depth, n = 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif c == "#":
            i, line = _skip_comment(text, i, line)
        elif c in "()":
            depth += 1 if c == "(" else -1
            i += 1
            if depth == 0:
                break
            args.append(c)
        elif c == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            args.append(text[i:end + 1])
            line += text.count("\n", i, end)
            i = end + 1
        elif (m := _BRACKET_OPEN.match(text, i)) and (end := text.find(f"]{m.group(1)}]", m.end())) >= 0:
            args.append('"' + text[m.end():end] + '"')
            line += text.count("\n", i, end)
            i = end + len(m.group(1)) + 2
        elif m := _UNQUOTED.match(text, i):
            args.append(m.group(0))
            i = m.end()
        else:
            i += 1
    return args, i, line


def enclosing_branches(cmds: list[Command], line: int) -> list[Branch]:
    """The if() branches that enclose the command on LINE, outermost first."""
    stack: list[list[Command]] = []  # open blocks; an if block lists its if/elseif/else commands so far
    for cmd in cmds:
        if cmd.line >= line:
            break
        if cmd.name in _OPENS:
            stack.append([cmd])
        elif cmd.name in ("elseif", "else") and stack and stack[-1][0].name == "if":
            stack[-1].append(cmd)
        elif cmd.name in _CLOSES and stack:
            stack.pop()
    return [_branch(block) for block in stack if block[0].name == "if"]


def _branch(block: list[Command]) -> Branch:
    taken = block[-1]
    conditions = [(c, False) for c in block[:-1]]
    if taken.name != "else":
        conditions.append((taken, True))
    return Branch(taken.name, taken.line, tuple(conditions))


def is_name(word: str) -> bool:
    """Whether WORD is a plain variable name (not a reference, a quoted string or an operator)."""
    return bool(_NAME.match(word))


def switch_terms(condition: tuple[str, ...], held: bool) -> dict[str, bool]:
    """The variables CONDITION tests for truth alone (`USE_TLS`, `NOT WITH_ZLIB`, one side of AND/OR), each with
    the value it had when the condition HELD as given: {"USE_TLS": True}. Operands of comparisons, DEFINED,
    TARGET and the like are left out: setting them to ON or OFF is not how they are switched. Only values that
    are certain: none from an OR that held, or from a false condition of more than one term."""
    terms: dict[str, bool] = {}
    if (held and "OR" in (w.upper() for w in condition)) or "(" in condition:  # NOT (A AND B): not read here
        return terms
    for i, word in enumerate(condition):
        if not _NAME.match(word) or word.upper() in _UNARY | _BINARY or _CONSTANT.match(word):
            continue
        before = condition[i - 1].upper() if i else ""
        after = condition[i + 1].upper() if i + 1 < len(condition) else ""
        if before in _BINARY - {"AND", "OR"} or after in _BINARY - {"AND", "OR"} or before in _UNARY - {"NOT"}:
            continue
        negations = 0
        j = i - 1
        while j >= 0 and condition[j].upper() == "NOT":
            negations += 1
            j -= 1
        terms[word] = held != bool(negations % 2)
    return terms if held or len(terms) == 1 else {}


def alternatives(condition: tuple[str, ...]) -> list[str]:
    """The variables of `A OR B OR ...` (plain names only, no NOT, comparison or parentheses), each of which alone
    makes it true; [] for any other condition."""
    words = [w for w in condition if w.upper() != "OR"]
    if "OR" not in (w.upper() for w in condition) or len(words) * 2 - 1 != len(condition):
        return []
    if any(not _NAME.match(w) or w.upper() in _UNARY | _BINARY or _CONSTANT.match(w) for w in words):
        return []
    return words if all(condition[i].upper() == "OR" for i in range(1, len(condition), 2)) else []
