"""musl's dynamic loader for qemu runs of dynamically linked musl programs, cached per architecture.

Debian ships musl only for the build machine's architecture; the plan is to build `ld-musl-<arch>.so.1` once per
architecture from Debian's musl source with zig into `<cache>/musl-sysroot/<arch>/lib/`. Only the lookup exists so
far (TODO: the build, minding that zig's compiler-rt makes memcpy & co. weak hidden in a zig-linked libc.so).
"""

from __future__ import annotations

from pathlib import Path

from . import host

_LOADER_ARCH = {"aarch64": "aarch64", "x86_64": "x86_64", "riscv64": "riscv64", "arm": "armhf"}


def sysroots_root() -> Path:
    """The folder holding every architecture's musl sysroot (the sandbox mounts it read-only)."""
    return host.cache_root() / "musl-sysroot"


def sysroot_dir(arch: str) -> Path:
    return sysroots_root() / arch


def loader_name(arch: str) -> str:
    return f"ld-musl-{_LOADER_ARCH[arch]}.so.1"


def sysroot_for(arch: str) -> Path | None:
    """The qemu -L folder for `arch` if its loader has been built, else None."""
    root = sysroot_dir(arch)
    return root if (root / "lib" / loader_name(arch)).exists() else None
