"""musl's dynamic loader for qemu runs of dynamically linked musl programs, cached per architecture.

Debian ships musl only for the build machine's architecture, so `build()` makes `ld-musl-<arch>.so.1` from musl's
source with zig (in the sandbox) and keeps it under `<cache>/musl-sysroot/<arch>/lib/`. The source is the musl zig
links against (musl_sysroot.MUSL_VERSION): Debian 12 has only 1.2.3, so the tarball comes from Debian's pool (as
trixie's musl_1.2.5-3 ships it), checked against the SHA-256 that package's .dsc lists. The trap: zig's
compiler-rt defines memcpy, memset, strlen, the math functions... as weak *hidden* symbols, and lld gives a symbol
the strictest visibility it sees, so a libc.so linked with it would not export them. We link a copy of compiler-rt
in which those libc-level symbols are made local.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

from crossbuild.env import sandbox, workspace
from crossbuild.env.musl_sysroot import MUSL_VERSION, loader_path, stamp_text, sysroot_for, sysroots_root
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation import host
from crossbuild.foundation.targets import Target


class LoaderBuildError(RuntimeError):
    pass


MUSL_TARBALL = f"pool/main/m/musl/musl_{MUSL_VERSION}.orig.tar.gz"
MUSL_SHA256 = "a9a118bbe84d8764da0ea0d28b3ab3fae8477fc7e4085d90102b8596fc7c75e4"


def musl_source() -> Path:
    """musl's release tarball from the Debian archive this machine uses, cached and checked by its SHA-256."""
    dest = host.cache_root() / "debian-src" / f"musl_{MUSL_VERSION}.orig.tar.gz"
    if dest.exists() and _sha256(dest) == MUSL_SHA256:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    mirrors = [line.split(":", 1)[1].split()[0] for stanza in workspace.debian_archives()
               for line in stanza.splitlines() if line.startswith("URIs:") and "security" not in line]
    errors = []
    for mirror in [*mirrors, "http://deb.debian.org/debian"]:
        tmp = dest.with_suffix(".part")
        try:
            with urllib.request.urlopen(f"{mirror.rstrip('/')}/{MUSL_TARBALL}", timeout=120) as r, \
                    open(tmp, "wb") as f:
                shutil.copyfileobj(r, f)
        except OSError as e:
            errors.append(f"{mirror}: {e}")
            continue
        if _sha256(tmp) != MUSL_SHA256:
            errors.append(f"{mirror}: checksum mismatch")
            tmp.unlink()
            continue
        tmp.replace(dest)
        return dest
    raise LoaderBuildError(f"cannot download musl {MUSL_VERSION} ({MUSL_TARBALL}): {'; '.join(errors)}")


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _compiler_rt_archive(zig: Path, zig_target: str, scratch: Path) -> Path:
    """The compiler-rt archive zig links for `zig_target` (zig builds it on first use); found from `-v`."""
    (scratch / "probe.c").write_text("int probe(void){return 0;}\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "ZIG_GLOBAL_CACHE_DIR": str(host.zig_cache_dir(zig_target))}
    r = subprocess.run([str(zig), "cc", "-v", "-target", zig_target, "-nostdlib", "-shared", "probe.c", "-lgcc",
                        "-o", "probe.so"], cwd=scratch, env=env, capture_output=True, text=True, timeout=900)
    found = re.findall(r"(\S+/libcompiler_rt\.a)", r.stderr)
    if r.returncode != 0 or not found:
        raise LoaderBuildError(f"could not find zig's compiler-rt for {zig_target}: {r.stderr.strip()[-300:]}")
    return Path(found[-1])


def _libc_level(name: str) -> bool:
    """Whether a compiler-rt symbol is one musl defines and must export: plain libc names (memcpy, sqrt), the stack
    protector's (__stack_chk_fail, __stack_chk_guard: every -fstack-protector program needs them) and ARM EABI's
    memory helpers (__aeabi_memcpy...)."""
    return not name.startswith("__") or name.startswith(("__stack_chk_", "__aeabi_mem"))


def _localized_compiler_rt(archive: Path, dest: Path) -> Path:
    """A copy of compiler-rt whose libc-level symbols are local, so musl's own definitions are exported."""
    tools = {name: shutil.which(name) for name in ("llvm-nm", "llvm-objcopy")}
    if not all(tools.values()):
        raise LoaderBuildError("building the musl loader needs llvm-nm and llvm-objcopy: `apt-get install llvm`")
    r = subprocess.run([tools["llvm-nm"], str(archive)], capture_output=True, text=True, check=True)
    names = sorted({parts[2] for line in r.stdout.splitlines() if len(parts := line.split()) == 3
                    and parts[1] in ("W", "V", "T", "D", "B") and _libc_level(parts[2])})
    subprocess.run([tools["llvm-objcopy"], *(f"--localize-symbol={n}" for n in names), str(archive), str(dest)],
                   check=True, capture_output=True)
    return dest


def build(target: Target, *, source: str | None = None, force: bool = False,
          progress: Callable[[str], None] = lambda _: None) -> Path:
    """Build and cache the musl loader for `target`'s architecture (from SOURCE, default: the pinned release of
    the musl zig links against); returns its path. A loader of another musl version is rebuilt."""
    if target.libc != "musl":
        raise LoaderBuildError(f"{target.name} is not a musl target")
    dest = loader_path(target.arch)
    if sysroot_for(target.arch) and not force:
        return dest
    with host.exclusive(sysroots_root() / f".{target.arch}.lock"):  # verifiers in parallel build it once
        if sysroot_for(target.arch) and not force:
            return dest
        return _build(target, dest, source or str(musl_source()), progress)


def _build(target: Target, dest: Path, source: str, progress: Callable[[str], None]) -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="crossbuild-musl-"))
    try:
        progress(f"fetching {source}")
        ws = workspace.prepare(source, scratch / "ws")
        tc = Toolchain.for_target(target, ws.root, prefix=scratch / "prefix").materialise()
        crt = _localized_compiler_rt(_compiler_rt_archive(tc.zig, target.zig_target, scratch),
                                     ws.root / "libcompiler_rt-local.a")
        box = sandbox.for_toolchain(tc)
        env = tc.env.as_dict()
        steps = [
            ["./configure", f"--target={target.zig_target}", "--prefix=/", "--disable-static", f"CC={env['CC']}",
             f"AR={env['AR']}", f"RANLIB={env['RANLIB']}", f"LIBCC={crt}"],
            ["make", f"-j{os.cpu_count() or 2}", "lib/libc.so"],
        ]
        failed = box.run_steps([(argv, ws.src, env) for argv in steps], log_dir=tc.logs, stem="musl",
                               on_step=lambda n, argv: progress(" ".join(argv[:2]) + " ..."))
        if failed:
            argv, res = failed
            tail = Path(res.log_path).read_text(errors="replace").splitlines()[-5:]
            raise LoaderBuildError(f"musl build step `{argv[0]} {argv[1]}` failed "
                                   f"({res.stopped or f'exit {res.returncode}'}): " + " | ".join(tail))
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".tmp")
        shutil.copy2(ws.src / "lib" / "libc.so", tmp)
        tmp.replace(dest)
        version = (ws.src / "VERSION").read_text().strip() if (ws.src / "VERSION").exists() else "?"
        if version != MUSL_VERSION:
            raise LoaderBuildError(f"{source} is musl {version}, not {MUSL_VERSION} (the musl zig links against)")
        (dest.parent / "MUSL_VERSION").write_text(stamp_text())
        return dest
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
