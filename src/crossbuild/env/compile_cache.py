"""A workspace's compile cache: ccache in front of zig for each `-c` compile, so the verifier's clean rebuild
takes the first build's objects instead of compiling them again.

zig keeps a cache of its own, but it misses on a source file whose time or inode changed even when its bytes did
not (measured with zig 0.17.1: a copied tree compiles again in full), and the clean rebuild is a copy in another
folder. ccache keys a compile on the bytes of the source and of every header it read (from the compiler's -MD
file), on the arguments with the workspace's own paths made relative (CCACHE_BASEDIR: the rebuild's folder differs
only there) and on zig's identity; an object is reused only when all of that is the same, so the rebuild still
catches a file the first build changed without a recorded step. Both builds of one workspace share its cache; no
other workspace sees it (the cache lives in the workspace's scratch folder, which its builds write). Without ccache
on the machine (scripts/setup.sh installs it) every compile runs, as before.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

# zigwrap's compiles go through the program named here; the rebuild's record counts its hits and misses
PROGRAM_VARIABLE = "CROSSBUILD_CCACHE"
_STATS = re.compile(r"^(direct_cache_hit|preprocessed_cache_hit|cache_miss)\t(\d+)$", re.MULTILINE)


def program() -> str | None:
    """This machine's ccache, or None."""
    return shutil.which("ccache", path="/usr/local/bin:/usr/bin:/bin")


def shims(zig: Path) -> dict[str, str]:
    """The compilers ccache is given, one per zig driver (ccache takes a program, not `zig cc`)."""
    return {f"zig-{driver}": f"#!/bin/sh\nexec {shlex.quote(str(zig))} {driver} \"$@\"\n" for driver in ("cc", "c++")}


def environment(cache_dir: Path, workspace: Path, zig: Path, config: Path) -> dict[str, str]:
    """The variables a build's compiles read: the cache folder, the workspace as the base of relative paths, and
    zig's identity (path, size and time: a reinstalled zig is another compiler). CONFIG is crossbuild's own
    settings file (empty): never one a build wrote into the cache folder."""
    ccache = program()
    try:
        st = zig.stat()
    except OSError:  # no zig there (yet): nothing to name the compiler by
        return {}
    if ccache is None:
        return {}
    return {PROGRAM_VARIABLE: ccache, "CCACHE_DIR": str(cache_dir), "CCACHE_CONFIGPATH": str(config),
            "CCACHE_BASEDIR": str(workspace), "CCACHE_NOHASHDIR": "1", "CCACHE_DEPEND": "1",
            "CCACHE_COMPILERTYPE": "clang", "CCACHE_COMPILERCHECK": f"string:{zig}:{st.st_size}:{st.st_mtime_ns}",
            "CCACHE_MAXSIZE": "20G"}


ZERO = "--zero-stats"  # counts start from nothing
PRINT = "--print-stats"  # what counts() reads


def counts(printed: str) -> dict[str, int] | None:
    """`ccache --print-stats` read: compiles taken from the cache and compiles that ran since the counts were
    zeroed; None when it printed none."""
    found = {name: int(n) for name, n in _STATS.findall(printed)}
    if "cache_miss" not in found:
        return None
    return {"reused": found.get("direct_cache_hit", 0) + found.get("preprocessed_cache_hit", 0),
            "compiled": found["cache_miss"]}
