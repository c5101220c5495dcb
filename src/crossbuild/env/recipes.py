"""The standard recipe per build system (CMake, Meson, autotools, zlib-style configure, a configure that takes a
machine name (OpenSSL-style, target_configure.py), plain Make), as steps.

A recipe is what a person would type first; the agent (a later layer) starts from it and repairs what fails.
Steps are data (argv + working folder relative to the workspace), so the verifier can replay them.

Longer than ~350 lines: besides the recipes it reads the Makefile and configure facts they depend on (default goal,
cross switches, conditional rules, configure switches, Meson options), each a short reader.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from crossbuild.env import target_configure
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation import safefs

BUILD_SYSTEMS = ("cmake", "meson", "autotools", "target-configure", "configure", "make")
# cmake's modes that do not configure a project
CMAKE_NOT_CONFIGURE = frozenset({"--build", "--install", "-E", "-P", "--version", "--help", "-N", "--find-package",
                                 "--workflow", "--list-presets"})


@dataclass(frozen=True)
class BuildStep:
    argv: tuple[str, ...]
    cwd: str = "."  # relative to the workspace root
    phase: str = "build"  # prepare | configure | build | check | install
    env: tuple[tuple[str, str], ...] = ()  # extra environment on top of the BuildEnv

    def __str__(self) -> str:
        return " ".join(self.argv) + ("" if self.cwd == "." else f"   (in {self.cwd})")


# make's options whose value is the next argument (GNU make's short and long spellings)
MAKE_VALUE_OPTIONS = frozenset({"-C", "-f", "-o", "-W", "-I", "-E", "--directory", "--file", "--makefile",
                                "--include-dir", "--old-file", "--assume-old", "--what-if", "--new-file",
                                "--assume-new", "--eval"})


def make_goals(argv: Sequence[str]) -> list[str]:
    """The goals a make command names (not its options, their values, nor its VARIABLE=value arguments)."""
    goals, skip = [], False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg in MAKE_VALUE_OPTIONS:
            skip = True
        elif not arg.startswith("-") and "=" not in arg and not arg.isdigit():
            goals.append(arg)
    return goals


# goals that clean or package; and `install` with its parts (OpenSSL's install_sw, automake's install-strip)
_NOT_BUILDS = frozenset({"clean", "distclean", "mostlyclean", "maintainer-clean", "dist"})
_INSTALLS = re.compile(r"^(un)?install([_-][\w-]+)?$")


def builds_nothing(goal: str) -> bool:
    """Whether a make goal installs, cleans or packages rather than builds."""
    return goal in _NOT_BUILDS or _INSTALLS.match(goal) is not None


def make_folder(step: BuildStep) -> str:
    """The folder a make step reads its Makefile in: its cwd, then each -C (they add up, as make applies them)."""
    argv, folder = list(step.argv), Path(step.cwd)
    for i, arg in enumerate(argv[1:], 1):
        if arg in ("-C", "--directory") and i + 1 < len(argv):
            folder /= argv[i + 1]
        elif arg.startswith("--directory="):
            folder /= arg.split("=", 1)[1]
        elif arg.startswith("-C") and len(arg) > 2:
            folder /= arg[2:]
    return os.path.normpath(folder)


def make_file_named(argv: Sequence[str]) -> bool:
    """Whether a make command reads a Makefile it names (-f, --file, --makefile) rather than its folder's."""
    return any(a in ("-f", "--file", "--makefile") or a.startswith(("--file=", "--makefile=")) or
               (a.startswith("-f") and len(a) > 2) for a in argv[1:])


class NoBuildSystemError(ValueError):
    pass


def detect(source: Path) -> str:
    """The build system a person would pick first in `source`."""
    if (source / "CMakeLists.txt").exists():
        return "cmake"
    if (source / "meson.build").exists():
        return "meson"
    if (source / "configure.ac").exists() or (source / "configure.in").exists():
        return "autotools"
    if target_configure.present(source):
        return "target-configure"
    if (source / "configure").exists():
        return "autotools" if autoconf_generated(source) else "configure"
    if own_makefile(source):
        return "make"
    raise NoBuildSystemError(
        f"no build system found in {source} (looked for CMakeLists.txt, meson.build, configure.ac, Configure with "
        "Configurations/, configure, Makefile)"
    )


