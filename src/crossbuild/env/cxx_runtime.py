"""One shared C++ runtime per musl target: zig's own libc++, libc++abi and libunwind built as one shared library
with default visibility, `libc++_shared.so` (the name Android's NDK gives its shared runtime), kept in the target's
musl sysroot beside its loader, where qemu's loader search finds it.

Why: zig links a static copy of its C++ runtime, every symbol hidden, into each shared library and program. A C++
project that builds shared libraries then runs with one runtime per library: an exception thrown in one is not
caught in another (std::runtime_error's type_info is another object), so tests that check an error terminate
instead (libjsoncpp, geographiclib, clhep). A native toolchain links them all to one shared runtime
(libstdc++.so.6); the compiler wrapper does the same with this one (zigwrap: C++ shared libraries, and the
programs that link one of them).

How: zig's own compile commands for those sources, printed by `--verbose-cc` while a throwaway cache builds them,
are run again with default visibility: the same code, configuration and ABI that zig's headers give every object a
project compiles; only the symbols' visibility differs. Inputs are zig's shipped sources only, so this runs on the
host, like the zig cache's warming.
"""

from __future__ import annotations

import concurrent.futures
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from crossbuild.env.musl_sysroot import sysroot_dir
from crossbuild.foundation import host
from crossbuild.foundation.progress import NoteFn
from crossbuild.foundation.targets import Target, parse_target

SONAME = "libc++_shared.so"
REVISION = "1"  # raised when the way the runtime is built changes, so cached ones are built again
_RUNTIME_SOURCES = ("/lib/libcxx/src/", "/lib/libcxxabi/src/", "/lib/libunwind/src/")
_HIDING = {"-D_LIBUNWIND_HIDE_SYMBOLS", "-fvisibility-global-new-delete=force-hidden"}
_DROPPED_WITH_VALUE = {"-MF", "--serialize-diagnostics", "-o"}  # zig's own dependency files and outputs
_DROPPED = {"-MD", "-MV", *_HIDING}


class RuntimeBuildError(RuntimeError):
    pass


def path(target: Target) -> Path:
    return sysroot_dir(target.arch) / "lib" / SONAME


def supported(target: Target) -> bool:
    """Linux musl targets: the runtime lives beside crossbuild's musl loader (glibc and Windows targets keep zig's
    static runtime)."""
    return target.libc == "musl" and not target.is_windows


def available(target: Target, zig: Path) -> Path | None:
    """The target's shared runtime if it was built by this zig, else None."""
    runtime = path(target)
    return runtime if supported(target) and runtime.is_file() and _stamp(target).is_file() and \
        _stamp(target).read_text() == _stamp_text(zig) else None


def build(target: Target, zig: Path, *, jobs: int | None = None,
          note: NoteFn | None = None) -> Path:
    """Build and cache the target's shared C++ runtime (once per zig installation); returns its path. NOTE is told
    when it is built (minutes, once)."""
    if not supported(target):
        raise RuntimeBuildError(f"{target.name}: a shared C++ runtime is built for Linux musl targets only")
    if found := available(target, zig):
        return found
    dest = path(target)
    failed = dest.with_name(SONAME + ".failed")  # a failure is remembered for this zig: not retried by every run
    try:
        if failed.is_file() and failed.read_text().startswith(_stamp_text(zig)):
            raise RuntimeBuildError(failed.read_text().split("\n", len(_stamp_text(zig).splitlines()))[-1])
        dest.parent.mkdir(parents=True, exist_ok=True)
        with host.exclusive(dest.parent.parent / f".{target.arch}-cxx.lock"):  # parallel runs build it once
            if found := available(target, zig):
                return found
            if note:
                note(f"building crossbuild's shared C++ runtime for {target.name} (first use of this target only; "
                     "about 2.5 minutes on two cores)", None, None)
            try:
                _build(target, zig, dest, jobs or os.cpu_count() or 2)
            except RuntimeBuildError as e:
                failed.write_text(_stamp_text(zig) + str(e))
                raise
            _stamp(target).write_text(_stamp_text(zig))
    except (OSError, subprocess.SubprocessError) as e:  # a lock, a folder, a time-out: said as the runtime's
        raise RuntimeBuildError(f"{type(e).__name__}: {e}") from e
    return dest


