"""Dependencies in the per-target prefix: a cache of built dependencies keyed by (target, package, version, zig,
options), and installing into the prefix under a lock (built elsewhere, then moved in), so concurrent runs never
corrupt the prefix. Which package a name asks for is dependency_names.py's."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from crossbuild.env import cxx_runtime
from crossbuild.foundation import host, safefs


def deps_root() -> Path:
    return host.cache_root() / "deps"


# Raised when how crossbuild compiles changes what a dependency's files hold: 2, objects compiled -fPIE (zigwrap);
# 3, assert() compiled in: zig's own NDEBUG cancelled (zigwrap), CMake Release at -O2 without -DNDEBUG (recipes);
# 4, C++ shared libraries linked against the shared C++ runtime (cxx_runtime, zigwrap); 5, the prefix's
# dependencies a build used recorded with it (`requires`), which entries made before do not have.
_COMPILE_RECIPE = 5


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
    # the prefix's dependencies its own build used ([source, version]): installed first wherever it is installed
    # (libxml2 reused into a fresh prefix without liblzma.so.5, which its shared library needs at run time)
    requires: list[list] = field(default_factory=list)

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
          anchor: Path | None = None, own_tests: str | None = None,
          requires: list[tuple[str, str | None]] | None = None) -> CachedDependency:
    """Copy a staged install (STAGE/<prefix>: DESTDIR, written by a build) into the cache and rename it in atomically.
    The copy is checked: folders, regular files and links that stay inside the tree, resolved through the links it
    holds, only; whatever else the build left there (links out, chains of links that lead out, FIFOs, devices,
    crossbuild's own bookkeeping files) is not copied and is listed in `rejected`. ANCHOR: a folder above STAGE that
    the build cannot replace (no link is followed below it); default STAGE itself."""
    key = key or cache_key(target, source, version, options)
    entry = CachedDependency(target=target, source=source, version=version, key=key, prefix=str(prefix), files=[],
                             built_at=time.time(), build_s=build_s, run_id=run_id, own_tests=own_tests,
                             requires=[[s, v] for s, v in requires or []])
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


@dataclass
class Recorded:
    """One dependency a prefix's record says was installed there."""
    source: str  # the Debian source
    version: str | None
    files: list[str]  # as placed, relative to the prefix


def recorded(prefix: Path) -> list[Recorded]:
    """What PREFIX's records say was installed there (read without following links; a record of a local source,
    or one written before sources were recorded, is left out)."""
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
        if not isinstance(data, dict):
            continue
        source, version, files = data.get("source"), data.get("version"), data.get("files")
        if isinstance(source, str) and re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", source):
            found.append(Recorded(source, version if isinstance(version, str) else None,
                                  [f for f in files if isinstance(f, str)] if isinstance(files, list) else []))
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
    """Forget TARGET's (or every target's) cached builds and remembered failures; returns how many builds."""
    entries = [e for e in list_cached() if target is None or e.target == target]
    for e in entries:
        shutil.rmtree(e.dir, ignore_errors=True)
    for folder in deps_root().glob(f"{target or '*'}/{_FAILED}"):
        shutil.rmtree(folder, ignore_errors=True)
    return len(entries)


# A dependency that failed to cross-build is remembered, so the next consumer is told at once instead of waiting
# the same minutes for the same failure (Qt's qtbase: 20 to 50 minutes each time). Only with every input the same:
# the cache key (source, version, zig, compile recipe), crossbuild's own code, and how it was asked (INPUTS: the
# depth, the user's options); `crossbuild deps clear` forgets them.
_FAILED = "failed"


def _failure_file(target: str, source: str, key: str, inputs: dict) -> Path:
    raw = json.dumps({"key": key, "code": host.code_identity(), **inputs}, sort_keys=True)
    return deps_root() / target / _FAILED / f"{_safe(source)}-{hashlib.sha256(raw.encode()).hexdigest()[:16]}.json"


def remember_failure(target: str, source: str, key: str, inputs: dict, message: str, seconds: float) -> None:
    path = _failure_file(target, source, key, inputs)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"source": source, "message": message, "at": time.time(), "seconds": seconds}
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)


def list_failures() -> list[dict]:
    """Every remembered failure: {target, source, message, at, seconds}, oldest first."""
    found = []
    for path in deps_root().glob(f"*/{_FAILED}/*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("at"), (int, float)):
            found.append({"target": path.parent.parent.name, **data})
    return sorted(found, key=lambda f: f["at"])


def failed_before(target: str, source: str, key: str, inputs: dict) -> dict | None:
    """The remembered failure of building SOURCE for TARGET with these very inputs: {message, at, seconds}."""
    try:
        data = json.loads(_failure_file(target, source, key, inputs).read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("message"), str) and isinstance(data.get("at"), (int, float))
    return data if ok else None
