"""Facts about the machines crossbuild builds for: one Target per triple, and parsing of user-typed names.

Everything another layer needs to know about a target (zig's name for it, what its binaries look like, how
CMake, Meson and autotools call it, which qemu runs it) lives here and nowhere else.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace


class UnknownTargetError(ValueError):
    """A target name crossbuild does not know; the message lists the close matches."""


@dataclass(frozen=True)
class Target:
    name: str  # canonical, as the user types it: "aarch64-linux-gnu.2.28"
    arch: str  # zig/LLVM arch name: aarch64, riscv64, arm, x86_64, wasm32
    os: str  # linux | windows | macos | freebsd | wasi
    abi: str  # musl | gnu | musleabihf | gnueabihf | none (macOS, FreeBSD and WASI: one C library each)
    binary_format: str  # elf | pe | macho | wasm
    bits: int  # 32 | 64
    endian: str  # little | big
    # ELF e_machine as pyelftools names it (EM_AARCH64 ...), the PE machine name (IMAGE_FILE_MACHINE_AMD64) or the
    # Mach-O CPU type (arm64, x86_64)
    machine: str
    float_abi: str | None  # "hard" | "soft" where the ABI distinguishes them (32-bit ARM), else None
    qemu: str | None  # qemu-user binary that runs this target's Linux programs
    cmake_system_name: str
    cmake_system_processor: str
    meson_cpu_family: str
    meson_cpu: str
    meson_system: str
    autotools_host: str
    debian_arch: str  # Debian's name for the architecture (cross libc packages: libc6-<arch>-cross)
    glibc_version: tuple[int, int] | None = None  # only for versioned gnu targets
    # macOS: the oldest release its programs run on (zig's own default is the newest it knows); FreeBSD: the release
    min_os: tuple[int, int] | None = None

    @property
    def zig_target(self) -> str:
        base = f"{self.arch}-{self.os}" + ("" if self.abi == "none" else f"-{self.abi}")
        version = self.glibc_version or self.min_os
        return f"{base}.{version[0]}.{version[1]}" if version else base

    @property
    def is_windows(self) -> bool:
        return self.os == "windows"

    @property
    def is_linux(self) -> bool:
        return self.os == "linux"

    @property
    def is_wasm(self) -> bool:
        return self.binary_format == "wasm"

    @property
    def runs_through_target_run(self) -> bool:
        """Its programs run only through the workspace's own target-run (Wine with the workspace's prefix,
        wasmtime with the workspace preopened), never under a bare runner as qemu-user runs Linux programs."""
        return self.is_windows or self.is_wasm

    @property
    def libc(self) -> str:
        """musl, glibc, mingw, freebsd (FreeBSD's libc.so.7), libsystem (macOS) or wasi-libc: what links the
        programs."""
        if self.is_windows:
            return "mingw"
        if not self.is_linux:
            return {"macos": "libsystem", "freebsd": "freebsd", "wasi": "wasi-libc"}[self.os]
        return "musl" if self.abi.startswith("musl") else "glibc"

    @property
    def dynamic_loader(self) -> str | None:
        """The program interpreter a correctly built dynamic executable for this target asks for (ELF's PT_INTERP,
        Mach-O's LC_LOAD_DYLINKER); None for Windows and WebAssembly (no loader: a module's runtime runs it)."""
        if self.is_windows or self.is_wasm:
            return None
        return _LOADERS[(self.arch, self.libc)]

    @property
    def gnu_triple(self) -> str:
        """Debian's multiarch triple for glibc targets (where libc6-<arch>-cross installs: /usr/<triple>)."""
        return _GNU_TRIPLES[self.arch]

    @property
    def glibc_variant(self) -> Target | None:
        """The same machine with glibc (aarch64-linux-musl -> aarch64-linux-gnu), for a musl target; else None."""
        if self.libc != "musl":
            return None
        return TARGETS.get(f"{self.arch}-{self.os}-{self.abi.replace('musl', 'gnu', 1)}")

    def facts(self) -> dict[str, str]:
        """A flat, printable summary (for `crossbuild targets` and `--json`)."""
        return {
            "name": self.name,
            "zig": self.zig_target,
            "format": f"{_FORMAT_NAMES[self.binary_format]}{self.bits} {self.endian}",
            "machine": self.machine,
            "float_abi": self.float_abi or "-",
            "libc": self.libc + (f" {self.glibc_version[0]}.{self.glibc_version[1]}" if self.glibc_version else "")
            + (f" (macOS {self.min_os[0]}.{self.min_os[1]} and later)" if self.min_os and self.os == "macos" else ""),
            "qemu": self.qemu or "-",
            "cmake": f"{self.cmake_system_name}/{self.cmake_system_processor}",
            "meson": f"{self.meson_cpu_family}/{self.meson_cpu}/{self.meson_system}",
            "host_triple": self.autotools_host,
        }


_FORMAT_NAMES = {"elf": "ELF", "pe": "PE", "macho": "Mach-O ", "wasm": "WebAssembly "}

_LOADERS = {
    ("aarch64", "musl"): "/lib/ld-musl-aarch64.so.1",
    ("aarch64", "glibc"): "/lib/ld-linux-aarch64.so.1",
    ("x86_64", "musl"): "/lib/ld-musl-x86_64.so.1",
    ("x86_64", "glibc"): "/lib64/ld-linux-x86-64.so.2",
    ("riscv64", "musl"): "/lib/ld-musl-riscv64.so.1",
    ("riscv64", "glibc"): "/lib/ld-linux-riscv64-lp64d.so.1",
    ("arm", "musl"): "/lib/ld-musl-armhf.so.1",
    ("arm", "glibc"): "/lib/ld-linux-armhf.so.3",
    ("aarch64", "freebsd"): "/libexec/ld-elf.so.1",
    ("x86_64", "freebsd"): "/libexec/ld-elf.so.1",
    ("aarch64", "libsystem"): "/usr/lib/dyld",
    ("x86_64", "libsystem"): "/usr/lib/dyld",
}

_GNU_TRIPLES = {
    "aarch64": "aarch64-linux-gnu",
    "x86_64": "x86_64-linux-gnu",
    "riscv64": "riscv64-linux-gnu",
    "arm": "arm-linux-gnueabihf",
}


def _linux(arch: str, abi: str, **kw) -> Target:
    common = {
        "aarch64": dict(bits=64, machine="EM_AARCH64", qemu="qemu-aarch64", cmake_system_processor="aarch64",
                        meson_cpu_family="aarch64", meson_cpu="aarch64", debian_arch="arm64", float_abi=None),
        "x86_64": dict(bits=64, machine="EM_X86_64", qemu="qemu-x86_64", cmake_system_processor="x86_64",
                       meson_cpu_family="x86_64", meson_cpu="x86_64", debian_arch="amd64", float_abi=None),
        "riscv64": dict(bits=64, machine="EM_RISCV", qemu="qemu-riscv64", cmake_system_processor="riscv64",
                        meson_cpu_family="riscv64", meson_cpu="riscv64", debian_arch="riscv64", float_abi=None),
        "arm": dict(bits=32, machine="EM_ARM", qemu="qemu-arm", cmake_system_processor="armv7-a",
                    meson_cpu_family="arm", meson_cpu="armv7", debian_arch="armhf", float_abi="hard"),
    }[arch]
    fields = dict(
        name=f"{arch}-linux-{abi}", arch=arch, os="linux", abi=abi, binary_format="elf", endian="little",
        cmake_system_name="Linux", meson_system="linux", autotools_host=f"{arch}-linux-{abi}",
    )
    fields.update(common)
    fields.update(kw)
    return Target(**fields)


def _format_only(arch: str, os: str) -> Target:
    """A target whose programs cannot run on this machine (no emulator for its system calls): its builds are
    proven from their bytes, at the `built` level."""
    cmake = {"macos": "Darwin", "freebsd": "FreeBSD"}[os]
    host = {"macos": f"{arch}-apple-darwin", "freebsd": f"{arch}-unknown-freebsd14.0"}[os]
    if os == "macos":
        machine, binary_format = {"aarch64": "arm64", "x86_64": "x86_64"}[arch], "macho"
    else:
        machine, binary_format = {"aarch64": "EM_AARCH64", "x86_64": "EM_X86_64"}[arch], "elf"
    return Target(
        name=f"{arch}-{os}", arch=arch, os=os, abi="none", binary_format=binary_format, bits=64, endian="little",
        machine=machine, float_abi=None, qemu=None, cmake_system_name=cmake,
        cmake_system_processor={"aarch64": "arm64" if os == "macos" else "aarch64", "x86_64": "x86_64"}[arch],
        meson_cpu_family=arch, meson_cpu=arch, meson_system={"macos": "darwin", "freebsd": "freebsd"}[os],
        autotools_host=host, debian_arch={"aarch64": "arm64", "x86_64": "amd64"}[arch],
        # macOS: Big Sur, the first arm64 release and zig's oldest; FreeBSD: 14, the release of zig's libc
        min_os=(11, 0) if os == "macos" else (14, 0),
    )


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        _linux("aarch64", "musl"),
        _linux("aarch64", "gnu"),
        _linux("x86_64", "musl"),
        _linux("x86_64", "gnu"),
        _linux("riscv64", "musl"),
        _linux("riscv64", "gnu"),
        _linux("arm", "musleabihf"),
        _linux("arm", "gnueabihf"),
        Target(
            name="x86_64-windows-gnu", arch="x86_64", os="windows", abi="gnu", binary_format="pe", bits=64,
            endian="little", machine="IMAGE_FILE_MACHINE_AMD64", float_abi=None, qemu=None,
            cmake_system_name="Windows", cmake_system_processor="AMD64", meson_cpu_family="x86_64",
            meson_cpu="x86_64", meson_system="windows", autotools_host="x86_64-w64-mingw32", debian_arch="amd64",
        ),
        _format_only("aarch64", "macos"),
        _format_only("x86_64", "macos"),
        _format_only("aarch64", "freebsd"),
        _format_only("x86_64", "freebsd"),
        # WASI preview 1 modules (zig's wasi-libc), run by wasmtime; no shared libraries, no loader. CMake knows
        # the system as WASI; config.sub canonicalises wasm32-wasi to wasm32-unknown-wasi
        Target(
            name="wasm32-wasi", arch="wasm32", os="wasi", abi="none", binary_format="wasm", bits=32,
            endian="little", machine="wasm32", float_abi=None, qemu=None, cmake_system_name="WASI",
            cmake_system_processor="wasm32", meson_cpu_family="wasm32", meson_cpu="wasm32", meson_system="wasi",
            autotools_host="wasm32-unknown-wasi", debian_arch="wasm32",
        ),
    ]
}