_MARKERS = {"cmake": ("CMakeLists.txt",), "meson": ("meson.build",), "autotools": ("configure.ac", "configure.in"),
            "configure": ("configure",), "make": ("Makefile", "makefile", "GNUmakefile")}


def present(system: str, source: Path) -> bool:
    """Whether SOURCE has the files SYSTEM needs. A `configure` autoconf wrote is autotools' (it takes --host),
    not a hand-written one's (zlib's, which takes the compilers from the environment alone)."""
    if system == "target-configure":
        return target_configure.present(source)
    if system in ("configure", "autotools") and (source / "configure").exists():
        if autoconf_generated(source):
            return system == "autotools"
        if system == "configure":
            return True
    if system == "make":
        return own_makefile(source)
    return any((source / m).exists() for m in _MARKERS.get(system, ()))


# gnulib's GNUmakefile: `include Makefile` once configure has written one, a maintainer's rules (./bootstrap) before
_INCLUDES_MAKEFILE = re.compile(r"^\s*-?include\s+Makefile\s*$", re.MULTILINE)


def own_makefile(source: Path) -> bool:
    """Whether SOURCE has a Makefile that builds by itself: a Makefile or makefile, or a GNUmakefile that is not a
    wrapper around the Makefile configure writes (gnulib's, in gnutls and most GNU packages: without that Makefile
    it runs the maintainer's bootstrap). Read below SOURCE, never through a link."""
    if any((source / n).exists() for n in ("Makefile", "makefile")):
        return True
    text = safefs.read_text_or_none(source, "GNUmakefile", max_bytes=1 << 20)
    return text is not None and not _INCLUDES_MAKEFILE.search(text)


def autoconf_generated(source: Path) -> bool:
    """Whether SOURCE/configure is autoconf's output (its opening comment says so); read below SOURCE, never
    through a link."""
    try:
        with os.fdopen(safefs.open_regular(source, "configure"), "rb") as f:
            return b"Generated by GNU Autoconf" in f.read(4096)
    except OSError:
        return False


# A folder of other projects' code inside a source tree (bundled copies, FetchContent's _deps, Meson's subprojects),
# and quilt's .pc/ (files as they were before Debian's patches) and the packaging in debian/: never the project's own.
VENDORED = re.compile(r"(^|/)(third[_-]?party|3rd[_-]?party|external|extern|vendor(ed)?|deps|_deps|bundled?|contrib|"
                      r"subprojects|\.pc|debian)(/|$)", re.IGNORECASE)

# Folders that hold a project's tests, examples or bundled third-party code, never the project itself.
_NOT_ROOTS = re.compile(r"^(\.|_)|^(tests?|testing|testsuite|examples?|demos?|samples?|docs?|debian|bench(marks?)?|"
                        r"fuzz(ing|ers?)?|third[_-]?party|vendor|deps|external|extern|contrib|cmake|m4|build-aux|"
                        r"ci|scripts?|tools?|packaging|win(32|64)?|msvc|vs\d+|android|ios)$", re.IGNORECASE)


def find_root(anchor: Path, source: str = "src", *, depth: int = 2) -> str:
    """The folder under SOURCE (relative to ANCHOR, the workspace) that holds the project's top-level build: SOURCE
    itself when it has one, else the shallowest folder down to DEPTH levels whose CMakeLists.txt calls project(),
    or that has meson.build, configure.ac, configure or a Makefile (not tests, examples, docs or bundled code).
    Read through safefs: the tree is the build's to write."""
    if detect_or_none(anchor / source):
        return source
    level = [source]
    for _ in range(depth):
        found, below = [], []
        for rel in level:
            for name in sorted(_subfolders(anchor, rel)):
                if _NOT_ROOTS.search(name):
                    continue
                sub = f"{rel}/{name}"
                (found if _is_root(anchor, sub) else below).append(sub)
        if found:
            return found[0]
        level = below
    return source


