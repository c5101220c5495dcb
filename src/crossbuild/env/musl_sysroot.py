"""Where each architecture's musl sysroot (the dynamic loader qemu-user needs) lives in crossbuild's cache.

Only paths: building the loader is `musl_loader`'s job, which sits above the sandbox and toolchain it uses."""

from __future__ import annotations

from pathlib import Path

from crossbuild.foundation import host

# The musl zig links programs against (zig 0.17 ships musl 1.2.5). A loader of an older musl lacks symbols such
# programs need: statx, which zig's UBSan runtime in every Debug build calls, is new in 1.2.5.
MUSL_VERSION = "1.2.5"
# Bumped when the way the loader is built changes, so cached loaders are rebuilt (2: exports musl's stack
# protector symbols).
LOADER_REVISION = "2"
_LOADER_ARCH = {"aarch64": "aarch64", "x86_64": "x86_64", "riscv64": "riscv64", "arm": "armhf"}


def sysroots_root() -> Path:
    """The folder holding every architecture's musl sysroot (the sandbox mounts it read-only)."""
    return host.cache_root() / "musl-sysroot"


def sysroot_dir(arch: str) -> Path:
    return sysroots_root() / arch


def loader_name(arch: str) -> str:
    return f"ld-musl-{_LOADER_ARCH[arch]}.so.1"


def sysroot_for(arch: str) -> Path | None:
    """The qemu -L folder for `arch` if its loader has been built from the musl zig links against, else None."""
    root = sysroot_dir(arch)
    return root if (root / "lib" / loader_name(arch)).exists() and _stamp(arch) == [MUSL_VERSION, LOADER_REVISION] \
        else None


def built_version(arch: str) -> str:
    """The musl version the cached loader was built from ("?" when none is)."""
    return (_stamp(arch) or ["?"])[0]


def stamp_text() -> str:
    return f"{MUSL_VERSION}\n{LOADER_REVISION}\n"


def _stamp(arch: str) -> list[str]:
    stamp = sysroot_dir(arch) / "lib" / "MUSL_VERSION"
    return stamp.read_text().split() if stamp.exists() else []


def loader_path(arch: str) -> Path:
    return sysroot_dir(arch) / "lib" / loader_name(arch)
