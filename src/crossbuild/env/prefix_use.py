"""Which of the dependencies a shared prefix records a build in a workspace used.

The per-target prefix is shared across runs, so it holds what earlier builds brought (glib, pcre2, ...). The
build-machine check must rebuild for the build machine what *this* build took from the prefix, not all of it: every
extra one costs minutes, and one that cannot be built for the build machine would leave a test that fails only
under the emulator unexplained. What a build used is read from the records its build system leaves - CMake's cache
and link lines, build.ninja and its deps log, Makefiles, config.status, compilers' depfiles, libtool archives -
looking for a recorded dependency's library (`-lNAME`, `libNAME.so`/`.a`), one of its include folders or headers,
or its CMake package folder. A mention the check does not need costs only time; a use it misses leaves the check
unavailable, as it was before, for that build only.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Iterable
from pathlib import Path

from crossbuild.env import dependency_cache
from crossbuild.foundation import safefs

# files a build system writes that name what it found or linked
_RECORD_NAMES = frozenset({"CMakeCache.txt", "build.ninja", ".ninja_deps", "link.txt", "flags.make",
                           "compiler_depend.make", "depend.make", "Makefile", "config.status",
                           "intro-dependencies.json"})
_RECORD_SUFFIXES = (".d", ".Po", ".Plo", ".la", ".pc")
_MAX_FILE = 64 << 20
_MAX_TOTAL = 512 << 20
_TOP_SKIPPED = {".xbuild", ".scratch"}  # crossbuild's own files, the builds' HOME and caches
_LIBRARY = re.compile(r"(?:lib|lib64|lib/[^/]+)/lib([^/]+?)\.(?:so(?:\.[0-9.]+)?|a|dll\.a|dylib)")
_INCLUDE = re.compile(r"include/([^/]+)(/)?")
_CMAKE_PACKAGE = re.compile(r"((?:lib|lib64|share)/cmake/[^/]+)/")


def markers(files: Iterable[str]) -> set[str]:
    """Regular expressions (as text) any of which, found in a build's records, says it used a dependency whose
    prefix record lists FILES."""
    found = set()
    for rel in files:
        if m := _LIBRARY.fullmatch(rel):
            name = re.escape(m.group(1))
            found.add(rf"-l{name}(?![\w.+-])|lib{name}\.(?:so|a|la|dylib)(?!\w)")
        elif m := _INCLUDE.match(rel):
            found.add(rf"include/{re.escape(m.group(1))}" + ("/" if m.group(2) else r"(?![\w.+-])"))
        elif m := _CMAKE_PACKAGE.match(rel):
            found.add(rf"{re.escape(m.group(1))}(?![\w.+-])")
    return found


def records_text(workspace: Path) -> Iterable[bytes]:
    """The contents of WORKSPACE's build-system records (read without following links; sizes bounded)."""
    total = 0
    for entry in safefs.walk_files(workspace, prune=lambda rel: rel in _TOP_SKIPPED):
        if not (entry.name in _RECORD_NAMES or entry.name.endswith(_RECORD_SUFFIXES)) \
                or not stat.S_ISREG(entry.st.st_mode) or entry.st.st_size > _MAX_FILE:
            continue
        total += entry.st.st_size
        if total > _MAX_TOTAL:
            return
        try:
            yield safefs.read_bytes(workspace, entry.rel, max_bytes=_MAX_FILE)
        except OSError:
            continue


def used_sources(prefix: Path, workspace: Path) -> list[tuple[str, str | None]]:
    """(Debian source, version) of each dependency PREFIX records that the builds in WORKSPACE used."""
    named = {(r.source, r.version): markers(r.files) for r in dependency_cache.recorded(prefix)}
    left = {key: re.compile("|".join(sorted(found)).encode()) for key, found in named.items() if found}
    used: set[tuple[str, str | None]] = set()
    for text in records_text(workspace):
        for key, pattern in list(left.items()):
            if pattern.search(text):
                used.add(key)
                del left[key]
        if not left:
            break
    return sorted(used, key=lambda k: (k[0], k[1] or ""))
