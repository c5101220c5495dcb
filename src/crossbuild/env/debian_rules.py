"""What a Debian source package's `debian/rules` says about its build: the build system dh is told to use, the
source and build folders, and the literal arguments its configure step passes. Read as text, never run (the file is
the build's to write, and a Makefile can run anything): hints for build_status and the planner, not a recipe.

Only what can be read without evaluating make is taken: `$(VAR)` is expanded when VAR is assigned plainly outside
any conditional; arguments that still hold a `$`, or name a host path, are left out and counted as dropped.

Longer than ~350 lines: one reader of one file; each hint (dh's options, configure and make arguments, cross
exports, echoed files) is a short function over the same logical lines and plain variables.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crossbuild.foundation import safefs

# dh's build system names -> crossbuild's recipes (`dh --list` lists the others: pybuild, qmake, cargo, ...)
_SYSTEMS = {"cmake": "cmake", "cmake+makefile": "cmake", "cmake+ninja": "cmake", "meson": "meson",
            "meson+ninja": "meson", "autoconf": "autotools", "makefile": "make"}
_CONDITIONAL_OPEN = re.compile(r"^\s*(ifeq|ifneq|ifdef|ifndef)\b")
_CONDITIONAL_END = re.compile(r"^\s*endif\b")
_CONDITIONAL_ELSE = re.compile(r"^\s*else\b")
# `ifeq ($(DEB_BUILD_GNU_TYPE),$(DEB_HOST_GNU_TYPE))` and the ARCH forms: the branch a cross build takes
_CROSS_TEST = re.compile(r"^\s*(ifeq|ifneq)\s*\(\s*\$\(DEB_(BUILD|HOST)_(GNU_TYPE|ARCH)\)\s*,\s*"
                         r"\$\(DEB_(BUILD|HOST)_(GNU_TYPE|ARCH)\)\s*\)")
# what crossbuild's toolchain sets itself: Debian's cross values for these name its own cross tools
_TOOLCHAIN_VARIABLES = re.compile(r"^(CC|CXX|CPP|AR|AS|LD|NM|RANLIB|STRIP|OBJCOPY|OBJDUMP|PKG_CONFIG\w*|\w*FLAGS|"
                                  r"PATH|HOME|SHELL|\w*_FOR_BUILD|HOST_\w+|BUILD_\w+|DEB_\w+|DH_\w+)$")
_ASSIGNMENT = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(\+=|:=|\?=|=)\s*(.*)$")
_REFERENCE = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]")
_PKG_INFO = re.compile(r"^[ \t]*-?include[ \t]+/usr/share/dpkg/(pkg-info|default)\.mk[ \t]*$", re.MULTILINE)
_CHANGELOG_TOP = re.compile(r"^[a-z0-9][a-z0-9.+-]* \(([0-9][A-Za-z0-9.+~:-]{0,80})\) ")  # `name (version) dist;`
_CURDIR = "@CURDIR@"  # the package root, where make runs debian/rules
_DH_COMMAND = re.compile(r"^\s*-?(dh|dh_auto_configure|dh_auto_build)\s")
_FOLDER_OPTIONS = {"--sourcedirectory": "sourcedir", "--sourcedir": "sourcedir", "-D": "sourcedir",
                   "--builddirectory": "builddir", "-B": "builddir",
                   "--buildsystem": "buildsystem", "-S": "buildsystem"}


@dataclass(frozen=True)
class DebianRules:
    buildsystem: str | None = None  # as dh names it: cmake, autoconf, makefile, meson, pybuild, ...
    sourcedir: str | None = None  # relative to the package root
    builddir: str | None = None
    autoreconf: bool | None = None  # `--with autoreconf` / `--without autoreconf`; None when rules do not say
    configure_args: tuple[str, ...] = ()  # after `dh_auto_configure --`, the first unconditional call
    dropped_args: tuple[str, ...] = field(default=())  # made of make variables or host paths
    # `export NAME = value` in the branch a cross build takes (sqlite3: CROSS_BUILDING=yes, so its Makefile builds
    # lemon for the build machine), literal values only, never a toolchain variable
    cross_env: tuple[tuple[str, str], ...] = ()
    # after `dh_auto_build --`: make goals and NAME=value variables (http-parser: `package library`; re2:
    # REBUILD_TABLES=1), only from calls whose arguments are all plain goals or literal variables
    build_args: tuple[str, ...] = ()
    # debian/changelog's upstream version, when debian/rules includes dpkg's pkg-info.mk: Debian passes it where a
    # release tarball has no git to read it from (benchmark: -DGIT_VERSION="$(DEB_VERSION_UPSTREAM)")
    upstream_version: str | None = None
    # files the rules write with plain `echo ... > FILE` lines (lua5.4: src/lua5.4-deb-multiarch.h, which Debian's
    # luaconf.h patch includes): path below the package root -> content, Debian's host variables left as $(NAME)
    written_files: tuple[tuple[str, str], ...] = ()

    def files_written(self, host: dict[str, str]) -> dict[str, str]:
        """written_files with Debian's host variables (DEB_HOST_MULTIARCH...) given their values in HOST; a file
        whose content still holds another reference is left out."""
        out = {}
        for path, content in self.written_files:
            filled = _REFERENCE.sub(lambda m: host.get(m.group(1), m.group(0)), content)
            if "$" not in filled:
                out[path] = filled
        return out

    @property
    def system(self) -> str | None:
        """crossbuild's recipe for dh's build system: autoconf with `--without autoreconf` runs the shipped
        configure; a build system crossbuild has no recipe for is None."""
        system = _SYSTEMS.get(self.buildsystem or "")
        return "configure" if system == "autotools" and self.autoreconf is False else system

    def describe(self) -> str:
        said = [f"dh --buildsystem={self.buildsystem}" if self.buildsystem else "dh picks the build system itself"]
        if self.sourcedir:
            said.append(f"source folder {self.sourcedir}/")
        if self.autoreconf is not None:
            said.append(f"{'with' if self.autoreconf else 'without'} autoreconf")
        if self.configure_args:
            said.append(f"configure arguments: {shlex.join(self.configure_args)}")
        if self.dropped_args:
            said.append(f"{len(self.dropped_args)} arguments left out (make variables or host paths)")
        if self.cross_env:
            said.append("when cross-building: " + " ".join(f"{k}={v}" for k, v in self.cross_env))
        if self.build_args:
            said.append(f"make: {shlex.join(self.build_args)}")
        if self.written_files:
            said.append(f"writes {', '.join(path for path, _ in self.written_files)}")
        return "; ".join(said)


def file_named(paths: Iterable[str], name: str) -> str | None:
    """The path among PATHS (files debian/rules writes) that a build's missing NAME is: its file name, with or
    without .h (the knowledge base names a missing header without it)."""
    return next((path for path in paths if path.rpartition("/")[2] in (name, f"{name}.h")), None)


def read(anchor: Path, rel: str = "src") -> DebianRules | None:
    """The hints in ANCHOR/REL/debian/rules, or None when there is no such file (read through safefs, bounded)."""
    try:
        text = safefs.read_text(anchor, f"{rel}/debian/rules", max_bytes=1 << 20)
    except (OSError, ValueError):
        return None
    try:  # its first line names the version; the whole file is the package's history
        top = safefs.read_page(anchor, f"{rel}/debian/changelog", offset=0, size=512)[0]
    except OSError:
        top = b""
    return parse(text, top.decode("utf-8", "replace").split("\n", 1)[0])


def parse(text: str, changelog_top: str = "") -> DebianRules:
    """The hints of debian/rules TEXT; CHANGELOG_TOP, debian/changelog's first line, gives dpkg's pkg-info.mk
    version variables their values when the rules include it."""
    lines = _logical_lines(text)
    variables = _plain_variables(lines)
    upstream = None
    if _PKG_INFO.search(text) and (version := _CHANGELOG_TOP.match(changelog_top)):
        full = version.group(1)  # [epoch:]upstream[-revision]; a native package has no revision
        no_epoch = re.sub(r"^\d+:", "", full)
        upstream = no_epoch.rsplit("-", 1)[0]
        variables = {"DEB_VERSION": full, "DEB_VERSION_UPSTREAM": upstream,
                     "DEB_VERSION_EPOCH_UPSTREAM": full.rsplit("-", 1)[0],
                     "DEB_VERSION_UPSTREAM_REVISION": no_epoch} | variables
    found: dict[str, str] = {}
    autoreconf: bool | None = None
    configure: tuple[list[str], list[str]] | None = None
    build: list[str] = []
    depth, target = 0, ""
    for line in lines:
        if _CONDITIONAL_OPEN.match(line):
            depth += 1
            continue
        if _CONDITIONAL_END.match(line):
            depth = max(0, depth - 1)
            continue
        if not line.startswith("\t") and ":" in line and not _ASSIGNMENT.match(line):
            target = line.split(":", 1)[0].strip()  # the rule whose recipe follows
        m = _DH_COMMAND.match(line)
        if not m or target.endswith("-indep"):  # -indep rules build documentation, not the library
            continue
        options, rest = _split_at_dashdash(_words(_expand(line, variables))[1:])
        for key, value in _options(options):
            if key in ("with", "without"):
                autoreconf = (key == "with") if "autoreconf" in value.split(",") else autoreconf
                continue
            value = value.replace(f"{_CURDIR}/", "").strip("/")
            if not value or "$" in value or _CURDIR in value:
                continue
            if key == "buildsystem" and found.get(key) in _SYSTEMS:
                continue  # brotli: pybuild in one branch, cmake in the other; crossbuild can use the latter
            if key not in found or (key == "buildsystem" and value in _SYSTEMS):
                found[key] = value
        if m.group(1) == "dh_auto_configure" and configure is None and depth == 0 and rest is not None:
            configure = _literal(rest)
        if m.group(1) == "dh_auto_build" and depth == 0 and rest:
            build += _goals_and_variables(rest)
    kept, dropped = configure or ([], [])
    return DebianRules(buildsystem=found.get("buildsystem"), sourcedir=found.get("sourcedir"),
                       builddir=found.get("builddir"), autoreconf=autoreconf, configure_args=tuple(kept),
                       dropped_args=tuple(dropped), cross_env=_cross_exports(lines),
                       build_args=tuple(dict.fromkeys(build)), written_files=_echoed_files(lines, variables),
                       upstream_version=upstream)


def _cross_exports(lines: list[str]) -> tuple[tuple[str, str], ...]:
    """`export NAME = value` lines that a cross build takes and a native build does not: inside the cross branch
    of a build-versus-host test, with no other condition around them."""
    branches: list[str] = []  # per open conditional: "cross", "native" or "other"
    out: dict[str, str] = {}
    for line in lines:
        if m := _CROSS_TEST.match(line):
            branches.append("native" if m.group(1) == "ifeq" else "cross")
        elif _CONDITIONAL_OPEN.match(line):
            branches.append("other")
        elif _CONDITIONAL_ELSE.match(line) and branches:
            branches[-1] = {"cross": "native", "native": "cross"}.get(branches[-1], "other")
        elif _CONDITIONAL_END.match(line) and branches:
            branches.pop()
        elif branches and set(branches) == {"cross"} and not line.startswith("\t") \
                and line.lstrip().startswith("export "):
            m = _ASSIGNMENT.match(line.strip())
            if m and m.group(2) in ("=", ":=", "?=") and not _TOOLCHAIN_VARIABLES.match(m.group(1)):
                value = m.group(3).strip()
                if value and not re.search(r"[$/`\\\s]", value):
                    out[m.group(1)] = value
    return tuple(out.items())


_ECHO_TARGET = re.compile(r"^[\w.+-]+(/[\w.+-]+)*$")  # a relative path in the package, no `..` climbing


def _echoed_files(lines: list[str], variables: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The files unconditional recipe lines write with a plain `echo WORDS > FILE` (`>>` appends): no echo option,
    no other shell operator, a relative path made of plain variables. Contents keep references to variables
    crossbuild does not know ($(DEB_HOST_MULTIARCH)), for files_written to fill in or refuse."""
    files: dict[str, str] = {}
    for line in _unconditional(lines):
        if line.startswith("\t") and (written := _echo_line(_expand(line.strip(), variables))):
            path, append, text = written
            files[path] = (files.get(path, "") if append else "") + text + "\n"
    return tuple((path, content) for path, content in files.items() if len(content) <= 64 * 1024)


