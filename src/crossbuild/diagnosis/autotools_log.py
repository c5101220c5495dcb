"""A failed autoconf configure read from its own records: config.log's first error names its line in the
configure script (`configure:12345: error: ...`) and, just before it, the check that failed (a header, a
pkg-config module); the script's if/case blocks around that line name the `--with-X`/`--enable-X` options that
lead there, kept when the script's own help offers the switch that turns them off."""

from __future__ import annotations

import re
from pathlib import Path

from crossbuild.diagnosis import shell_blocks
from crossbuild.diagnosis.model import Diagnosis, Switch, offered
from crossbuild.env import build_tools
from crossbuild.foundation import safefs

LOG_MAX_BYTES = 16 << 20
SCRIPT_MAX_BYTES = 16 << 20
LINE_MAX = 4096  # longer lines are never a check, an error or a condition autoconf wrote
_ERROR = re.compile(r"^configure:(\d+): error: (.*)$")
_PKG_EXISTS = re.compile(r"\$PKG_CONFIG --exists --print-errors \"([^\"]+)\"")
# autoconf's block for one option: `# Check whether --with-ssl was given.` ... `fi`
_GIVEN = re.compile(r"^# Check whether --(with|enable)-([\w.-]+) was given\.\n((?:.*\n){1,12}?)fi\b", re.MULTILINE)
_HEADER = re.compile(r"^[\w./+-]+\.(h|hh|hpp)$")
_PROGRAM = re.compile(r"^[A-Za-z][\w.+-]{0,63}$")
_FAILED_RUN = 60  # the most checks of one run of failures read back from the error
# a result that is neither found nor failed: a backend this platform never has (a Windows-only one), passed over
_PASSED_OVER = ("disabled",)


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
    missing, programs, alternatives = _looked_for(lines[:at])
    return Diagnosis(system="autotools", failed=failed[:200], where=f"{script_rel}:{lineno}", message=error[2][:300],
                     missing=tuple(missing), programs=tuple(programs), alternatives=tuple(alternatives),
                     switches=tuple(_switches(conditions, script, script_rel)), record="config.log")


def _looked_for(before: list[str]) -> tuple[list[str], list[str], list[str]]:
    """What the failed checks just before the error looked for: pkg-config modules or a header (a dependency), or a
    program (AC_PATH_PROG: a check of one name that compiled nothing) or a Perl module the build machine's perl
    lacks (intltool's XML::Parser, whose check the error cuts short). A macro may try several ways before its
    error (AM_PATH_SDL2: pkg-config, then sdl2-config, then a version test): failed checks that name nothing are
    passed over, back to the nearest that names something (never past one that succeeded). A dependency's own
    -config script is not a program the build machine lacks, and finding the build machine's is not finding the
    target's library. Third, the alternatives: dependencies that failed checks further back in the same run looked
    for, nearest first. Configure went on past each of them, so none was required alone (a required one stops
    configure right after its own check), and an error after them all may be about any one of them (crypto
    backends: openssl, nss, gnutls, gcrypt)."""
    checks: list[tuple[str, list[str], str | None]] = []
    for line in before:  # one pass: each check, what ran for it, its result
        if not line.startswith("configure:"):
            if checks:
                checks[-1][1].append(line)
            continue
        text = line.split(": ", 1)[-1]
        if text.startswith("checking "):
            checks.append((text.removeprefix("checking ").removeprefix("for ").rstrip(". "), [], None))
        elif text.startswith("result: ") and checks:
            checks[-1] = (checks[-1][0], checks[-1][1], text.removeprefix("result: ").strip())
        elif checks:
            checks[-1][1].append(line)
    named: list[list[str]] = []  # what each failed check that names a dependency looked for, nearest first
    for n, (check, body, result) in enumerate(reversed(checks[-_FAILED_RUN:])):
        if result in _PASSED_OVER or check.endswith("-config"):
            continue
        if result not in ("no", "not found") and not (n == 0 and result is None):  # the error cut the last short
            break
        modules = [m for line in body for found in _PKG_EXISTS.findall(line) for m in _modules(found)]
        if modules or _HEADER.match(check):
            named.append(list(dict.fromkeys(modules or [check])))
            continue
        if named:  # past the nearest dependency, only other dependencies count
            continue
        module = check.removeprefix("perl module ")
        if build_tools.PERL_MODULE.match(module):  # intltool's `checking for XML::Parser`: one for perl here
            return [], [module], []
        if _PROGRAM.match(check) and not body and not check.endswith("-config"):
            return [], [check], []
    if not named:
        return [], [], []
    seen = {_library(m) for m in named[0]}
    alternatives = []
    for name in (m for names in named[1:] for m in names):
        if _library(name) not in seen:  # one library under two names (gnutls, libgnutls) is tried once
            seen.add(_library(name))
            alternatives.append(name)
    return named[0], [], alternatives


def _library(name: str) -> str:
    """The library a module or header names, for telling two names of one apart: libgnutls and gnutls."""
    return re.sub(r"^lib|[\d.]+$|\.(h|hh|hpp)$", "", name.lower())


def _modules(spec: str) -> list[str]:
    """pkg-config module names of a requirement list: `glib-2.0 >= 2.50 gio-2.0` -> glib-2.0, gio-2.0."""
    words = spec.replace(",", " ").split()
    return [w for i, w in enumerate(words) if not re.match(r"^[<>=!]+$", w) and not (
        i and re.match(r"^[<>=!]+$", words[i - 1])) and not w.startswith("$")]  # $DEPS_PKGS: logged unexpanded


def _option_aliases(script: str) -> dict[str, tuple[str, str]]:
    """Variables an option's own action sets from its value, read from the blocks autoconf writes for each
    AC_ARG_WITH/AC_ARG_ENABLE: curl's `--with-ssl` sets OPT_SSL=$withval; the autoconf manual's idiom, avahi's
    `--enable-gtk3`, sets HAVE_GTK3 in the `no)` arm of a case on the value."""
    aliases: dict[str, tuple[str, str]] = {}
    for m in _GIVEN.finditer(script):
        found = re.findall(rf"\b([A-Za-z_]\w*)=\$\{{?{m[1]}val\b", m[3])
        found += re.findall(r"^\s*no\)\s*([A-Za-z_]\w*)=", m[3], re.MULTILINE)
        for var in found:
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
