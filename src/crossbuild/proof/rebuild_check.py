"""The verifier's clean rebuild: the recorded steps replayed in a second build from the source as it was prepared
(second_build.py), which must make every linked artifact the first build made."""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

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


def clean_rebuild(root: Path, steps: list[BuildStep], toolchain: Toolchain, source: str,
                   box: Sandbox | None, edits: Sequence[str] = ()) -> dict:
    """Replay the recorded steps in a second build (second_build: a fresh copy of the pristine source with the
    agent's edits, in `.xbuild/rebuild/`), and check it made every linked artifact the first build made."""
    original_ws = toolchain.workspace
    second = build_again(toolchain, steps, source, edits, box, into="rebuild")
    fresh, fresh_ws = second.toolchain, second.workspace
    if second.error:
        return {"ok": False, "steps": [str(s) for s in steps], "workspace": str(fresh_ws),
                "not_copied": second.not_copied, "error": second.error}
    try:
        rel_root = root.relative_to(original_ws)
    except ValueError:
        rel_root = Path(".")
    linked = LINKED_KINDS
    rebuilt = {a.path for a in scan_outputs(fresh_ws / rel_root, fresh).artifacts if a.kind in linked}
    original = {a.path for a in scan_outputs(root, toolchain).artifacts if a.kind in linked}
    missing = missing_from_rebuild(original, rebuilt)
    missing = [p for p in missing if p not in copies_of(root, missing, original & rebuilt)]
    ok = bool(rebuilt) and not missing
    return {"ok": ok, "steps": [str(s) for s in steps], "workspace": str(fresh_ws), "artifacts": len(rebuilt),
            "not_copied": second.not_copied,
            "error": None if ok else ("rebuild produced no binaries" if not rebuilt
                                      else f"rebuild lacks {', '.join(missing[:5])}")}


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
