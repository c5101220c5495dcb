"""A failed autoconf configure read from its own records: config.log's first error names its line in the
configure script (`configure:12345: error: ...`) and, just before it, the check that failed (a header, a
pkg-config module); the script's if/case blocks around that line name the `--with-X`/`--enable-X` options that
lead there, kept when the script's own help offers the switch that turns them off."""

from __future__ import annotations

import re
from pathlib import Path

from crossbuild.diagnosis import shell_blocks
from crossbuild.diagnosis.model import Diagnosis, Switch, offered
from crossbuild.foundation import safefs

LOG_MAX_BYTES = 16 << 20
SCRIPT_MAX_BYTES = 16 << 20
LINE_MAX = 4096  # longer lines are never a check, an error or a condition autoconf wrote
_ERROR = re.compile(r"^configure:(\d+): error: (.*)$")
_PKG_EXISTS = re.compile(r"\$PKG_CONFIG --exists --print-errors \"([^\"]+)\"")
# autoconf's block for one option: `# Check whether --with-ssl was given.` ... `fi`
_GIVEN = re.compile(r"^# Check whether --(with|enable)-([\w.-]+) was given\.\n((?:.*\n){1,12}?)fi\b", re.MULTILINE)
_HEADER = re.compile(r"^[\w./+-]+\.(h|hh|hpp)$")


def read(root: Path, log_rel: str, script_rel: str) -> Diagnosis | None:
    """The diagnosis of the configure whose config.log is ROOT/LOG_REL and script ROOT/SCRIPT_REL; None when
    config.log records no error."""
    log = safefs.read_text_or_none(root, log_rel, max_bytes=LOG_MAX_BYTES) or ""
    lines = [line for line in log.splitlines() if len(line) <= LINE_MAX]
    # the first error's own line: autoconf writes `error: in `/dir':` before the message
    at, error = next(((i, m) for i, line in enumerate(lines) if (m := _ERROR.match(line))
                      and not m[2].startswith("in `")), (0, None))
    if error is None:
        return None
    lineno = int(error[1][:9])
    script = safefs.read_text_or_none(root, script_rel, max_bytes=SCRIPT_MAX_BYTES) or ""
    conditions = shell_blocks.enclosing_conditions(script, lineno)
    script_lines = script.splitlines()
    failed = script_lines[lineno - 1].strip() if 0 < lineno <= len(script_lines) else f"configure:{lineno}"
    return Diagnosis(system="autotools", failed=failed[:200], where=f"{script_rel}:{lineno}", message=error[2][:300],
                     missing=tuple(_looked_for(lines[:at])),
                     switches=tuple(_switches(conditions, script, script_rel)), record="config.log")


def _looked_for(before: list[str]) -> list[str]:
    """What the check just before the error looked for, when it failed: its pkg-config modules, or its header."""
    check, body, result = None, [], None
    for line in before:  # one pass: the last check, what ran for it, its result
        if not line.startswith("configure:"):
            body.append(line)
            continue
        text = line.split(": ", 1)[-1]
        if text.startswith("checking "):
            check, body, result = text.removeprefix("checking ").removeprefix("for ").rstrip(". "), [], None
        elif text.startswith("result: "):
            result = text.removeprefix("result: ").strip()
        else:
            body.append(line)
    if check is None or result not in ("no", "not found"):
        return []
    modules = [m for line in body for found in _PKG_EXISTS.findall(line) for m in _modules(found)]
    return list(dict.fromkeys(modules)) or ([check] if _HEADER.match(check) else [])


def _modules(spec: str) -> list[str]:
    """pkg-config module names of a requirement list: `glib-2.0 >= 2.50 gio-2.0` -> glib-2.0, gio-2.0."""
    words = spec.replace(",", " ").split()
    return [w for i, w in enumerate(words) if not re.match(r"^[<>=!]+$", w) and not (
        i and re.match(r"^[<>=!]+$", words[i - 1]))]


def _option_aliases(script: str) -> dict[str, tuple[str, str]]:
    """Variables an option's own action sets from its value (curl: `--with-ssl` sets OPT_SSL=$withval), read from
    the blocks autoconf writes for each AC_ARG_WITH/AC_ARG_ENABLE."""
    aliases: dict[str, tuple[str, str]] = {}
    for m in _GIVEN.finditer(script):
        for var in re.findall(rf"\b([A-Za-z_]\w*)=\$\{{?{m[1]}val\b", m[3]):
            aliases.setdefault(var, (m[1], m[2].replace("-", "_")))
    return aliases


def _already_off(cond: shell_blocks.Condition, variable: str) -> bool:
    """Whether COND shows VARIABLE was already "no" here (`test "x$with_zlib" = xno` held, or `!= xno` did not):
    turning it off cannot take this branch away."""
    m = re.search(rf"\$\{{?{re.escape(variable)}\}}?\"?\s*(!?=)\s*\"?x?(no|yes)\b", cond.text)
    if not m:
        return False
    says_no = (m[1] == "=") == (m[2] == "no")  # the test is true exactly when the option is no
    return says_no == cond.held


def _switches(conditions: list[shell_blocks.Condition], script: str, script_rel: str) -> list[Switch]:
    found: dict[str, Switch] = {}
    aliases = _option_aliases(script)
    for cond in conditions:
        if re.search(r"\|\||\s-o\s", cond.text):  # either side may have led here
            continue
        tested = [(kind, name, f"{kind}_{name}") for kind, name in shell_blocks.option_variables(cond.text)] + [
            (*aliases[v], v) for v in re.findall(r"\$\{?([A-Za-z_]\w*)", cond.text) if v in aliases]
        for kind, name, variable in tested:
            option = name.replace("_", "-")
            off = f"--without-{option}" if kind == "with" else f"--disable-{option}"
            if _already_off(cond, variable):
                continue
            if cond.kind == "case":
                # an option whose value chooses (avahi's --with-distro): a value its case accepts, "none" first
                values = [v for v in shell_blocks.safe_case_values(script, cond.line) if offered(option, v)]
                if not values:
                    continue
                value = next((v for v in values if v in ("none", "no")), values[0])
                off = off if value == "no" else f"--{kind}-{option}={value}"
            if not offered(option, "no"):
                continue
            if off in found or not re.search(rf"--(with|without|enable|disable)-{re.escape(option)}\b", script):
                continue
            found[off] = Switch(name=f"--{kind}-{option}", value="", arg=off,
                                why=f"`{cond.text[:120]}` at {script_rel}:{cond.line}"
                                    + ("" if cond.held else ", which was false"))
    return list(found.values())
