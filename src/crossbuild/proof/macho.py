"""Read a Mach-O file's header and load commands as an `Artifact`: CPU, file type, platform and minimum OS version,
install name, the libraries it loads, its dynamic linker and whether it holds code (macOS targets; any target's
scan recognises the format)."""

from __future__ import annotations

import struct

from crossbuild.proof.binary_formats import Artifact, stream_size

_MACHO_CPU = {7: "x86", 0x01000007: "x86_64", 12: "arm", 0x0100000C: "arm64"}
# Mach-O load commands read here (mach-o/loader.h); LC_REQ_DYLD (0x80000000) is part of the number
_LC_SEGMENT, _LC_SEGMENT_64, _LC_ID_DYLIB, _LC_LOAD_DYLINKER = 0x1, 0x19, 0xD, 0xE
_LC_LOAD_DYLIBS = frozenset({0xC, 0x80000018, 0x8000001F, 0x80000023, 0x20})  # load, weak, reexport, upward, lazy
_LC_THREADS = frozenset({0x4, 0x5})  # LC_THREAD, LC_UNIXTHREAD: an entry point the old way
_LC_CODE_SIGNATURE = 0x1D
_CPU_SUBTYPE_ARM64E = 2
_LC_VERSION_MIN_MACOSX, _LC_BUILD_VERSION, _LC_MAIN, _LC_RPATH = 0x24, 0x32, 0x80000028, 0x8000001C
_MACHO_PLATFORMS = {1: "macos", 2: "ios", 3: "tvos", 4: "watchos", 5: "bridgeos", 6: "maccatalyst",
                    7: "ios-simulator", 8: "tvos-simulator", 9: "watchos-simulator", 10: "driverkit"}
_S_ATTR_INSTRUCTIONS = 0x80000000 | 0x400  # S_ATTR_PURE_INSTRUCTIONS | S_ATTR_SOME_INSTRUCTIONS
MAX_MACHO_COMMANDS_BYTES = 16 << 20
MAX_NEEDED = 256  # libraries and run paths kept per file


