"""Programs the build made for the build machine (generators such as sqlite3's lemon): told by what crossbuild's
build-machine compilers recorded (env/zigwrap.py's for-build mode behind CC_FOR_BUILD, BUILD_CC, HOSTCC and plain
cc/gcc/c++/g++), never by a file's name.

A binary for the build machine is not counted as a wrong-architecture product only when the record names its path
with the bytes it has now, its bytes are no file of the prepared source, it is not in the install folder and the
install (which must hold something built for the target) ships nothing of its name.
"""

from __future__ import annotations

import hashlib
import os
import platform
from pathlib import Path

from crossbuild.env.toolchain import Toolchain
from crossbuild.env.workspace import PRISTINE
from crossbuild.foundation import safefs
from crossbuild.proof.binary_formats import Artifact

BUILD_MACHINE = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64", "riscv64": "EM_RISCV"}  # platform -> ELF machine
MAX_RECORD_BYTES = 32 << 20
MAX_HASHED_BYTES = 1 << 30


def _digest(anchor: Path | str, rel: str) -> tuple[int, str] | None:
    """(size, sha256) of the regular file ANCHOR/REL, or None (a link, missing, too large)."""
    try:
        with os.fdopen(safefs.open_regular(anchor, rel, max_bytes=MAX_HASHED_BYTES), "rb") as f:
            return os.fstat(f.fileno()).st_size, hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


class BuildMachineOutputs:
    """The record of one workspace's build-machine compilers, and the checks that go with it."""

    def __init__(self, toolchain: Toolchain | None, installed: set[str] | None, install_dir: Path | None):
        self.toolchain = toolchain
        self.installed = installed  # the install's file names; None: no install of target binaries to tell by
        self.install_dir = install_dir  # where they were installed (verify's INSTALL_DIR)
        self.recorded: dict[str, set[str]] = {}
        self._source_sizes: dict[int, list[str]] | None = None
        self._source_digests: set[str] = set()
        self._hashed_sizes: set[int] = set()
        if toolchain is None or installed is None:
            return
        try:
            text = safefs.read_text(toolchain.workspace, toolchain.build_machine_record.relative_to(
                toolchain.workspace), max_bytes=MAX_RECORD_BYTES)
        except (OSError, ValueError):
            text = ""
        for line in text.splitlines():
            digest, sep, path = line.partition("\t")
            if sep and len(digest) == 64:
                self.recorded.setdefault(os.path.normpath(path), set()).add(digest)

    def made(self, a: Artifact, anchor: Path) -> bool:
        """Whether A (found below ANCHOR) is a program or object the build machine's compiler wrote, as recorded,
        and nothing the install ships or the source came with."""
        if (self.installed is None or self.toolchain is None or a.member_of or a.format != "elf"
                or a.kind not in ("executable", "object") or a.machine != BUILD_MACHINE.get(platform.machine())
                or Path(a.path).name in self.installed):
            return False
        path = os.path.normpath(os.path.join(os.path.realpath(anchor), a.path))
        install = os.path.normpath(str(self.install_dir))
        if path == install or path.startswith(install + os.sep) or path not in self.recorded:
            return False
        found = _digest(anchor, a.path)
        return found is not None and found[1] in self.recorded[path] and not self._in_source(*found)

    def _in_source(self, size: int, digest: str) -> bool:
        """Whether a file of the source as prepared (its pristine copy) has these bytes: a prebuilt program."""
        pristine = self.toolchain.workspace / PRISTINE
        if self._source_sizes is None:
            self._source_sizes = {}
            if pristine.is_dir() and not pristine.is_symlink():
                for entry in safefs.walk_files(pristine):
                    self._source_sizes.setdefault(entry.st.st_size, []).append(entry.rel)
        if size not in self._hashed_sizes:
            self._hashed_sizes.add(size)
            for rel in self._source_sizes.get(size, ()):
                found = _digest(pristine, rel)
                if found:
                    self._source_digests.add(found[1])
        return digest in self._source_digests
