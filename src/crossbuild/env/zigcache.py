"""zig's shared cache, which no build can write: crossbuild warms it on the host with its own test programs, and
each workspace gets a private writable layer over it (manifests copied, outputs linked read-only).

zig opens cache manifests for writing even on a hit, so a read-only cache fails; the layer gives every build a
cache it may write, whose new entries (a CPU variant nobody warmed, the project's own objects) stay in the
workspace, while the shared libc, compiler-rt and libc++ are only ever written by `warm` — never by a build.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from crossbuild.foundation import host, safefs
from crossbuild.foundation.progress import NoteFn
from crossbuild.foundation.targets import Target

_C = "#include <stdio.h>\nint crossbuild_warm(void){return puts(\"warm\");}\nint main(void){return 0;}\n"
_CXX = "#include <iostream>\n#include <string>\nint main(){std::string s(\"warm\");std::cout<<s<<std::endl;}\n"
# What real builds ask for first: debug (CMake/Meson defaults) and optimised (autotools' -O2, Release) programs
# and shared libraries; anything else a project needs is built in its own layer. "rc": `zig rc`'s resource compiler
# (Windows only), which zig compiles on first use.
_VARIANTS = (("exe", ("-O0", "-g")), ("exe", ("-O2",)), ("shared", ("-O0", "-g")), ("shared", ("-O2",)), ("rc", ()))
_WARM_RECIPE = 2  # raised whenever warm builds more, so that caches warmed before are completed once
_WARM_LOCK = ".crossbuild-warm.lock"
_LAYER_COPIED = ("h", "b")  # manifests and build files zig opens for writing; `o/` holds the outputs


class WarmError(RuntimeError):
    """zig could not build the target's runtime libraries on the host."""


def stamp(shared: Path, target: Target, language: str, zig: Path) -> Path:
    """Marks a warmed (target, language) for this installation of zig. The installation's identity counts, not
    only its version: zig's manifests record its sources' inodes and times, so after a reinstall at the same path
    (a fresh venv, as every CI checkout makes) zig regenerates some entries — mingw's DLL import libraries write
    their new file in place, through the layer's link into the read-only shared cache. Warming again on the host
    brings the shared manifests up to date first."""
    name = f"{target.zig_target}-{language}-zig{host.zig_version()}-{_install_id(zig)}-r{_WARM_RECIPE}"
    return shared / "crossbuild-warm" / name


