"""The standard recipe per build system (CMake, Meson, autotools, zlib-style configure, plain Make), as steps.

A recipe is what a person would type first; the agent (a later layer) starts from it and repairs what fails.
Steps are data (argv + working folder relative to the workspace), so the verifier can replay them.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from crossbuild.env.toolchain import Toolchain

BUILD_SYSTEMS = ("cmake", "meson", "autotools", "configure", "make")


@dataclass(frozen=True)
class BuildStep:
    argv: tuple[str, ...]
    cwd: str = "."  # relative to the workspace root
    phase: str = "build"  # prepare | configure | build | check | install
    env: tuple[tuple[str, str], ...] = ()  # extra environment on top of the BuildEnv

    def __str__(self) -> str:
        return " ".join(self.argv) + ("" if self.cwd == "." else f"   (in {self.cwd})")


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
    if (source / "configure").exists():
        return "configure"
    if any((source / n).exists() for n in ("Makefile", "makefile", "GNUmakefile")):
        return "make"
    raise NoBuildSystemError(
        f"no build system found in {source} (looked for CMakeLists.txt, meson.build, configure.ac, configure, "
        "Makefile)"
    )


_MARKERS = {"cmake": ("CMakeLists.txt",), "meson": ("meson.build",), "autotools": ("configure.ac", "configure.in"),
            "configure": ("configure",), "make": ("Makefile", "makefile", "GNUmakefile")}


def present(system: str, source: Path) -> bool:
    """Whether SOURCE has the files SYSTEM needs."""
    return any((source / m).exists() for m in _MARKERS.get(system, ()))


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
            BuildStep(("cmake", "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                       f"-DCMAKE_INSTALL_PREFIX={stage}"), phase="configure"),
            BuildStep(("cmake", "--build", build, "--parallel", str(jobs))),
            BuildStep(("cmake", "--install", build), phase="install"),
        ]
    if system == "meson":
        return [
            BuildStep(("meson", "setup", build, source, *toolchain.meson_args(), "--buildtype=release",
                       f"--prefix={stage}"), phase="configure"),
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
            BuildStep((rel_configure, *toolchain.configure_args(), f"--prefix={stage}"), cwd=build, phase="configure"),
            BuildStep(("make", f"-j{jobs}"), cwd=build),
            # build the check programs without running them (they are for the target); the verifier runs them
            BuildStep(("make", f"-j{jobs}", "check", "TESTS="), cwd=build, phase="check"),
            BuildStep(("make", "install"), cwd=build, phase="install"),
        ]
        return steps
    if system == "configure":  # hand-written configure scripts (zlib): in-tree, compilers from CC/AR/RANLIB
        return [
            BuildStep(("./configure", f"--prefix={stage}"), cwd=source, phase="configure"),
            BuildStep(("make", f"-j{jobs}"), cwd=source),
            BuildStep(("make", "install"), cwd=source, phase="install"),
        ]
    if system == "make":
        cc = toolchain.env.vars
        return [BuildStep(("make", f"-j{jobs}", f"CC={cc['CC']}", f"CXX={cc['CXX']}", f"AR={cc['AR']}",
                           f"RANLIB={cc['RANLIB']}"), cwd=source)]
    raise NoBuildSystemError(f"unknown build system {system!r}; choose one of {', '.join(BUILD_SYSTEMS)}")


_TEST_GOAL = re.compile(r"^(run)?(test|tests|check|checks|testsuite|selftest)([-_.].*)?$|[-_.](test|tests|check)$",
                        re.IGNORECASE)


def default_goal(makefile: str) -> tuple[str, list[str]] | None:
    """A Makefile's default goal and its prerequisites, read from the text (never run: $(shell) is the build's
    code); None when the goal or a prerequisite needs make's own expansion to know."""
    text = makefile.replace("\\\n", " ")
    goal = None
    rules: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("\t") or line.lstrip().startswith("#"):
            continue
        m = re.match(r"^\s*\.DEFAULT_GOAL\s*:?=\s*(\S+)", line)
        if m:
            goal = m.group(1)
            continue
        m = re.match(r"^([A-Za-z0-9_./+-][^:=#]*?)\s*::?(?!=)\s*([^=;#]*)", line)
        if not m or "%" in m.group(1):
            continue
        for target in m.group(1).split():
            rules.setdefault(target, []).extend(m.group(2).split())
            if goal is None and not target.startswith("."):
                goal = target
    if goal is None or "$" in goal or goal not in rules or any("$" in p for p in rules[goal]):
        return None
    return goal, rules[goal]


def without_test_goals(prerequisites: list[str]) -> list[str]:
    """The prerequisites that are not test goals (which run target programs on the build machine)."""
    return [p for p in prerequisites if not _TEST_GOAL.search(p)]
