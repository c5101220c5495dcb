"""A failed autoconf configure read from its own records: config.log's first error names its line in the
configure script (`configure:12345: error: ...`) and, just before it, the check that failed (a header, a
pkg-config module); the script's if/case blocks around that line name the `--with-X`/`--enable-X` options that
lead there, kept when the script's own help offers the switch that turns them off."""

from __future__ import annotations

import re
from pathlib import Path

from crossbuild.diagnosis import shell_blocks
from crossbuild.diagnosis.model import Diagnosis, Switch
from crossbuild.foundation import safefs

LOG_MAX_BYTES = 16 << 20
SCRIPT_MAX_BYTES = 16 << 20
_ERROR = re.compile(r"^configure:(\d+): error: (.*)$", re.MULTILINE)
_CHECK = re.compile(r"^configure:\d+: checking (?:for )?(.+?)(?:\.\.\.)?\s*$", re.MULTILINE)
_RESULT = re.compile(r"^configure:\d+: result: (.*)$", re.MULTILINE)
_PKG_EXISTS = re.compile(r"\$PKG_CONFIG --exists --print-errors \"([^\"]+)\"")
# autoconf's block for one option: `# Check whether --with-ssl was given.` ... `fi`
_GIVEN = re.compile(r"^# Check whether --(with|enable)-([\w.-]+) was given\.\n((?:.*\n){1,12}?)fi\b", re.MULTILINE)
_HEADER = re.compile(r"^[\w./+-]+\.(h|hh|hpp)$")


def read(root: Path, log_rel: str, script_rel: str) -> Diagnosis | None:
    """The diagnosis of the configure whose config.log is ROOT/LOG_REL and script ROOT/SCRIPT_REL; None when
    config.log records no error."""
    log = safefs.read_text_or_none(root, log_rel, max_bytes=LOG_MAX_BYTES) or ""
    error = _ERROR.search(log)
    if not error:
        return None
    lineno = int(error[1])
    script = safefs.read_text_or_none(root, script_rel, max_bytes=SCRIPT_MAX_BYTES) or ""
    conditions = shell_blocks.enclosing_conditions(script, lineno)
    lines = script.splitlines()
    failed = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else f"configure:{lineno}"
    return Diagnosis(system="autotools", failed=failed[:200], where=f"{script_rel}:{lineno}", message=error[2][:300],
                     missing=tuple(_looked_for(log[:error.start()])),
                     switches=tuple(_switches(conditions, script, script_rel)), record="config.log")


def _looked_for(before: str) -> list[str]:
    """What the last failed check before the error looked for: its pkg-config modules, or its header."""
    checks = list(_CHECK.finditer(before))
    for check in reversed(checks):
        body = before[check.end():]
        result = _RESULT.search(body)
        if not result or result[1].strip() not in ("no", "not found"):
            continue
        modules = [m for found in _PKG_EXISTS.findall(body[:result.start()]) for m in _modules(found)]
        if modules:
            return list(dict.fromkeys(modules))
        return [check[1]] if _HEADER.match(check[1]) else []
    return []


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


def _switches(conditions: list[shell_blocks.Condition], script: str, script_rel: str) -> list[Switch]:
    found: dict[str, Switch] = {}
    aliases = _option_aliases(script)
    for cond in conditions:
        tested = shell_blocks.option_variables(cond.text) + [
            aliases[v] for v in re.findall(r"\$\{?([A-Za-z_]\w*)", cond.text) if v in aliases]
        for kind, name in tested:
            option = name.replace("_", "-")
            off = f"--without-{option}" if kind == "with" else f"--disable-{option}"
            if cond.kind == "case" and (values := shell_blocks.safe_case_values(script, cond.line)):
                # an option whose value chooses (avahi's --with-distro): a value its case accepts, "none" first
                value = next((v for v in values if v in ("none", "no")), values[0])
                off = off if value == "no" else f"--{kind}-{option}={value}"
            if off in found or not re.search(rf"--(with|without|enable|disable)-{re.escape(option)}\b", script):
                continue
            found[off] = Switch(name=f"--{kind}-{option}", value="", arg=off,
                                why=f"`{cond.text[:120]}` at {script_rel}:{cond.line}"
                                    + ("" if cond.held else ", which was false"))
    return list(found.values())
