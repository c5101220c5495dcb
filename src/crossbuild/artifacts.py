"""What a build produced: find every binary in a tree (ELF, ar archives and their members, PE, Mach-O) by its
content, describe it, and say whether it fits a target. File names are never trusted; magic bytes are.
"""

from __future__ import annotations

import fnmatch
import io
import os
import stat
import struct
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pefile
from elftools.common.exceptions import ELFError
from elftools.elf.constants import E_FLAGS
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_E_MACHINE, ENUM_EI_OSABI
from elftools.elf.gnuversions import GNUVerNeedSection

from . import safefs
from .targets import Target

# Where configure steps leave the binaries of their compiler checks: only these folders hold probes, whatever the
# files in them are called (a file named like a probe anywhere else is an artifact like any other).
CMAKE_PROBE_DIRS = ("CMakeScratch", "CMakeTmp")  # CMakeFiles/CMakeScratch/..., CMakeFiles/CMakeTmp/...
MESON_PROBE_DIR = "meson-private"
MAX_ARCHIVE_BYTES = 2 << 30  # archives are read whole; a larger one is reported, not read
MAX_SCAN_SECONDS = 600.0
# Names that promise a binary; such a file with other content is reported (a renamed text file is no library).
BINARY_SUFFIXES = (".o", ".obj", ".a", ".lib", ".so", ".dll", ".exe", ".dylib")

_ELF_MACHINE_OF_PE = {0x8664: "IMAGE_FILE_MACHINE_AMD64", 0x14C: "IMAGE_FILE_MACHINE_I386",
                      0xAA64: "IMAGE_FILE_MACHINE_ARM64", 0x1C4: "IMAGE_FILE_MACHINE_ARMNT"}
_MACHO_CPU = {7: "x86", 0x01000007: "x86_64", 12: "arm", 0x0100000C: "arm64"}
_E_MACHINE_NAMES = {v: k for k, v in ENUM_E_MACHINE.items() if isinstance(v, int)}
_EI_OSABI_NAMES = {v: k for k, v in ENUM_EI_OSABI.items() if isinstance(v, int)}
EF_ARM_ABI_FLOAT_HARD = 0x400
EF_ARM_ABI_FLOAT_SOFT = 0x200


@dataclass
class Artifact:
    path: str  # relative to the scanned root; archive members as "lib.a(member.o)"
    format: str  # elf | pe | macho | ar | thin-ar | coff
    kind: str  # executable | shared_library | object | static_library | import_library | unknown
    machine: str | None = None
    bits: int | None = None
    endian: str | None = None
    os_abi: str | None = None
    linkage: str | None = None  # static | dynamic | static-pie (executables)
    interpreter: str | None = None
    libc: str | None = None  # musl | glibc (from the interpreter), for dynamic ELF executables
    float_abi: str | None = None  # hard | soft (32-bit ARM)
    code: bool | None = None  # executables and libraries: an executable segment with bytes in the file
    max_glibc: str | None = None  # highest GLIBC_x.y symbol version required
    needed: list[str] = field(default_factory=list)
    subsystem: str | None = None  # PE: console | gui | ...
    members: int | None = None  # ar: number of object members
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in (None, [], "")}


@dataclass
class ScanResult:
    artifacts: list[Artifact]
    probes_excluded: list[str]
    not_binaries: list[str]  # files with a binary's name but other content (or a FIFO, device... so named)
    files_seen: int
    probe_artifacts: list[Artifact] = field(default_factory=list)  # what the probe folders hold, for the report
    incomplete: str | None = None  # why the scan stopped early


def is_probe(rel: str) -> bool:
    """Whether REL lies where CMake or Meson keep their compiler checks: CMakeFiles/<version>/CompilerId*/...,
    CMakeFiles/<version>/CMakeDetermineCompilerABI_*.bin, CMakeFiles/CMakeScratch|CMakeTmp/..., meson-private/."""
    parts = Path(rel).parts
    if MESON_PROBE_DIR in parts[:-1]:
        return True
    for i, p in enumerate(parts[:-2]):
        if p != "CMakeFiles":
            continue
        nxt = parts[i + 1]
        if nxt in CMAKE_PROBE_DIRS:
            return True
        if _is_version(nxt):
            rest = parts[i + 2:]
            if len(rest) >= 2 and rest[0].startswith("CompilerId"):
                return True
            if len(rest) == 1 and rest[0].startswith("CMakeDetermineCompilerABI_") and rest[0].endswith(".bin"):
                return True
    return False


