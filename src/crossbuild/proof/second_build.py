"""A second build of the project by its recorded steps, from a fresh copy of its source, in a workspace of its own
below `.xbuild/` (which builds cannot write). The verifier's clean rebuild makes one for the same target; its
check of a failed test program makes one for the build machine (native_check).

The copy starts from the source as it was prepared (nothing an in-tree build left behind is reused), with the
files the agent edited laid over it, and takes folders, files and links as they are, never following one. A
workspace prepared before pristine copies existed is copied as it is now.
"""

from __future__ import annotations

import os
import platform
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from crossbuild.env import musl_sysroot, sandbox
from crossbuild.env.recipes import BuildStep
from crossbuild.env.sandbox import Sandbox
from crossbuild.env.toolchain import Toolchain, own_folder
from crossbuild.env.workspace import PRISTINE
from crossbuild.foundation import host, safefs
from crossbuild.foundation.targets import Target
from crossbuild.proof import target_run


@dataclass
class SecondBuild:
    toolchain: Toolchain  # the second build's own, in its own workspace
    box: Sandbox
    not_copied: list[str]
    error: str | None  # the step that failed, with its log; None when every step passed

    @property
    def workspace(self) -> Path:
        return self.toolchain.workspace


def runs_here(target: Target) -> dict[str, str]:
    """For a musl build of this machine's own architecture (the build-machine check), whose programs a test's
    script starts directly: link its dynamic programs with crossbuild's musl loader and the folder beside it (the
    shared C++ runtime) by path, as this machine has no /lib/ld-musl-*.so.1. Never for a product."""
    if target.libc != "musl" or target.arch != platform.machine() or target.is_windows:
        return {}
    return {"CROSSBUILD_PROGRAM_LOADER": str(musl_sysroot.loader_path(target.arch))}


def build_again(toolchain: Toolchain, steps: Sequence[BuildStep], source: str, edits: Sequence[str],
                like: Sandbox | None, *, into: str, target: Target | None = None,
                prefix: Path | None = None) -> SecondBuild:
    """Replay STEPS in `.xbuild/INTO/`, in a sandbox of LIKE's backend (the first build's; default: auto), which
    LIKE's watcher watches. For another TARGET, the steps' mentions of the original target's names
    become the new target's, and its dependencies' prefix is PREFIX (theirs, built for TARGET), else an empty one
    (the original's were built for the original target)."""
    original_ws = toolchain.workspace
    rel = Path(".xbuild", into)
    fresh_ws = original_ws / rel
    safefs.remove_tree(original_ws, rel)
    pristine = original_ws / PRISTINE
    base = pristine if (pristine / source).is_dir() and not (pristine / source).is_symlink() else original_ws
    copied = safefs.copy_tree(base, source, original_ws, rel / source)
    if base == pristine:
        _lay_over(original_ws, fresh_ws, [e for e in edits if Path(e).is_relative_to(source)])
    # same settings, new place; the same target's compiles take the first build's objects where they are the same
    # (compile_cache.py), from a real folder of that workspace, never a link a build left there
    same = target is None or target == toolchain.target
    ccache = toolchain.ccache_dir
    if same and ccache.is_relative_to(original_ws):
        ccache = own_folder(original_ws, str(ccache.relative_to(original_ws)))
    fresh = replace(toolchain, workspace=fresh_ws, compile_cache=ccache if same else None)
    renames = {str(original_ws): str(fresh_ws)}
    if target is not None and target != toolchain.target:
        fresh = replace(fresh, target=target, prefix=prefix or fresh_ws / ".xbuild" / "no-dependencies",
                        zig_cache=host.zig_cache_dir(target.zig_target),
                        passthrough={**fresh.passthrough, **runs_here(target)})
        renames[str(toolchain.prefix)] = str(fresh.prefix)
        for old, new in ((toolchain.target.name, target.name), (toolchain.target.zig_target, target.zig_target),
                         (toolchain.target.autotools_host, target.autotools_host)):
            renames.setdefault(old, new)
    fresh = fresh.materialise()
    box = sandbox.for_toolchain(fresh, backend=like.backend if like is not None else "auto")
    if like is not None:
        box.watch = like.watch
    rename = _renamer(renames)
    env = fresh.env.as_dict()
    moved = [([rename(a) for a in step.argv], fresh_ws / step.cwd, {**env, **{k: rename(v) for k, v in step.env}})
             for step in steps]
    failed = box.run_steps(moved, log_dir=fresh.logs, stem=into,
                           variant=lambda step_env: target_run.build_box(box, fresh.target, fresh_ws, step_env))
    error = None
    if failed:
        argv, res = failed
        error = f"`{' '.join(argv)}` {res.stopped or f'exit {res.returncode}'} (log {res.log_path})"
    return SecondBuild(fresh, box, copied.skipped[:20], error)


def _renamer(renames: dict[str, str]):
    """One pass over a string, the longest name first at each place: the workspace's path is replaced whole even
    when it holds the target's name (`work/glog-riscv64-linux-musl-r1/ws`)."""
    pattern = re.compile("|".join(re.escape(old) for old in sorted(renames, key=len, reverse=True)))
    return lambda text: pattern.sub(lambda m: renames[m.group(0)], text)


def _lay_over(original_ws: Path, fresh_ws: Path, edits: list[str]) -> None:
    """The agent's edited files, read without following links, written into the second build's source."""
    for rel in edits:
        try:
            with os.fdopen(safefs.open_regular(original_ws, rel, max_bytes=64 << 20), "rb") as f:
                data, mode = f.read(), stat.S_IMODE(os.fstat(f.fileno()).st_mode)
        except OSError:  # safefs.UnsafePath included
            continue  # removed or replaced since: the second build shows what that means
        safefs.write_atomic(fresh_ws, rel, data, mode=mode)
