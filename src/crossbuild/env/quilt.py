"""Debian's patches undone, for a source built as upstream ships it (--no-source-hints).

dpkg-source applies a `3.0 (quilt)` package's patches when it unpacks it and keeps quilt's backups in `.pc/`: one
folder per applied patch, holding each file it touched as it was before (an empty file: one the patch created).
With `debian/` removed but its patches still applied, the tree is neither upstream's nor Debian's (lua5.4's patched
luaconf.h includes a header only debian/rules writes), so the patches are undone from those backups, last first —
as `quilt pop -a` would, without running quilt. Everything is read and written through safefs: a source's `.pc/`
is as untrusted as the rest of it, and nothing it links to is followed.
"""

from __future__ import annotations

import stat
from pathlib import Path

from crossbuild.foundation import safefs

_MAX_FILE = 64 << 20


def unapply(src: Path) -> list[str]:
    """Undo the patches `.pc/applied-patches` lists, from their backups below SRC/.pc; returns the names of the
    patches undone. A patch name that leaves `.pc/`, or a backup folder that is a link, undoes nothing at all: a
    half-undone series is worse than the patched tree."""
    series = safefs.read_text_or_none(src, ".pc/applied-patches", max_bytes=1 << 20)
    names = [line.strip() for line in (series or "").splitlines() if line.strip()]
    plans: list[tuple[str, list[tuple[str, bytes | None, int]]]] = []
    try:
        for name in reversed(names):
            plans.append((name, _restorations(src, f".pc/{name}")))
    except (OSError, ValueError):
        return []
    for _, restorations in plans:
        for rel, data, mode in restorations:
            try:
                if data is None:
                    safefs.remove_tree(src, rel)
                else:  # a link at REL is replaced, never written through
                    safefs.write_atomic(src, rel, data, mode=mode)
            except safefs.UnsafePath:  # a link where a folder on the way should be: the host is never reached
                continue
    return [name for name, restorations in plans if restorations]


def _restorations(src: Path, backups: str) -> list[tuple[str, bytes | None, int]]:
    """(path below SRC, its text before the patch or None when the patch created it, mode) for each regular file
    below SRC/BACKUPS. A patch with no backup folder changed nothing dpkg-source recorded."""
    try:
        with safefs.open_dir(src, backups):  # refuses a link anywhere on the way
            pass
    except FileNotFoundError:
        return []
    out = []
    for entry in safefs.walk_files(src / backups):
        if not stat.S_ISREG(entry.st.st_mode):
            continue
        data = safefs.read_bytes(src, f"{backups}/{entry.rel}", max_bytes=_MAX_FILE) if entry.st.st_size else None
        out.append((entry.rel, data, stat.S_IMODE(entry.st.st_mode) or 0o644))
    return out
