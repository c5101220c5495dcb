"""What a build produced: find every binary in a tree (ELF, ar archives and their members, PE, Mach-O) by its
content, describe it, and say whether it fits a target. File names are never trusted; magic bytes are, and configure
probes are told by their build system's records (probes.py).
"""

from __future__ import annotations

import fnmatch
import io
import os
import posixpath
import re
import stat
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import pefile
from elftools.common.exceptions import ELFError

from crossbuild.foundation import safefs
from crossbuild.foundation.targets import Target
from crossbuild.proof.binary_formats import (
    MAX_ARCHIVE_BYTES,
    PE_MACHINES,
    Artifact,
    describe_coff,
    describe_elf,
    describe_pe,
    iter_ar_members,
    sniff,
)
from crossbuild.proof.macho import describe_macho
from crossbuild.proof.probes import ProbeRecords
from crossbuild.proof.wasm import describe_wasm

MAX_SCAN_SECONDS = 600.0
# Names that promise a binary; such a file with other content is reported (a renamed text file is no library).
BINARY_SUFFIXES = (".o", ".obj", ".a", ".lib", ".so", ".dll", ".exe", ".dylib", ".wasm")
# What LLVM's linkers (zig's lld) write before renaming into place, `<output>.tmp` and 7 random hex digits; a link
# that failed or was killed leaves it behind, half-written: not an artifact, and never run as a program.
LINKER_TEMPORARY = re.compile(r"\.tmp[0-9a-f]{7}$")


@dataclass
class ScanResult:
    artifacts: list[Artifact]
    probes_excluded: list[str]
    not_binaries: list[str]  # files with a binary's name but other content (or a FIFO, device... so named)
    files_seen: int
    probe_artifacts: list[Artifact] = field(default_factory=list)  # what the probe folders hold, for the report
    incomplete: str | None = None  # why the scan stopped early
    linker_temporaries: list[str] = field(default_factory=list)  # left by failed links; not counted


def scan_tree(root: str | Path, *, prune: frozenset[str] = frozenset(),
              max_seconds: float = MAX_SCAN_SECONDS, shipped: Callable[[str, BinaryIO], bool] | None = None
              ) -> ScanResult:
    """Every binary below ROOT, found by content. Links are never followed and only regular files are read
    (a FIFO or device cannot hang or flood the scan); PRUNE names folders (relative to ROOT) left out, such as
    crossbuild's own .xbuild/; SHIPPED(rel, open file) tells a file the prepared source holds as it is (not the
    build's output: left out); configure probes are told by their build system's records (probes.py); the scan
    stops, saying so, after MAX_SECONDS."""
    root = Path(root)
    result = ScanResult([], [], [], 0)
    probes = ProbeRecords(root)
    deadline = time.monotonic() + max_seconds
    for entry in safefs.walk_files(root, prune=lambda rel: rel in prune):
        if time.monotonic() > deadline:
            result.incomplete = f"the scan stopped after {max_seconds:.0f} s ({result.files_seen} files read)"
            break
        if not stat.S_ISREG(entry.st.st_mode):
            if not stat.S_ISLNK(entry.st.st_mode) and _promises_binary(entry.name):
                result.not_binaries.append(entry.rel)
            continue
        result.files_seen += 1
        try:
            fd = safefs.open_regular_at(entry.dir_fd, entry.name)
        except OSError:
            continue  # swapped for a link or a FIFO since the walk saw it
        with os.fdopen(fd, "rb") as f:
            head = f.read(64)
            fmt = sniff(head)
            if fmt is None and not (_promises_binary(entry.name) and head):
                continue
            if shipped is not None and shipped(entry.rel, f):
                continue
            if fmt is None:
                result.not_binaries.append(entry.rel)
                continue
            found = describe_file(f, entry.rel, fmt, root=root)
        if LINKER_TEMPORARY.search(entry.name):
            result.linker_temporaries.append(entry.rel)
        elif probes.is_probe(entry.rel, entry.st.st_mtime_ns):
            result.probes_excluded.append(entry.rel)
            result.probe_artifacts.extend(found)
        else:
            result.artifacts.extend(found)
    return result


def same_as_source(anchor: Path, source: str, copy: str) -> Callable[[str, BinaryIO], bool]:
    """SHIPPED for a scan_tree of ANCHOR: whether a file below SOURCE/ holds the bytes of the same path below COPY/
    (the pristine copy of the source as prepared): the project's own file, not something the build wrote."""
    def shipped(rel: str, f: BinaryIO) -> bool:
        if not rel.startswith(source + "/"):
            return False
        try:
            fd = safefs.open_regular(anchor, f"{copy}/{rel[len(source) + 1:]}")
        except OSError:
            return False
        with os.fdopen(fd, "rb") as g:
            if os.fstat(g.fileno()).st_size != os.fstat(f.fileno()).st_size:
                return False
            f.seek(0)
            while True:
                a, b = f.read(1 << 20), g.read(1 << 20)
                if a != b:
                    return False
                if not a:
                    return True
    return shipped