def _is_version(name: str) -> bool:
    return bool(name) and all(part.isdigit() for part in name.split("."))


def scan_tree(root: str | Path, *, prune: frozenset[str] = frozenset(),
              max_seconds: float = MAX_SCAN_SECONDS) -> ScanResult:
    """Every binary below ROOT, found by content. Links are never followed and only regular files are read
    (a FIFO or device cannot hang or flood the scan); PRUNE names folders (relative to ROOT) left out, such as
    crossbuild's own .xbuild/; the scan stops, saying so, after MAX_SECONDS."""
    root = Path(root)
    result = ScanResult([], [], [], 0)
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
            if fmt is None:
                if _promises_binary(entry.name) and head:
                    result.not_binaries.append(entry.rel)
                continue
            found = describe_file(f, entry.rel, fmt, root=root)
        if is_probe(entry.rel):
            result.probes_excluded.append(entry.rel)
            result.probe_artifacts.extend(found)
        else:
            result.artifacts.extend(found)
    return result


def _promises_binary(name: str) -> bool:
    if name.endswith(BINARY_SUFFIXES):
        return True
    return ".so." in name and name.split(".so.", 1)[1].replace(".", "").isdigit()


def sniff(head: bytes) -> str | None:
    if head.startswith(b"\x7fELF"):
        return "elf"
    if head.startswith(b"!<arch>\n"):
        return "ar"
    if head.startswith(b"!<thin>\n"):
        return "thin-ar"
    if head.startswith(b"MZ"):
        return "pe"
    if len(head) >= 4 and struct.unpack("<I", head[:4])[0] in (0xFEEDFACE, 0xFEEDFACF, 0xCEFAEDFE, 0xCFFAEDFE):
        return "macho"
    if len(head) >= 8 and head[:4] == b"\xca\xfe\xba\xbe" and 0 < struct.unpack(">I", head[4:8])[0] < 30:
        return "macho"  # fat binary (a Java class file has a version >= 45 here)
    if len(head) >= 20 and struct.unpack("<H", head[:2])[0] in _ELF_MACHINE_OF_PE and _plausible_coff(head):
        return "coff"
    return None


def _plausible_coff(head: bytes) -> bool:
    nsections, _, _, _, opt_size, _ = struct.unpack("<HIIIHH", head[2:20])
    return 0 < nsections < 4096 and opt_size == 0


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
            return [describe_macho(f.read(4096), rel)]
        if fmt == "coff":
            return [describe_coff(f.read(20), rel)]
    except (ELFError, pefile.PEFormatError, struct.error, OSError, ValueError) as e:
        return [Artifact(path=rel, format=fmt, kind="unknown", problems=[f"unreadable {fmt}: {e}"])]
    return []


def _arm_float_abi(e_flags: int, is_object: bool) -> str | None:
    if e_flags & EF_ARM_ABI_FLOAT_HARD:
        return "hard"
    if e_flags & EF_ARM_ABI_FLOAT_SOFT:
        return "soft"
    if (e_flags & E_FLAGS.EF_ARM_EABIMASK) >= 0x05000000 and not is_object:
        return "soft"
    return None


