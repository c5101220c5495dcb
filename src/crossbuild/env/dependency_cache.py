"""Dependencies in the per-target prefix: what a build asks for -> a source package (shipped mapping), a cache of
built dependencies keyed by (target, package, version, zig, options), and installing into the prefix under a lock
(built elsewhere, then moved in), so concurrent runs never corrupt the prefix."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from crossbuild.env import cxx_runtime
from crossbuild.foundation import host, safefs


class UnknownDependencyError(ValueError):
    """Nothing in the mapping answers this name; the message lists close ones."""


@dataclass(frozen=True)
class Package:
    source: str  # Debian source package name
    pkg_config: str | None = None
    cmake: str | None = None


@cache
def _mapping() -> tuple[dict[str, Package], dict[str, str]]:
    raw = tomllib.loads(resources.files(__package__).joinpath("packages.toml").read_text())
    packages, names = {}, {}
    for source, info in raw.items():
        packages[source] = Package(source, info.get("pkg_config"), info.get("cmake"))
        for n in [source, *info.get("names", [])]:
            names[_key(n)] = source
    return packages, names


def _key(name: str) -> str:
    n = name.strip().lower()
    n = re.sub(r"::.*$", "", n)  # PNG::PNG -> png
    n = re.sub(r"\.h$", "", n)  # zlib.h -> zlib
    n = re.sub(r"^lib(?=.)", "", n)  # libzstd -> zstd (a source named lib..., libuv1, keys as uv1 on both sides)
    return n


_DEBIAN_NAME = re.compile(r"^[a-z0-9][a-z0-9.+-]+$")  # Debian policy 5.6.1 (source package names)
# a header as a project includes it (gmock/gmock, benchmark/benchmark.h): relative, each part a plain name, no `..`
# (its first part no host name such as github.com, its last a header or a bare name, never a tarball)
_INCLUDE_PATH = re.compile(r"[\w+-]+(/[\w+-][\w.+-]*)*/[\w+-]+(\.(h|hh|hpp|hxx))?")


def resolve(name: str, user_sources: dict[str, str] | None = None) -> Package:
    """The source package for what a failing build asked for: ZLIB, zlib.h, PNG::PNG, libzstd, absl,
    debian:NAME... Names come from a model or a build's output, so they never name a host path or a URL: a local
    folder or tarball comes only from USER_SOURCES (name -> path, given by the user on the command line)."""
    user_sources = user_sources or {}
    if name in user_sources:
        return Package(user_sources[name])
    packages, names = _mapping()
    if name in packages:
        return packages[name]
    found = names.get(_key(name))
    if found:
        return packages[found]
    if name.startswith("debian:"):
        source = name.removeprefix("debian:")
        if not _DEBIAN_NAME.match(source):
            raise UnknownDependencyError(f"{name!r} is not a Debian source package name (lowercase letters, digits "
                                         "and . + -, e.g. debian:zlib).")
        return packages.get(source, Package(source))
    if include := _INCLUDE_PATH.fullmatch(name):  # `#include <benchmark/benchmark.h>`: a path in Contents, never opened
        found_in_index = _from_index(name if include.group(2) else f"{name}.h")  # a bare name: its `.h`
        if found_in_index is not None:
            return found_in_index
    elif "/" in name or name.startswith(("~", ".")) or "://" in name or name.endswith((".tar.gz", ".tar.xz", ".tgz")):
        raise UnknownDependencyError(
            f"{name[:200]!r} is a path or a URL; dependencies are named, never fetched from a path a build printed "
            "or a model chose. Give what the build asks for (a CMake package, a pkg-config module, a header or "
            "library name) or debian:NAME; a local source can only be vouched for by the user "
            "(crossbuild build --dep-source NAME=PATH).")
    found_in_index = _from_index(name)
    if found_in_index is not None:
        return found_in_index
    import difflib

    close = difflib.get_close_matches(_key(name), list(names), n=4)
    raise UnknownDependencyError(
        f"no Debian package ships a file that provides {name!r} (its .pc, CMake config, header or library)"
        + (f"; close: {', '.join(close)}" if close else "")
        + ". Give a Debian source package name instead (debian:NAME), or build without the feature that needs it.")


# Sources whose files satisfy a name but that are the toolchain or the C library itself, never a dependency to build.
_NOT_DEPENDENCIES = re.compile(r"^(glibc|musl|gcc-\d+|llvm-toolchain-\d+|linux|binutils|cmake|meson|pkgconf)$")


def buildable_name(name: str) -> str:
    """NAME as resolve() takes it: a project's own Find module is often named in capitals (`find_package(LIBZMQ)`)
    for what Debian's index knows by its pkg-config or library name (`libzmq`). NAME itself when neither resolves
    or the index cannot be read."""
    for candidate in dict.fromkeys((name, name.lower())):
        try:
            resolve(candidate)
            return candidate
        except UnknownDependencyError:
            continue
        except Exception:  # noqa: BLE001 - the index cannot be read here: the name as the project gave it
            return name
    return name


def _from_index(name: str) -> Package | None:
    """The answer of Debian's package indices (debian_index), or None when they do not know the name."""
    from crossbuild.env import debian_index

    try:
        found = debian_index.resolve(name)
    except debian_index.IndexError_:
        return None
    if found.source is None or _NOT_DEPENDENCIES.match(found.source):
        return None
    packages, _ = _mapping()
    return packages.get(found.source, Package(found.source))


