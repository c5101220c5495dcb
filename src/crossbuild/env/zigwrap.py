"""The compiler-tool wrappers (zcc, zxx, zar, zstrip, ...): GNU-style command lines in, zig commands out; and the
build machine's compilers (CC_FOR_BUILD, plain cc/gcc), run as they are with a record of the binaries they wrote.

Runs as a standalone script on every compiler call (see `main` for its arguments), so it
imports only the standard library. Each rewrite below answers a failure seen on real projects with zig 0.17; the
pure function `rewrite_cc` holds the logic and is unit-tested, `main` only executes its plan. Longer than the
house limit because it must stand alone (copied into `.xbuild/`, run with `python -I -S` inside the sandbox):
splitting it would mean shipping and path-wiring several files for every compiler call.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

# Source suffixes clang recognises; a positional input with one of these is compiled, not linked.
SOURCE_SUFFIXES = {
    ".c", ".cc", ".cpp", ".cxx", ".c++", ".C", ".cp", ".m", ".mm", ".s", ".S", ".sx", ".i", ".ii",
}
# Linker inputs zig knows by name; anything else with object magic is renamed (zig would hand the whole
# command to clang's driver, which links with the host /usr/bin/ld: bzip2's `.sho` objects).
KNOWN_LINK_SUFFIXES = {".o", ".lo", ".obj", ".a", ".lib", ".so", ".dll", ".dylib", ".res", ".tbd"}
_SHARED_VERSIONED = re.compile(r"\.so(\.\d+)+$")
_OBJECT_MAGICS = (b"\x7fELF", b"!<arch>\n", b"!<thin>\n", b"\x64\x86", b"\x4c\x01", b"\x64\xaa")

_POSITION_INDEPENDENT = {"-fPIC", "-fpic", "-fPIE", "-fpie"}
_NOT_PIE = {"-no-pie", "-nopie", "-fno-PIE", "-fno-pie", "-fno-PIC", "-fno-pic"}

# Options whose value is the next argument (so that argument is not an input file).
_TAKES_VALUE = {
    "-o", "-I", "-D", "-U", "-L", "-l", "-include", "-imacros", "-isystem", "-idirafter", "-iquote", "-isysroot",
    "-iprefix", "-iwithprefix", "-x", "-MF", "-MT", "-MQ", "-Xlinker", "-Xpreprocessor", "-Xassembler", "-T",
    "-u", "-e", "-target", "-arch", "-z", "-aux-info", "--param", "-Xclang", "-mllvm",
}
# Flags that make the call compile only (no link step happens).
_NO_LINK = {"-c", "-E", "-S", "-M", "-MM", "-fsyntax-only"}

# gcc feature names in -march=...+feat, as zig's -mcpu feature names.
_AARCH64_FEATURES = {
    "crypto": "crypto", "crc": "crc", "simd": "neon", "fp": "fp_armv8", "lse": "lse", "sve": "sve",
    "sve2": "sve2", "dotprod": "dotprod", "fp16": "fullfp16", "aes": "aes", "sha2": "sha2", "sha3": "sha3",
    "sm4": "sm4", "rcpc": "rcpc", "rdma": "rdm", "i8mm": "i8mm", "bf16": "bf16",
}


@dataclass
class Plan:
    """What the wrapper will do: print text and exit, or run one zig command per entry of `commands`."""

    commands: list[list[str]] = field(default_factory=list)
    stdout: str | None = None
    symlinks: dict[str, str] = field(default_factory=dict)  # link name (in a temp dir) -> real object file
    notes: list[str] = field(default_factory=list)  # what was rewritten, for the wrapper log
    error: str | None = None  # the call cannot be translated: print this and exit 2
    linker_state: dict[str, str] = field(default_factory=dict)  # the positional linker switches now in force
    linker_stack: list[dict[str, str]] = field(default_factory=list)  # saved by --push-state
    macho: bool = False  # linking for macOS: GNU linker switches are translated to Apple's
    soname_pending: bool = False  # a Mach-O link's `-Wl,-soname` whose name comes in the next -Wl argument


def _is_object_file(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return any(head.startswith(m) for m in _OBJECT_MAGICS)


def _translate_march(value: str, arch: str) -> str | None:
    """-march=VALUE for a non-x86 target, as the -mcpu=... zig accepts (None: drop the flag)."""
    if value == "native":
        return None
    if arch == "aarch64":
        m = re.fullmatch(r"armv(8|9)(?:\.(\d))?-a((?:\+[a-z0-9]+)*)", value)
        if not m:
            return None
        major, minor, feats = m.group(1), m.group(2), m.group(3)
        parts = ["generic"]
        if major == "9":
            parts.append("v9a" if not minor else f"v9_{minor}a")
        elif minor:
            parts.append(f"v8_{minor}a")
        for feat in filter(None, feats.split("+")):
            neg = feat.startswith("no")
            name = _AARCH64_FEATURES.get(feat[2:] if neg else feat)
            if name:
                parts.append(("-" if neg else "+") + name)
        return "-mcpu=" + parts[0] + "".join(p if p[0] in "+-" else "+" + p for p in parts[1:])
    if arch == "arm":
        m = re.fullmatch(r"armv(\d)(?:\.(\d))?-?(a|r|m)?((?:\+[a-z0-9]+)*)", value)
        if not m:
            return None
        version = m.group(1) + (f"_{m.group(2)}" if m.group(2) else "") + (m.group(3) or "")
        return f"-mcpu=generic+v{version}"
    # riscv64 (-march=rv64gc...) and others: zig's baseline CPU already matches the ABI; drop it.
    return None


_WASI_EMULATED = ("signal", "mman", "process_clocks", "getpid")
# What C++17 removed and libstdc++ (Debian's g++) still declares, deprecated; zig's libc++ hides it unless asked
_LIBCXX_KEPT = ("UNARY_BINARY_FUNCTION", "BINDERS", "AUTO_PTR", "RANDOM_SHUFFLE")


def rewrite_cc(args: list[str], *, driver: str, zig: str, zig_target: str, arch: str, binary_format: str,
               bindir: str, exists=os.path.exists, is_object=_is_object_file, no_werror: bool = False,
               pie: bool = False, prefix: str | None = None, cxx_runtime: str | None = None,
               needs_runtime=None, program_loader: str | None = None, holds_cxx=None,
               force_include: str = "") -> Plan:
    """Plan the zig call(s) for `zcc`/`zxx ARGS` (driver is "cc" or "c++"). no_werror ($CROSSBUILD_NO_WERROR=1):
    the project's -Werror flags are dropped, whatever build file added them. ELF code is compiled
    position-independent unless the project says otherwise; pie ($CROSSBUILD_PIE=1): whatever it says, and
    executables are linked as PIE, as Debian's compilers do by default. PREFIX ($CROSSBUILD_PREFIX): the
    dependencies cross-built for the target are searched last, as a cross compiler searches its sysroot's /usr.
    CXX_RUNTIME ($CROSSBUILD_SHARED_CXX_RUNTIME, cxx_runtime.py): a C++ shared library, and a C++ program linking
    one that needs it (NEEDS_RUNTIME), link that shared runtime instead of zig's static one; so does a shared
    library the C driver links from C++ objects or archives (HOLDS_CXX reads them). PROGRAM_LOADER
    ($CROSSBUILD_PROGRAM_LOADER, the build-machine check's): dynamic programs name that loader, and its folder as
    their run path, so a script can start them on this machine. FORCE_INCLUDE ($CROSSBUILD_FORCE_INCLUDE, the
    knowledge base's musl entries): headers every C and C++ compile includes first (see _forced_includes)."""
    plan = Plan(macho=binary_format == "macho")
    holds_cxx = holds_cxx or _holds_cxx_code

    # Queries some configure scripts and libtool make; answer them like a non-multilib gcc would.
    for arg in args:
        if arg == "-print-multi-os-directory":
            plan.stdout = "../lib\n"
            return plan
        if arg == "-print-multi-directory":
            plan.stdout = ".\n"
            return plan
        if arg == "-print-multi-lib":
            plan.stdout = ".;\n"
            return plan
        if arg == "-print-prog-name=ld":
            plan.stdout = os.path.join(bindir, "zld") + "\n"
            return plan

    out: list[str] = []
    link = not any(a in _NO_LINK for a in args)
    sources: list[str] = []
    has_output = False
    shared = "-shared" in args
    nostdlib = "-nostdlib" in args
    if "-static" in args:  # the state --pop-state restores starts static
        plan.linker_state["static"] = "-Bstatic"
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _TAKES_VALUE and i + 1 < len(args):
            if arg == "-o":
                has_output = True
            if arg == "-Xlinker" and args[i + 1] in ("-rpath-link", "--rpath-link") and i + 3 < len(args):
                plan.notes.append(f"dropped -Xlinker {args[i + 1]} {args[i + 3]}")
                i += 4  # -Xlinker -rpath-link -Xlinker DIR
                continue
            if arg == "-target":
                plan.notes.append(f"dropped {arg} {args[i + 1]} (the wrapper sets the target)")
                i += 2
                continue
            if arg == "-Xlinker":
                out += [a for item in _filter_linker_flags([args[i + 1]], plan) for a in ("-Xlinker", item)]
                i += 2
                continue
            out += [arg, args[i + 1]]
            i += 2
            continue
        if arg.startswith("--target=") or arg.startswith("-mtune=") or arg in ("-mcpu=native",):
            plan.notes.append(f"dropped {arg}")
        elif arg.startswith("-march="):
            value = arg.split("=", 1)[1]
            if arch == "x86_64" and value != "native":
                out.append(arg)
            else:
                new = _translate_march(value, arch)
                plan.notes.append(f"{arg} -> {new or 'dropped'}")
                if new:
                    out.append(new)
        elif arg.startswith("-Wp,") and all(p.startswith(("-D", "-U")) and len(p) > 2 for p in arg[4:].split(",")):
            # `-Wp,-D_FORTIFY_SOURCE=2` (hardening flags written for gcc): zig's driver takes only -MD/-MMD after
            # -Wp, and refuses the rest ("unsupported preprocessor arg"). gcc hands these to its preprocessor as is.
            out += arg[4:].split(",")
            plan.notes.append(f"{arg} -> {' '.join(arg[4:].split(','))}")
        elif arg.startswith("-Wl,"):
            kept = _filter_linker_flags(arg[4:].split(","), plan)
            if kept:
                out.append("-Wl," + ",".join(kept))
        elif no_werror and (arg == "-Werror" or arg.startswith("-Werror=") or arg == "-pedantic-errors"):
            plan.notes.append(f"dropped {arg} (CROSSBUILD_NO_WERROR)")
        elif pie and binary_format == "elf" and arg in _NOT_PIE:
            plan.notes.append(f"dropped {arg} (CROSSBUILD_PIE)")
        elif arg in ("-lgcc_s", "-lgcc", "-stats"):
            plan.notes.append(f"dropped {arg}")  # zig links its own compiler-rt and unwinder
        elif driver == "c++" and shared and nostdlib and _is_libtool_postdep(arg):
            plan.notes.append(f"dropped libtool postdep {arg}")
        elif driver == "c++" and shared and nostdlib and arg == "-nostdlib":
            plan.notes.append("dropped -nostdlib from libtool C++ shared link (zig links libc++ itself)")
        elif not arg.startswith("-") or arg == "-":
            suffix = os.path.splitext(arg)[1]
            if suffix in SOURCE_SUFFIXES:
                sources.append(arg)
                out.append(arg)
            elif (suffix not in KNOWN_LINK_SUFFIXES and not _SHARED_VERSIONED.search(arg) and exists(arg)
                  and is_object(arg)):
                # numbered: objects from different folders often share a name (malloc/free.lo, mallocng/free.lo)
                link_name = f"{len(plan.symlinks)}-{os.path.basename(arg)}.o"
                plan.symlinks[link_name] = os.path.abspath(arg)
                plan.notes.append(f"renamed linker input {arg} -> *.o")
                out.append("\0" + link_name)  # resolved to the temp dir path by main()
            else:
                out.append(arg)
        else:
            out.append(arg)
        i += 1

    # -UNDEBUG: zig cc defines NDEBUG at every -O level but -O0/-Og, which gcc and clang never do, so a project's
    # assert() checks (its test programs' among them) were compiled out of every optimised build. Given before
    # the project's arguments it cancels only zig's own define; a project's -DNDEBUG (CMake's Release) still holds.
    # -fno-sanitize=undefined: zig cc instruments with UBSan when no -O (or -O0) is given, which no gcc or clang
    # does: a static library built that way (a hand-written Makefile with no CFLAGS) leaves __ubsan_handle_*
    # undefined in every consumer linked with -O. Before the project's arguments, so its own -fsanitize= holds.
    base = [zig, driver, "-target", zig_target, "-Wno-error=date-time", "-UNDEBUG", "-fno-sanitize=undefined"]
    tail: list[str] = ["-Wno-error"] if no_werror else []
    if binary_format == "elf" and sources and not any(a in _POSITION_INDEPENDENT for a in args) and (
            pie or (not link and not any(a in _NOT_PIE for a in args))):
        # Objects always, as Debian's compilers do: code that reads libc's data (stdout, environ) through the GOT,
        # never through copy relocations in the executable. zig's stub libc.so gives such objects one shared
        # address, so a non-PIE dynamic executable got one copy for stdout and stderr, or for environ, optind
        # and optarg (libuv's test runner crashed on arm and riscv64; lld refused the misaligned copy on
        # aarch64). zig itself compiles PIC when it compiles and links a dynamic program in one command, and
        # -fPIE there would make static programs static-pie: only pie mode adds it to those.
        tail.append("-fPIE")
    if pie and binary_format == "elf" and link and not shared and "-r" not in args and "-pie" not in args and (
            sources or out):
        tail.append("-pie")
    if (link and "musl" in zig_target and "-ldl" in args and not shared and
            not any(a in ("-static", "-r", "-nostdlib") for a in args)):
        # zig links musl programs statically unless told otherwise, and musl's libc.a answers every dlopen with
        # "Dynamic loading not supported". A program that asks for libdl loads code at run time: linked as a
        # native musl gcc links it (dynamically), it can (libuv's dlerror test in its static-library runner).
        plan.notes.append("-ldl: linked dynamically (a static musl program cannot dlopen)")
        tail.append("-dynamic")
    if program_loader and link and binary_format == "elf" and not shared and "-r" not in args and (sources or out):
        tail += [f"-Wl,--dynamic-linker={program_loader}", f"-Wl,-rpath,{os.path.dirname(program_loader)}"]
    if link and binary_format == "elf" and (sources or out):
        # lld defaults to --no-undefined-version, which breaks version scripts naming absent symbols
        # (zlib's configure then silently drops its shared library).
        tail.append("-Wl,--undefined-version")

    if binary_format == "wasm":
        # wasi-libc declares signal(), mmap(), clock() and getpid() only with these, and its headers then
        # #error out; every project that meets them is built the same way (wasi-sdk's emulations), and the
        # libraries, static, add only what a module calls
        base += [f"-D_WASI_EMULATED_{name.upper()}" for name in _WASI_EMULATED]
        if link and (sources or out) and "-r" not in args and not any(a == "-nostdlib" for a in args):
            tail += [f"-lwasi-emulated-{name.replace('_', '-')}" for name in _WASI_EMULATED]
    base += _forced_includes(force_include, driver, sources, args, plan)
    if driver == "c++":
        # code written against libstdc++ uses them in C++17 (Boost 1.74's hash derives from std::unary_function):
        # built as g++ builds it, not refused by the library zig links instead
        base += [f"-D_LIBCPP_ENABLE_CXX17_REMOVED_{name}" for name in _LIBCXX_KEPT]
    if prefix:
        # the prefix is the target's /usr for what was cross-built into it: a Debian-patched project includes
        # <gmock/gmock.h> and links -lgtest with no find_package, as its cross compiler finds them in the
        # multiarch folders. Searched after everything else (-idirafter: never in front of libc's own headers;
        # -L last: the project's own folders first).
        include, lib = os.path.join(prefix, "include"), os.path.join(prefix, "lib")
        if (sources or not link) and exists(include):
            tail += ["-idirafter", include]
        if link and (sources or out) and exists(lib):
            tail += ["-L", lib]
    if "-c" in args and not has_output and (len(sources) > 1 or (sources and binary_format == "pe")):
        # zig merges `cc -c a.c b.c` into one a.o; gcc writes a.o and b.o. For Windows zig names the object
        # a.obj where mingw gcc writes a.o; autoconf would take the .obj for MSVC and libtool would call `lib`.
        plan.notes.append(f"-c of {len(sources)} source(s) without -o: one NAME.o each")
        others = [a for a in out if a not in sources]
        for src in sources:
            obj = os.path.splitext(os.path.basename(src))[0] + ".o"
            plan.commands.append(base + others + [src, "-o", obj])
        return plan
    cxx_link = driver == "c++" or any(a.startswith("-l") and a[2:] in _CXX_LIBS for a in args)
    if not cxx_link and link and shared and binary_format == "elf" and not nostdlib and holds_cxx(
            [*plan.symlinks.values(), *(a for a in out if a.endswith((".o", ".a")) and exists(a))]):
        # libtool links a library with the C driver when the library's own sources are C (or none: only C++
        # convenience archives); gcc leaves the C++ runtime's symbols undefined there, for the consumer's shared
        # libstdc++ to answer. zig's runtime is static and hidden in every consumer: nothing would answer them
        # (__cxa_guard_acquire: "symbol not found" when the library loads), so it is linked in as g++ would.
        cxx_link = True
        plan.notes.append("C++ code in a shared library linked by the C driver: linked with the C++ runtime")
        if not cxx_runtime:
            tail.append("-lc++")
    if cxx_runtime and binary_format == "elf" and link and not any(a in ("-r", "-static", "-static-pie")
                                                                   for a in args) and cxx_link and (
            shared or _links_a_runtime_user(out, prefix, exists, needs_runtime or _needs_runtime)):
        return _with_shared_runtime(plan, base, out, tail, sources, cxx_runtime, shared, args)
    plan.commands.append(base + out + tail)
    return plan


# A header name a forced include may take: a system header's relative name, never a path that climbs or starts at /
_HEADER_NAME = re.compile(r"^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*(\.h|\.hpp)?$")
_NOT_C_FAMILY = (".s", ".S", ".sx", ".i", ".ii")  # assembly and preprocessed sources: no header goes in front
_CXX_SUFFIXES = (".cc", ".cpp", ".cxx", ".c++", ".C", ".cp", ".mm")


def _forced_includes(names: str, driver: str, sources: list[str], args: list[str], plan: Plan) -> list[str]:
    """`-include H` for each header NAMES lists (space-separated): what glibc's headers declare through their own
    includes and musl's do not (`ulong` comes with glibc's <stdlib.h>, from <sys/types.h> in both). Only for
    compiles of C or C++ sources: never assembly (a C typedef in front of it is an error), never preprocessed
    input; a header without a .h suffix (<cstdint>) only when every source is C++."""
    languages = [v for a, v in zip(args, args[1:], strict=False) if a == "-x"]
    if not names or not sources or any(s.endswith(_NOT_C_FAMILY) for s in sources) or any(
            v.startswith(("assembler", "cpp-output")) for v in languages):
        return []
    cxx = all(s.endswith(_CXX_SUFFIXES) or (driver == "c++" and not s.endswith((".c", ".m"))) for s in sources)
    out: list[str] = []
    for name in names.split():
        if not _HEADER_NAME.match(name):
            plan.notes.append(f"CROSSBUILD_FORCE_INCLUDE: {name!r} is not a system header's name; left out")
        elif name.endswith((".h", ".hpp")) or cxx:
            out += ["-include", name]
    return out


_CXX_LIBS = {"stdc++", "c++", "c++abi", "supc++"}  # -l names that make a link a C++ one
_CXX_STDLIB = _CXX_LIBS | {"unwind"}  # -l names of a C++ runtime's parts (the shared one has them all)
_RUNTIME_NAME = b"libc++_shared.so\0"


def _pairs(items: list[str], takes_value: set[str]) -> list[list[str]]:
    """ITEMS as arguments with their separate value: [["-o", "x"], ["a.o"], ...]."""
    out: list[list[str]] = []
    i = 0
    while i < len(items):
        width = 2 if items[i] in takes_value and i + 1 < len(items) else 1
        out.append(items[i:i + width])
        i += width
    return out


def _with_shared_runtime(plan: Plan, base: list[str], out: list[str], tail: list[str], sources: list[str],
                         runtime: str, shared: bool, args: list[str]) -> Plan:
    """Link with the shared C++ runtime through zig's C driver (zig's C++ driver always links its static one, and
    -lc++ names it): sources in the same command are compiled first, each to an object of its own, position
    independent as the link needs."""
    pairs = [p for p in _pairs(out, _TAKES_VALUE) if not _static_runtime_part(p)]
    if sources:
        dropped = {"-o"} | ({"-MF", "-MT", "-MQ"} if len(sources) > 1 else set())  # one output per source
        compile_args = [a for p in pairs if p[0] not in dropped and p[0] not in sources for a in p]
        extra = ["-Wno-unused-command-line-argument"]
        if not any(a in _POSITION_INDEPENDENT for a in args):
            extra += ["-fPIC"] if shared else [] if any(a in _NOT_PIE for a in args) else ["-fPIE"]
        objects = {}
        for n, src in enumerate(dict.fromkeys(sources)):
            objects[src] = f"\0cxx-{n}-{os.path.basename(src)}.o"
            plan.commands.append(base + compile_args + tail + extra + ["-c", src, "-o", objects[src]])
        # a language named for the sources (-x c++, -xc++) would make the link read its objects as source
        pairs = [[objects.get(a, a) for a in p] for p in pairs if not p[0].startswith("-x")]
    plan.commands.append([base[0], "cc", *base[2:], *(a for p in pairs for a in p), runtime, *tail])
    plan.notes.append(f"linked with the shared C++ runtime {runtime}")
    return plan


def _library_name(pair: list[str]) -> str:
    """The NAME of -lNAME or -l NAME (`:FILE` for -l:FILE), else ""."""
    if pair[0] == "-l":
        return pair[1] if len(pair) > 1 else ""
    return pair[0][2:] if pair[0].startswith("-l") else ""


def _static_runtime_part(pair: list[str]) -> bool:
    """Whether an argument (with its value) links a static C++ runtime or a part of one: -lc++, -l c++, -lunwind,
    -l:libc++.a, -static-libstdc++."""
    name = _library_name(pair)
    if name.startswith(":"):
        name = re.sub(r"^lib|\.(a|so[.\d]*)$", "", name[1:])
    return name in _CXX_STDLIB or pair[0] in ("-static-libstdc++", "-static-libgcc")


def _links_a_runtime_user(out: list[str], prefix: str | None, exists, needs_runtime) -> bool:
    """Whether a shared library this link takes (a path, or -lNAME / -l:FILE in its -L folders and the prefix) was
    linked with the shared C++ runtime: a program using it must share that runtime."""
    pairs = _pairs(out, _TAKES_VALUE)
    folders = [p[1] if len(p) > 1 else p[0][2:] for p in pairs if p[0].startswith("-L") and (len(p) > 1 or p[0][2:])]
    if prefix:
        folders.append(os.path.join(prefix, "lib"))
    candidates = [p[0] for p in pairs if not p[0].startswith("-") and (p[0].endswith(".so")
                                                                         or _SHARED_VERSIONED.search(p[0]))]
    for p in pairs:
        if name := _library_name(p):
            file = name[1:] if name.startswith(":") else f"lib{name}.so"
            candidates += [os.path.join(d, file) for d in folders]
    return any(exists(c) and needs_runtime(c) for c in candidates)


def _needs_runtime(path: str) -> bool:
    """Whether the ELF file at PATH names the shared C++ runtime (its dynamic string table holds the name)."""
    return _file_holds(path, re.compile(re.escape(_RUNTIME_NAME)), (b"\x7fELF",))


# Names only C++ code refers to (the runtime's: exceptions, guarded statics, operator new/delete, type_info
# vtables), as whole entries of a symbol string table. Not __cxa_atexit/__cxa_finalize: C's startup code uses them.
_CXX_RUNTIME_NAMES = re.compile(rb"\0(?:__gxx_personality_v0|__cxa_(?:guard_acquire|throw|begin_catch|pure_virtual"
                                rb")|_Znw[mj]|_Zna[mj]|_ZdlPv|_ZdaPv|_ZTVN10__cxxabiv1\w*)\0")


def _holds_cxx_code(paths) -> bool:
    """Whether any of the objects or archives at PATHS holds compiled C++ (refers to the C++ runtime)."""
    return any(_file_holds(p, _CXX_RUNTIME_NAMES, (b"\x7fELF", b"!<arch>\n")) for p in dict.fromkeys(paths))


def _file_holds(path: str, pattern: re.Pattern, magics: tuple[bytes, ...], overlap: int = 256) -> bool:
    """Whether the file at PATH starts with one of MAGICS and holds PATTERN (at most OVERLAP bytes long), read in
    chunks."""
    try:
        with open(path, "rb") as f:
            if not f.read(8).startswith(magics):
                return False
            f.seek(0)
            carry = b""
            while chunk := f.read(1 << 20):
                if pattern.search(carry + chunk):
                    return True
                carry = chunk[-overlap:]
    except OSError:
        return False
    return False


_CRT_OBJECT = re.compile(r"(^|/)(crt[1in]|Scrt1|crtbegin\w*|crtend\w*)\.o$")


def _is_libtool_postdep(arg: str) -> bool:
    """Startup objects and runtime libraries libtool copies from `$CXX -v` into a -nostdlib link."""
    return bool(_CRT_OBJECT.search(arg)) or arg in ("-lstdc++", "-lc++", "-lc++abi", "-lunwind", "-lsupc++")


def _filter_linker_flags(items: list[str], plan: Plan) -> list[str]:
    kept: list[str] = []
    skip_next = False
    for j, item in enumerate(items):
        if skip_next:
            skip_next = False
            continue
        if plan.macho and (plan.soname_pending or item in _SONAME or item.startswith(_SONAME_IS)):
            # a shared library's name as a GNU link gives it (libtool, when zld answers as lld, and hand-written
            # Makefiles) becomes its Mach-O install name under @rpath, which is what zig's linker records: it
            # ignores -soname and would record the output's path (`.libs/libfoo.1.dylib`), relative to the build
            name = item if plan.soname_pending else item.split("=", 1)[1] if "=" in item else None
            if name is None and j + 1 < len(items):
                name, skip_next = items[j + 1], True
            plan.soname_pending = name is None
            if name is not None:
                kept += ["-install_name", "@rpath/" + os.path.basename(name)]
                plan.notes.append(f"-soname {name} -> -install_name @rpath/{os.path.basename(name)}")
            continue
        if item in ("-rpath-link", "--rpath-link"):
            plan.notes.append(f"dropped -Wl,{item}")
            skip_next = j + 1 < len(items)
            continue
        if item.startswith(("-rpath-link=", "--rpath-link=")) or item in ("--kill-at", "-stats", "--stats"):
            plan.notes.append(f"dropped -Wl,{item}")
            continue
        if item == "--push-state":  # zig's linker options have no state stack (abseil's -latomic group)
            plan.linker_stack.append(dict(plan.linker_state))
            plan.notes.append("-Wl,--push-state: the switches after it are undone at --pop-state")
            continue
        if item == "--pop-state":
            saved = plan.linker_stack.pop() if plan.linker_stack else {}
            for switch, (default, _) in _STATE_SWITCHES.items():
                if plan.linker_state.get(switch, default) != saved.get(switch, default):
                    kept.append(saved.get(switch, default))
                    plan.linker_state[switch] = saved.get(switch, default)
            continue
        for switch, (default, other) in _STATE_SWITCHES.items():
            if _STATE_ALIASES.get(item, item) in (default, other):
                plan.linker_state[switch] = _STATE_ALIASES.get(item, item)
        kept.append(item)
    return kept


_SONAME = ("-soname", "--soname", "-h")
_SONAME_IS = ("-soname=", "--soname=")

# positional linker switches --push-state saves: (zig's default, the other setting)
_STATE_SWITCHES = {"as-needed": ("--no-as-needed", "--as-needed"), "static": ("-Bdynamic", "-Bstatic"),
                   "whole-archive": ("--no-whole-archive", "--whole-archive")}
_STATE_ALIASES = {"-dn": "-Bstatic", "-non_shared": "-Bstatic", "-static": "-Bstatic", "-dy": "-Bdynamic",
                  "-call_shared": "-Bdynamic", "-as-needed": "--as-needed", "-no-as-needed": "--no-as-needed",
                  "-whole-archive": "--whole-archive", "-no-whole-archive": "--no-whole-archive"}


def rewrite_windres(args: list[str], *, zig: str) -> Plan:
    """GNU windres (-i IN -o OUT -I DIR -D X, or positional IN OUT) as `zig rc`; lld links the .res it writes."""
    plan = Plan()
    inputs: list[str] = []
    output = None
    rc: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if a in ("-i", "--input") and nxt:
            inputs.append(nxt)
            i += 2
            continue
        if a in ("-o", "--output") and nxt:
            output = nxt
            i += 2
            continue
        if a in ("-I", "--include-dir") and nxt:
            rc += ["/i", nxt]
            i += 2
            continue
        if a in ("-D", "--define") and nxt:
            rc += ["/d", _windres_define(nxt)]
            i += 2
            continue
        if a in ("-O", "--output-format", "-J", "--input-format", "-F", "--target", "-c", "--codepage") and nxt:
            i += 2  # zig rc always reads .rc and writes .res, which lld accepts as an object
            continue
        for prefix, opt in (("--input=", None), ("--output=", None), ("--include-dir=", "/i"), ("-I", "/i"),
                            ("--define=", "/d"), ("-D", "/d")):
            if a.startswith(prefix) and len(a) > len(prefix):
                value = a[len(prefix):]
                if prefix == "--input=":
                    inputs.append(value)
                elif prefix == "--output=":
                    output = value
                else:
                    rc += [opt, _windres_define(value) if opt == "/d" else value]
                break
        else:
            if a.startswith("-"):
                plan.notes.append(f"ignored windres option {a}")
            elif not inputs:
                inputs.append(a)
            elif output is None:
                output = a
        i += 1
    if len(inputs) != 1 or not output:
        plan.error = "windres: need exactly one input and an output (-i IN -o OUT)"
        return plan
    plan.commands.append([zig, "rc", *rc, "/fo", output, "--", inputs[0]])
    return plan


def _windres_define(value: str) -> str:
    """GNU windres hands its defines to the preprocessor through a shell, so projects escape their quotes once more
    for it (libgit2: -DLIBGIT2_FILENAME=\\"git2\\"); zig rc takes them as they are and rejects the backslashes.
    Undo that one level of shell quoting, as llvm-windres does."""
    try:
        return " ".join(shlex.split(value))
    except ValueError:  # unbalanced quotes: not shell-escaped after all
        return value


def rewrite_strip(args: list[str], *, llvm_strip: str | None) -> Plan:
    """strip: zig's objcopy cannot strip (0.17: "unimplemented"), so use the host's multi-target llvm-strip;
    without it, leave the files as they are (stripping never decides whether a build is correct)."""
    if llvm_strip:
        return Plan(commands=[[llvm_strip, *args]])
    return Plan(notes=["strip: llvm-strip not found (apt-get install llvm); files left unstripped"])


def plan_for(tool: str, args: list[str], *, zig: str, zig_target: str, arch: str, binary_format: str,
             bindir: str) -> Plan:
    if tool in ("cc", "c++"):
        return rewrite_cc(args, driver=tool, zig=zig, zig_target=zig_target, arch=arch,
                          binary_format=binary_format, bindir=bindir,
                          no_werror=os.environ.get("CROSSBUILD_NO_WERROR") == "1",
                          pie=os.environ.get("CROSSBUILD_PIE") == "1",
                          prefix=os.environ.get("CROSSBUILD_PREFIX") or None,
                          cxx_runtime=os.environ.get("CROSSBUILD_SHARED_CXX_RUNTIME") or None,
                          program_loader=os.environ.get("CROSSBUILD_PROGRAM_LOADER") or None,
                          force_include=os.environ.get("CROSSBUILD_FORCE_INCLUDE", ""))
    if tool in ("ar", "ranlib", "objcopy", "dlltool"):
        return Plan(commands=[[zig, tool, *args]])
    if tool == "ld":
        kept = _filter_linker_flags(args, Plan())
        if binary_format == "pe":
            # zig 0.17 has no GNU-style PE linker (ld.lld rejects -m i386pep; lld-link speaks link.exe). Answer
            # version probes as lld does, so libtool sees a GNU-compatible linker instead of assuming MSVC's `lib`.
            if kept in (["-v"], ["--version"], ["-V"]):
                return Plan(commands=[[zig, "ld.lld", "--version"]])
            if kept == ["--help"]:
                # libtool builds DLLs only when `$LD --help` names auto-import (GNU ld and lld in MinGW mode do);
                # libtool links them through $CC, whose lld does auto-import. Without it every libtool library
                # for Windows was static only, and a test declaring dllimport could not link (libconfig)
                return Plan(commands=[["/bin/echo", "zld: Windows links go through $CC (lld in MinGW mode), which "
                                       "accepts --enable-auto-import and --out-implib"]])
            return Plan(error="zld: no GNU-style linker for Windows targets in zig 0.17; link through $CC instead")
        return Plan(commands=[[zig, "ld.lld", *kept]])
    if tool == "strip":
        return rewrite_strip(args, llvm_strip=shutil.which("llvm-strip"))
    if tool == "windres":
        return rewrite_windres(args, zig=zig)
    raise SystemExit(f"zigwrap: unknown tool {tool!r}")


def _log(plan: Plan, tool: str, args: list[str]) -> None:
    path = os.environ.get("CROSSBUILD_WRAP_LOG")
    if not path or not plan.notes:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{tool} {' '.join(args)}\n  " + "\n  ".join(plan.notes) + "\n")
    except OSError:
        pass


def build_outputs(args: list[str]) -> list[str]:
    """The files a gcc-style compiler call with ARGS writes that may be binaries: the -o output; without one, NAME.o
    for each source with -c, or a.out when it links; nothing for a query (--version, -dumpmachine, -E, ...)."""
    inputs: list[str] = []
    output = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-o", "--output") and i + 1 < len(args):
            output = args[i + 1]
            i += 2
            continue
        if arg.startswith("--output="):
            output = arg.split("=", 1)[1]
        elif arg.startswith("-o") and len(arg) > 2 and not arg.startswith("-objc"):
            output = arg[2:]
        elif arg in _TAKES_VALUE:
            i += 1
        elif not arg.startswith("-") and not arg.startswith("@"):
            inputs.append(arg)
        i += 1
    if output is not None:
        return [] if output == "-" else [output]
    if not inputs or any(a in ("-E", "-S", "-M", "-MM", "-fsyntax-only") for a in args):
        return []
    if "-c" in args:
        return [os.path.splitext(os.path.basename(src))[0] + ".o" for src in inputs
                if os.path.splitext(src)[1] in SOURCE_SUFFIXES]
    return ["a.out"]


def run_for_build(compiler: str, record: str, args: list[str]) -> int:
    """The build machine's COMPILER (CC_FOR_BUILD, BUILD_CC, HOSTCC, plain cc/gcc on PATH) as it is, appending the
    ELF files it wrote to RECORD (`sha256<TAB>absolute path` a line): the verifier excuses a program for the build
    machine only when this record names it with its bytes (proof/for_build.py)."""
    outputs = build_outputs(args)
    if not outputs:
        os.execv(compiler, [compiler, *args])
    rc = subprocess.call([compiler, *args])
    if rc == 0:
        _record_outputs(record, outputs)
    return rc if rc >= 0 else 128 - rc


def _record_outputs(record: str, outputs: list[str]) -> None:
    lines = []
    for out in outputs:
        path = os.path.abspath(out)
        if "\n" in path or "\t" in path:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode) or f.read(4) != b"\x7fELF":
                continue
            f.seek(0)
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        lines.append(f"{digest}\t{path}\n")
    if not lines:
        return
    try:
        fd = os.open(record, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write("".join(lines))
    except OSError:
        pass


def through_compile_cache(command: list[str], bindir: str, ccache: str | None) -> list[str]:
    """A zig compile of sources to objects (`zig cc ... -c`) run by CCACHE (the workspace's compile cache,
    compile_cache.py) through the toolchain's `zig-cc`/`zig-c++`; anything else as it is."""
    if not ccache or len(command) < 2 or command[1] not in ("cc", "c++") or "-c" not in command:
        return command
    return [ccache, os.path.join(bindir, f"zig-{command[1]}"), *command[2:]]


def main(argv: list[str]) -> int:
    """argv: zigwrap.py TOOL ZIG ZIG_TARGET ARCH FORMAT BINDIR -- ARGS..., or zigwrap.py for-build COMPILER RECORD --
    ARGS... (the build machine's compiler, recording what it wrote)."""
    if argv[1] == "for-build":
        return run_for_build(argv[2], argv[3], argv[5:] if len(argv) > 4 and argv[4] == "--" else argv[4:])
    tool, zig, zig_target, arch, binary_format, bindir = argv[1:7]
    args = argv[8:] if len(argv) > 7 and argv[7] == "--" else argv[7:]
    plan = plan_for(tool, args, zig=zig, zig_target=zig_target, arch=arch, binary_format=binary_format,
                    bindir=bindir)
    _log(plan, tool, args)
    if plan.stdout is not None:
        sys.stdout.write(plan.stdout)
        return 0
    if plan.error:
        sys.stderr.write(plan.error + "\n")
        return 2
    if not plan.commands:
        return 0
    placeholders = any(a.startswith("\0") for cmd in plan.commands for a in cmd)
    if len(plan.commands) == 1 and not placeholders:
        command = through_compile_cache(plan.commands[0], bindir, os.environ.get("CROSSBUILD_CCACHE"))
        os.execv(command[0], command)  # the common case: no wrapper process left behind
    tmp = tempfile.mkdtemp(prefix="zigwrap-") if placeholders else None
    try:
        for name, target in plan.symlinks.items():
            os.symlink(target, os.path.join(tmp, name))
        for cmd in plan.commands:
            cmd = [os.path.join(tmp, a[1:]) if a.startswith("\0") else a for a in cmd]
            rc = subprocess.call(cmd)
            if rc != 0:
                return rc
        return 0
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)  # links to the project's objects and our own objects


if __name__ == "__main__":
    sys.exit(main(sys.argv))
