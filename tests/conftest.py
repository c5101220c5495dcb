"""Shared fixtures: real zig, real toolchain files, tmp workspaces; the zig cache is the shared one (host.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation import host
from crossbuild.foundation.targets import parse_target

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "libcalc"


@pytest.fixture
def make_toolchain(tmp_path):
    def make(target: str, name: str = "ws", warm: tuple[str, ...] = ("c",)) -> Toolchain:
        return Toolchain.for_target(parse_target(target), tmp_path / name, prefix=tmp_path / f"{name}-prefix")\
            .materialise(warm=warm)
    return make


@pytest.fixture
def zig() -> str:
    exe = host.zig_executable()
    assert exe is not None, "ziglang is a dependency of crossbuild"
    return str(exe)


def run_in(tc: Toolchain, argv: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    """Run a command with the toolchain's BuildEnv (no sandbox), capturing output."""
    return subprocess.run(argv, cwd=cwd, env=tc.env.as_dict(), capture_output=True, text=True, **kw)


def copy_example(dest: Path) -> Path:
    shutil.copytree(EXAMPLE, dest)
    return dest


CLI = [str(Path(sys.executable).parent / "crossbuild")]


def cb(*args: str, cwd: Path | None = None, timeout: float = 1200,
       env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The real `crossbuild` command, with a minimal environment (plus ENV)."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(Path.home()), **(env or {})})


def forget_cached_dependencies(root: Path) -> None:
    """Take the dependencies a test built from local sources under ROOT out of the shared dependency cache."""
    from crossbuild.env import dependency_cache as deps
    from crossbuild.foundation import safefs

    for entry in deps.list_cached():
        if entry.source.startswith(str(root)):
            safefs.remove_tree(entry.dir.parent, entry.dir.name)
            for lock in (entry.dir.with_suffix(".lock"), entry.dir.parent / f"{deps._safe(entry.source)}.build.lock"):
                lock.unlink(missing_ok=True)
    for failure in deps.deps_root().glob("*/failed/*.json"):  # and the failures remembered of them
        if json.loads(failure.read_text()).get("source", "").startswith(str(root)):
            failure.unlink()


def outcome_of(stdout: str) -> dict:
    """The outcome `crossbuild build --json` ends with ({} when there is none): the evaluation's own reading."""
    from crossbuild.agent.events import outcome_from

    return outcome_from(stdout) or {}


# A test program that fails the same way on every machine, calling lib() (lib.c returns 1)
GOLDEN_MISMATCH = r"""
#include <errno.h>
#include <stdio.h>
#include <string.h>
int lib(void);
int main(void) {
    /* like google-glog's logging_unittest under Debian's errno patch: its golden text names no number any libc has */
    char got[32];
    snprintf(got, sizeof got, "[%d]", EINTR + lib() - 1);
    if (strcmp(got, "[__EINTR_NUM__]") != 0) {
        printf("golden mismatch: expected [__EINTR_NUM__], got %s\n", got);
        return 1;
    }
    return 0;
}
"""
