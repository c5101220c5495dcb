"""Read one binary's bytes: recognise its format from the magic, and describe an ELF, PE or COFF file or an ar
archive's members as an `Artifact` (machine, bits, linkage, interpreter, float ABI, ...); Mach-O is `macho`'s,
WebAssembly `wasm`'s.
Parsing only; which files to read and whether an artifact fits a target is `artifacts`' job."""

from __future__ import annotations

import io
import os
import struct
from dataclasses import asdict, dataclass, field

import pefile
from elftools.common.exceptions import ELFError
from elftools.elf.constants import E_FLAGS
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.enums import ENUM_E_MACHINE, ENUM_EI_OSABI
from elftools.elf.gnuversions import GNUVerNeedSection
from elftools.elf.sections import ARMAttributesSection, NoteSection

from crossbuild.proof.elf_marks import elf_system, needed_versions, read_notes

MAX_ARCHIVE_BYTES = 2 << 30  # archives and PE files are read whole; a larger one is reported, not read
PE_MACHINES = {0x8664: "IMAGE_FILE_MACHINE_AMD64", 0x14C: "IMAGE_FILE_MACHINE_I386",
               0xAA64: "IMAGE_FILE_MACHINE_ARM64", 0x1C4: "IMAGE_FILE_MACHINE_ARMNT"}
_E_MACHINE_NAMES = {v: k for k, v in ENUM_E_MACHINE.items() if isinstance(v, int)}
_EI_OSABI_NAMES = {v: k for k, v in ENUM_EI_OSABI.items() if isinstance(v, int)}
# What a build delivers; objects and archive members are intermediate.
LINKED_KINDS = frozenset({"executable", "shared_library", "static_library", "import_library"})
EF_ARM_ABI_FLOAT_HARD = 0x400
EF_ARM_ABI_FLOAT_SOFT = 0x200


@dataclass
class Artifact:
    path: str  # relative to the scanned root; archive members as "lib.a(member.o)"
    format: str  # elf | pe | macho | wasm | ar | thin-ar | coff
    kind: str  # executable | shared_library | object | static_library | import_library | unknown
    machine: str | None = None
    bits: int | None = None
    endian: str | None = None
    os_abi: str | None = None
    linkage: str | None = None  # static | dynamic | static-pie (executables)
    interpreter: str | None = None
    libc: str | None = None  # musl | glibc | freebsd | libsystem (from the interpreter), for dynamic executables
    float_abi: str | None = None  # hard | soft (32-bit ARM)
    code: bool | None = None  # executables and libraries: an executable segment with bytes in the file
    max_glibc: str | None = None  # highest GLIBC_x.y symbol version required
    needed: list[str] = field(default_factory=list)
    min_os: str | None = None  # Mach-O: the minimum OS version it was built for; FreeBSD: its ABI note's release
    install_name: str | None = None  # Mach-O shared library: the path programs that link it record
    rpaths: list[str] = field(default_factory=list)  # Mach-O: LC_RPATH entries
    signed: bool | None = None  # Mach-O: carries a code signature (LC_CODE_SIGNATURE)
    system: str | None = None  # ELF: linux | freebsd | mixed, from the marks a system leaves (notes, loader, libc)
    subsystem: str | None = None  # PE: console | gui | ...
    members: int | None = None  # ar: number of object members
    member_of: str | None = None  # an archive member: the archive's path (members are not files of their own)
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v not in (None, [], "")}


def sniff(head: bytes) -> str | None:
    if head.startswith(b"\x7fELF"):
        return "elf"
    if head.startswith(b"!<arch>\n"):
        return "ar"
    if head.startswith(b"!<thin>\n"):
        return "thin-ar"
    if head.startswith(b"MZ"):
        return "pe"
    if head.startswith(b"\x00asm"):
        return "wasm"
    if len(head) >= 4 and struct.unpack("<I", head[:4])[0] in (0xFEEDFACE, 0xFEEDFACF, 0xCEFAEDFE, 0xCFFAEDFE):
        return "macho"
    if len(head) >= 8 and head[:4] in (b"\xca\xfe\xba\xbe", b"\xca\xfe\xba\xbf") and (
            0 < struct.unpack(">I", head[4:8])[0] < 30):
        return "macho"  # fat binary (a Java class file has a version >= 45 here)
    if len(head) >= 20 and struct.unpack("<H", head[:2])[0] in PE_MACHINES and _plausible_coff(head):
        return "coff"
    return None


def _plausible_coff(head: bytes) -> bool:
    nsections, _, _, _, opt_size, _ = struct.unpack("<HIIIHH", head[2:20])
    return 0 < nsections < 4096 and opt_size == 0


