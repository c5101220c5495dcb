"""A configure script that takes the name of the machine it builds for, as a word from its own table (OpenSSL's
Perl `Configure` and its forks): `Configure linux-aarch64 --prefix=P`. It is not autoconf (no --host=, no
config.sub); it reads CC, AR and RANLIB from the environment, and its table lives in `Configurations/*.conf`.

The name for a target is the first of a short list, most specific first, that the project's table declares; a
generic name (`linux-generic64`: no assembly) is the fallback a table of this family always has. A project whose
table names none of them gets the first, and its Configure says what it knows."""

from __future__ import annotations

import os
import re
from pathlib import Path

from crossbuild.foundation import safefs
from crossbuild.foundation.targets import Target

TABLE = "Configurations"

# (os, arch) -> the table's names, most specific first
_NAMES = {
    ("linux", "aarch64"): ("linux-aarch64", "linux-generic64"),
    ("linux", "riscv64"): ("linux64-riscv64", "linux-generic64"),
    ("linux", "arm"): ("linux-armv4", "linux-generic32"),
    ("linux", "x86_64"): ("linux-x86_64", "linux-generic64"),
    ("windows", "x86_64"): ("mingw64",),
}
_DECLARED = re.compile(r'^\s*"([A-Za-z0-9_.+-]+)"\s*=>\s*\{', re.MULTILINE)


def present(source: Path) -> bool:
    """Whether SOURCE configures this way: a `Configure` script beside its `Configurations/` table."""
    return (source / "Configure").is_file() and (source / TABLE).is_dir()


def declared(source: Path) -> set[str]:
    """The machine names SOURCE's table declares (read through safefs: the tree is the build's to write)."""
    names: set[str] = set()
    try:
        with safefs.open_dir(source, TABLE) as fd:
            files = sorted(n for n in os.listdir(fd) if n.endswith(".conf"))
    except OSError:
        return names
    for name in files[:64]:
        text = safefs.read_text_or_none(source, f"{TABLE}/{name}", max_bytes=1 << 20)
        names.update(_DECLARED.findall(text or ""))
    return names


def machine_name(source: Path, target: Target) -> str:
    """The name SOURCE's Configure knows TARGET by."""
    candidates = _NAMES.get((target.os, target.arch))
    if not candidates:
        raise ValueError(f"no Configure machine name is known for {target.name}")
    known = declared(source)
    return next((c for c in candidates if c in known), candidates[0])
