"""Run folders: `<workspace>/src` holds a private copy of the project, prepared from a local folder, a tarball,
a git URL or `debian:NAME[=VERSION]`. The original source is never modified. Longer than 350 lines: preparing each
source form into that layout and recognising the layout later (is_workspace) are one job.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crossbuild.env import quilt, sources
from crossbuild.foundation import host, safefs

# The source as prepared, before any build ran: the clean rebuild starts from it (plus the agent's own edits). Under
# .xbuild/, which builds cannot write.
PRISTINE = ".xbuild/pristine"

# Files a build never needs and a model must never read: they are not copied into workspaces, and the tools refuse
# them by name even if one appears later.
CREDENTIAL_PATTERNS = (".env", ".env.*", ".envrc", "*.pem", "*.key", "*.p12", "*.pfx", "*.keystore", "*.jks",
                       "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", "_netrc", ".git-credentials",
                       ".npmrc", ".pypirc", ".pgpass", "credentials", "credentials.json", "*.kdbx", ".htpasswd",
                       "secrets.*", ".dockercfg")
CREDENTIAL_DIRS = (".ssh", ".aws", ".gnupg", ".docker", ".kube")
# Names test suites also give public material (a test CA's certificate, a public key): a credential unless the
# content is public PEM blocks (anything else, a private key or plain text in such a file, is one)
BY_CONTENT = ("*.pem", "*.key")
_PUBLIC_BLOCK = re.compile(rb"-----BEGIN (CERTIFICATE|TRUSTED CERTIFICATE|PUBLIC KEY|X509 CRL|CERTIFICATE REQUEST|"
                           rb"NEW CERTIFICATE REQUEST|(X9\.42 )?DH PARAMETERS|DSA PARAMETERS|EC PARAMETERS)-----")
_ANY_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 .]+)-----")
PEEK_BYTES = 1 << 20
# A distribution's packaging of the project at its top level (Debian's rules and patches, quilt's copies of the
# files before patching): hints an upstream release does not have (prepare(..., source_hints=False) removes them).
PACKAGING = ("debian", ".pc")


def is_workspace(root: Path) -> bool:
    """A crossbuild workspace as crossbuild makes one: real folders (no links, nor above) with src/ and .xbuild/."""
    try:
        return all(p.is_dir() and not p.is_symlink() for p in (root, root / "src", root / ".xbuild")) \
            and not any(part.is_symlink() for part in root.parents)
    except OSError:
        return False


def enclosing(path: Path) -> Path | None:
    """The workspace PATH (absolute) lies in: itself or its nearest parent that is one, else None."""
    return next((p for p in (path, *path.parents) if is_workspace(p)), None)


def is_credential(path: str | Path, read: Callable[[], bytes | None] | None = None) -> bool:
    """Whether PATH is a file tools never copy, read or write: by its name or folder, and for names public
    material also has (BY_CONTENT) by what READ returns (None, or no READ: a credential)."""
    p = Path(path)
    if any(part in CREDENTIAL_DIRS for part in p.parts):
        return True
    if not any(fnmatch.fnmatchcase(p.name, pat) for pat in CREDENTIAL_PATTERNS):
        return False
    if not any(fnmatch.fnmatchcase(p.name, pat) for pat in BY_CONTENT) or read is None:
        return True
    try:
        content = read()
    except OSError:
        return True
    return content is None or not public_pem(content)


def peek(anchor: str | Path, rel: str | Path) -> Callable[[], bytes]:
    """What is_credential reads of ANCHOR/REL when its name needs its content: at most PEEK_BYTES, no link followed."""
    return lambda: safefs.read_bytes(anchor, rel, max_bytes=PEEK_BYTES)


def public_pem(content: bytes) -> bool:
    """Whether CONTENT holds PEM blocks and every one is public (certificates, public keys, CRLs, parameters)."""
    blocks = _ANY_BLOCK.findall(content)
    return bool(blocks) and len(blocks) == len(_PUBLIC_BLOCK.findall(content)) and b"PRIVATE" not in content


class SourceError(ValueError):
    """The source cannot be prepared; the message says what to do."""


@dataclass(frozen=True)
class Workspace:
    root: Path
    left_out: tuple[str, ...] = ()  # files of the source not copied in (credentials, FIFOs...), with why

    @property
    def src(self) -> Path:
        return self.root / "src"


_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]*$")


def check_name(name: str) -> str:
    """A folder name that cannot escape its parent (no '..', no '/', not empty)."""
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name or not _SAFE_NAME.match(name):
        raise SourceError(f"refusing unsafe name {name!r}: use letters, digits and . _ + ~ - (no '/', no '..')")
    return name


def label_for(source: str) -> str:
    """A short name for a run folder: the project's name from a folder, tarball, URL or debian:NAME."""
    return source.removeprefix("debian:").rstrip("/").split("/")[-1] or "run"