def _describe_object_header(head: bytes, rel: str, size: int) -> Artifact | None:
    """An ET_REL file described from its 64-byte header alone (objects carry no segments, dynamic section or
    symbol versions); None for any other ELF type. pyelftools costs ~10 ms a file, most of a build tree's scan."""
    if len(head) < 52 or head[4] not in (1, 2) or head[5] not in (1, 2):
        return None
    order = "<" if head[5] == 1 else ">"
    e_type, e_machine = struct.unpack(order + "HH", head[16:20])
    if e_type != 1:  # ET_REL
        return None
    is32 = head[4] == 1
    flags_at = 36 if is32 else 48
    e_flags = struct.unpack(order + "I", head[flags_at:flags_at + 4])[0]
    e_shoff = struct.unpack(order + ("I" if is32 else "Q"), head[32:36] if is32 else head[40:48])[0]
    e_shentsize, e_shnum = struct.unpack(order + "HH", head[46:50] if is32 else head[58:62])
    machine = _E_MACHINE_NAMES.get(e_machine, hex(e_machine))
    a = Artifact(path=rel, format="elf", kind="object", machine=machine, bits=32 if is32 else 64,
                 endian="little" if head[5] == 1 else "big", os_abi=_EI_OSABI_NAMES.get(head[7], hex(head[7])),
                 float_abi=_arm_float_abi(e_flags, True) if machine == "EM_ARM" else None)
    if e_shnum == 0 or e_shoff == 0 or e_shoff + e_shnum * e_shentsize > size:
        a.problems.append("not a sound object file: its section headers are missing or lie outside the file")
    return a


def _stream_size(stream) -> int:
    here = stream.tell()
    stream.seek(0, os.SEEK_END)
    size = stream.tell()
    stream.seek(here)
    return size


def describe_elf(stream, rel: str) -> Artifact:
    start = stream.tell()
    size = _stream_size(stream) - start
    quick = _describe_object_header(stream.read(64), rel, size)
    if quick is not None:
        return quick
    stream.seek(start)
    elf = ELFFile(stream)
    h = elf.header
    a = Artifact(path=rel, format="elf", kind="unknown", machine=h["e_machine"], bits=elf.elfclass,
                 endian="little" if elf.little_endian else "big", os_abi=h["e_ident"]["EI_OSABI"])
    etype = h["e_type"]
    interp = None
    executable_ranges = []
    for seg in elf.iter_segments():
        if seg["p_offset"] + seg["p_filesz"] > size:
            a.problems.append(f"not a sound ELF file: a {seg['p_type']} segment lies outside the file")
            return a
        if seg["p_type"] == "PT_INTERP":
            interp = seg.get_interp_name()
        elif seg["p_type"] == "PT_LOAD" and seg["p_flags"] & 1 and seg["p_filesz"] > 0:  # PF_X
            executable_ranges.append((seg["p_vaddr"], seg["p_vaddr"] + seg["p_filesz"]))
    dyn = elf.get_section_by_name(".dynamic")
    flags_1 = 0
    soname = None
    if isinstance(dyn, DynamicSection):
        for tag in dyn.iter_tags():
            if tag.entry.d_tag == "DT_NEEDED":
                a.needed.append(tag.needed)
            elif tag.entry.d_tag == "DT_FLAGS_1":
                flags_1 = tag.entry.d_val
            elif tag.entry.d_tag == "DT_SONAME":
                soname = tag.soname
    if etype == "ET_REL":
        a.kind = "object"
    elif etype == "ET_EXEC":
        a.kind = "executable"
        a.linkage = "dynamic" if interp else "static"
    elif etype == "ET_DYN":
        is_pie = bool(flags_1 & 0x08000000)  # DF_1_PIE
        if interp or (is_pie and not soname):
            a.kind = "executable"
            a.linkage = "dynamic" if interp else "static-pie"
        else:
            a.kind = "shared_library"
    if a.kind in ("executable", "shared_library"):
        a.code = bool(executable_ranges)
        if not executable_ranges:
            a.problems.append("no code: no loadable executable segment with bytes in the file")
        elif a.kind == "executable" and not any(lo <= h["e_entry"] < hi for lo, hi in executable_ranges):
            a.problems.append(f"entry point {h['e_entry']:#x} lies outside its executable code")
    if interp:
        a.interpreter = interp
        a.libc = "musl" if "ld-musl" in interp else "glibc" if "ld-linux" in interp else None
    if h["e_machine"] == "EM_ARM":
        a.float_abi = _arm_float_abi(h["e_flags"], a.kind == "object")
    for sec in elf.iter_sections():
        if isinstance(sec, GNUVerNeedSection):
            versions = [aux.name for _, auxes in sec.iter_versions() for aux in auxes]
            glibc = [v for v in versions if v.startswith("GLIBC_2.")]
            if glibc:
                a.max_glibc = max(glibc, key=_version_key).removeprefix("GLIBC_")
    return a