# Names people type for the same machine; they resolve to the canonical target (never silently guessed).
ALIASES = {
    "arm64-linux-musl": "aarch64-linux-musl",
    "arm64-linux-gnu": "aarch64-linux-gnu",
    "amd64-linux-musl": "x86_64-linux-musl",
    "amd64-linux-gnu": "x86_64-linux-gnu",
    "armv7-linux-musleabihf": "arm-linux-musleabihf",
    "armv7-linux-gnueabihf": "arm-linux-gnueabihf",
    "x86_64-w64-mingw32": "x86_64-windows-gnu",
    # Rust's triples (cargo, cross-rs, cargo-zigbuild; their `.2.17` glibc suffix works as on crossbuild's names)
    "aarch64-unknown-linux-gnu": "aarch64-linux-gnu",
    "aarch64-unknown-linux-musl": "aarch64-linux-musl",
    "x86_64-unknown-linux-gnu": "x86_64-linux-gnu",
    "x86_64-unknown-linux-musl": "x86_64-linux-musl",
    "riscv64gc-unknown-linux-gnu": "riscv64-linux-gnu",
    "riscv64gc-unknown-linux-musl": "riscv64-linux-musl",
    "armv7-unknown-linux-gnueabihf": "arm-linux-gnueabihf",
    "armv7-unknown-linux-musleabihf": "arm-linux-musleabihf",
    "x86_64-pc-windows-gnu": "x86_64-windows-gnu",
    "aarch64-apple-darwin": "aarch64-macos",
    "x86_64-apple-darwin": "x86_64-macos",
    "aarch64-unknown-freebsd": "aarch64-freebsd",
    "x86_64-unknown-freebsd": "x86_64-freebsd",
    # zig's and clang's spellings
    "arm64-macos": "aarch64-macos",
    "arm64-apple-darwin": "aarch64-macos",
    "aarch64-macos-none": "aarch64-macos",
    "x86_64-macos-none": "x86_64-macos",
    "aarch64-freebsd-none": "aarch64-freebsd",
    "x86_64-freebsd-none": "x86_64-freebsd",
    "amd64-freebsd": "x86_64-freebsd",
    "arm64-freebsd": "aarch64-freebsd",
    "wasm32-wasip1": "wasm32-wasi",  # Rust's name for WASI preview 1
    "wasm32-wasi-musl": "wasm32-wasi",  # zig's full triple
    "wasm32-unknown-wasi": "wasm32-wasi",
    "wasi": "wasm32-wasi",
    # Debian's architecture names, whose libc Debian fixes: `arm64` is glibc, `musl-linux-arm64` is musl
    "arm64": "aarch64-linux-gnu",
    "amd64": "x86_64-linux-gnu",
    "riscv64": "riscv64-linux-gnu",
    "armhf": "arm-linux-gnueabihf",
    "musl-linux-arm64": "aarch64-linux-musl",
    "musl-linux-amd64": "x86_64-linux-musl",
    "musl-linux-riscv64": "riscv64-linux-musl",
    "musl-linux-armhf": "arm-linux-musleabihf",
}