def _arm_float_abi(e_flags: int, is_object: bool) -> str | None:
    if e_flags & EF_ARM_ABI_FLOAT_HARD:
        return "hard"
    if e_flags & EF_ARM_ABI_FLOAT_SOFT:
        return "soft"
    if (e_flags & E_FLAGS.EF_ARM_EABIMASK) >= 0x05000000 and not is_object:
        return "soft"
    return None


def _declares_fp_use(elf: ELFFile) -> bool:
    """Whether an ARM object's build attributes say it uses floating point (Tag_ABI_FP_number_model). LLVM's
    assembler marks every object it assembles soft-float, even on a hard-float target (zstd's
    huf_decompress_amd64.S, empty on ARM); such an object declares no number model, and GNU ld's attribute merge
    lets it link with either calling convention. A compiled soft-float object declares one."""
    sec = elf.get_section_by_name(".ARM.attributes")
    if not isinstance(sec, ARMAttributesSection):
        return True  # no attributes to go by: keep the header's word
    return any(a.tag == "TAG_ABI_FP_NUMBER_MODEL" and a.value
               for sub in sec.iter_subsections() for subsub in sub.iter_subsubsections()
               for a in subsub.iter_attributes())


def object_machine(head: bytes) -> str | None:
    """The machine (EM_AARCH64 ...) of an ELF relocatable object from its first bytes; None for anything else."""
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[5] not in (1, 2):
        return None
    e_type, e_machine = struct.unpack(("<" if head[5] == 1 else ">") + "HH", head[16:20])
    return _E_MACHINE_NAMES.get(e_machine, hex(e_machine)) if e_type == 1 else None


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


def stream_size(stream) -> int:
    here = stream.tell()
    stream.seek(0, os.SEEK_END)
    size = stream.tell()
    stream.seek(here)
    return size


def describe_elf(stream, rel: str) -> Artifact:
    start = stream.tell()
    size = stream_size(stream) - start
    quick = _describe_object_header(stream.read(64), rel, size)
    if quick is not None:
        if quick.float_abi == "soft":  # rare in a hard-float build: worth reading its build attributes
            stream.seek(start)
            if not _declares_fp_use(ELFFile(stream)):
                quick.float_abi = None
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
            if tag.entry.d_tag == "DT_NEEDED" and tag.needed not in a.needed and len(a.needed) < 256:
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
        a.libc = ("musl" if "ld-musl" in interp else "glibc" if "ld-linux" in interp
                  else "freebsd" if interp == "/libexec/ld-elf.so.1" else None)
    if h["e_machine"] == "EM_ARM":
        a.float_abi = _arm_float_abi(h["e_flags"], a.kind == "object")
    versions: list[str] = []
    note_owners: set[str] = set()
    for sec in elf.iter_sections():
        if isinstance(sec, GNUVerNeedSection):
            versions = needed_versions(sec, a.problems)
            glibc = [v for v in versions if v.startswith("GLIBC_2.")]
            if glibc:
                a.max_glibc = max(glibc, key=_version_key).removeprefix("GLIBC_")
        elif isinstance(sec, NoteSection) and sec["sh_size"] <= 1 << 16:
            owners, release = read_notes(sec, elf.little_endian)
            note_owners |= owners
            a.min_os = release or a.min_os
    a.system = elf_system(os_abi=a.os_abi, interpreter=a.interpreter, libc=a.libc, max_glibc=a.max_glibc,
                          kind=a.kind, needed=a.needed, versions=versions, note_owners=note_owners)
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
            machine=PE_MACHINES.get(machine, hex(machine)),
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
    return Artifact(path=rel, format="coff", kind="object", machine=PE_MACHINES.get(machine, hex(machine)),
                    endian="little")


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


def archive_defines_global(data: bytes, name: str) -> bool:
    """Whether an ELF member of the (regular) archive DATA defines the global symbol NAME (an archive holding
    main(), gtest_main's, is a program's entry)."""
    try:
        members = list(iter_ar_members(data, thin=False))
    except ValueError:
        return False
    for _, start, size in members:
        if data[start:start + 4] != b"\x7fELF":
            continue  # the symbol index, string tables
        try:
            symtab = ELFFile(io.BytesIO(data[start:start + size])).get_section_by_name(".symtab")
            if symtab is not None and any(sym.name == name and sym["st_shndx"] != "SHN_UNDEF"
                                          and sym["st_info"]["bind"] == "STB_GLOBAL"
                                          for sym in symtab.iter_symbols()):
                return True
        except (ELFError, ValueError):
            continue
    return False


def has_interpreter(f) -> bool:
    """Whether the ELF file F names a program interpreter (it is linked dynamically)."""
    return any(seg["p_type"] == "PT_INTERP" for seg in ELFFile(f).iter_segments())