def _subfolders(anchor: Path, rel: str) -> list[str]:
    try:
        with safefs.open_dir(anchor, rel) as fd, os.scandir(fd) as entries:
            return [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _is_root(anchor: Path, rel: str) -> bool:
    system = detect_or_none(anchor / rel)
    if system != "cmake":
        return system is not None
    text = safefs.read_text_or_none(anchor, f"{rel}/CMakeLists.txt", max_bytes=1 << 20)
    return text is not None and re.search(r"^\s*project\s*\(", text, re.IGNORECASE | re.MULTILINE) is not None


def detect_or_none(source: Path) -> str | None:
    try:
        return detect(source)
    except NoBuildSystemError:
        return None


def output_dir(system: str, *, source: str = "src", build: str = "build") -> str:
    """The workspace folder the steps of `system` build into: in-tree for configure/make, else the build folder."""
    return source if system in ("configure", "make") else build


def steps_for(system: str, toolchain: Toolchain, *, source: str = "src", build: str = "build",
              jobs: int | None = None, install_prefix: str | Path | None = None,
              destdir: str | Path | None = None) -> list[BuildStep]:
    """Configure, build and install steps for `system`, relative to the toolchain's workspace. By default the
    project installs into <workspace>/install; a dependency is configured for its final prefix and installed
    into DESTDIR, to be moved into the prefix under a lock."""
    steps = _steps(system, toolchain, source, build, jobs or os.cpu_count() or 2,
                   str(install_prefix or toolchain.workspace / "install"))
    if destdir is not None:
        # the environment for CMake and Meson; an argument too for make (a Makefile's `DESTDIR =` beats the env)
        steps = [dataclasses.replace(s, env=(("DESTDIR", str(destdir)),),
                                     argv=s.argv + ((f"DESTDIR={destdir}",) if s.argv[0] == "make" else ()))
                 if s.phase == "install" else s for s in steps]
    return steps


def _steps(system: str, toolchain: Toolchain, source: str, build: str, jobs: int, stage: str) -> list[BuildStep]:
    src_abs = toolchain.workspace / source
    if system == "cmake":
        return [
            # toolchain: from the env. Release as the project knows it, but -O2 without CMake's -DNDEBUG, as
            # distributions build (Debian: -O2, no NDEBUG): test programs that check with assert() would
            # otherwise check nothing, and the verifier runs them as proof
            BuildStep(("cmake", "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                       "-DCMAKE_C_FLAGS_RELEASE=-O2", "-DCMAKE_CXX_FLAGS_RELEASE=-O2",
                       f"-DCMAKE_INSTALL_PREFIX={stage}", *toolchain.extra_args.get("cmake", ())), phase="configure"),
            BuildStep(("cmake", "--build", build, "--parallel", str(jobs))),
            BuildStep(("cmake", "--install", build), phase="install"),
        ]
    if system == "meson":
        return [
            BuildStep(("meson", "setup", build, source, "--buildtype=release", f"--prefix={stage}",
                       *toolchain.meson_args()), phase="configure"),
            BuildStep(("meson", "compile", "-C", build, "-j", str(jobs))),
            BuildStep(("meson", "install", "-C", build), phase="install"),
        ]
    if system == "autotools":
        steps = []
        if not (src_abs / "configure").exists():
            steps.append(BuildStep(("autoreconf", "-fi"), cwd=source, phase="prepare"))
        rel_configure = os.path.relpath(src_abs / "configure", toolchain.workspace / build)
        steps += [
            BuildStep(("mkdir", "-p", build), phase="prepare"),
            BuildStep((rel_configure, f"--prefix={stage}", *toolchain.configure_args()), cwd=build, phase="configure"),
            BuildStep(("make", f"-j{jobs}"), cwd=build),
            # build the check programs without running them (they are for the target); the verifier runs them. An
            # autotest suite (the autoconf manual's `check-local: ... $(SHELL) '$(TESTSUITE)' $(TESTSUITEFLAGS)`)
            # runs whatever TESTS says: asked only to list its tests, it runs none (libtool's took over 20 minutes)
            BuildStep(("make", f"-j{jobs}", "check", "TESTS=", "TESTSUITEFLAGS=--list"), cwd=build, phase="check"),
            BuildStep(("make", "install"), cwd=build, phase="install"),
        ]
        return steps
    if system == "target-configure":  # OpenSSL-style: a machine name from its table; CC/AR/RANLIB from the env
        rel_configure = os.path.relpath(src_abs / "Configure", toolchain.workspace / build)
        return [
            BuildStep(("mkdir", "-p", build), phase="prepare"),
            BuildStep((rel_configure, target_configure.machine_name(src_abs, toolchain.target), f"--prefix={stage}",
                       "--libdir=lib"), cwd=build, phase="configure"),
            BuildStep(("make", f"-j{jobs}"), cwd=build),
            BuildStep(("make", "install_sw"), cwd=build, phase="install"),  # no manual pages: host tools, minutes
        ]
    if system == "configure":  # hand-written configure scripts (zlib): in-tree, compilers from CC/AR/RANLIB
        return [
            BuildStep(("./configure", f"--prefix={stage}", *toolchain.extra_args.get("configure", ())), cwd=source,
                      phase="configure"),
            BuildStep(("make", f"-j{jobs}"), cwd=source),
            BuildStep(("make", "install"), cwd=source, phase="install"),
        ]
    if system == "make":
        cc = toolchain.env.vars
        makefiles = makefile_texts(toolchain.workspace, source, subfolders=True)
        tools = (f"CC={cc['CC']}", f"CXX={cc['CXX']}", f"AR={' '.join((cc['AR'], *archiver_flags(makefiles)))}",
                 f"RANLIB={cc['RANLIB']}")
        # a plain Makefile names its prefix PREFIX or prefix, or a name of its own set to /usr/local (Lua's
        # INSTALL_TOP); it may rebuild while installing, with the tools
        prefixes = dict.fromkeys(("PREFIX", "prefix", *install_prefix_variables(makefiles)))
        return [BuildStep(("make", f"-j{jobs}", *tools), cwd=source),
                BuildStep(("make", "install", *(f"{name}={stage}" for name in prefixes), *tools), cwd=source,
                          phase="install")]
    raise NoBuildSystemError(f"unknown build system {system!r}; choose one of {', '.join(BUILD_SYSTEMS)}")


# `AR = ar rcu`: the archiver with its operation in one variable, used as `$(AR) $@ $(OBJS)` (Lua and many
# hand-written Makefiles). Overriding AR with the archiver alone drops the operation ("zar liblua.a ...": usage).
_AR_WITH_FLAGS = re.compile(r"^[ \t]*AR[ \t]*[:?]?=[ \t]*(\S+)[ \t]+([A-Za-z]+)[ \t]*(?:#.*)?$", re.MULTILINE)
_AR_PLAIN = re.compile(r"^[ \t]*AR[ \t]*[:?]?=[ \t]*(\S+)[ \t]*(?:#.*)?$", re.MULTILINE)


def archiver_flags(makefiles: Sequence[str]) -> tuple[str, ...]:
    """The operation letters the project's Makefiles put in AR itself (`AR= ar rcu` -> ("rcu",)), to keep after the
    toolchain's archiver; () when none does, or when another Makefile sets AR to the archiver alone (its rules then
    pass their own operation)."""
    found = {m.group(2) for text in makefiles for m in _AR_WITH_FLAGS.finditer(text)
             if os.path.basename(m.group(1)).endswith("ar")}
    plain = any(_AR_PLAIN.search(text) for text in makefiles)
    return (found.pop(),) if len(found) == 1 and not plain else ()


_USR_LOCAL = re.compile(r"^[ \t]*([A-Za-z_]*(?:PREFIX|prefix|TOP|ROOT))[ \t]*[:?]?=[ \t]*/usr/local/?[ \t]*(?:#.*)?$",
                        re.MULTILINE)


def install_prefix_variables(makefiles: Sequence[str]) -> list[str]:
    """The variables a Makefile sets to /usr/local as its installation prefix, under a name of its own
    (`INSTALL_TOP= /usr/local`): `make install` must be given the stage in them, not only in PREFIX/prefix."""
    return list(dict.fromkeys(m.group(1) for text in makefiles for m in _USR_LOCAL.finditer(text)))


def makefile_texts(workspace: Path, source: str, *, subfolders: bool = False, templates: bool = False) -> list[str]:
    """The Makefile make reads in the source folder (GNUmakefile, makefile or Makefile, the first there is), and with
    SUBFOLDERS those of the folders right below it too: a top-level Makefile often only runs `$(MAKE) -C src`. With
    TEMPLATES a folder's Makefile.in (what configure makes the Makefile from) is read as well. Read through safefs,
    never following a link, bounded."""
    folders = ["."]
    if subfolders:
        try:
            with safefs.open_dir(workspace, source) as fd:
                folders += sorted(e.name for e in os.scandir(fd) if e.is_dir(follow_symlinks=False))[:64]
        except OSError:
            return []
    texts = []
    for folder in folders:
        for name in ("GNUmakefile", "makefile", "Makefile"):
            # generated Makefiles run to megabytes (OpenSSL's: 5.8 MiB); read linearly
            text = safefs.read_text_or_none(workspace, f"{source}/{folder}/{name}", max_bytes=32 << 20)
            if text is not None:
                texts.append(text)
                break
        if templates:
            template = safefs.read_text_or_none(workspace, f"{source}/{folder}/Makefile.in", max_bytes=4 << 20)
            texts += [template] if template is not None else []
    return texts


# A libtool for the target, made as Debian makes one for lua (debian/configure.ac, autoreconf, configure for the
# host architecture), for a Makefile that runs $(LIBTOOL) without setting it. The build machine's own libtool links
# shared libraries with the gcc it was configured with, whatever compiler it is handed.
LIBTOOL_FOLDER = "crossbuild-libtool"
LIBTOOL_CONFIGURE_AC = """AC_INIT([crossbuild-libtool], [1])
AC_CONFIG_AUX_DIR([.])
AC_PROG_CC
AC_PROG_CXX
LT_INIT
AC_OUTPUT
"""


def libtool_steps(folder: str, configure_args: Sequence[str]) -> list[BuildStep]:
    """The steps that make FOLDER/libtool for the target from LIBTOOL_CONFIGURE_AC written into FOLDER (the
    toolchain's compilers come from the environment; CONFIGURE_ARGS name the host and build machines)."""
    return [BuildStep(("autoreconf", "-fi"), cwd=folder, phase="prepare"),
            BuildStep(("./configure", *configure_args), cwd=folder, phase="prepare")]


_TEST_GOAL = re.compile(r"^(run)?(test|tests|check|checks|testsuite|selftest)([-_.].*)?$|[-_.](test|tests|check)$",
                        re.IGNORECASE)


# Goals that build documentation: they need host tools (xmlto, asciidoc, doxygen...) and give no target binary.
_DOC_GOAL = re.compile(r"^(docs?|documentation|man|manpages?|html|pdf|info|api-?docs?)$|\.(\d|html|pdf|info|xml)$",
                       re.IGNORECASE)
_VARIABLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(\+|:|::|\?)?=\s*(.*)$")
_REFERENCE = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]")


