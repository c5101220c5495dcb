"""What a project's own files say, read without running anything (every read through safefs: the tree is the
build's to write): its on/off options (the CMake cache, or the declarations in its CMake files before any
configure; configure's --help; Meson's options file), its CMake projects and choice options, its config scripts,
and its Makefile's goals, cross-building switches and conditional rules."""

from __future__ import annotations

import itertools
import os
import re
import stat
from pathlib import Path
from typing import Any

from crossbuild.diagnosis import cmake_lists
from crossbuild.env import recipes
from crossbuild.foundation import safefs
from crossbuild.proof.tests_off import turns_tests_on

_TEST_FOLDER = re.compile(r"^(unit[_-]?)?(tests?|testing|testsuite|checks?)$", re.I)


def config_scripts(root: Path, source: str = "src") -> list[str]:
    """The project's copies of config.sub and config.guess (workspace-relative), which an old release ships too old
    for riscv64 or musl."""
    return sorted(f"{source}/{e.rel}" for e in safefs.walk_files(root / source, prune=lambda rel: rel.count("/") > 3)
                  if e.name in ("config.sub", "config.guess") and stat.S_ISREG(e.st.st_mode))


def configure_options(root: Path, source: str = "src") -> dict[str, str]:
    """What the project's configure script can turn off (from its --help text; the script is never run here)."""
    text = safefs.read_text_or_none(root, f"{source}/configure", max_bytes=16 << 20)
    return recipes.configure_switches(text) if text is not None else {}


def meson_options(root: Path, source: str = "src") -> dict[str, str]:
    """What the project's Meson options can turn off (from meson.options or meson_options.txt; meson is not run)."""
    for name in ("meson.options", "meson_options.txt"):  # meson 1.1 reads the first when both are there
        text = safefs.read_text_or_none(root, f"{source}/{name}", max_bytes=4 << 20)
        if text is not None:
            return recipes.meson_switches(text)
    return {}


def make_goals(root: Path, source: str = "src") -> dict[str, Any] | None:
    """The source folder's Makefile: its default goal, the goal's prerequisites, and those that are not test goals
    (read, never run)."""
    for text in recipes.makefile_texts(root, source):
        found = recipes.default_goal(text)
        if found is None:
            return None
        return {"default": found.name, "prerequisites": found.prerequisites, "has_recipe": found.has_recipe,
                "essential": found.essential()}
    return None


def make_cross_switches(root: Path, source: str = "src") -> list[str]:
    """`CROSS_BUILDING=yes` where the source folder's Makefile (or the Makefile.in configure makes it from) has
    a branch for cross-building (read, never run)."""
    found: list[str] = []
    for text in recipes.makefile_texts(root, source, templates=True):
        found += [s for s in recipes.cross_switches(text) if s not in found]
    return found


def make_conditional_rules(root: Path, source: str = "src") -> dict[str, str]:
    """The source folder's Makefile rules that exist only when a variable is set (read, never run)."""
    found: dict[str, str] = {}
    for text in recipes.makefile_texts(root, source):
        found = {**recipes.conditional_rules(text), **found}
    return found


def declared_options(root: Path, source: str = "src", max_files: int = 300) -> dict[str, str]:
    """The on/off options the project's CMake files declare (option(), cmake_dependent_option()) with their
    defaults, read from the source before any configure; never below a vendored folder."""
    out: dict[str, str] = {}
    found = (e for e in safefs.walk_files(root / source, prune=lambda rel: rel.count("/") > 4
                                          or bool(recipes.VENDORED.search(rel)))
             if e.name == "CMakeLists.txt" or e.name.endswith(".cmake"))
    for e in itertools.islice(found, max_files):
        text = safefs.read_text_or_none(root, f"{source}/{e.rel}", max_bytes=1 << 20) or ""
        for cmd in cmake_lists.commands(text):
            if cmd.name in ("option", "cmake_dependent_option") and cmd.args and cmake_lists.is_name(cmd.args[0]):
                default = cmd.args[2] if len(cmd.args) > 2 else "OFF"
                out.setdefault(cmd.args[0], default.strip('"').upper() or "OFF")
    return out