def deps_root() -> Path:
    return host.cache_root() / "deps"


# Raised when how crossbuild compiles changes what a dependency's files hold: 2, objects compiled -fPIE (zigwrap);
# 3, assert() compiled in: zig's own NDEBUG cancelled (zigwrap), CMake Release at -O2 without -DNDEBUG (recipes);
# 4, C++ shared libraries linked against the shared C++ runtime (cxx_runtime, zigwrap).
_COMPILE_RECIPE = 4


def cache_key(target: str, source: str, version: str | None, options: dict | None = None) -> str:
    raw = json.dumps({"target": target, "source": source, "version": version or "default", "zig": host.zig_version(),
                      "options": options or {}, "recipe": _COMPILE_RECIPE, "local": local_source_state(source),
                      "cxx_runtime": cxx_runtime.identity(target)}, sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def local_source_state(source: str) -> str | None:
    """What a local folder or tarball (`--dep-source NAME=PATH`) holds now, for the cache key: the same path after
    the user edited it must be built again, not reused. Names, sizes and modification times of a folder's entries
    (links not followed); a tarball's bytes. None for a Debian package, whose name and version say it all."""
    path = Path(source)
    if not path.is_absolute():
        return None
    digest = hashlib.sha256()
    if path.is_file():
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    elif path.is_dir():
        for entry in safefs.walk_files(path):
            digest.update(f"{entry.rel}\0{entry.st.st_mode}\0{entry.st.st_size}\0{entry.st.st_mtime_ns}\n".encode())
    else:
        return "missing"
    return digest.hexdigest()[:16]


@dataclass
class CachedDependency:
    target: str
    source: str
    version: str | None
    key: str
    prefix: str  # the prefix it was configured for
    files: list[str]  # relative to the prefix
    built_at: float
    build_s: float
    run_id: str | None = None
    rejected: list[str] = field(default_factory=list)  # what the staged install held that was not taken
    # what its own tests showed on the target when it was not `tested` (a few failed; a suite unfinished within its
    # time): said on every use
    own_tests: str | None = None

    @property
    def dir(self) -> Path:
        return deps_root() / self.target / f"{_safe(self.source)}-{self.key}"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name)[:60]


def _record(source: str) -> str:
    """The prefix's record of one dependency source: readable, and unique even for long local paths that share
    their first 60 characters (a hash of the whole source)."""
    return f".crossbuild-deps/{_safe(source)[:40]}-{hashlib.sha256(source.encode()).hexdigest()[:12]}.json"


def lookup(target: str, source: str, version: str | None, options: dict | None = None, *,
           key: str | None = None) -> CachedDependency | None:
    """KEY: the cache_key taken before the build, so a local source edited meanwhile is not filed under its new
    state."""
    key = key or cache_key(target, source, version, options)
    manifest = deps_root() / target / f"{_safe(source)}-{key}" / "manifest.json"
    if not manifest.is_file():
        return None
    return CachedDependency(**json.loads(manifest.read_text()))


# crossbuild's own files in a prefix: a dependency's install never brings them (a link planted there would be opened
# for the lock, or written through for the record)
_BOOKKEEPING = (".crossbuild-deps", ".crossbuild-prefix.lock")


def _ours(rel: str) -> bool:
    return rel.split("/", 1)[0] in _BOOKKEEPING


def store(target: str, source: str, version: str | None, stage: Path, *, prefix: Path, build_s: float,
          run_id: str | None, options: dict | None = None, key: str | None = None,
          anchor: Path | None = None, own_tests: str | None = None) -> CachedDependency:
    """Copy a staged install (STAGE/<prefix>: DESTDIR, written by a build) into the cache and rename it in atomically.
    The copy is checked: folders, regular files and links that stay inside the tree, resolved through the links it
    holds, only; whatever else the build left there (links out, chains of links that lead out, FIFOs, devices,
    crossbuild's own bookkeeping files) is not copied and is listed in `rejected`. ANCHOR: a folder above STAGE that
    the build cannot replace (no link is followed below it); default STAGE itself."""
    key = key or cache_key(target, source, version, options)
    entry = CachedDependency(target=target, source=source, version=version, key=key, prefix=str(prefix), files=[],
                             built_at=time.time(), build_s=build_s, run_id=run_id, own_tests=own_tests)
    final = entry.dir
    tmp = final.with_name(final.name + f".tmp-{os.getpid()}")
    safefs.remove_tree(tmp.parent, tmp.name)
    tmp.mkdir(parents=True)
    anchor = anchor or stage
    staged = Path(stage).relative_to(anchor) / str(prefix).lstrip("/")
    copied = safefs.copy_tree(anchor, staged, tmp, "tree", links="internal", skip=_ours)
    entry.rejected = [f"{rel} ({why})" for rel, why in copied.skipped]
    entry.files = sorted(e.rel for e in safefs.walk_files(tmp / "tree"))
    (tmp / "manifest.json").write_text(json.dumps(asdict(entry), indent=1))
    with host.exclusive(final.with_suffix(".lock")):
        if final.exists():
            shutil.rmtree(final)
        os.rename(tmp, final)
    return entry