@dataclass(frozen=True)
class MakeGoal:
    name: str
    prerequisites: list[str]
    has_recipe: bool  # the goal runs commands of its own after its prerequisites (`all: libs progs` + `$(MAKE) -C doc`)

    def essential(self) -> list[str]:
        """The prerequisites that build the project: not its test goals (which run target programs on the build
        machine) nor its documentation goals."""
        return [p for p in self.prerequisites if not _TEST_GOAL.search(p) and not _DOC_GOAL.search(p)]


def default_goal(makefile: str) -> MakeGoal | None:
    """A Makefile's default goal and its prerequisites, read from the text (never run: $(shell) is the build's
    code). Plain variables (`UTILS = $(INSTALLABLE) gifbg`) are expanded; None when the goal or a prerequisite needs
    more of make than that (functions, substitutions, variables set elsewhere)."""
    text = makefile.replace("\\\n", " ")
    goal = None
    rules: dict[str, list[str]] = {}
    recipes_of: set[str] = set()
    variables: dict[str, str] = {}
    last: list[str] = []
    for line in text.splitlines():
        if line.startswith("\t"):
            if line.strip():
                recipes_of.update(last)
            continue
        if line.lstrip().startswith("#"):
            continue
        m = re.match(r"^\s*\.DEFAULT_GOAL\s*:?=\s*(\S+)", line)
        if m:
            goal = m.group(1)
            continue
        v = _VARIABLE.match(line)
        if v:
            name, op, value = v.groups()
            variables[name] = f"{variables.get(name, '')} {value}" if op == "+" else value
            last = []
            continue
        m = re.match(r"^([A-Za-z0-9_./+-][^:=#]*?)\s*::?(?!=)\s*([^=;#]*)", line)
        if not m or "%" in m.group(1):
            last = []
            continue
        last = m.group(1).split()
        for target in last:
            rules.setdefault(target, []).extend(_expand(m.group(2), variables).split())
            if goal is None and not target.startswith("."):
                goal = target
    if goal is None or "$" in goal or goal not in rules or any("$" in p for p in rules[goal]):
        return None
    return MakeGoal(goal, rules[goal], goal in recipes_of)


