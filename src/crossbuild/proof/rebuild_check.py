"""The verifier's clean rebuild: the recorded steps replayed in a second build from the source as it was prepared
(second_build.py), which must make every linked artifact the first build made."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from crossbuild.env import compile_cache
from crossbuild.env.recipes import BuildStep
from crossbuild.env.sandbox import Sandbox
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation import safefs
from crossbuild.proof.artifacts import ScanResult, scan_tree
from crossbuild.proof.binary_formats import LINKED_KINDS
from crossbuild.proof.second_build import build_again
from crossbuild.proof.smoke import own_folders


def scan_outputs(root: Path, toolchain: Toolchain | None) -> ScanResult:
    """scan_tree, leaving out crossbuild's own folders."""
    return scan_tree(root, prune=own_folders(root, toolchain))


RECORD = "rebuild.json"  # in the workspace's .xbuild/ (which builds cannot write): what the last rebuild replayed
RUN_OUTPUTS = "run-outputs.json"  # in .xbuild/: what the verifier's own test runs wrote in build folders


def remember_run_outputs(toolchain: Toolchain | None, root: Path, paths: Sequence[str]) -> None:
    """Record PATHS (below the build folder ROOT), which the verifier's test runs wrote and no build step made:
    a later clean rebuild, which runs no test, is not asked for them."""
    if toolchain is None or not paths:
        return
    key = os.path.relpath(root, toolchain.workspace)
    known = run_outputs(toolchain)
    known[key] = sorted({*known.get(key, []), *paths})[:10_000]
    safefs.write_atomic(toolchain.xbuild, RUN_OUTPUTS, json.dumps(known).encode())


def run_outputs(toolchain: Toolchain) -> dict[str, list[str]]:
    try:
        found = json.loads(safefs.read_text(toolchain.xbuild, RUN_OUTPUTS, max_bytes=4 << 20))
    except (OSError, ValueError):
        return {}
    return {k: [p for p in v if isinstance(p, str)] for k, v in found.items() if isinstance(v, list)} \
        if isinstance(found, dict) else {}


def clean_rebuild(root: Path, steps: list[BuildStep], toolchain: Toolchain, source: str,
                   box: Sandbox | None, edits: Sequence[str] = ()) -> dict:
    """Replay the recorded steps in a second build (second_build: a fresh copy of the pristine source with the
    agent's edits, in `.xbuild/rebuild/`), and check it made every linked artifact the first build made. A second
    build that already passed with the very same inputs (steps, edited files, dependencies in the prefix,
    settings: `_inputs`) is not made again: a verdict asked for twice without a change between (the build-machine
    check after a refused verdict) compares with it once more."""
    original_ws = toolchain.workspace
    try:
        rel_root = root.relative_to(original_ws)
    except ValueError:
        rel_root = Path(".")
    inputs = _inputs(toolchain, steps, source, edits)
    last = _last_rebuild(toolchain)
    fresh_ws = original_ws / ".xbuild" / "rebuild"
    reused = last.get("inputs") == inputs and safefs.is_dir(original_ws, Path(".xbuild", "rebuild", rel_root))
    compiles = None
    if reused:
        fresh, not_copied = replace(toolchain, workspace=fresh_ws), list(last.get("not_copied") or [])
        compiles = last.get("compiles")
    else:
        safefs.remove_tree(toolchain.xbuild, RECORD)  # the rebuild about to be made replaces the one it describes
        second = build_again(toolchain, steps, source, edits, box, into="rebuild")
        fresh, fresh_ws, not_copied = second.toolchain, second.workspace, second.not_copied
        # what the rebuild took from the first build's compiles, from its own stats log (compile_cache.py)
        compiles = compile_cache.counts(safefs.read_text_or_none(
            second.toolchain.scratch, compile_cache.STATS_LOG, max_bytes=64 << 20) or "")
        if second.error:
            return {"ok": False, "steps": [str(s) for s in steps], "workspace": str(fresh_ws),
                    "not_copied": not_copied, "error": second.error, "compiles": compiles}
        safefs.write_atomic(toolchain.xbuild, RECORD, json.dumps({"inputs": inputs, "not_copied": not_copied,
                                                                  "compiles": compiles}).encode())
    linked = LINKED_KINDS
    rebuilt = {a.path for a in scan_outputs(fresh_ws / rel_root, fresh).artifacts if a.kind in linked}
    original = {a.path for a in scan_outputs(root, toolchain).artifacts if a.kind in linked}
    missing = missing_from_rebuild(original, rebuilt)
    missing = [p for p in missing if p not in copies_of(root, missing, original & rebuilt)]
    ran = set(run_outputs(toolchain).get(str(rel_root), ()))  # made by an earlier verdict's test runs
    missing = [p for p in missing if p not in ran]
    ok = bool(rebuilt) and not missing
    return {"ok": ok, "steps": [str(s) for s in steps], "workspace": str(fresh_ws), "artifacts": len(rebuilt),
            "not_copied": not_copied, "reused": reused, "compiles": compiles,
            "error": None if ok else ("rebuild produced no binaries" if not rebuilt
                                      else f"rebuild lacks {', '.join(missing[:5])}")}