def _echo_line(line: str) -> tuple[str, bool, str] | None:
    """(path, appends, text) for `echo WORDS > PATH` or `>> PATH`, else None."""
    lexer = shlex.shlex(line.lstrip("@-"), posix=True, punctuation_chars="|&;<>()`")
    lexer.whitespace_split, lexer.commenters = True, ""
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    if len(tokens) < 3 or tokens[0] != "echo" or tokens[-2] not in (">", ">>"):
        return None
    words, path = tokens[1:-2], tokens[-1].removeprefix("./")
    if any(w.startswith("-") or set(w) <= set("|&;<>()`") for w in words) or not _ECHO_TARGET.match(path) \
            or ".." in path.split("/"):
        return None
    return path, tokens[-2] == ">>", " ".join(words)


def _logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined, without comments (a `#` inside a recipe line is the shell's)."""
    lines = []
    for raw in re.sub(r"\\\n\s*", " ", text).splitlines():
        if raw.lstrip().startswith("#"):
            continue
        line = raw if raw.startswith("\t") else raw.split(" #", 1)[0]
        if line.strip():
            lines.append(line.rstrip())
    return lines


def _unconditional(lines: list[str]):
    """The lines outside any make conditional (the conditionals' own lines left out)."""
    depth = 0
    for line in lines:
        if _CONDITIONAL_OPEN.match(line):
            depth += 1
        elif _CONDITIONAL_END.match(line):
            depth = max(0, depth - 1)
        elif depth == 0:
            yield line


def _plain_variables(lines: list[str]) -> dict[str, str]:
    """VAR = value assignments outside conditionals (`+=` appends), in file order."""
    variables: dict[str, str] = {}
    for line in _unconditional(lines):
        if not line.startswith("\t") and (m := _ASSIGNMENT.match(line)):
            name, op, value = m.groups()
            if op == "+=" and name in variables:
                variables[name] = f"{variables[name]} {value}".strip()
            elif op != "?=" or name not in variables:
                variables[name] = value.strip()
    return variables


def _expand(text: str, variables: dict[str, str], depth: int = 0) -> str:
    """TEXT with `$(VAR)`/`${VAR}` of plain variables substituted; any other reference (`$(shell ...)`, `$@`,
    `$$x`, a variable set conditionally) becomes one word holding `$`, so it is never mistaken for an argument."""
    out, i = [], 0
    while i < len(text):
        if text[i] != "$":
            out.append(text[i])
            i += 1
            continue
        if text[i + 1:i + 2] in ("(", "{"):
            level, j = 0, i + 1
            while j < len(text):
                level += text[j] in "({"
                level -= text[j] in ")}"
                if level == 0:
                    break
                j += 1
            name = text[i + 2:j]
            if name == "CURDIR":
                out.append(_CURDIR)
            elif name in variables and depth < 5:
                out.append(_expand(variables[name], variables, depth + 1))
            else:
                out.append("$(" + re.sub(r"\s+", "_", name) + ")")
            i = j + 1
        else:
            out.append(text[i:i + 2].replace(" ", "") or "$")
            i += 2
    return "".join(out)


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)  # recipe lines are shell: `# ...` ends them
    except ValueError:
        return line.split()