# A Makefile's own switch for cross-building: `ifeq ($(CROSS_BUILDING),yes)` (sqlite3 as Debian patches it builds
# lemon with $(BCC) only then), `ifdef CROSS_COMPILING`. Not CROSS_COMPILE, which kbuild-style Makefiles take as a
# tool prefix.
_CROSS_NAME = r"(?:IS_)?CROSS_?(?:BUILDING|COMPILING)"
_CROSS_IFEQ = re.compile(r"^\s*ifeq\s*[(\"']\s*\$[({](" + _CROSS_NAME +
                         r")[)}]\s*[,\"' ]\s*[\"']?\s*(yes|1|true)\s*[\"')]", re.IGNORECASE | re.MULTILINE)
_CROSS_IFDEF = re.compile(r"^\s*if(?:def\s+(" + _CROSS_NAME + r")\s*$|neq\s*\(\s*\$[({](" + _CROSS_NAME +
                          r")[)}]\s*,\s*\))", re.IGNORECASE | re.MULTILINE)


def cross_switches(makefile: str) -> list[str]:
    """The make arguments that turn on a Makefile's own cross-building branch (`CROSS_BUILDING=yes`), read from its
    conditionals: the variable is the project's, set by nobody else when it cross-builds."""
    found = {m.group(1): m.group(2) for m in _CROSS_IFEQ.finditer(makefile)}
    for m in _CROSS_IFDEF.finditer(makefile):
        found.setdefault(m.group(1) or m.group(2), "1")
    return [f"{name}={value}" for name, value in sorted(found.items())]


