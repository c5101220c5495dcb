"""The one way to run a target program here: qemu-user, with the target's dynamic loader (-L) and the tree's own
shared libraries. The verifier's smoke runs and the evaluation's functional checks both use it; `.xbuild/bin/
target-run` is the same command for people. A dynamic musl program needs crossbuild's musl loader: it is built on
first need (once per machine and architecture) instead of skipping the program."""

from __future__ import annotations

import os
import platform
import re
import stat
import struct
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.enums import ENUM_E_MACHINE

from crossbuild.env import cxx_runtime, musl_loader, musl_sysroot, workspace
from crossbuild.env.sandbox import Sandbox
from crossbuild.env.toolchain import Toolchain, qemu_sysroot, target_run_script
from crossbuild.foundation import host, safefs
from crossbuild.foundation.targets import Target
from crossbuild.proof.binary_formats import dynamic_symbols

# a path binfmt_misc's register line can hold: no field separator, no escape, no space
_REGISTRABLE = re.compile(r"/[\w./+-]+")


def qemu_command(target: Target) -> tuple[list[str] | None, str | None]:
    """The qemu prefix that runs this target's programs, or why they cannot run here."""
    if target.is_windows and (wine := host.find_wine()):
        return [wine], None  # its prefix and settings come from the workspace's target-run (runner_argv)
    if target.is_wasm and host.wasmtime_site() is not None:
        return [sys.executable], None  # wasirun.py, through the workspace's target-run (runner_argv)
    if target.qemu is None:
        return None, cannot_run_here(target)
    qemu = host.find_qemu(target.qemu)
    if not qemu:
        return None, f"{target.qemu} is not installed: `apt-get install qemu-user-static` (or qemu-user)"
    return [os.path.realpath(qemu)], None  # the file itself: a link on PATH (~/bin) may point where sandboxes see


def cannot_run_here(target: Target) -> str:
    """Why TARGET's programs do not run on this machine (its builds are proven from their bytes: `built`)."""
    if target.is_windows:
        return "Windows executables are scanned only (no wine: `apt-get install --no-install-recommends wine64`)"
    if target.is_wasm:
        return "WebAssembly modules are scanned only (no wasmtime: `pip install wasmtime`)"
    system = {"macos": "macOS", "freebsd": "FreeBSD"}.get(target.os, target.os)
    return f"{system} programs are scanned only (qemu-user runs Linux programs alone)"


def exec_handler(target: Target, workspace: Path | None = None) -> str | None:
    """A binfmt_misc registration that hands every program of TARGET's machine a test program starts (libuv's and
    glib's runners start themselves once per test) to qemu, as binfmt makes `execve` work on a machine with
    qemu-user-binfmt; None when the target runs natively or has no qemu. Its qemu finds the loader through
    QEMU_LD_PREFIX (runner_argv), since binfmt passes no options. A WebAssembly module (told by its magic and
    version) or a Windows program (MZ) goes to WORKSPACE's target-run (wasmtime with its preopens, Wine with the
    workspace's prefix): a test script's `./test1` or automake's `./test1.exe` runs as CTest's emulator would."""
    if target.runs_through_target_run:
        script = target_run_script(workspace) if workspace is not None else None
        if script is None or not script.is_file() or not _REGISTRABLE.fullmatch(str(script)):
            return None
        name, magic = ("wasm", "\\x00asm\\x01\\x00\\x00\\x00") if target.is_wasm else ("pe", "MZ")
        return f":crossbuild-{name}:M::{magic}::{script}:F"
    prefix, _ = qemu_command(target)
    if prefix is None or target.arch == platform.machine() or not target.is_linux:  # binfmt here is for ELF
        return None
    order = "<" if target.endian == "little" else ">"
    ident = b"\x7fELF" + bytes([1 if target.bits == 32 else 2, 1 if order == "<" else 2, 1]) + bytes(9)
    magic = ident + struct.pack(order + "HH", 2, ENUM_E_MACHINE[target.machine])  # e_type ET_EXEC, e_machine
    # the OS/ABI byte (7) ignored; e_type's mask 0xfffe matches ET_DYN (3) as well
    mask = b"\xff" * 7 + b"\x00" + b"\xff" * 8 + struct.pack(order + "HH", 0xfffe, 0xffff)
    magic_text, mask_text = ("".join(f"\\x{b:02x}" for b in field) for field in (magic, mask))
    # F: qemu is opened now, so it need not be visible inside the sandbox's own root
    return f":crossbuild-{target.arch}:M::{magic_text}:{mask_text}:{prefix[0]}:F"