def _split_at_dashdash(words: list[str]) -> tuple[list[str], list[str] | None]:
    if "--" in words:
        i = words.index("--")
        return words[:i], words[i + 1:]
    return words, None


def _options(words: list[str]):
    """(key, value) for dh's folder and build-system options and `--with/--without`, in their spellings:
    --opt=value, --opt value, -Bvalue, -B value, -O--opt=value."""
    i = 0
    while i < len(words):
        word = words[i].removeprefix("-O")
        name, eq, value = word.partition("=")
        if name in ("--with", "--without"):
            value = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            i += 0 if eq else 1
            yield name.lstrip("-"), value
        elif name in _FOLDER_OPTIONS:
            if not eq:
                value = words[i + 1] if i + 1 < len(words) else ""
                i += 1
            yield _FOLDER_OPTIONS[name], value
        elif word[:2] in ("-B", "-D", "-S") and len(word) > 2 and not word.startswith("--"):
            yield _FOLDER_OPTIONS[word[:2]], word[2:]
        i += 1


def _goals_and_variables(words: list[str]) -> list[str]:
    """A dh_auto_build call's make arguments when every one is a plain goal or a literal NAME=value that is not a
    toolchain variable (crossbuild sets those); nothing when any is an option (`-f makefile.shared`) or made of
    make variables, since then the call means what crossbuild cannot see."""
    out = []
    for word in words:
        m = _ASSIGNMENT.match(word)
        if word.startswith("-") or "$" in word or _CURDIR in word or "/" in word:
            return []
        if m and m.group(2) == "=":
            if not _TOOLCHAIN_VARIABLES.match(m.group(1)):
                out.append(word)
        elif re.fullmatch(r"[\w.+-]+", word):
            out.append(word)
        else:
            return []
    return out


def _literal(words: list[str]) -> tuple[list[str], list[str]]:
    """The configure arguments that are plain text, and the ones left out (unknown make variables, host paths,
    paths in the package crossbuild cannot place)."""
    kept, dropped = [], []
    for word in words:
        value = word.split("=", 1)[-1]
        if "$" in word or _CURDIR in word or value.startswith("/") or word.startswith("/"):
            dropped.append(word)
        else:
            kept.append(word)
    return kept, dropped