_IF_SET = re.compile(r"^\s*if(?:def\s+([A-Za-z_]\w*)\s*$|neq\s*\(\s*\$[({]([A-Za-z_]\w*)[)}]\s*,\s*\)\s*$)")
_RULE = re.compile(r"^([A-Za-z0-9_./%+-][^:=#\s]*(?:\s+[A-Za-z0-9_./%+-][^:=#\s]*)*)\s*::?(?!=)")


def conditional_rules(makefile: str) -> dict[str, str]:
    """The targets a Makefile has a rule for only when a variable is set (re2's tables under `ifdef REBUILD_TABLES`,
    whose generated sources Debian's repack removed): target or %-pattern -> the make argument that turns the
    rule on. Read, never run; only a block's own branch, not its `else`."""
    out: dict[str, str] = {}
    stack: list[str | None] = []  # per open conditional: the variable whose rules are taken, None for others
    for line in makefile.replace("\\\n", " ").splitlines():
        if line.startswith("\t"):
            continue
        m = _IF_SET.match(line)
        if m:
            stack.append(m.group(1) or m.group(2))
        elif re.match(r"^\s*if(n?eq|n?def)\b", line):
            stack.append(None)
        elif re.match(r"^\s*else\b", line) and stack:
            stack[-1] = None
        elif re.match(r"^\s*endif\b", line) and stack:
            stack.pop()
        elif stack and stack[-1] and not line.startswith(".") and (rule := _RULE.match(line)):
            for target in rule.group(1).split():
                out.setdefault(target, f"{stack[-1]}=1")
    return out