def _promises_binary(name: str) -> bool:
    if name.endswith(BINARY_SUFFIXES):
        return True
    return ".so." in name and name.split(".so.", 1)[1].replace(".", "").isdigit()


def describe_file(f, rel: str, fmt: str, *, root: Path) -> list[Artifact]:
    """Describe the open regular file F (at REL below ROOT) of format FMT."""
    try:
        f.seek(0)
        if fmt == "elf":
            return [describe_elf(f, rel)]
        if fmt in ("ar", "thin-ar"):
            return describe_archive(f, rel, thin=fmt == "thin-ar", root=root)
        if fmt == "pe":
            return [describe_pe(f, rel)]
        if fmt == "macho":
            return [describe_macho(f, rel)]
        if fmt == "coff":
            return [describe_coff(f.read(20), rel)]
        if fmt == "wasm":
            return [describe_wasm(f, rel, max_bytes=MAX_ARCHIVE_BYTES)]
    except (ELFError, pefile.PEFormatError, struct.error, OSError, ValueError) as e:
        return [Artifact(path=rel, format=fmt, kind="unknown", problems=[f"unreadable {fmt}: {e}"])]
    return []


def describe_archive(f, rel: str, thin: bool, *, root: Path) -> list[Artifact]:
    archive = Artifact(path=rel, format="thin-ar" if thin else "ar", kind="static_library", members=0)
    data = f.read(MAX_ARCHIVE_BYTES + 1)
    if len(data) > MAX_ARCHIVE_BYTES:
        archive.problems.append(f"larger than {MAX_ARCHIVE_BYTES >> 20} MiB: too large to check")
        return [archive]
    out = [archive]
    machines = set()
    budget = MAX_ARCHIVE_BYTES
    for name, start, size in iter_ar_members(data, thin):
        member_rel = f"{rel}({name})"
        if thin:  # members are files next to the archive: only regular files inside the scanned tree
            member = os.path.normpath(os.path.join(os.path.dirname(rel), name))
            try:
                blob = safefs.read_bytes(root, member, max_bytes=budget)
            except OSError as e:
                archive.problems.append(f"thin archive member {name} cannot be checked: "
                                        f"{e.strerror or e}" + (f" ({e.filename})" if e.filename else ""))
                continue
            budget -= len(blob)
        else:
            blob = data[start:start + size]
        fmt = sniff(blob[:64])
        if fmt == "elf":
            try:
                m = describe_elf(io.BytesIO(blob), member_rel)
            except (ELFError, struct.error, ValueError) as e:
                m = Artifact(path=member_rel, format="elf", kind="object", problems=[f"unreadable ELF: {e}"])
        elif fmt == "coff":
            m = describe_coff(blob[:20], member_rel)
        elif fmt == "macho":
            try:
                m = describe_macho(io.BytesIO(blob), member_rel)
            except (struct.error, ValueError) as e:
                m = Artifact(path=member_rel, format="macho", kind="object", problems=[f"unreadable Mach-O: {e}"])
        elif fmt == "wasm":
            m = describe_wasm(io.BytesIO(blob), member_rel, max_bytes=MAX_ARCHIVE_BYTES)
        elif blob[:4] == b"\x00\x00\xff\xff":  # short import object of a Windows import library
            machine = struct.unpack("<H", blob[6:8])[0]
            m = Artifact(path=member_rel, format="coff", kind="import_object",
                         machine=PE_MACHINES.get(machine, hex(machine)))
            archive.kind = "import_library"
        else:
            continue  # text members (e.g. __.PKGDEF) are not code
        m.member_of = rel
        archive.members += 1
        machines.add(m.machine)
        out.append(m)
    if len(machines) == 1:
        archive.machine = next(iter(machines))
    elif machines:
        archive.machine = "mixed:" + ",".join(sorted(str(m) for m in machines))
    return out


def check_artifact(a: Artifact, target: Target, *, workspace: Path | None = None) -> list[str]:
    """Why this artifact does not belong to `target` (empty when it fits). WORKSPACE: where the build ran; a
    Mach-O file that loads a library by a path in its build folders (all but install/) names nothing on a Mac."""
    problems = list(a.problems)
    if a.kind == "static_library":
        if a.members == 0:
            problems.append("archive holds no object files")
        return problems
    if a.format in ("ar", "thin-ar"):
        return problems
    if target.binary_format == "elf":
        _check_elf(a, target, problems)
    elif target.binary_format == "macho":
        _check_macho(a, target, problems, workspace)
    elif target.binary_format == "wasm":
        if a.format != "wasm":
            problems.append(f"{a.format.upper()} file, expected a WebAssembly module for {target.name}")
    elif a.format not in ("pe", "coff"):
        problems.append(f"{a.format.upper()} file, expected PE/COFF for {target.name}")
    elif a.machine != target.machine:
        problems.append(f"machine {a.machine}, expected {target.machine}")
    return problems


