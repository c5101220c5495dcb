"""A failed configure diagnosed from the build system's own records (issue 36). CMake's configure is run again, as
it was, with its JSON trace on, and crossbuild.diagnosis reads the trace, the project's files and the cache (the
rerun is the same command in the same sandbox and environment; its output goes to a log of its own, and it is not
recorded as a build step, so a clean rebuild never replays it). An autoconf configure left config.log and its
script: they are read as they are."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from crossbuild.diagnosis import autotools_log, cmake_trace, meson_log
from crossbuild.diagnosis.model import Diagnosis
from crossbuild.env import dependency_names, recipes
from crossbuild.foundation import safefs
from crossbuild.tools.context import RunContext

TRACE_NAME = "crossbuild-configure-trace.json"
RERUN_TIMEOUT_S = 600.0


def failed_configure(ctx: RunContext, argv: list[str], cwd: Path, env: dict[str, str], log: str, *,
                     took_s: float = 60.0) -> Diagnosis | None:
    """The diagnosis of the failed command ARGV (run in CWD, a real folder in the workspace, with ENV, its output
    LOG, in TOOK_S seconds) when it is a configure whose records name what failed, else None. The records are the
    build's to write: anything a reader trips on raises DiagnosisFailed, which the caller shows beside the
    command's own result, never in its place."""
    try:
        found = _diagnose(ctx, argv, cwd, env, log, took_s)
    except Exception as e:  # noqa: BLE001 - any reader failure on hostile records, MemoryError included
        raise DiagnosisFailed(f"{type(e).__name__}: {e}"[:300]) from e
    if found is None:
        return None
    return dataclasses.replace(found, missing=tuple(dependency_names.buildable_name(n) for n in found.missing))


class DiagnosisFailed(Exception):
    pass


def _diagnose(ctx: RunContext, argv: list[str], cwd: Path, env: dict[str, str], log: str,
              took_s: float) -> Diagnosis | None:
    root = ctx.root.resolve()  # crossbuild made it; every path below is taken apart lexically, never resolved
    if _below(root, cwd) is None:
        return None
    if Path(argv[0]).name == "configure":
        return _autotools(root, argv[0], cwd)
    if Path(argv[0]).name == "cmake" and not recipes.CMAKE_NOT_CONFIGURE & set(argv[1:]) and "CMake Error" in log:
        return _cmake(ctx, root, argv, cwd, env, log, took_s)
    if Path(argv[0]).name == "meson" and "setup" in argv[1:2] and "ERROR:" in log:
        return _meson(root, argv[2:], cwd, log)
    return None


def _below(root: Path, path: Path | str) -> str | None:
    """PATH (absolute) as a path below ROOT, taken apart lexically; None outside it. No link is followed here:
    safefs refuses one when the path is read."""
    rel = os.path.relpath(os.path.normpath(path), root)
    return None if rel == ".." or rel.startswith("../") or os.path.isabs(rel) else rel


# meson setup's options that take their value as the next argument (the others are flags or NAME=VALUE)
_MESON_FLAGS = {"--reconfigure", "--wipe", "--werror", "--strip", "--fatal-meson-warnings", "--clearcache",
                "--vsenv", "-v", "--errorlogs", "--stdsplit"}


def _meson(root: Path, args: list[str], cwd: Path, log: str) -> Diagnosis | None:
    """`meson setup [OPTIONS] BUILD [SOURCE]`: the source folder is the second folder named, else CWD."""
    folders, i = [], 0
    while i < len(args):
        a = args[i]
        if a.startswith("-"):
            i += 1 if "=" in a or a in _MESON_FLAGS or (a.startswith("-D") and len(a) > 2) else 2
            continue
        folders.append(a)
        i += 1
    source = _below(root, cwd / folders[1]) if len(folders) > 1 else _below(root, cwd)
    return meson_log.read(root, log, cwd=_below(root, cwd), source=source) if source is not None else None


def _autotools(root: Path, script: str, cwd: Path) -> Diagnosis | None:
    script_rel, log_rel = _below(root, cwd / script), _below(root, cwd / "config.log")
    if script_rel is None or log_rel is None:
        return None
    return autotools_log.read(root, log_rel, script_rel)


