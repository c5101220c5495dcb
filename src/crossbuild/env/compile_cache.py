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

import shlex
import shutil
from pathlib import Path

# zigwrap's compiles go through the program named here
PROGRAM_VARIABLE = "CROSSBUILD_CCACHE"


def program() -> str | None:
    """This machine's ccache, or None."""
    return shutil.which("ccache", path="/usr/local/bin:/usr/bin:/bin")


def shims(zig: Path) -> dict[str, str]:
    """The compilers ccache is given, one per zig driver (ccache takes a program, not `zig cc`)."""
    return {f"zig-{driver}": f"#!/bin/sh\nexec {shlex.quote(str(zig))} {driver} \"$@\"\n" for driver in ("cc", "c++")}


def environment(cache_dir: Path, workspace: Path, zig: Path, config: Path, stats_log: Path) -> dict[str, str]:
    """The variables a build's compiles read: the cache folder, the workspace as the base of relative paths, and
    zig's identity (path, size and time: a reinstalled zig is another compiler). CONFIG is crossbuild's own
    settings file (empty): never one a build wrote into the cache folder. STATS_LOG: where each compile's counters
    go (the clean rebuild reads its own workspace's, so no ccache process of crossbuild's runs to count)."""
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
            "CCACHE_MAXSIZE": "20G", "CCACHE_STATSLOG": str(stats_log)}


STATS_LOG = "ccache-stats.log"  # in the workspace's scratch folder: one line per counter a compile moved


def counts(stats_log: str) -> dict[str, int] | None:
    """A build's compiles read from its stats log (ccache's stats_log: `# SOURCE` then the counters each compile
    moved): those taken from the cache and those that ran; None when no compile went through the cache."""
    lines = [line.strip() for line in stats_log.splitlines()]
    reused = sum(line in ("direct_cache_hit", "preprocessed_cache_hit") for line in lines)
    compiled = sum(line == "cache_miss" for line in lines)
    return {"reused": reused, "compiled": compiled} if reused or compiled else None