# Names that say the machine but not its C library (a Docker platform is glibc in a Debian image and musl in an
# Alpine one): refused with the choices, never guessed.
MACHINE_ONLY = {
    "linux/arm64": "aarch64", "linux/arm64/v8": "aarch64", "linux/amd64": "x86_64", "linux/riscv64": "riscv64",
    "linux/arm/v7": "arm", "aarch64": "aarch64", "x86_64": "x86_64", "armv7": "arm",
}


def aliases_of(name: str) -> list[str]:
    """The other names that resolve to target NAME (for `crossbuild targets`)."""
    return [alias for alias, canonical in ALIASES.items() if canonical == name]

# zig ships glibc stubs from 2.17 on; Debian 12 itself has 2.36.
_GLIBC_MIN = (2, 17)
_GLIBC_MAX = (2, 41)
# macOS: Big Sur (the first arm64 release) to the 2026 release; a suffix sets the oldest release programs run on
_MACOS_MIN, _MACOS_MAX = (11, 0), 27
_MACOS_SUFFIX = re.compile(r"^(?P<base>.+-(?:macos|darwin))\.(?P<major>\d+)\.(?P<minor>\d+)$")
_GLIBC_SUFFIX = re.compile(r"^(?P<base>.+-gnu(?:eabihf)?)\.(?P<major>\d+)\.(?P<minor>\d+)$")


