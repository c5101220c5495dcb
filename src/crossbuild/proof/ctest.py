"""Where CTest runs a CMake project's test programs: the WORKING_DIRECTORY its generated CTestTestfile.cmake
files give each program (libuv's tests open `test/fixtures/...` from the source folder). The files are the
build's own writing, so a folder counts only when it is a real folder inside the tree being verified."""

from __future__ import annotations

import os
import re
from pathlib import Path

from crossbuild.env.toolchain import TARGET_RUN
from crossbuild.foundation import safefs

_NAME = "CTestTestfile.cmake"
_COMMAND = re.compile(r"^\s*(add_test|set_tests_properties)\s*\((.*)\)\s*$", re.MULTILINE)
# CMake's argument forms in generated files: [=[bracket]=], "quoted" (backslash escapes), unquoted
_ARGUMENT = re.compile(r'\[(=*)\[(.*?)\]\1\]|"((?:[^"\\]|\\.)*)"|([^\s"]+)', re.DOTALL)
_UNESCAPE = re.compile(r"\\(.)")


def working_dirs(root: Path, prune: frozenset[str] = frozenset(), within: Path | None = None) -> dict[Path, Path]:
    """Each test program of the CTest files below ROOT (its absolute path) -> the folder CTest runs it in, for
    tests that name one inside WITHIN (default ROOT; the workspace, when ROOT is its build folder). The first test
    of a program decides; an emulator in front of it (CMAKE_CROSSCOMPILING_EMULATOR, crossbuild's target-run) is
    skipped. Top-level folders in PRUNE are not searched."""
    root = root.resolve()
    within = (within or root).resolve()
    found: dict[Path, Path] = {}
    for entry in safefs.walk_files(root, prune=lambda rel: rel in prune):
        if entry.name != _NAME:
            continue
        text = safefs.read_text_or_none(root, entry.rel, max_bytes=4 << 20)
        if text is None:
            continue
        programs: dict[str, Path] = {}
        for kind, body in _COMMAND.findall(text):
            args = _arguments(body)
            if kind == "add_test" and len(args) >= 2:
                program = next((Path(a) for a in args[1:] if os.path.isabs(a) and Path(a).name != TARGET_RUN),
                               None)
                if program is not None:
                    programs[args[0]] = program.resolve()
            elif kind == "set_tests_properties" and args and args[0] in programs:
                folder = _property(args, "WORKING_DIRECTORY")
                inside = _inside(within, folder) if folder else None
                if inside is not None:
                    found.setdefault(programs[args[0]], inside)
    return found


def _arguments(body: str) -> list[str]:
    return [m.group(2) if m.group(2) is not None else _UNESCAPE.sub(r"\1", m.group(3)) if m.group(3) is not None
            else m.group(4) for m in _ARGUMENT.finditer(body)]


def _property(args: list[str], name: str) -> str | None:
    try:
        values = args[args.index("PROPERTIES") + 1:]
    except ValueError:
        return None
    pairs = dict(zip(values[::2], values[1::2], strict=False))
    return pairs.get(name)


def _inside(root: Path, folder: str) -> Path | None:
    """FOLDER when it is a real folder under ROOT, reached without links; else None."""
    path = Path(folder)
    if not path.is_absolute() or ".." in path.parts or not path.is_relative_to(root):
        return None
    current = root
    for part in path.relative_to(root).parts:
        current = current / part
        if current.is_symlink() or not current.is_dir():
            return None
    return path
