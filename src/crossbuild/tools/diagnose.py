"""A failed configure diagnosed from the build system's own records (issue 36). CMake's configure is run again, as
it was, with its JSON trace on, and crossbuild.diagnosis reads the trace, the project's files and the cache (the
rerun is the same command in the same sandbox and environment; its output goes to a log of its own, and it is not
recorded as a build step, so a clean rebuild never replays it). An autoconf configure left config.log and its
script: they are read as they are."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from crossbuild.diagnosis import autotools_log, cmake_trace, meson_log
from crossbuild.diagnosis.model import Diagnosis
from crossbuild.foundation import safefs
from crossbuild.tools.context import RunContext

TRACE_NAME = "crossbuild-configure-trace.json"
RERUN_TIMEOUT_S = 600.0
# cmake's modes that do not configure a project
_NOT_CONFIGURE = {"--build", "--install", "-E", "-P", "--version", "--help", "-N", "--find-package", "--workflow",
                  "--list-presets"}


def failed_configure(ctx: RunContext, argv: list[str], cwd: Path, env: dict[str, str], log: str) -> Diagnosis | None:
    """The diagnosis of the failed command ARGV (run in CWD with ENV, its output LOG) when it is a configure whose
    records name what failed, else None. The records are the build's to write: a reader that trips on them
    raises DiagnosisFailed, which the caller shows beside the command's own result."""
    try:
        return _diagnose(ctx, argv, cwd, env, log)
    except (ValueError, KeyError, IndexError, TypeError, RecursionError) as e:
        raise DiagnosisFailed(f"{type(e).__name__}: {e}"[:300]) from e


class DiagnosisFailed(Exception):
    pass


def _diagnose(ctx: RunContext, argv: list[str], cwd: Path, env: dict[str, str], log: str) -> Diagnosis | None:
    if Path(argv[0]).name == "configure":
        return _autotools(ctx, argv[0], cwd)
    if Path(argv[0]).name == "cmake" and not _NOT_CONFIGURE & set(argv[1:]) and "CMake Error" in log:
        return _cmake(ctx, argv, cwd, env, log)
    if Path(argv[0]).name == "meson" and "setup" in argv[1:2] and "ERROR:" in log:
        return _meson(ctx, argv[2:], cwd, log)
    return None


def _meson(ctx: RunContext, args: list[str], cwd: Path, log: str) -> Diagnosis | None:
    """`meson setup BUILD [SOURCE]`: the source folder is the second folder named, else CWD."""
    root = ctx.root.resolve()
    folders = [a for a in args if not a.startswith("-")]
    source = (cwd / folders[1]).resolve() if len(folders) > 1 else cwd.resolve()
    if not (source.is_relative_to(root) and cwd.resolve().is_relative_to(root)):
        return None
    return meson_log.read(root, log, cwd=str(cwd.resolve().relative_to(root)), source=str(source.relative_to(root)))


def _autotools(ctx: RunContext, script: str, cwd: Path) -> Diagnosis | None:
    root = ctx.root.resolve()
    script_path, log_path = (cwd / script).resolve(), cwd.resolve() / "config.log"
    if not (script_path.is_relative_to(root) and log_path.is_relative_to(root)):
        return None
    return autotools_log.read(root, str(log_path.relative_to(root)), str(script_path.relative_to(root)))


def _cmake(ctx: RunContext, argv: list[str], cwd: Path, env: dict[str, str], log: str) -> Diagnosis | None:
    build, source = _folders(argv[1:], cwd)
    root = ctx.root.resolve()
    try:
        build_rel = build.relative_to(root)
    except ValueError:
        return None
    if not safefs.is_dir(root, build_rel / "CMakeFiles"):
        return None
    cache = safefs.read_text_or_none(root, build_rel / "CMakeCache.txt", max_bytes=cmake_trace.FILE_MAX_BYTES)
    source = source or _cache_home(cache)
    if source is None or not source.is_relative_to(root):
        return None
    trace_rel = build_rel / "CMakeFiles" / TRACE_NAME
    limits = dataclasses.replace(ctx.command_limits, timeout_s=min(ctx.command_limits.timeout_s, RERUN_TIMEOUT_S))
    try:
        ctx.sandbox.run([*argv, "--trace-format=json-v1", f"--trace-redirect={root / trace_rel}"], cwd=cwd,
                        env={**ctx.toolchain.env.as_dict(), **env}, log_path=ctx.next_log("cmake-trace"),
                        limits=limits, cancel=ctx.cancel)
        cache = safefs.read_text_or_none(root, build_rel / "CMakeCache.txt", max_bytes=cmake_trace.FILE_MAX_BYTES)
        return cmake_trace.read((root, str(trace_rel)), log, root=root, source=str(source.relative_to(root)),
                                cache=cache)
    finally:
        try:
            safefs.remove_tree(root, trace_rel)
        except OSError:
            pass


def _folders(args: list[str], cwd: Path) -> tuple[Path, Path | None]:
    """(build folder, source folder or None) of a cmake configure's arguments: -B/-S, or a source folder given
    alone (`cmake ../src` in the build folder)."""
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
        elif not a.startswith("-") and source is None and os.path.isfile(cwd / a / "CMakeLists.txt"):
            source = a
        i += 1
    return (cwd / (build or ".")).resolve(), (cwd / source).resolve() if source else None


def _cache_home(cache: str | None) -> Path | None:
    """The source folder the cache names (CMAKE_HOME_DIRECTORY)."""
    for line in (cache or "").splitlines():
        if line.startswith("CMAKE_HOME_DIRECTORY:"):
            return Path(line.split("=", 1)[1])
    return None