def parse_target(name: str) -> Target:
    """Resolve a user-typed target name, e.g. 'aarch64-linux-gnu.2.28'. Raises UnknownTargetError."""
    text = name.strip()
    if text in MACHINE_ONLY:
        choices = [t for t in TARGETS.values() if t.arch == MACHINE_ONLY[text] and t.os == "linux"]
        raise UnknownTargetError(f"{name!r} names a machine, not its C library: choose "
                                 + " or ".join(f"{t.name} ({t.libc})" for t in choices))
    if text in ALIASES:
        text = ALIASES[text]
    if text in TARGETS:
        return TARGETS[text]
    m = _GLIBC_SUFFIX.match(text)
    if m:
        base = ALIASES.get(m["base"], m["base"])
        version = (int(m["major"]), int(m["minor"]))
        if base not in TARGETS:
            raise UnknownTargetError(_unknown_message(name))
        if not (_GLIBC_MIN <= version <= _GLIBC_MAX):
            raise UnknownTargetError(
                f"glibc {version[0]}.{version[1]} is outside what zig can target "
                f"({_GLIBC_MIN[0]}.{_GLIBC_MIN[1]}–{_GLIBC_MAX[0]}.{_GLIBC_MAX[1]}); try {base}.2.28"
            )
        return replace(TARGETS[base], name=f"{base}.{version[0]}.{version[1]}", glibc_version=version)
    m = _MACOS_SUFFIX.match(text)
    if m:
        base = ALIASES.get(m["base"], m["base"])
        version = (int(m["major"]), int(m["minor"]))
        if base not in TARGETS or TARGETS[base].os != "macos":
            raise UnknownTargetError(_unknown_message(name))
        if not (_MACOS_MIN <= version < (_MACOS_MAX + 1, 0)):
            raise UnknownTargetError(f"macOS {version[0]}.{version[1]} is outside what crossbuild targets "
                                     f"({_MACOS_MIN[0]}.{_MACOS_MIN[1]} to {_MACOS_MAX}.x); try {base}.13.0")
        return replace(TARGETS[base], name=f"{base}.{version[0]}.{version[1]}", min_os=version)
    if re.match(r"^.+-(musl|musleabihf)\.\d+\.\d+$", text):
        raise UnknownTargetError(
            f"unknown target {name!r}: a libc version suffix only applies to glibc (-gnu) targets"
        )
    raise UnknownTargetError(_unknown_message(name))


def _unknown_message(name: str) -> str:
    known = list(TARGETS) + list(ALIASES)
    close = difflib.get_close_matches(name.strip(), known, n=3, cutoff=0.5)
    close = list(dict.fromkeys(ALIASES.get(c, c) for c in close))
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return (
        f"unknown target {name!r}.{hint} Known targets: {', '.join(TARGETS)} "
        "(glibc targets also take a version, e.g. aarch64-linux-gnu.2.28, and macOS targets their oldest "
        "release, e.g. aarch64-macos.13.0). See `crossbuild targets`."
    )
