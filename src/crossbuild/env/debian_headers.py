"""Headers a dependency needs that Debian ships in a -dev package holding no library (Boost's libboost1.74-dev:
14,000 headers, no .so or .a), for when its source cannot be cross-built (Boost builds with its own b2): there is
nothing to compile for the target, so the headers are taken from the binary package as they are. Only regular
files and folders below usr/include/ are taken, never a link; the package is unpacked, never installed (no
maintainer scripts run)."""

from __future__ import annotations

import sqlite3
import subprocess
import tempfile
from pathlib import Path

from crossbuild.env import build_tools, debian_index
from crossbuild.foundation import safefs

_LIBRARY = ("%.so", "%.a", "%.so.%")


def headers_only_binary(source: str) -> str | None:
    """The -dev binary package of the Debian source SOURCE that ships headers and no library (the one with the
    most headers), or None when every -dev package of it ships a library or the index does not know it."""
    try:
        db = sqlite3.connect(f"file:{debian_index.ensure_index(lambda _: None)}?mode=ro", uri=True)
    except (debian_index.IndexError_, sqlite3.Error):
        return None
    try:
        found = []
        for (binary,) in db.execute("SELECT binary FROM binaries WHERE source = ? AND binary GLOB '*-dev'",
                                    (source,)):
            headers = db.execute("SELECT count(*) FROM files WHERE binary = ? AND path GLOB 'usr/include/*'",
                                 (binary,)).fetchone()[0]
            libraries = db.execute("SELECT count(*) FROM files WHERE binary = ? AND (path LIKE ? OR path LIKE ? "
                                   "OR path LIKE ?)", (binary, *_LIBRARY)).fetchone()[0]
            if headers and not libraries:
                found.append((headers, binary))
    finally:
        db.close()
    return max(found)[1] if found else None


def take_headers(binary: str, into: Path) -> int:
    """Download BINARY and copy its usr/include/ tree to INTO/include, which must not exist yet: how many files."""
    with tempfile.TemporaryDirectory(prefix="headers-") as scratch:
        [deb] = build_tools.download([binary], Path(scratch))
        subprocess.run(["dpkg-deb", "--extract", str(deb), str(Path(scratch) / "unpacked")], capture_output=True,
                       timeout=600, check=True)
        report = safefs.copy_tree(scratch, "unpacked/usr/include", into, "include", links="drop")
        return report.files