@dataclass
class Installed:
    """What one install put into the prefix, and what it did not (with why)."""

    files: int = 0
    links: int = 0
    rejected: list[str] = field(default_factory=list)

    @property
    def copied(self) -> int:
        return self.files + self.links


def install(entry: CachedDependency, prefix: Path) -> int:
    """Copy a cached dependency into PREFIX under the prefix's lock; returns the number of files copied."""
    return install_report(entry, prefix).copied


def install_report(entry: CachedDependency, prefix: Path) -> Installed:
    """Copy a cached dependency into PREFIX under the prefix's lock, through safefs: no write passes through a link
    the prefix holds (an entry whose folder is one is not installed), every file is replaced by a rename, and any
    link of the prefix that now leads out of it, through the links it holds, is removed. Both are `rejected`."""
    prefix = Path(prefix)
    prefix.mkdir(parents=True, exist_ok=True)
    with safefs.open_dir(prefix) as pfd, _prefix_lock(pfd):
        report = safefs.install_tree(entry.dir, "tree", prefix, files=entry.files, skip=_ours)
        done = Installed(report.files, report.links, [f"{rel} ({why})" for rel, why in report.skipped])
        placed = [f for f in entry.files if f not in {rel for rel, _ in report.skipped}]
        record = {"key": entry.key, "files": placed, "version": entry.version, "rejected": done.rejected,
                  "source": entry.source}
        safefs.write_atomic(prefix, _record(entry.source), json.dumps(record).encode())
    return done


@contextmanager
def _prefix_lock(prefix_fd: int) -> Iterator[None]:
    """The prefix's lock file, opened below its descriptor without following a link (one an older install let a
    dependency plant is replaced)."""
    name = ".crossbuild-prefix.lock"
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, 0o644, dir_fd=prefix_fd)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        os.unlink(name, dir_fd=prefix_fd)
        fd = os.open(name, flags, 0o644, dir_fd=prefix_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def installed(prefix: Path, entry: CachedDependency) -> bool:
    """Whether PREFIX holds ENTRY as its last install left it (read without following links)."""
    text = safefs.read_text_or_none(prefix, _record(entry.source), max_bytes=64 << 20)
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return False
    if not isinstance(data, dict) or data.get("key") != entry.key or not isinstance(data.get("files"), list):
        return False
    return all(isinstance(f, str) and safefs.lexists(prefix, f) for f in data["files"])


def recorded_sources(prefix: Path) -> list[tuple[str, str | None]]:
    """(Debian source, version) of each dependency PREFIX's records say was installed there (read without
    following links; a record of a local source, or one written before sources were recorded, is left out)."""
    found = []
    try:
        with safefs.open_dir(prefix, ".crossbuild-deps") as dfd, os.scandir(dfd) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".json"))[:200]
    except OSError:
        return []
    for name in names:
        text = safefs.read_text_or_none(prefix, f".crossbuild-deps/{name}", max_bytes=64 << 20)
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            continue
        source = data.get("source") if isinstance(data, dict) else None
        version = data.get("version")
        if isinstance(source, str) and re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", source):
            found.append((source, version if isinstance(version, str) else None))
    return found


@contextmanager
def build_lock(target: str, source: str, *, until: Callable[[], bool] | None = None) -> Iterator[None]:
    """One build of a package per target at a time; the second waiter then finds it in the cache (UNTIL: see
    host.exclusive)."""
    with host.exclusive(deps_root() / target / f"{_safe(source)}.build.lock", until=until):
        yield


def list_cached() -> list[CachedDependency]:
    root = deps_root()
    out = []
    for manifest in sorted(root.glob("*/*/manifest.json")):
        try:
            out.append(CachedDependency(**json.loads(manifest.read_text())))
        except (ValueError, TypeError):
            continue
    return out


def clear(target: str | None = None) -> int:
    entries = [e for e in list_cached() if target is None or e.target == target]
    for e in entries:
        shutil.rmtree(e.dir, ignore_errors=True)
    return len(entries)