_ELF_OS_ABIS = {"linux": ("ELFOSABI_SYSV", "ELFOSABI_LINUX", "ELFOSABI_GNU"),
                "freebsd": ("ELFOSABI_SYSV", "ELFOSABI_FREEBSD")}
_SYSTEM_NAMES = {"linux": "Linux", "freebsd": "FreeBSD"}


def _check_elf(a: Artifact, target: Target, problems: list[str]) -> None:
    if a.format != "elf":
        problems.append(f"{a.format.upper()} file, expected ELF for {target.name}")
        return
    if a.machine != target.machine:
        problems.append(f"machine {a.machine}, expected {target.machine}")
    if a.bits != target.bits:
        problems.append(f"ELF{a.bits}, expected ELF{target.bits}")
    if a.endian != target.endian:
        problems.append(f"{a.endian}-endian, expected {target.endian}")
    system = _SYSTEM_NAMES[target.os]
    if a.os_abi not in _ELF_OS_ABIS[target.os]:
        problems.append(f"OS/ABI {a.os_abi}, expected SYSV/{system}")
    if a.system == "mixed":
        problems.append(f"both Linux's and FreeBSD's marks (loader, libc, symbol versions, ABI note), expected "
                        f"{system}'s alone")
    elif a.system and a.system != target.os:
        problems.append(f"built for {_SYSTEM_NAMES[a.system]} (its loader, libc or ABI note), expected {system}")
    elif target.os == "freebsd" and a.kind == "executable" and not a.system:
        problems.append("no FreeBSD mark (ABI note, /libexec/ld-elf.so.1 or libc.so.7): not linked for FreeBSD")
    if target.os == "freebsd" and a.min_os and target.min_os and _version(a.min_os) > target.min_os:
        problems.append(f"built for FreeBSD {a.min_os}, newer than the target's {target.min_os[0]}")
    if target.float_abi and a.float_abi and a.float_abi != target.float_abi:
        problems.append(f"{a.float_abi}-float ABI, expected {target.float_abi}-float")
    if a.kind == "executable" and a.interpreter:
        if a.libc and a.libc != target.libc:
            problems.append(f"links {a.libc} (interpreter {a.interpreter}), expected {target.libc}")
        elif a.libc is None:
            problems.append(f"unexpected interpreter {a.interpreter}")
    if target.glibc_version and a.max_glibc:
        if _version(a.max_glibc) > target.glibc_version:
            have = ".".join(map(str, target.glibc_version))
            problems.append(f"needs GLIBC_{a.max_glibc}, newer than the target's glibc {have}")


def _check_macho(a: Artifact, target: Target, problems: list[str], workspace: Path | None) -> None:
    if a.format != "macho":
        problems.append(f"{a.format.upper()} file, expected Mach-O for {target.name}")
        return
    if (a.machine or "").startswith("fat:"):
        return  # a universal file: its own problem says so
    if a.machine != target.machine:
        problems.append(f"CPU {a.machine}, expected {target.machine}")
    if (a.bits, a.endian) != (target.bits, target.endian):
        problems.append(f"{a.bits}-bit {a.endian}-endian, expected {target.bits}-bit {target.endian}-endian")
    if a.machine == "arm64" and a.kind in ("executable", "shared_library") and not a.signed:
        problems.append("no code signature (LC_CODE_SIGNATURE): macOS on arm64 runs no unsigned code")
    if a.os_abi and a.os_abi != "macos":
        problems.append(f"built for {a.os_abi}, expected macos")
    elif not a.os_abi and a.kind in ("executable", "shared_library"):
        problems.append("no platform or minimum macOS version (LC_BUILD_VERSION)")
    if a.min_os and target.min_os and _version(a.min_os) > target.min_os:
        have = ".".join(map(str, target.min_os))
        problems.append(f"needs macOS {a.min_os}, newer than the target's {have}")
    if a.kind == "executable" and a.interpreter != target.dynamic_loader:
        problems.append(f"dynamic linker {a.interpreter or 'none'}, expected {target.dynamic_loader}")
    named = list(dict.fromkeys(([a.install_name] if a.install_name else []) + a.needed))
    wrong = []
    for p in named:
        what = "install name" if p == a.install_name else "loads"
        if not p.startswith(("/", "@")):
            wrong.append(f"{what} {p}: a relative path, which dyld resolves against the working directory "
                         "(@rpath/ is the usual name)")
        elif workspace is not None and _below(posixpath.normpath(p), workspace) and not _below(
                posixpath.normpath(p), workspace / "install"):
            wrong.append(f"{what} {p}: a path in the build folder, which names nothing on a Mac (@rpath/ is the "
                         "usual name)")
    problems += wrong[:5] + ([f"... and {len(wrong) - 5} more such paths"] if len(wrong) > 5 else [])


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(".") if x.isdigit())


def _below(path: str, folder: Path) -> bool:
    return path == str(folder) or path.startswith(f"{folder}/")


def matches_any(rel: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(os.path.basename(rel), p) for p in patterns)