def loader_root(target: Target) -> tuple[Path | None, str | None]:
    """Folder qemu -L uses for dynamically linked programs (the musl loader is built when missing), or why there
    is none."""
    root = qemu_sysroot(target)
    if target.libc == "glibc":
        if not (root / target.dynamic_loader.lstrip("/")).exists() and not any(root.glob("lib/ld-linux*")):
            return None, f"dynamic glibc program needs Debian's libc6-{target.debian_arch}-cross"
        return root, None
    if musl_sysroot.sysroot_for(target.arch) is None:
        try:
            musl_loader.build(target)
        except (musl_loader.LoaderBuildError, workspace.SourceError, OSError) as e:
            return None, f"dynamic musl program needs the musl loader, and building it failed: {e}"
    return root, None


def loader_roots(target: Target) -> list[Path]:
    """The folders qemu -L maps `/` to for this target's programs (none for Windows): test programs' sandboxes
    cover them (test_program_box)."""
    root = qemu_sysroot(target)
    return [root] if root is not None else []


# A build command's environment setting that lets the target programs it starts run (run_command's env, a recorded
# step's): a build that compiles a generator with $CC and runs it (polyml's polyimport) builds as on a machine with
# qemu-user-binfmt. It changes no configure's view: --host, CMake's toolchain file and Meson's cross file still say
# cross-compiling.
EMULATE_TARGET = "CROSSBUILD_EMULATE_TARGET"


def build_box(box: Sandbox, target: Target, workspace: Path, env: Mapping[str, str]) -> Sandbox:
    """BOX, or its variant where the target programs a build step starts run under the target's runner, when the
    step's ENV asks for it (EMULATE_TARGET=1)."""
    return box.starting_target_programs(exec_handler(target, workspace)) if env.get(EMULATE_TARGET) == "1" else box


def test_program_box(box: Sandbox, target: Target, workspace: Path | None = None) -> Sandbox:
    """BOX's variant that TARGET's test programs run in (Sandbox.for_test_programs): the loader roots covered, the
    programs they start run under qemu too (WebAssembly's under WORKSPACE's target-run)."""
    return box.for_test_programs(loader_roots=loader_roots(target), exec_handler=exec_handler(target, workspace))


def wine_path(folders: Sequence[str]) -> str:
    """WINEPATH naming FOLDERS (host paths), where Wine looks for a program's DLLs: Z: is the host's root."""
    return ";".join("Z:" + d.replace("/", "\\") for d in folders)


def runner_argv(target: Target, exe: Path, *, dynamic: bool, lib_dirs: list[str] = (),
                args: list[str] = (), workspace: Path | None = None) -> tuple[list[str] | None, str | None]:
    """The command that runs EXE (with ARGS) on this machine, or why it cannot run here. A Windows program runs
    under Wine through WORKSPACE's target-run (its own prefix), finding the DLLs of LIB_DIRS through WINEPATH."""
    prefix, why = qemu_command(target)
    if prefix is None:
        return None, why
    if target.runs_through_target_run:
        script = target_run_script(workspace) if workspace is not None else None
        if script is None or not script.is_file():
            return None, ("Windows programs run under Wine with their workspace's prefix" if target.is_windows
                          else "WebAssembly programs run under wasmtime through their workspace's target-run") \
                + ", and there is none here"
        if target.is_wasm:
            return [str(script), str(exe), *args], None
        return ["/usr/bin/env", f"WINEPATH={wine_path(lib_dirs)}", str(script), str(exe), *args], None
    argv = list(prefix)
    if dynamic:
        sysroot, why = loader_root(target)
        if sysroot is None:
            return None, why
        # QEMU_LD_PREFIX: the same root for programs the program starts (exec_handler)
        argv += ["-L", str(sysroot), "-E", f"QEMU_LD_PREFIX={sysroot}"]
    if lib_dirs:
        argv += ["-E", "LD_LIBRARY_PATH=" + ":".join(lib_dirs)]
    return [*argv, str(exe), *args], None