def dynamic_symbols(f) -> tuple[set[str], set[str]]:
    """(exported, required) dynamic symbols of an open ELF file; weak references are not required."""
    exported: set[str] = set()
    required: set[str] = set()
    dynsym = ELFFile(f).get_section_by_name(".dynsym")
    for sym in dynsym.iter_symbols() if dynsym is not None else ():
        bind = sym["st_info"]["bind"]
        if not sym.name or bind == "STB_LOCAL":
            continue
        if sym["st_shndx"] == "SHN_UNDEF":
            if bind == "STB_GLOBAL":
                required.add(sym.name)
        elif sym["st_other"]["visibility"] in ("STV_DEFAULT", "STV_PROTECTED"):
            exported.add(sym.name)
    return exported, required


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("_", 1)[1].split(".") if x.isdigit())


def describe_pe(f, rel: str) -> Artifact:
    data = f.read(MAX_ARCHIVE_BYTES + 1)
    if len(data) > MAX_ARCHIVE_BYTES:
        return Artifact(path=rel, format="pe", kind="unknown", problems=["too large to check"])
    pe = pefile.PE(data=data, fast_load=True)
    try:
        machine = pe.FILE_HEADER.Machine
        dll = bool(pe.FILE_HEADER.Characteristics & 0x2000)
        subsystem = pefile.SUBSYSTEM_TYPE.get(pe.OPTIONAL_HEADER.Subsystem, str(pe.OPTIONAL_HEADER.Subsystem))
        a = Artifact(
            path=rel, format="pe", kind="shared_library" if dll else "executable",
            machine=_ELF_MACHINE_OF_PE.get(machine, hex(machine)),
            bits=64 if pe.OPTIONAL_HEADER.Magic == 0x20B else 32, endian="little",
            subsystem=subsystem.removeprefix("IMAGE_SUBSYSTEM_").lower(),
        )
        code = [sec for sec in pe.sections if sec.Characteristics & 0x20000000 and sec.SizeOfRawData > 0]  # EXECUTE
        if any(sec.PointerToRawData + sec.SizeOfRawData > len(data) for sec in pe.sections):
            a.problems.append("not a sound PE file: a section lies outside the file")
        a.code = bool(code)
        if not code:
            a.problems.append("no code: no executable section with bytes in the file")
        return a
    finally:
        pe.close()


def describe_coff(head: bytes, rel: str) -> Artifact:
    machine = struct.unpack("<H", head[:2])[0]
    return Artifact(path=rel, format="coff", kind="object", machine=_ELF_MACHINE_OF_PE.get(machine, hex(machine)),
                    endian="little")


def describe_macho(data: bytes, rel: str) -> Artifact:
    magic = struct.unpack("<I", data[:4])[0]
    if data[:4] == b"\xca\xfe\xba\xbe":
        n = struct.unpack(">I", data[4:8])[0]
        cpus = [_MACHO_CPU.get(struct.unpack(">i", data[8 + 20 * i: 12 + 20 * i])[0], "?") for i in range(n)]
        return Artifact(path=rel, format="macho", kind="unknown", machine="fat:" + ",".join(cpus))
    endian = "<" if magic in (0xFEEDFACE, 0xFEEDFACF) else ">"
    cputype, _, filetype = struct.unpack(endian + "iII", data[4:16])
    kinds = {1: "object", 2: "executable", 6: "shared_library", 8: "shared_library"}
    bits = 64 if magic in (0xFEEDFACF, 0xCFFAEDFE) else 32
    return Artifact(path=rel, format="macho", kind=kinds.get(filetype, "unknown"),
                    machine=_MACHO_CPU.get(cputype, hex(cputype)), bits=bits, endian="little")


