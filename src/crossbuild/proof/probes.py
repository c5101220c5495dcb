"""Configure probes: the binaries CMake and Meson compile to check a compiler, recognised by the build systems' own
records in the build folder that made them, never by a folder name alone.

A file counts as a probe only when (1) it lies in a probe folder of a build folder of that build system (CMakeFiles/
next to a CMakeCache.txt; meson-private/ next to meson-logs/ or meson-info/), (2) that build system's record there
names it, and (3) it is no newer than that record: a binary a build step put there after the configure wrote its
record (or overwrote a real probe with) is an artifact like any other. What each build system records:
- Meson: meson-logs/meson-log.txt lists the command line of every compile it ran, with its `-o` output (the
  sanity checks' `sanity_check_for_c.exe` in meson-private/, the checks' meson-private/tmpXXXX/output.exe); a
  regeneration rewrites that log without the sanity checks, so meson-info/intro-compilers.json (each compiler
  Meson detected, for the build or the host machine) also vouches for the sanity check Meson's code compiles for
  it: `sanity_check_for_<lang>.exe`, `sanity_check_for_<lang>_cross.exe` for a cross compiler.
- CMake: try_compile's scratch folders (CMakeFiles/CMakeScratch/TryCompile-XXXX, CMakeFiles/CMakeTmp before 3.24)
  when CMakeFiles/CMakeConfigureLog.yaml (CMake >= 3.26), CMakeOutput.log or CMakeError.log names the folder; the
  compiler identification binary (CMakeFiles/<version>/CompilerId<LANG>/a.out) when those logs name it ("found
  in") and CMake<LANG>Compiler.cmake, which CMake writes from it, is next to it; the ABI check's
  CMakeFiles/<version>/CMakeDetermineCompilerABI_<LANG>.bin when that file says `CMAKE_<LANG>_ABI_COMPILED TRUE`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from crossbuild.foundation import safefs

MAX_RECORD_BYTES = 64 << 20  # a record larger than this is not read: its probes are artifacts
CMAKE_CACHE = "CMakeCache.txt"
CMAKE_LOGS = ("CMakeFiles/CMakeConfigureLog.yaml", "CMakeFiles/CMakeOutput.log", "CMakeFiles/CMakeError.log")
MESON_LOG = "meson-logs/meson-log.txt"
MESON_COMPILERS = "meson-info/intro-compilers.json"
MESON_PRIVATE = "meson-private"

# what CMake's logs say: the try_compile folder ("Change Dir: /b/CMakeFiles/CMakeScratch/TryCompile-aecSif",
# `binary: "/b/CMakeFiles/CMakeScratch/TryCompile-aecSif"`), the compiler identification binary ("found in
# "/b/CMakeFiles/3.25.1/CompilerIdC/a.out"")
_CMAKE_SCRATCH = re.compile(r"/CMakeFiles/(CMakeScratch/[^/\s\"']+|CMakeTmp)(?=[/\s\"']|$)", re.MULTILINE)
_CMAKE_COMPILER_ID = re.compile(r"/CMakeFiles/([^/\s\"']+/CompilerId[^/\s\"']+/[^\s\"']+)")
_CMAKE_ABI_BIN = re.compile(r"CMakeDetermineCompilerABI_(\w+)\.bin")
# an output in a command line meson-log.txt shows ("Command line: `zcc .../testfile.c -o .../output.exe ...` -> 0",
# "Sanity check compiler command line: /usr/bin/cc -o sanity_check_for_c.exe sanity_check_for_c.c")
_MESON_OUTPUT = re.compile(r"(?:^|[\s`])-o\s*([^\s`'\"]+)")


def _is_version(name: str) -> bool:
    return bool(name) and all(part.isdigit() for part in name.split("."))


class ProbeRecords:
    """The configure probes below ROOT, told by the records of the build folders they lie in (each read once)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._meson: dict[str, dict[str, int]] = {}
        self._cmake: dict[str, dict[str, int] | None] = {}
        self._files: dict[str, tuple[str, int] | None] = {}

    def is_probe(self, rel: str, mtime_ns: int) -> bool:
        """Whether the file REL (below ROOT), last changed at MTIME_NS, is a probe its build system recorded."""
        parts = Path(rel).parts
        for i, part in enumerate(parts[:-1]):
            build = "/".join(parts[:i])
            below = "/".join(parts[i:])
            if part == MESON_PRIVATE and mtime_ns <= self._meson_names(build).get(below, -1):
                return True
            if part == "CMakeFiles" and self._cmake_probe(build, parts[i + 1:], mtime_ns):
                return True
        return False

    # -- Meson ------------------------------------------------------------------------------------------------
    def _meson_names(self, build: str) -> dict[str, int]:
        """meson-private/... paths Meson's records in BUILD name as its compile outputs -> the record's mtime."""
        if build in self._meson:
            return self._meson[build]
        names: dict[str, int] = {}
        log = self._read(build, MESON_LOG)
        if log is not None:
            text, mtime = log
            for line in text.splitlines():
                if "command line:" not in line.lower():
                    continue
                for out in _MESON_OUTPUT.findall(line):
                    if out.startswith("/"):  # an absolute path: the part from its meson-private/ on
                        at = out.rfind(f"/{MESON_PRIVATE}/")
                        key = out[at + 1:] if at >= 0 else None
                    else:  # relative to meson-private/, where Meson runs its sanity checks
                        key = os.path.normpath(f"{MESON_PRIVATE}/{out}")
                    if key:
                        names[key] = max(names.get(key, -1), mtime)
        compilers = self._read(build, MESON_COMPILERS)
        if compilers is not None:
            text, mtime = compilers
            try:
                machines = json.loads(text)
            except ValueError:
                machines = {}
            for machine, languages in (machines.items() if isinstance(machines, dict) else ()):
                if machine not in ("build", "host") or not isinstance(languages, dict):
                    continue
                for lang in languages:
                    if not isinstance(lang, str) or not re.fullmatch(r"\w+", lang):
                        continue
                    for suffix in ("", "_cross") if machine == "host" else ("",):
                        key = f"{MESON_PRIVATE}/sanity_check_for_{lang}{suffix}.exe"
                        names[key] = max(names.get(key, -1), mtime)
        self._meson[build] = names
        return names

    # -- CMake ------------------------------------------------------------------------------------------------
    def _cmake_probe(self, build: str, rest: tuple[str, ...], mtime_ns: int) -> bool:
        """REST: the path below BUILD/CMakeFiles/."""
        if len(rest) < 2:
            return False
        if rest[0] in ("CMakeScratch", "CMakeTmp"):
            folder = "/".join(rest[:2]) if rest[0] == "CMakeScratch" else "CMakeTmp"
            if rest[0] == "CMakeScratch" and len(rest) < 3:
                return False  # a file in CMakeScratch/ itself is in no try_compile's folder
            names = self._cmake_names(build)
            return names is not None and mtime_ns <= names.get(folder, -1)
        if not _is_version(rest[0]):
            return False
        version = rest[0]
        if len(rest) >= 3 and rest[1].startswith("CompilerId"):
            lang = rest[1].removeprefix("CompilerId")
            names = self._cmake_names(build)
            return (names is not None and self._read(build, f"CMakeFiles/{version}/CMake{lang}Compiler.cmake")
                    is not None and mtime_ns <= names.get("/".join(rest), -1))
        abi = _CMAKE_ABI_BIN.fullmatch(rest[1]) if len(rest) == 2 else None
        if abi and self._cmake_names(build) is not None:
            lang = abi.group(1)
            compiler = self._read(build, f"CMakeFiles/{version}/CMake{lang}Compiler.cmake")
            return (compiler is not None and f"set(CMAKE_{lang}_ABI_COMPILED TRUE)" in compiler[0]
                    and mtime_ns <= compiler[1])
        return False

    def _cmake_names(self, build: str) -> dict[str, int] | None:
        """What CMake's logs in BUILD name (try_compile folders and compiler identification binaries, below
        CMakeFiles/) -> the newest mtime of a log naming it; None when BUILD is no CMake build folder."""
        if build in self._cmake:
            return self._cmake[build]
        names: dict[str, int] | None = None
        if safefs.is_regular(self.root, f"{build or '.'}/{CMAKE_CACHE}"):
            names = {}
            for log in CMAKE_LOGS:
                found = self._read(build, log)
                if found is None:
                    continue
                text, mtime = found
                for key in [*_CMAKE_SCRATCH.findall(text), *_CMAKE_COMPILER_ID.findall(text)]:
                    names[key] = max(names.get(key, -1), mtime)
        self._cmake[build] = names
        return names

    # -- the records, read without following links --------------------------------------------------------------
    def _read(self, build: str, rel: str) -> tuple[str, int] | None:
        """The text and mtime of the regular file BUILD/REL below ROOT, or None (missing, a link, too large)."""
        path = f"{build}/{rel}" if build else rel
        if path not in self._files:
            try:
                fd = safefs.open_regular(self.root, path, max_bytes=MAX_RECORD_BYTES)
            except OSError:
                self._files[path] = None
            else:
                with os.fdopen(fd, "rb") as f:
                    mtime = os.fstat(f.fileno()).st_mtime_ns
                    self._files[path] = (f.read(MAX_RECORD_BYTES).decode("utf-8", errors="replace"), mtime)
        return self._files[path]
