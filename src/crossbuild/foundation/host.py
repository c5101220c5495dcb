"""The build machine itself: where crossbuild keeps its caches and where the host tools (zig, cmake, qemu...) are.

Read at call time, never at import time, so tests and two runs in one process can point them elsewhere.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path


def cache_root() -> Path:
    """Shared caches (zig's, sources, musl loaders, prefixes): $CROSSBUILD_CACHE_DIR or ~/.cache/crossbuild."""
    explicit = os.environ.get("CROSSBUILD_CACHE_DIR")
    if explicit:
        return Path(explicit).resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return (base / "crossbuild").resolve()


class GaveUpWaiting(RuntimeError):
    """A lock's waiter was told to stop waiting (its call was cancelled)."""


@contextmanager
def exclusive(lock_file: Path, *, shared: bool = False, until: Callable[[], bool] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `lock_file` (created if need be): crossbuild processes on one machine share the
    caches, and the second one to arrive waits, then finds the work done. `shared`: many readers at once, none
    while a writer holds it exclusively. UNTIL: checked while waiting; once true, GaveUpWaiting (another run's
    build may hold the lock for an hour, and a cancelled call must not wait for it)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a") as f:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        if until is None:
            fcntl.flock(f, mode)
        else:
            while True:
                try:
                    fcntl.flock(f, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if until():
                        raise GaveUpWaiting(f"stopped waiting for {lock_file.name}") from None
                    time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def zig_caches() -> Path:
    """The shared zig caches of this zig installation, one folder per target: every run, test and CI job of one
    install warms each target's libc once. Keyed by the zig binary's real path too, since zig's cache entries
    record where its own sources lie: a second install (another venv) would miss on every entry the first one
    warmed."""
    zig = zig_executable()
    where = hashlib.sha256(str(zig.resolve() if zig else "none").encode()).hexdigest()[:10]
    return cache_root() / "zig" / f"{zig_version()}-{where}"


def zig_cache_dir(zig_target: str) -> Path:
    """The shared zig cache of one target (zig's -target). One per target, since every workspace's private layer
    copies or links each entry of its cache (zigcache.make_layer): thousands of inodes per layer once a machine has
    built for several targets, none of which a build for this one reads."""
    return zig_caches() / zig_target


def zig_executable() -> Path | None:
    """The zig binary of the installed `ziglang` package (never a zig found on PATH: the version is pinned)."""
    spec = importlib.util.find_spec("ziglang")
    if spec is None or not spec.origin:
        return None
    exe = Path(spec.origin).parent / ("zig.exe" if os.name == "nt" else "zig")
    return exe if exe.exists() else None


def wasmtime_site() -> Path | None:
    """The folder holding the installed `wasmtime` package (its Python bindings and runtime library), which runs
    WebAssembly test programs; None when it is not installed."""
    spec = importlib.util.find_spec("wasmtime")
    if spec is None or not spec.origin:
        return None
    return Path(spec.origin).resolve().parent.parent


def zig_version() -> str:
    """The pinned zig's version (from the `ziglang` package), part of every cache key."""
    try:
        return metadata.version("ziglang")
    except metadata.PackageNotFoundError:
        return "unknown"


_CODE_IDENTITY: dict[str, str] = {}


def code_identity() -> str:
    """A digest of crossbuild's own code and data as installed (every .py and .toml file of the package, by
    content): what a remembered failure must have been made by to be believed again. Read once per process (about
    2 MB)."""
    if "digest" not in _CODE_IDENTITY:
        package = Path(__file__).resolve().parent.parent
        digest = hashlib.sha256()
        for path in sorted(package.rglob("*")):
            if path.suffix in (".py", ".toml") and path.is_file() and "__pycache__" not in path.parts:
                digest.update(f"{path.relative_to(package)}\0".encode() + path.read_bytes() + b"\0")
        _CODE_IDENTITY["digest"] = digest.hexdigest()[:16]
    return _CODE_IDENTITY["digest"]


def python_dirs() -> list[Path]:
    """Directories holding this Python and its packages: the sandbox mounts them read-only so the
    compiler wrappers, zig and pip-installed meson/ninja run inside it."""
    dirs = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent}
    return sorted(dirs)


def scripts_dir() -> Path:
    """Where pip put this environment's console scripts (meson, ninja, crossbuild)."""
    return Path(sys.executable).parent


def find_tool(name: str) -> str | None:
    """A host program, preferring the one installed beside crossbuild (pip's ninja/meson) over the system's."""
    local = scripts_dir() / name
    if local.exists() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(name)


def find_qemu(name: str) -> str | None:
    """qemu-user's NAME (qemu-aarch64): the static build when installed (qemu-user-static), else the dynamic one. A
    static qemu loads no host library, so LD_PRELOAD or LD_LIBRARY_PATH that a test sets for the target program it
    starts never reaches the host's loader, whose complaint on stderr fails a test that compares its output
    (libzip's preload test)."""
    return find_tool(f"{name}-static") or find_tool(name)


def find_wine() -> str | None:
    """Wine's 64-bit loader, which runs x86_64 Windows programs on an x86_64 machine (Debian's wine64:
    /usr/lib/wine/wine64, also named wine64 on PATH), or None (not installed, or another machine: Wine is no
    emulator)."""
    if platform.machine() != "x86_64":
        return None
    debian = Path("/usr/lib/wine/wine64")
    return str(debian) if debian.is_file() and os.access(debian, os.X_OK) else find_tool("wine64")


def build_triple() -> str:
    """The autotools --build triple of this machine (what config.guess would print on glibc Linux)."""
    machine = platform.machine() or "x86_64"
    return f"{machine}-pc-linux-gnu"


def autotools_scripts() -> dict[str, Path]:
    """The build machine's config.sub and config.guess (autotools-dev), the ones Debian's dh_update_autotools_config
    puts into every package it builds; empty when not installed."""
    found = {name: Path("/usr/share/misc") / name for name in ("config.sub", "config.guess")}
    return {name: path for name, path in found.items() if path.is_file()}