def _build(target: Target, zig: Path, dest: Path, jobs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="crossbuild-cxxrt-") as tmp:
        work = Path(tmp)
        objects = _compile(_zig_commands(target, zig, work), work / "obj", jobs)
        part = dest.with_name(dest.name + ".part")
        _run([str(zig), "cc", "-target", target.zig_target, "-shared", "-o", str(part),
              f"-Wl,-soname,{SONAME}", *map(str, objects)], "linking the runtime")
        part.replace(dest)


def identity(name: str) -> str | None:
    """What a build for the target NAME linking its runtime depends on (the runtime's stamp), or None when there is
    none: the dependency cache keys on it, so a library built with zig's static runtime is never taken for one
    built with the shared one."""
    try:
        target = parse_target(name)
    except ValueError:  # a name only tests use
        return None
    stamp = _stamp(target)
    return stamp.read_text() if supported(target) and path(target).is_file() and stamp.is_file() else None


def _zig_commands(target: Target, zig: Path, work: Path) -> list[list[str]]:
    """zig's compile commands for its C++ runtime's sources, from a build in a throwaway cache (zig prints a
    command only when it compiles)."""
    (work / "probe.cpp").write_text("int crossbuild_cxx_runtime(void) { return 0; }\n")
    env = {**os.environ, "ZIG_GLOBAL_CACHE_DIR": str(work / "cache"), "ZIG_LOCAL_CACHE_DIR": str(work / "cache")}
    res = subprocess.run([str(zig), "build-lib", "-dynamic", "--verbose-cc", "-target", target.zig_target,
                          "-lc++", "-lc", "probe.cpp", f"-femit-bin={work / 'probe.so'}"],
                         cwd=work, env=env, capture_output=True, text=True, timeout=3600)
    commands = [shlex.split(line) for line in res.stderr.splitlines() + res.stdout.splitlines()
                if any(part in line for part in _RUNTIME_SOURCES)]
    missing = [part.strip("/") for part in _RUNTIME_SOURCES if not any(part in " ".join(c) for c in commands)]
    if res.returncode != 0 or missing:  # a partial runtime would be cached as whole
        raise RuntimeBuildError(f"zig's build of its C++ runtime exited {res.returncode}, without commands for "
                                f"{', '.join(missing) or '-'}: " + " | ".join(res.stderr.splitlines()[-3:]))
    return commands


def _exported(argv: list[str], obj: Path) -> list[str]:
    """One of zig's compile commands, writing OBJ, with default visibility and none of zig's cache bookkeeping."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _DROPPED_WITH_VALUE:
            skip = True
        elif arg not in _DROPPED:
            out.append("-fvisibility=default" if arg == "-fvisibility=hidden" else arg)
    return [*out, "-o", str(obj)]


def _compile(commands: list[list[str]], folder: Path, jobs: int) -> list[Path]:
    folder.mkdir()
    planned = []
    for n, argv in enumerate(commands):
        source = next((a for a in argv if any(part in a for part in _RUNTIME_SOURCES)), f"source{n}")
        planned.append(_exported(argv, folder / f"{n:03d}-{Path(source).stem}.o"))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda argv: _run(argv, f"compiling {Path(argv[-1]).stem}"), planned))  # raises the first
    return [Path(argv[-1]) for argv in planned]


def _run(argv: list[str], what: str) -> None:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    if res.returncode != 0:
        raise RuntimeBuildError(f"{what} failed (exit {res.returncode}): "
                                + " | ".join((res.stderr or res.stdout).strip().splitlines()[-3:]))


def _stamp(target: Target) -> Path:
    return path(target).with_name(SONAME + ".stamp")


def _stamp_text(zig: Path) -> str:
    """The runtime's identity: zig's version and the way it is built. Not the installation: two of the same version
    (a CI checkout's venv beside a developer's) give the same runtime, and sharing one cache they would otherwise
    build it in turn."""
    return f"zig {host.zig_version()}\nrevision {REVISION}\n"