def test_variables(root: Path, source: str = "src") -> list[str]:
    """Variables the top CMakeLists.txt must find true to build the tests - an if() around enable_testing(),
    add_test() or add_subdirectory() of a test folder. Declared by an option() of that file (libyang's
    ENABLE_TESTS, off in a Release build) or by nothing (libgd's `if (BUILD_TEST) ENABLE_TESTING()`, with no cache
    entry to find): either way the project's own switch for its own tests, named by where it is used, whatever its
    name. Of `if(A OR B)`, each term that builds tests is enough."""
    text = safefs.read_text_or_none(root, f"{source}/CMakeLists.txt", max_bytes=1 << 20) or ""
    cmds = cmake_lists.commands(text)
    found: list[str] = []
    for cmd in cmds:
        if cmd.name in ("enable_testing", "add_test") or (
                cmd.name == "add_subdirectory" and cmd.args and _test_folder(cmd.args[0])):
            for branch in cmake_lists.enclosing_branches(cmds, cmd.line):
                for condition, held in branch.conditions:
                    terms = cmake_lists.switch_terms(condition.args, held) or (
                        dict.fromkeys(cmake_lists.alternatives(condition.args), True) if held else {})
                    found += [name for name, value in terms.items()
                              if value and name not in found and turns_tests_on(name)]
    return found


def _test_folder(path: str) -> bool:
    """Whether an add_subdirectory() path is a test folder: one of its parts is (dmlc-core's `test/unittest`,
    `${CMAKE_CURRENT_SOURCE_DIR}/tests`)."""
    return any(_TEST_FOLDER.search(part) for part in path.strip('"').split("/"))


def project_options(root: Path, build: str = "build") -> dict[str, str]:
    """The project's own on/off options from a configured CMake cache (not CMake's own CMAKE_* ones)."""
    return {name: value for name, (kind, value, _) in _cmake_cache(root, build).items() if kind == "BOOL"}


def cache_not_found(root: Path, build: str = "build") -> list[str]:
    """The lookups a configured CMake cache records as failed (`CMOCKA_INCLUDE_DIR:PATH=CMOCKA_INCLUDE_DIR-NOTFOUND`,
    `GTest_DIR:PATH=GTest_DIR-NOTFOUND`), not CMake's own tools (CMAKE_DLLTOOL)."""
    text = safefs.read_text_or_none(root, f"{build}/CMakeCache.txt", max_bytes=16 << 20) or ""
    return [m[1] for m in re.finditer(r"^([A-Za-z][\w.+-]{0,199}):[A-Z]+=\1-NOTFOUND$", text, re.M)
            if not m[1].startswith("CMAKE_")]


def cmake_projects(root: Path, build: str = "build") -> list[str]:
    """The names of the project's own CMake projects from a configured cache: CMAKE_PROJECT_NAME (the top level)
    first, then every project() declared in its source tree (each leaves `<name>_SOURCE_DIR`: googletest's gtest
    and gmock), never one below a vendored folder (leveldb's third_party/benchmark) or outside the tree
    (FetchContent's _deps)."""
    text = safefs.read_text_or_none(root, f"{build}/CMakeCache.txt", max_bytes=16 << 20) or ""
    top = re.search(r"^CMAKE_PROJECT_NAME:STATIC=(.*)$", text, re.M)
    home = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", text, re.M)
    names = [top.group(1).strip()] if top else []
    for name, folder in re.findall(r"^([A-Za-z][\w.+-]*)_SOURCE_DIR:STATIC=(.*)$", text, re.M):
        inside = home and folder.startswith("/") and home.group(1).startswith("/") and \
            os.path.commonpath([folder, home.group(1)]) == home.group(1)  # the cache is the build's writing
        if inside and not recipes.VENDORED.search(os.path.relpath(folder, home.group(1))) and name not in names:
            names.append(name)
    return names


def choice_options(root: Path, build: str = "build") -> dict[str, dict[str, str]]:
    """The project's options that take a word rather than ON/OFF (libgit2's USE_HTTP_PARSER, "either system or
    builtin"), with the help text that names the choices."""
    return {name: {"value": value, "help": help_} for name, (kind, value, help_) in _cmake_cache(root, build).items()
            if kind == "STRING" and help_ and not name.endswith(("_DIR", "_LIBRARY", "_INCLUDE_DIR"))}


def _cmake_cache(root: Path, build: str) -> dict[str, tuple[str, str, str]]:
    """NAME -> (type, value, help) of the project's entries in a CMake cache (the `//` lines above an entry are
    its help)."""
    text = safefs.read_text_or_none(root, f"{build}/CMakeCache.txt", max_bytes=16 << 20)  # written by the build
    if text is None:
        return {}
    out, help_ = {}, []
    for line in text.splitlines():
        if line.startswith("//"):
            help_.append(line[2:].strip())
            continue
        m = re.match(r"^([A-Za-z][A-Za-z0-9_]*):(BOOL|STRING)=(.*)$", line)
        if m and not m.group(1).startswith(("CMAKE_", "FETCHCONTENT_")):
            out[m.group(1)] = (m.group(2), m.group(3), " ".join(help_)[:300])
        help_ = []
    return out