def iter_ar_members(data: bytes, thin: bool):
    """(name, offset, size) of each member of an ar archive (GNU/SysV long names, BSD #1/, thin)."""
    pos = 8
    longnames = b""
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        if header[58:60] != b"`\n":
            raise ValueError(f"corrupt ar member header at offset {pos}")
        raw_name = header[:16].decode("ascii", "replace").rstrip()
        size = int(header[48:58].decode().strip() or 0)
        body = pos + 60
        name = raw_name
        data_start, data_size = body, size
        if raw_name == "//":
            longnames = data[body:body + size]
        elif raw_name.startswith("#1/"):
            n = int(raw_name[3:])
            name = data[body:body + n].decode("utf-8", "replace").rstrip("\0")
            data_start, data_size = body + n, size - n
        elif raw_name.startswith("/") and raw_name[1:].isdigit():
            off = int(raw_name[1:])
            end = longnames.find(b"\n", off)
            name = longnames[off:end if end >= 0 else None].decode("utf-8", "replace").rstrip("/")
        else:
            name = raw_name.rstrip("/")
        is_index = raw_name in ("/", "//", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED") or raw_name.startswith(
            "__.SYMDEF")
        if not is_index:
            yield name, data_start, 0 if thin else data_size
        # thin archives store only the index and name tables inline
        advance = size if (not thin or raw_name in ("/", "//", "/SYM64/")) else 0
        pos = body + advance + (advance & 1)


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
        elif blob[:4] == b"\x00\x00\xff\xff":  # short import object of a Windows import library
            machine = struct.unpack("<H", blob[6:8])[0]
            m = Artifact(path=member_rel, format="coff", kind="import_object",
                         machine=_ELF_MACHINE_OF_PE.get(machine, hex(machine)))
            archive.kind = "import_library"
        else:
            continue  # text members (e.g. __.PKGDEF) are not code
        archive.members += 1
        machines.add(m.machine)
        out.append(m)
    if len(machines) == 1:
        archive.machine = next(iter(machines))
    elif machines:
        archive.machine = "mixed:" + ",".join(sorted(str(m) for m in machines))
    return out


def check_artifact(a: Artifact, target: Target) -> list[str]:
    """Why this artifact does not belong to `target` (empty when it fits)."""
    problems = list(a.problems)
    if a.kind == "static_library":
        if a.members == 0:
            problems.append("archive holds no object files")
        return problems
    if a.format in ("ar", "thin-ar"):
        return problems
    if target.binary_format == "elf":
        if a.format != "elf":
            problems.append(f"{a.format.upper()} file, expected ELF for {target.name}")
            return problems
        if a.machine != target.machine:
            problems.append(f"machine {a.machine}, expected {target.machine}")
        if a.bits != target.bits:
            problems.append(f"ELF{a.bits}, expected ELF{target.bits}")
        if a.endian != target.endian:
            problems.append(f"{a.endian}-endian, expected {target.endian}")
        if a.os_abi not in ("ELFOSABI_SYSV", "ELFOSABI_LINUX", "ELFOSABI_GNU"):
            problems.append(f"OS/ABI {a.os_abi}, expected SYSV/Linux")
        if target.float_abi and a.float_abi and a.float_abi != target.float_abi:
            problems.append(f"{a.float_abi}-float ABI, expected {target.float_abi}-float")
        if a.kind == "executable" and a.interpreter:
            if a.libc and a.libc != target.libc:
                problems.append(f"links {a.libc} (interpreter {a.interpreter}), expected {target.libc}")
            elif a.libc is None:
                problems.append(f"unexpected interpreter {a.interpreter}")
        if target.glibc_version and a.max_glibc:
            need = tuple(int(x) for x in a.max_glibc.split("."))
            if need > target.glibc_version:
                have = ".".join(map(str, target.glibc_version))
                problems.append(f"needs GLIBC_{a.max_glibc}, newer than the target's glibc {have}")
    else:
        if a.format not in ("pe", "coff"):
            problems.append(f"{a.format.upper()} file, expected PE/COFF for {target.name}")
        elif a.machine != target.machine:
            problems.append(f"machine {a.machine}, expected {target.machine}")
    return problems


def matches_any(rel: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(os.path.basename(rel), p) for p in patterns)