def safe_label(label: str) -> str:
    """LABEL as a folder name: anything but letters, digits and . _ + ~ - becomes '-' (a colon, a slash...)."""
    return re.sub(r"[^A-Za-z0-9._+~-]+", "-", label).strip("-.")[:60] or "run"


def new_root(runs_dir: Path, source: str, target_name: str) -> Path:
    """A new run folder under RUNS_DIR named after the source, the target and the time: `zlib-aarch64-linux-musl-
    20261130-211500` (with -2, -3 ... when that exists)."""
    label = safe_label(f"{label_for(source)}-{target_name}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    root = runs_dir / f"{check_name(label)}-{stamp}"
    n = 1
    while root.exists():
        n += 1
        root = runs_dir / f"{label}-{stamp}-{n}"
    return root


def prepare(source: str, root: str | Path, *, source_hints: bool = True,
            note: Callable[[str], None] | None = None) -> Workspace:
    """Make `root/src` from SOURCE. Raises SourceError with an actionable message. Credential files (keys,
    tokens, .env) and special files are not copied, but from Debian's archive, whose files are all public, such
    files (a test suite's keys) stay; the returned Workspace lists what was left out in `left_out`. Without
    SOURCE_HINTS Debian's patches are undone and the packaging (PACKAGING) removed: the project as upstream ships it.
    NOTE is told each phase (a download can take minutes)."""
    note = note or (lambda _: None)
    ws = Workspace(Path(root).resolve())
    if ws.src.exists():
        raise SourceError(f"{ws.src} already exists: choose a new workspace folder")
    if ws.root.exists() and not ws.root.is_dir():
        raise SourceError(f"{ws.root} is a file: choose a new or empty workspace folder")
    if ws.root.is_dir() and any(ws.root.iterdir()):  # src/, build/, install/ and .xbuild/ would land among its files
        raise SourceError(f"{ws.root} is a folder with files in it, not a crossbuild workspace: choose a new or "
                          "empty workspace folder")
    created = not ws.root.exists()
    ws.root.mkdir(parents=True, exist_ok=True)
    try:
        left_out = _fill(source, ws, note)
        if sources.parse(source).kind != "debian":
            note("leaving credential files out")
            left_out += _drop_credentials(ws.src)
        # Debian's archive publishes every file of its sources (hash-checked): a test suite's private keys there
        # (OpenSSL's, curl's) are public test data its tests read, and stay; the tools still refuse them by name
        if not source_hints:
            left_out += [f"debian/patches/{name} (undone: --no-source-hints)" for name in quilt.unapply(ws.src)]
            left_out += _drop_packaging(ws.src)
        note("keeping a pristine copy of the source for the clean rebuild")
        safefs.copy_tree(ws.root, "src", ws.root, f"{PRISTINE}/src")
    except BaseException:
        if created:  # a source that cannot be prepared leaves nothing behind
            shutil.rmtree(ws.root, ignore_errors=True)
        raise
    return Workspace(ws.root, tuple(left_out))


def _fill(source: str, ws: Workspace, note: Callable[[str], None]) -> list[str]:
    try:
        spec = sources.parse(source)
    except sources.UnusableSource as e:
        raise SourceError(str(e)) from None
    if spec.kind == "debian":
        _from_debian(spec.value, ws, note)
    elif spec.kind == "network" or spec.git:
        note(f"cloning {source}")
        try:
            sources.clone(spec, ws.src)
        except sources.UnusableSource as e:
            raise SourceError(str(e)) from None
    else:
        path = Path(spec.value)  # the user's own path (or one checked against the roots); below it, nothing is followed
        if not path.exists():
            raise SourceError(f"source {source!r} does not exist (give {sources.FORMS})")
        if path.is_dir():
            note(f"copying {path}")
            inside = _workspace_inside(path, ws.root)
            copied = safefs.copy_tree(path, ".", ws.root, "src", links="keep",
                                      skip=lambda rel: rel in (".xbuild", inside) or is_credential(
                                          rel, peek(path, rel)))
            return [f"{rel} ({'credential file' if why == 'left out' else why})" for rel, why in copied.skipped
                    if rel not in (".xbuild", inside)]
        if tarfile.is_tarfile(path):
            note(f"unpacking {path.name}")
            _from_tarball(path, ws)
        else:
            raise SourceError(f"{source} is neither a folder nor a tarball")
    return []


def _workspace_inside(source: Path, root: Path) -> str | None:
    """The top folder of SOURCE that holds the workspace ROOT, when it does (`crossbuild build .` keeps its runs in
    ./crossbuild-runs/): left out of the copy, which would otherwise copy itself without end."""
    try:
        rel = root.resolve().relative_to(source)
    except ValueError:
        return None
    return rel.parts[0] if rel.parts else None


def _drop_credentials(src: Path) -> list[str]:
    """Delete credential files a download or an archive brought in (they are never needed to build)."""
    found = [e.rel for e in safefs.walk_files(src)
             if is_credential(e.rel, peek(src, e.rel))]
    for rel in found:
        parts = Path(rel).parts
        top = next((i for i, part in enumerate(parts) if part in CREDENTIAL_DIRS), None)
        safefs.remove_tree(src, Path(*parts[:top + 1]) if top is not None else rel)
    return [f"{rel} (credential file)" for rel in found]


def _drop_packaging(src: Path) -> list[str]:
    found = [name for name in PACKAGING if (src / name).is_dir() or (src / name).is_symlink()]
    for name in found:
        safefs.remove_tree(src, name)
    return [f"{name}/ (packaging: --no-source-hints)" for name in found]


def _from_tarball(path: Path, ws: Workspace) -> None:
    unpack = ws.root / ".unpack"
    with tarfile.open(path) as tar:
        tar.extractall(unpack, filter="data")  # refuses absolute paths, '..' and links out of the folder
    _adopt_single_dir(unpack, ws.src)


def _adopt_single_dir(unpack: Path, dest: Path) -> None:
    entries = [p for p in unpack.iterdir()]
    top = entries[0] if len(entries) == 1 and entries[0].is_dir() else unpack
    top.rename(dest)
    if unpack.exists():
        shutil.rmtree(unpack)


# -- Debian source packages, with a private apt configuration ------------------------------------------------

def _apt_dir() -> Path:
    return host.cache_root() / "apt"


def _deb_src_entries() -> list[str]:
    """deb-src stanzas for the Debian archives the machine already uses (its apt setup is only read). The private
    configuration also reads their binary indices (`_archive_entries`), for build-machine tools."""
    stanzas: list[str] = []
    etc = Path("/etc/apt")
    for f in sorted((etc / "sources.list.d").glob("*.sources")) if (etc / "sources.list.d").exists() else []:
        for block in f.read_text().split("\n\n"):
            fields = dict(
                line.split(":", 1) for line in block.splitlines() if ":" in line and not line.startswith("#")
            )
            fields = {k.strip(): v.strip() for k, v in fields.items()}
            if "deb" in fields.get("Types", "").split() and "debian" in fields.get("URIs", ""):
                st = ["Types: deb-src", f"URIs: {fields['URIs']}", f"Suites: {fields.get('Suites', '')}",
                      f"Components: {fields.get('Components', 'main')}"]
                if "Signed-By" in fields:
                    st.append(f"Signed-By: {fields['Signed-By']}")
                stanzas.append("\n".join(st))
    legacy = etc / "sources.list"
    if legacy.exists():
        for line in legacy.read_text().splitlines():
            m = re.match(r"^deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.+)$", line.strip())
            if m and "debian" in m.group(2):
                stanzas.append(f"Types: deb-src\nURIs: {m.group(2)}\nSuites: {m.group(3)}\nComponents: {m.group(4)}")
    return stanzas


def _archive_entries() -> list[str]:
    """The private configuration's stanzas: each archive's sources, and its packages for this machine (build_tools
    downloads programs such as bison from them)."""
    return [s.replace("Types: deb-src", "Types: deb-src deb", 1) for s in _deb_src_entries()]


def apt_options() -> list[str]:
    """apt's options for crossbuild's private configuration (its own lists and state; the host's are only read)."""
    d = _apt_dir()
    return ["-o", f"Dir::Etc::SourceList={d / 'sources.list'}", "-o", f"Dir::Etc::SourceParts={d / 'sources.d'}",
            "-o", f"Dir::State={d / 'state'}", "-o", f"Dir::Cache={d / 'cache'}", "-o", "APT::Sandbox::User=root",
            "-o", "Debug::NoLocking=1"]


def _apt_update() -> None:
    """Write the private source lists and fetch their indices (at most daily). Under a lock: two crossbuild
    processes updating one apt state at once fail (apt's own locking is off, since the state is private)."""
    stanzas = _archive_entries()
    if not stanzas:
        raise SourceError("no Debian archive found in /etc/apt to fetch source packages from")
    with host.exclusive(_apt_dir() / "update.lock"):
        _write_lists_and_update(stanzas)


def _write_lists_and_update(stanzas: list[str]) -> None:
    d = _apt_dir()
    (d / "sources.d").mkdir(parents=True, exist_ok=True)
    (d / "state" / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (d / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    # replaced whole, never truncated: another crossbuild's `apt-get source` may be reading these lists right
    # now without the update lock, and an empty file there reads as "no deb-src URIs"
    safefs.write_atomic(d, "sources.list", b"")
    safefs.write_atomic(d, "sources.d/crossbuild.sources", ("\n\n".join(stanzas) + "\n").encode())
    stamp = d / "state" / "updated"
    if stamp.exists() and time.time() - stamp.stat().st_mtime < 24 * 3600 and source_lists() and package_lists():
        return
    r = subprocess.run(["apt-get", *apt_options(), "update"], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SourceError(f"apt-get update (private source lists) failed: {r.stderr.strip()[-400:]}")
    stamp.touch()


def debian_archives() -> list[str]:
    """The Debian archives this machine's apt uses, as deb-src stanzas (URIs, Suites, Components)."""
    return _deb_src_entries()


def update_source_lists() -> None:
    """Fetch (at most daily) the Sources indices of crossbuild's private apt configuration."""
    _apt_update()


def package_lists() -> list[Path]:
    """The Packages index files of crossbuild's private apt configuration."""
    return sorted((_apt_dir() / "state" / "lists").glob("*_Packages*"))


def source_lists() -> list[Path]:
    """The Sources index files of crossbuild's private apt configuration (compressed as apt keeps them)."""
    return sorted((_apt_dir() / "state" / "lists").glob("*_Sources*"))


def _from_debian(spec: str, ws: Workspace, note: Callable[[str], None]) -> None:
    name, _, version = spec.partition("=")
    check_name(name)
    if version and not re.match(r"^[A-Za-z0-9.+~:-]+$", version):
        raise SourceError(f"invalid Debian version {version!r}")
    if shutil.which("apt-get") is None or shutil.which("dpkg-source") is None:
        raise SourceError("debian: sources need apt-get and dpkg-source: `apt-get install dpkg-dev`")
    note("reading Debian's source lists")
    _apt_update()
    cache = host.cache_root() / "debian-src" / (f"{name}_{version}" if version else name)
    note(f"downloading Debian source {spec} (or waiting for another download of it)")
    with host.exclusive(cache.with_name(cache.name + ".lock")):  # one download per package at a time
        dsc = _downloaded_source(name, version, spec, cache)
    note(f"unpacking {dsc[-1].name} and applying Debian's patches (dpkg-source -x)")
    r = subprocess.run(["dpkg-source", "--no-check", "-x", str(dsc[-1]), str(ws.src)], capture_output=True,
                       text=True, timeout=900)
    if r.returncode != 0:
        raise SourceError(f"dpkg-source -x {dsc[-1].name} failed: {r.stderr.strip()[-400:]}")


def _downloaded_source(name: str, version: str, spec: str, cache: Path) -> list[Path]:
    """The .dsc files of the source package in `cache`, downloading it first when it is not there. The download
    goes into `<cache>.part` and is renamed into place whole, so a reader that does not hold the lock (the
    evaluation's checksum check) never finds a .dsc whose tarballs are still coming."""
    dsc = sorted(cache.glob("*.dsc")) if cache.exists() else []
    if not dsc:
        part = cache.with_name(cache.name + ".part")
        r = _fetch_into(part, f"{name}={version}" if version else name)
        if r.returncode != 0 and not version:
            # the index can name a version whose files the mirror no longer serves (a superseded security
            # update): fall back to the newest version that downloads, and say which one was used
            for other in _served_versions(name)[::-1]:
                r = _fetch_into(part, f"{name}={other}")
                if r.returncode == 0:
                    break
        if r.returncode != 0:
            shutil.rmtree(part, ignore_errors=True)
            served = _served_versions(name)
            hint = f" The archive lists: {', '.join(served)}." if served else ""
            raise SourceError(f"cannot download Debian source {spec}: {r.stderr.strip()[-300:]}{hint}")
        shutil.rmtree(cache, ignore_errors=True)  # an empty or partial folder an older crossbuild left
        part.rename(cache)
        dsc = sorted(cache.glob("*.dsc"))
    return dsc


def _fetch_into(folder: Path, spec: str) -> subprocess.CompletedProcess:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    # NAME=VERSION is a source version: else apt takes NAME's binary candidate (brotli=1.0.9-2 got 1.0.9-2+deb12u1)
    return subprocess.run(["apt-get", *apt_options(), "source", *(["--only-source"] if "=" in spec else []),
                           "--download-only", spec], cwd=folder, capture_output=True, text=True, timeout=1800)


def _served_versions(name: str) -> list[str]:
    """The versions the archive index lists, oldest first (Debian version order)."""
    r = subprocess.run(["apt-cache", *apt_options(), "showsrc", name], capture_output=True, text=True)
    versions = {line.split(":", 1)[1].strip() for line in r.stdout.splitlines() if line.startswith("Version:")}
    return sorted(versions, key=functools.cmp_to_key(_compare_versions))


def _compare_versions(a: str, b: str) -> int:
    if subprocess.run(["dpkg", "--compare-versions", a, "lt", b]).returncode == 0:
        return -1
    return 0 if a == b else 1