def describe_macho(stream, rel: str) -> Artifact:
    """A Mach-O file from its header and load commands: CPU, file type, the platform and minimum OS version
    (LC_BUILD_VERSION, or the older LC_VERSION_MIN_MACOSX), its install name and the libraries it loads, the
    dynamic linker, and whether it holds code. Hand-written rather than macholib: that library opens files by
    name only (crossbuild reads a build's files through descriptors it opened below the workspace) and checks
    malformed input with assert."""
    start = stream.tell()
    size = stream_size(stream) - start
    head = stream.read(32)
    if head[:4] in (b"\xca\xfe\xba\xbe", b"\xca\xfe\xba\xbf"):  # fat, fat with 64-bit offsets
        n = struct.unpack(">I", head[4:8])[0]
        width = 20 if head[3] == 0xBE else 32
        arches = head + stream.read(width * min(n, 64))
        cpus = [_MACHO_CPU.get(struct.unpack(">i", arches[8 + width * i: 12 + width * i])[0], "?")
                for i in range(min(n, 64)) if 12 + width * i <= len(arches)]
        return Artifact(path=rel, format="macho", kind="unknown", machine="fat:" + ",".join(cpus),
                        problems=["a universal (fat) file: crossbuild builds one architecture per target"])
    magic = struct.unpack("<I", head[:4])[0]
    order = "<" if magic in (0xFEEDFACE, 0xFEEDFACF) else ">"
    bits = 64 if magic in (0xFEEDFACF, 0xCFFAEDFE) else 32
    cputype, cpusubtype, filetype, ncmds, sizeofcmds = struct.unpack(order + "iIIII", head[4:24])
    kinds = {1: "object", 2: "executable", 6: "shared_library", 8: "shared_library"}  # MH_DYLIB, MH_BUNDLE
    a = Artifact(path=rel, format="macho", kind=kinds.get(filetype, "unknown"),
                 machine=_MACHO_CPU.get(cputype, hex(cputype)), bits=bits,
                 endian="little" if order == "<" else "big")
    if a.machine == "arm64" and cpusubtype & 0xFF == _CPU_SUBTYPE_ARM64E:
        a.machine = "arm64e"  # pointer authentication: macOS runs only Apple's own arm64e code by default
    header_size = 32 if bits == 64 else 28
    if sizeofcmds > min(size - header_size, MAX_MACHO_COMMANDS_BYTES):
        a.problems.append("not a sound Mach-O file: its load commands lie outside the file")
        return a
    stream.seek(start + header_size)
    commands = stream.read(sizeofcmds)
    code: list[tuple[int, int]] = []  # file ranges of sections holding instructions
    entry = None
    threads = False
    platforms = 0
    pos = 0
    for _ in range(ncmds):
        if pos + 8 > len(commands):
            a.problems.append("not a sound Mach-O file: a load command runs past the commands' end")
            return a
        cmd, cmdsize = struct.unpack(order + "II", commands[pos:pos + 8])
        body = commands[pos:pos + cmdsize]
        if cmdsize < 8 or len(body) < cmdsize:
            a.problems.append("not a sound Mach-O file: a load command runs past the commands' end")
            return a
        if cmd in (_LC_SEGMENT, _LC_SEGMENT_64):
            wide = cmd == _LC_SEGMENT_64
            seg_fmt, sect_fmt = (order + "16sQQQQiiII", order + "16s16sQQIIIIIIII") if wide else (
                order + "16sIIIIiiII", order + "16s16sIIIIIIIII")
            seg_size, sect_size = struct.calcsize(seg_fmt), struct.calcsize(sect_fmt)
            nsects = struct.unpack(seg_fmt, body[8:8 + seg_size])[7]
            for i in range(min(nsects, (cmdsize - 8 - seg_size) // sect_size)):
                at = 8 + seg_size + i * sect_size
                fields = struct.unpack(sect_fmt, body[at:at + sect_size])
                sect_size_bytes, offset, flags = fields[3], fields[4], fields[8]
                if flags & _S_ATTR_INSTRUCTIONS and sect_size_bytes and offset:
                    if offset + sect_size_bytes > size:
                        a.problems.append("not a sound Mach-O file: a code section lies outside the file")
                        return a
                    code.append((offset, offset + sect_size_bytes))
        elif cmd == _LC_BUILD_VERSION:
            platform, minos = struct.unpack(order + "II", body[8:16])
            a.os_abi, a.min_os = _MACHO_PLATFORMS.get(platform, str(platform)), _macho_version(minos)
            platforms += 1
        elif cmd == _LC_VERSION_MIN_MACOSX:
            a.os_abi, a.min_os = "macos", _macho_version(struct.unpack(order + "I", body[8:12])[0])
            platforms += 1
        elif cmd in _LC_THREADS:
            threads = True
        elif cmd == _LC_CODE_SIGNATURE:
            a.signed = True
        elif cmd == _LC_ID_DYLIB:
            a.install_name = _macho_string(body, order)
        elif cmd in _LC_LOAD_DYLIBS:
            name = _macho_string(body, order)
            if name not in a.needed and len(a.needed) < MAX_NEEDED:  # a report, not a copy of a flood of commands
                a.needed.append(name)
        elif cmd == _LC_LOAD_DYLINKER:
            a.interpreter = _macho_string(body, order)
            a.libc = "libsystem" if a.interpreter == "/usr/lib/dyld" else None
        elif cmd == _LC_MAIN:
            entry = struct.unpack(order + "Q", body[8:16])[0]  # a file offset (__TEXT starts the file)
        elif cmd == _LC_RPATH and len(a.rpaths) < MAX_NEEDED:
            a.rpaths.append(_macho_string(body, order))
        pos += cmdsize
    if platforms > 1:  # the loader takes one; a second may say another system or an older minimum
        a.problems.append(f"{platforms} platform commands (LC_BUILD_VERSION, LC_VERSION_MIN_MACOSX): which system "
                          "and release it is for is ambiguous")
    if a.kind == "executable":
        a.linkage = "dynamic" if a.interpreter else "static"
        if entry is None and not threads:
            a.problems.append("no entry point (LC_MAIN): not a program the system can start")
    if a.kind in ("executable", "shared_library"):
        a.code = bool(code)
        if not code:
            a.problems.append("no code: no section of instructions with bytes in the file")
        elif entry is not None and not any(lo <= entry < hi for lo, hi in code):
            a.problems.append(f"entry point {entry:#x} lies outside its code")
    return a


def _macho_string(body: bytes, order: str) -> str:
    """The string a load command names by its offset (lc_str): dylib, dylinker and rpath commands."""
    offset = struct.unpack(order + "I", body[8:12])[0]
    return body[offset:].split(b"\0", 1)[0].decode("utf-8", "replace") if 12 <= offset < len(body) else ""


def _macho_version(packed: int) -> str:
    """X.Y.Z packed as xxxx.yy.zz nibbles; the .0 patch left out."""
    major, minor, patch = packed >> 16, (packed >> 8) & 0xFF, packed & 0xFF
    return f"{major}.{minor}" + (f".{patch}" if patch else "")