def _inputs(toolchain: Toolchain, steps: Sequence[BuildStep], source: str, edits: Sequence[str]) -> str:
    """A digest of everything a second build is made from: the steps with their environments, the source folder,
    each edited file's bytes, the settings (BuildEnv), and the prefix's files (a dependency built since changes
    what the steps find)."""
    h = hashlib.sha256(json.dumps([[dataclasses.asdict(s) for s in steps], source, sorted(edits),
                                   toolchain.env.as_dict()], sort_keys=True, default=str).encode())
    for rel in sorted(edits):
        try:
            h.update(rel.encode() + b"\0" + hashlib.sha256(safefs.read_bytes(toolchain.workspace, rel,
                                                                               max_bytes=64 << 20)).digest())
        except (OSError, ValueError):
            h.update(rel.encode() + b"\0gone")
    if toolchain.prefix.is_dir():
        for e in sorted(safefs.walk_files(toolchain.prefix), key=lambda e: e.rel):
            # ctime and inode too: an install copies a dependency's mtimes, which utime can set, ctime it cannot
            h.update(f"{e.rel}\0{e.st.st_size}\0{e.st.st_mtime_ns}\0{e.st.st_ctime_ns}\0{e.st.st_ino}\0"
                     f"{e.st.st_mode}\n".encode())
    return h.hexdigest()


def _last_rebuild(toolchain: Toolchain) -> dict:
    try:
        return json.loads(safefs.read_text(toolchain.xbuild, RECORD, max_bytes=1 << 20))
    except (OSError, ValueError):
        return {}


_HASH = re.compile(r"[0-9a-f]{16,}", re.IGNORECASE)


def _unhashed(path: str) -> str:
    """PATH with the hashes in its folder names blanked (libzstd's `obj/conf_<md5 of the flags>/`): the flags
    name the workspace, so the rebuild's copy hashes to another folder."""
    folders, _, name = path.rpartition("/")
    return _HASH.sub("#", folders) + "/" + name


def missing_from_rebuild(original: set[str], rebuilt: set[str]) -> list[str]:
    """The first build's artifacts the rebuild lacks: each needs its own path, or one rebuilt artifact no other
    claims whose path differs only in hashed folder names."""
    spare = Counter(_unhashed(p) for p in rebuilt - original)
    missing = []
    for path in sorted(original - rebuilt):
        if spare[_unhashed(path)]:
            spare[_unhashed(path)] -= 1
        else:
            missing.append(path)
    return missing


def copies_of(root: Path, paths: Sequence[str], kept: set[str]) -> set[str]:
    """Of PATHS (below ROOT), the files whose bytes equal an artifact of KEPT: copies an install step made of a
    product both builds have (a plain Makefile's install into the source folder that failed partway, lua5.4's
    debian/tmp, is not replayed), which are no products of their own."""
    def fingerprint(rel: str, sizes: set[int] | None = None) -> tuple[int, str] | None:
        try:
            with os.fdopen(safefs.open_regular(root, rel, max_bytes=256 << 20), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if sizes is not None and size not in sizes:
                    return None  # no copy of anything missing: not worth hashing
                return size, hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:  # safefs.UnsafePath included: a link or something else is no copy
            return None

    found = {p: fp for p in paths if (fp := fingerprint(p))}
    sizes = {size for size, _ in found.values()}
    known = {fp for rel in kept if (fp := fingerprint(rel, sizes))} if found else set()
    return {p for p, fp in found.items() if fp in known}
