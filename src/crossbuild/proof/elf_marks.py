"""What an ELF file says about the system it was linked for: the symbol versions it needs (read with bounds: the
counts come from the file), FreeBSD's ABI note and its release, and each system's marks, Linux's or FreeBSD's."""

from __future__ import annotations

import itertools
import struct

from elftools.elf.gnuversions import GNUVerNeedSection
from elftools.elf.sections import NoteSection

MAX_VERSIONS = 4096


def needed_versions(sec: GNUVerNeedSection, problems: list[str]) -> list[str]:
    """The symbol versions a dynamic ELF file needs, read at most MAX_VERSIONS entries deep: the section's own
    counts and links come from the file, and a loop in them (vn_next 0 with a huge sh_info) would make pyelftools
    read the same entry for hours."""
    versions: list[str] = []
    if sec["sh_info"] > max(sec["sh_size"], 0) // 16:  # each Verneed entry is 16 bytes
        problems.append("not a sound ELF file: its version needs count more entries than its section holds")
        return versions
    for _, auxes in itertools.islice(sec.iter_versions(), MAX_VERSIONS):
        versions += [aux.name for aux in itertools.islice(auxes, MAX_VERSIONS - len(versions))]
        if len(versions) >= MAX_VERSIONS:
            break
    return versions


def elf_system(*, os_abi: str | None, interpreter: str | None, libc: str | None, max_glibc: str | None, kind: str,
               needed: list[str], versions: list[str], note_owners: set[str]) -> str | None:
    """linux, freebsd or mixed, from the marks each system's toolchain leaves in what it links (None: no mark, as a
    static musl program has none). FreeBSD: its OS/ABI byte, its ABI note (crt1), its loader, libc.so.7 or FBSD_
    symbol versions; Linux: a musl or glibc loader, GLIBC_ versions, glibc's ABI note, musl's or glibc's libc."""
    freebsd = (os_abi == "ELFOSABI_FREEBSD" or "FreeBSD" in note_owners or interpreter == "/libexec/ld-elf.so.1"
               or "libc.so.7" in needed or any(v.startswith("FBSD_") for v in versions))
    linux = (libc in ("musl", "glibc") or max_glibc or "GNU" in note_owners and kind == "executable"
             or any(n in ("libc.so", "libc.so.6") or n.startswith("ld-linux") for n in needed))
    if freebsd and linux:
        return "mixed"  # one system's marks on another's file: no loader takes it as it is
    return "freebsd" if freebsd else "linux" if linux else None


def read_notes(sec: NoteSection, little_endian: bool) -> tuple[set[str], str | None]:
    """The owners of a note section's first 64 notes, and the release FreeBSD's ABI note names (__FreeBSD_version:
    1400500 is 14.0), if it is there."""
    owners, release = set(), None
    for note in itertools.islice(sec.iter_notes(), 64):
        owners.add(str(note["n_name"]))
        desc = note["n_desc"]
        if note["n_name"] == "FreeBSD" and note["n_type"] in (1, "NT_GNU_ABI_TAG") and isinstance(
                desc, bytes) and len(desc) == 4:  # NT_FREEBSD_ABI_TAG, which pyelftools names as GNU's type 1
            version = struct.unpack("<I" if little_endian else ">I", desc)[0]
            release = f"{version // 100000}.{version // 1000 % 100}"
    return owners, release