def _cmake(ctx: RunContext, root: Path, argv: list[str], cwd: Path, env: dict[str, str], log: str,
           took_s: float) -> Diagnosis | None:
    build_arg, source_arg = _folders(argv[1:])
    build_rel = _below(root, cwd / (build_arg or "."))
    if build_rel is None or not safefs.is_dir(root, Path(build_rel) / "CMakeFiles"):
        return None
    cache = safefs.read_text_or_none(root, Path(build_rel) / "CMakeCache.txt", max_bytes=cmake_trace.FILE_MAX_BYTES)
    given = _below(root, cwd / source_arg) if source_arg else None
    # a folder given alone may be a build folder (`cmake .` to configure again): its cache names the source
    source_rel = given if given is not None and safefs.is_regular(root, Path(given) / "CMakeLists.txt") else (
        _below(root, home) if (home := _cache_home(cache)) else None)
    if source_rel is None:
        return None
    trace_rel = Path(build_rel) / "CMakeFiles" / TRACE_NAME
    # whatever the first configure left in the trace's place (a FIFO would stall the rerun) is replaced by a new
    # empty file; cmake opens it before the project's code runs again
    if safefs.lexists(root, trace_rel):
        safefs.remove_tree(root, trace_rel)
    os.close(safefs.create_new(root, trace_rel))
    limit = min(ctx.command_limits.timeout_s, RERUN_TIMEOUT_S, max(60.0, 4 * took_s))
    try:
        ctx.sandbox.run([*argv, *cmake_trace.TRACE_ARGS, f"--trace-redirect={root / trace_rel}"], cwd=cwd,
                        env={**ctx.toolchain.env.as_dict(), **env}, log_path=ctx.next_log("cmake-trace"),
                        limits=dataclasses.replace(ctx.command_limits, timeout_s=limit), cancel=ctx.cancel)
        cache = safefs.read_text_or_none(root, Path(build_rel) / "CMakeCache.txt",
                                         max_bytes=cmake_trace.FILE_MAX_BYTES)
        return cmake_trace.read((root, str(trace_rel)), log, root=root, source=source_rel, cache=cache)
    finally:
        try:
            safefs.remove_tree(root, trace_rel)
        except OSError:
            pass


def _folders(args: list[str]) -> tuple[str | None, str | None]:
    """(build folder, source folder) named by a cmake configure's arguments (-B/-S, or a folder given alone, as
    `cmake ../src` in the build folder), each None when not named."""
    build = source = None
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-B", "-S") and i + 1 < len(args):
            build, source = (args[i + 1], source) if a == "-B" else (build, args[i + 1])
            i += 1
        elif a.startswith(("-B", "-S")) and len(a) > 2:
            build, source = (a[2:], source) if a[1] == "B" else (build, a[2:])
        elif a in ("-G", "-T", "-A", "-C", "--preset") and i + 1 < len(args):
            i += 1
        elif not a.startswith("-") and source is None:
            source = a
        i += 1
    return build, source


def _cache_home(cache: str | None) -> Path | None:
    """The source folder the cache names (CMAKE_HOME_DIRECTORY)."""
    for line in (cache or "").splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:"):
            return Path(line.split("=", 1)[1])
    return None


_ERROR_LINE = re.compile(r"\berror\b|\bError \d+\b|\bfatal\b|\bundefined reference\b|\bcannot\b|"
                         r"\bPermission denied\b|\bNo such file or directory\b|\bRead-only file system\b|"
                         r"\bcommand not found\b", re.IGNORECASE)
# make's own reason to stop (`make: *** No rule to make target 'x'.  Stop.`), not a recipe's `[x] Error 1`
_MAKE_STOP = re.compile(r"^g?make(\[\d+\])?: \*\*\* (?!\[).*Stop\.\s*$")


def failure_hint(argv: list[str], lines: list[str], log: str) -> str:
    """Where to look in a failed command's log; for a make or ninja build whose log names no error, how to get one
    (a parallel build's first failure is buried among the other jobs' output, or a recipe failed silently)."""
    first = next((line for line in lines if _MAKE_STOP.match(line) or (
        _ERROR_LINE.search(line) and not line.startswith(("make: ***", "make[")))), None)
    if first is not None:
        return f"the first error line: {first.strip()[:200]!r}; read_file {log} shows what led to it"
    if Path(argv[0]).name in ("make", "gmake", "ninja") or argv[:2] == ["cmake", "--build"]:
        return (f"the log ({log}) names no error line: run the same build serially and verbose to see the failing "
                "command and its output (make -j1 V=1 VERBOSE=1, ninja -j1 -v, or cmake --build DIR -j1 -v)")
    return f"the log ({log}) names no error line: the command's own output above is all there is"


_STARTED_FOR_TARGET = re.compile(r"Exec format error|cannot execute binary file")


def tests_started_here(argv: list[str], lines: list[str]) -> str | None:
    """The hint for a run of the project's test suite (`make check|test`, `ctest`, `meson test`) that started a
    target program on the build machine: running the tests is verify's job (no knowledge entry's fix, such as
    turning a build's post-build run off, applies); None for any other command."""
    name = Path(argv[0]).name
    runs = (bool({"check", "test", "tests"} & set(recipes.make_goals(argv))) and "TESTS=" not in argv
            if name in ("make", "gmake", "ninja") else name == "ctest" or (name == "meson" and argv[1:2] == ["test"]))
    if not runs or not any(_STARTED_FOR_TARGET.search(line) for line in lines):
        return None
    return ("the project's tests are not run by run_command: build the test programs without running them (make "
            "check TESTS=, or the build's own goal), then call verify, which runs the project's tests on the target")


def hint_for(diagnosis: Diagnosis) -> str | None:
    """What to try first for a diagnosed configure failure: build what it looked for, else flip its switch."""
    steps = [f'build_dependency(name="{diagnosis.missing[0]}")'] if diagnosis.missing else []
    if diagnosis.switches:
        steps.append(f"configure again with {' '.join(s.arg for s in diagnosis.switches)} to build without it"
                     + (" (report the feature left out with the result)" if diagnosis.missing else ""))
    return "; or ".join(steps) or None