def loader_lacks(target: Target, root: Path, exe_rel: str, lib_rels: list[str],
                 dependency_lib_dirs: list[str] = ()) -> str | None:
    """Why a dynamic musl program cannot run on the cached loader (it needs newer musl symbols), or None. The
    dependencies' shared libraries (in the prefix) provide symbols too."""
    missing = _unresolved_by_loader(root, exe_rel, lib_rels, target, dependency_lib_dirs)
    if not missing:
        return None
    return (f"needs {', '.join(missing[:4])}, which the cached musl loader ({_musl_version(target)}) lacks: zig "
            "links against a newer musl")


def _musl_version(target: Target) -> str:
    return "musl " + musl_sysroot.built_version(target.arch)


def _unresolved_by_loader(root: Path, exe_rel: str, lib_rels: list[str], target: Target,
                          dependency_lib_dirs: list[str] = ()) -> list[str]:
    """Symbols the program and the tree's shared libraries require that neither they, the dependencies' shared
    libraries, the loader nor the shared C++ runtime beside it provide."""
    provided, required = set(), set()
    for system in (musl_sysroot.loader_path(target.arch), cxx_runtime.path(target)):
        if system.is_file():
            with open(system, "rb") as f:
                provided |= dynamic_symbols(f)[0]
    files = [(root, rel) for rel in [exe_rel, *lib_rels]]
    for folder in dependency_lib_dirs:
        with os.scandir(folder) as entries:  # regular files only: libz.so.1 is a link to libz.so.1.2.13
            files += [(Path(folder), e.name) for e in entries if ".so" in e.name and e.is_file(follow_symlinks=False)]
    for anchor, rel in files:
        try:
            with os.fdopen(safefs.open_regular(anchor, rel), "rb") as f:
                exported, needs = dynamic_symbols(f)
        except (OSError, ELFError):
            continue
        provided |= exported
        if anchor == root:
            required |= needs
    return sorted(required - provided)


_LIBRARY_NAME = re.compile(r"lib[\w.+-]*\.so(\.\d+)*")
LINK_WALK_MAX = 200_000  # entries of a build tree read for library links


def library_link_folders(root: Path, libraries: Sequence[str]) -> list[str]:
    """Folders below ROOT holding a link, named as a library, to one of LIBRARIES (their paths relative to ROOT): the
    name a program's loader looks for (its soname) is often only a link, in a folder of its own (nettle's
    `.lib/libnettle.so.8` -> `../libnettle.so`), which the project's own harness puts on LD_LIBRARY_PATH; the
    target's library path set for its programs (QEMU_SET_ENV) replaces that, so it must hold these folders too.
    Links are read, never followed out of ROOT."""
    wanted = {os.path.realpath(root / rel) for rel in libraries}
    top = os.path.realpath(root)
    found: set[str] = set()
    for n, entry in enumerate(safefs.walk_files(root)):
        if n >= LINK_WALK_MAX:
            break
        if stat.S_ISLNK(entry.st.st_mode) and _LIBRARY_NAME.fullmatch(entry.name):
            resolved = os.path.realpath(root / entry.rel)
            if resolved in wanted and os.path.commonpath([top, resolved]) == top:
                found.add(str((root / entry.rel).parent))
    return sorted(found)


def harness_environment(toolchain: Toolchain, lib_dirs: list[str]) -> dict[str, str]:
    """What a project's test harness runs with: the build environment, and the target's library folders for target
    programs only: qemu sets them in the program's environment (QEMU_SET_ENV), Wine reads WINEPATH.
    LD_LIBRARY_PATH itself would reach the host programs that start the sandbox (bwrap), which must never load a
    library from a folder the build wrote."""
    env = toolchain.env.as_dict()
    env["AM_COLOR_TESTS"] = "no"
    usable = [d for d in lib_dirs if not set(d) & {":", ",", "=", ";"}]  # the variables' separators
    if usable:
        env["QEMU_SET_ENV"] = "LD_LIBRARY_PATH=" + ":".join(usable)
        if toolchain.target.is_windows:  # a .exe a script starts (binfmt) finds the DLLs as runner_argv's do
            env["WINEPATH"] = wine_path(usable)
    return env