def rule_switch(target: str, rules: dict[str, str]) -> str | None:
    """The make argument that turns on the rule for TARGET among RULES (conditional_rules), or None. make names
    the object it cannot make when the missing file is that object's source (`obj/re2/perl_groups.o` for
    re2/perl_groups.cc), so the paths are compared without their extensions too, the rule's as a trailing part."""
    for pattern, switch in rules.items():
        exact = re.escape(pattern).replace("%", ".+", 1)
        stem = re.escape(_without_extension(pattern)).replace("%", ".+", 1)
        if re.fullmatch(exact, target) or re.fullmatch(f"(?:.*/)?{stem}", _without_extension(target)):
            return switch
    return None


def _without_extension(path: str) -> str:
    folder, _, name = path.rpartition("/")
    return f"{folder}/{name.split('.', 1)[0]}" if folder else name.split(".", 1)[0]


def _expand(words: str, variables: dict[str, str], depth: int = 0) -> str:
    """$(NAME) and ${NAME} replaced by plain variables' values (anything else stays, and makes the goal unknown)."""
    if depth > 10:
        return words
    return _REFERENCE.sub(lambda m: _expand(variables[m.group(1)], variables, depth + 1)
                          if m.group(1) in variables else m.group(0), words)


# Switches every configure script has; they say nothing about the project's features.
_GENERIC_SWITCHES = {"option-checking", "FEATURE", "PACKAGE", "silent-rules", "dependency-tracking", "shared",
                     "static", "fast-install", "libtool-lock", "pic", "gnu-ld", "sysroot", "aix-soname", "largefile",
                     "maintainer-mode", "rpath", "nls", "threads"}


def configure_switches(configure: str) -> dict[str, str]:
    """The features a configure script can turn off, from its --help text (read, never run): name -> the switch
    that turns it off (`--disable-examples`, `--without-zlib`)."""
    out: dict[str, str] = {}
    for m in re.finditer(r"^\s{2}--(disable|enable|without|with)-([A-Za-z0-9][\w-]*)", configure, re.MULTILINE):
        kind, name = m.groups()
        if name in _GENERIC_SWITCHES:
            continue
        off = {"disable": f"--disable-{name}", "enable": f"--disable-{name}", "without": f"--without-{name}",
               "with": f"--without-{name}"}[kind]
        if kind in ("disable", "without") or name not in out:  # "--disable-X" says X is on by default
            out[name] = off
    return out


_MESON_OPTION = re.compile(r"^\s*option\s*\(\s*'([^']+)'", re.MULTILINE)
_MESON_TYPE = re.compile(r"\btype\s*:\s*'(\w+)'")
_MESON_VALUE = re.compile(r"\bvalue\s*:\s*'?(\w+)")  # a boolean's true/false, a feature's enabled/auto/disabled


def meson_switches(options_file: str) -> dict[str, str]:
    """The features a Meson project's options file (meson.options or meson_options.txt) has on by default, each with
    the argument that turns it off: a boolean that is true (`-Dtests=false`), a feature that is enabled or auto
    (`-Dzstd=disabled`). Read as `meson introspect --buildoptions` would report them, without running meson."""
    out: dict[str, str] = {}
    starts = list(_MESON_OPTION.finditer(options_file))
    ends = [m.start() for m in starts[1:]] + ([len(options_file)] if starts else [])  # each option's text
    for m, end in zip(starts, ends, strict=True):
        body = options_file[m.end():end]
        kind, value = _MESON_TYPE.search(body), _MESON_VALUE.search(body)
        default = value.group(1) if value else None
        if kind and kind.group(1) == "boolean" and (default or "true") == "true":
            out[m.group(1)] = f"-D{m.group(1)}=false"
        elif kind and kind.group(1) == "feature" and (default or "auto") in ("enabled", "auto"):
            out[m.group(1)] = f"-D{m.group(1)}=disabled"
    return out