def _install_id(zig: Path) -> str:
    """A digest of the (name, inode, mtime) of zig's binary and every file of its lib/ tree: what zig's manifests
    compare before trusting an entry. ~20k files take ~0.1 s, so the walk is remembered per binary (a reinstall
    makes a new one)."""
    binary = Path(zig).resolve()
    st = binary.stat()
    return _install_digest(binary, st.st_ino, st.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _install_digest(binary: Path, inode: int, mtime_ns: int) -> str:
    digest = hashlib.sha256(f"{inode}:{mtime_ns}".encode())
    for folder, dirs, files in os.walk(binary.parent / "lib"):
        dirs.sort()
        for name in sorted(files):
            try:
                st = os.stat(os.path.join(folder, name), follow_symlinks=False)
            except OSError:
                continue
            digest.update(f"{folder}/{name}:{st.st_ino}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:12]


WARM_ESTIMATE = "first use of this target only; about 1 to 2.5 minutes on two cores"


def warm(target: Target, *, languages: tuple[str, ...] = ("c",), shared: Path | None = None,
         zig: Path | None = None, note: NoteFn | None = None) -> list[str]:
    """Build the target's libc, compiler-rt (and libc++ for "c++") into the shared cache, on the host, from
    crossbuild's own sources; returns the languages that were built now (empty when all were warm). NOTE is told
    what is being prepared, with how far it is (a first run otherwise sits silent for minutes)."""
    shared = shared or host.zig_cache_dir(target.zig_target)
    zig = zig or host.zig_executable()
    if zig is None:
        raise WarmError("zig is not installed: `pip install ziglang` (crossbuild pins its zig)")
    todo = [lang for lang in languages if not stamp(shared, target, lang, zig).exists()]
    if not todo:
        return []
    with writing(shared):
        done = []
        for lang in todo:
            done_stamp = stamp(shared, target, lang, zig)
            if done_stamp.exists():  # warmed by another run while we waited
                continue
            what = "C runtime (libc, compiler-rt)" if lang == "c" else "C++ runtime (libc++, libc++abi, libunwind)"
            phase = f"preparing zig's {what} for {target.name} ({WARM_ESTIMATE})"
            _warm_language(zig, target, lang, shared, lambda i, n, phase=phase: note and note(phase, i, n))
            done_stamp.parent.mkdir(exist_ok=True)
            done_stamp.touch()
            done.append(lang)
    return done


def writing(shared: Path):
    """The lock to hold while zig writes SHARED directly (warm does; so may a test compiling with the shared cache):
    layers are laid out under it shared, so none links an entry whose manifest is still being written."""
    return host.exclusive(shared / _WARM_LOCK)


def _warm_language(zig: Path, target: Target, lang: str, shared: Path,
                   progress: Callable[[int, int], object]) -> None:
    with tempfile.TemporaryDirectory(prefix="crossbuild-warm-") as tmp:
        src = Path(tmp) / ("warm.cpp" if lang == "c++" else "warm.c")
        src.write_text(_CXX if lang == "c++" else _C)
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "LC_ALL": "C", "ZIG_GLOBAL_CACHE_DIR": str(shared),
               "ZIG_LOCAL_CACHE_DIR": str(Path(tmp) / "local")}
        driver = "c++" if lang == "c++" else "cc"
        suffix = {"exe": ".exe" if target.is_windows else "", "shared": ".dll" if target.is_windows else ".so"}
        for i, (kind, flags) in enumerate(_VARIANTS):
            progress(i + 1, len(_VARIANTS))
            if kind == "rc":
                if target.is_windows and lang == "c":
                    _warm_resource_compiler(zig, Path(tmp), env)
                continue
            if kind == "shared" and target.is_wasm:
                continue  # WASI preview 1 has no shared libraries
            extra = ["-shared", "-fPIC"] if kind == "shared" else []
            out = Path(tmp) / f"out{i}{suffix[kind]}"
            r = subprocess.run([str(zig), driver, "-target", target.zig_target, *flags, *extra, str(src), "-o",
                                str(out)], cwd=tmp, env=env, capture_output=True, text=True, timeout=1800)
            if r.returncode != 0:
                raise WarmError(f"zig could not build {lang} runtime libraries for {target.zig_target} "
                                f"({kind} {' '.join(flags)}): {r.stderr.strip()[-400:]}")


def _warm_resource_compiler(zig: Path, tmp: Path, env: dict[str, str]) -> None:
    """`zig rc` (what the windres wrapper runs) compiles its resource compiler on first use: ~2.5 min that every
    workspace's layer and every clean rebuild paid again for each DLL with a version resource."""
    (tmp / "warm.rc").write_text('1 VERSIONINFO\nFILEVERSION 1,0,0,0\nBEGIN\nEND\n')
    r = subprocess.run([str(zig), "rc", "/fo", str(tmp / "warm.res"), "--", str(tmp / "warm.rc")],
                       cwd=tmp, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise WarmError(f"zig could not build its resource compiler: {r.stderr.strip()[-400:]}")


def make_layer(shared: Path, anchor: Path, rel: str) -> Path:
    """A fresh private cache at ANCHOR/REL over SHARED: its manifests and build files copied, every output folder a
    real folder of links to SHARED's files (which the sandbox mounts read-only). On a hit zig reads through the
    links; when it rebuilds an entry (another zig installation, changed inputs) it renames its new file over the
    link, inside the layer. (One link per output folder instead was tried at stop 30: after a reinstall zig
    compiles an entry nobody warmed again under the same digest, and its rename into the linked, read-only folder
    failed with EXDEV: musl's crt1.o of a dynamic program.) Whatever was at ANCHOR/REL before is removed."""
    dest = anchor / rel
    safefs.remove_tree(anchor, rel)
    shared.mkdir(parents=True, exist_ok=True)
    with safefs.open_dir(anchor, rel, create=True) as dfd:
        for name in ("o", "z", "tmp"):
            os.mkdir(name, 0o755, dir_fd=dfd)
    outputs = shared / "o"
    # shared: a warm on another worker writes an entry's outputs before its manifest; never copy one without the other
    with host.exclusive(shared / _WARM_LOCK, shared=True), safefs.open_dir(anchor, f"{rel}/o") as ofd:
        for entry in sorted(os.scandir(outputs), key=lambda e: e.name) if outputs.is_dir() else []:
            if not entry.is_dir(follow_symlinks=False):
                continue
            os.mkdir(entry.name, 0o755, dir_fd=ofd)
            efd = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=ofd)
            try:
                for name in os.listdir(entry.path):
                    os.symlink(os.path.join(entry.path, name), name, dir_fd=efd)
            finally:
                os.close(efd)
        for name in _LAYER_COPIED:
            if (shared / name).is_dir():
                safefs.copy_tree(shared, name, anchor, f"{rel}/{name}", links="drop")
    return dest


_CXX_SUFFIXES = (".cc", ".cpp", ".cxx", ".c++", ".C", ".hpp", ".hh", ".hxx")
_CMAKE_PROJECT = re.compile(r"^\s*project\s*\(([^)]*)\)", re.IGNORECASE | re.MULTILINE)
_AUTOCONF_CXX = re.compile(r"AC_PROG_CXX|LT_LANG\(\[?C\+\+|AC_LANG\(\[?C\+\+")
_MESON_CXX = re.compile(r"""project\s*\([^)]*['"]cpp['"]""", re.DOTALL)


def languages_of(src: Path, *, limit: int = 20_000) -> tuple[str, ...]:
    """("c",) or ("c", "c++"): whether building SRC links C++ — C++ sources, a CMake project() that keeps CMake's
    default languages (C and CXX) or names CXX, autoconf's AC_PROG_CXX, Meson's 'cpp'. Only a hint for warming:
    a build that needs C++ anyway gets it built in its own layer."""
    if not src.is_dir():
        return ("c",)
    for name, wants_cxx in (("CMakeLists.txt", _cmake_wants_cxx), ("configure.ac", _AUTOCONF_CXX.search),
                            ("configure.in", _AUTOCONF_CXX.search), ("meson.build", _MESON_CXX.search)):
        text = safefs.read_text_or_none(src, name, max_bytes=4 << 20)
        if text is not None and wants_cxx(text):
            return ("c", "c++")
    return ("c", "c++") if has_cxx_sources(src, limit=limit) else ("c",)


def has_cxx_sources(src: Path, *, limit: int = 20_000) -> bool:
    """Whether SRC holds C++ sources (within its first LIMIT files); False when there is no SRC folder."""
    if not src.is_dir():
        return False
    for seen, entry in enumerate(safefs.walk_files(src, prune=lambda rel: os.path.basename(rel).startswith("."))):
        if entry.name.endswith(_CXX_SUFFIXES):
            return True
        if seen >= limit:
            break
    return False


def _cmake_wants_cxx(text: str) -> bool:
    """Whether the first project() call enables CXX: named, or by default (no languages given)."""
    m = _CMAKE_PROJECT.search(text)
    if not m:
        return False
    words = m.group(1).replace('"', " ").split()[1:]
    languages, i = [], 0
    while i < len(words):
        if words[i] in ("VERSION", "DESCRIPTION", "HOMEPAGE_URL"):
            i += 2  # the keyword and its value
        elif words[i] == "LANGUAGES":
            languages += words[i + 1:]
            break
        else:
            languages.append(words[i])  # project(name C CXX): the short form
            i += 1
    return not languages or "CXX" in languages
