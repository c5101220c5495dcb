"""The targets of a CMake build folder generated for Ninja, read from its build.ninja (never run): each library and
program with its type and the object files of its sources, whose paths name the folders they come from
(`tests/CMakeFiles/foo_test.dir/t.c.o`, `CMakeFiles/pnggetset.dir/contrib/libtests/pnggetset.c.o`). What lets
a build name its library targets apart from its test programs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from crossbuild.foundation import safefs

MAX_BYTES = 64 << 20
MAX_PATHS = 8  # object files kept per target: enough to see the folders its sources are in
# CMake's Ninja generator writes a comment before each target's statements (stable since CMake 3.0)
_TARGET = re.compile(r"^# (?:Object|Link) build statements for (\w+) target (\S+)$", re.MULTILINE)
_LINK = re.compile(r"^# Link build statements for \w+ target (\S+)$", re.MULTILINE)
_BUILD = re.compile(r"^build ((?:[^\s:$]|\$.)+)", re.MULTILINE)  # a statement's first output (`$ ` escapes a space)
_OBJECT = re.compile(r"^build ((?:\S+/)?CMakeFiles/([^/\s]+)\.dir/\S+?)\.(?:o|obj):", re.MULTILINE)


def cmake_targets(root: Path, build: str = "build") -> list[dict[str, Any]]:
    """[{"name", "type" (STATIC_LIBRARY, SHARED_LIBRARY, EXECUTABLE...), "paths" (source paths of its objects,
    relative to the build folder's mirror of the source tree), "output" (what its link statement makes, relative to
    BUILD) and "built" (whether that is there now)}], in the order build.ninja has them; [] when BUILD holds no
    build.ninja."""
    text = safefs.read_text_or_none(root, f"{build}/build.ninja", max_bytes=MAX_BYTES)  # written by the build
    if text is None:
        return []
    targets: dict[str, dict[str, Any]] = {}
    for m in _TARGET.finditer(text):
        targets.setdefault(m[2], {"name": m[2], "type": m[1], "paths": []})
    for m in _LINK.finditer(text):  # the first statement after the comment is the link statement
        target, link = targets.get(m[1]), _BUILD.search(text, m.end())
        if target and link:
            target["output"] = re.sub(r"\$(.)", r"\1", link[1])
            target["built"] = _exists(root, f"{build}/{target['output']}")
    for m in _OBJECT.finditer(text):
        target = targets.get(m[2])
        if target and len(target["paths"]) < MAX_PATHS:
            target["paths"].append(m[1].replace(f"CMakeFiles/{m[2]}.dir/", ""))
    return list(targets.values())


def _exists(root: Path, rel: str) -> bool:
    """Whether ROOT/REL exists, REL as build.ninja names it (the build's writing: an absolute path or one that
    climbs out is not looked up)."""
    try:
        return safefs.lexists(root, rel)
    except safefs.UnsafePath:
        return False
