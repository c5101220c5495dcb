"""What a failing build asks for -> the Debian source package that provides it, read from Debian's own indices
instead of a hand-written table: the archive's `Contents` index (file path -> binary package) and the `Sources`
index the workspace already fetches for `debian:` sources (binary package -> source package).

A name is turned into the files that would satisfy it: a CMake package into `<Name>Config.cmake`/
`<name>-config.cmake`, or, when CMake ships a `Find<Name>.cmake` module, into the headers and libraries that module
searches for; a pkg-config module into `<name>.pc`; a header into `usr/include/<header>`; a library into
`lib<name>.so`/`.a`. The first query builds a compact index (~1 min, once) under the cache.
"""

from __future__ import annotations

import glob
import gzip
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from crossbuild.env import workspace
from crossbuild.foundation import host

CONTENTS = ("main/Contents-amd64.gz", "main/Contents-all.gz")
TRIPLET = "x86_64-linux-gnu"  # the multiarch folder of the amd64 Contents read here; what a file is called is the same
# The files a dependency is found by, and the programs, Perl modules and data a build runs on the build machine
# (build_tools: bison, gperf, intltool's XML::Parser, /usr/share/unicode/...), and the top of each source tree Debian
# ships under /usr/src (googletest); everything else in Contents is left out of the index.
_KEPT = re.compile(r"^usr/include/|^usr/lib/([^/]+/)?(pkgconfig/[^/]+\.pc|lib[^/]+\.(so|a))$|^usr/share/pkgconfig/|"
                   r"^usr/src/[^/]+/(CMakeLists\.txt|meson\.build|configure|Makefile)$|"
                   r"/cmake/.*([Cc]onfig|-config)\.cmake$|^(usr/)?s?bin/[^/]+$|"
                   r"^usr/(share/perl5|lib/[^/]+/perl5/[^/]+)/.+\.pm$|"
                   r"^usr/share/(?!doc/|man/|locale/|info/|help/|icons/|gtk-doc/|lintian/|texlive/|texmf/|fonts/|"
                   r"javascript/|zoneinfo/|i18n/|games/|sounds/|backgrounds/|themes/|pixmaps/|emacs/|vim/|gocode/|"
                   r"cargo/|R/|octave/|php/|ruby\w*/|nodejs/|java/|qt\d/|kf\d/|gnome\w*/|plasma/|metainfo/|"
                   r"applications/|bash-completion/|zsh/|fish/|dbus-1/|polkit-1/|mime/|doc-base/)[^/]+/")


class IndexError_(RuntimeError):  # noqa: N801 - not the builtin IndexError
    """The index cannot be built here (no archive reachable); the message says why."""


@dataclass
class Resolution:
    name: str
    source: str | None
    evidence: list[str] = field(default_factory=list)  # "usr/include/zlib.h in zlib1g-dev (source zlib)"
    candidates: list[str] = field(default_factory=list)  # other sources that also provide a wanted file


def index_path() -> Path:
    # -3: programs, build-machine data and /usr/src source trees kept; -4: Perl modules
    return host.cache_root() / "debian-index" / "bookworm-4.sqlite"


def packages_with(path: str, *, progress=lambda _: None) -> list[str]:
    """The binary packages whose files include PATH exactly (archive-relative: `usr/bin/bison`), or a path PATH
    matches as a GLOB pattern when it has a `*` (`usr/lib/*/perl5/*/XML/Parser.pm`)."""
    db = _open(progress)
    try:
        rows = db.execute(f"SELECT DISTINCT binary FROM files WHERE path {'GLOB' if '*' in path else '='} ? LIMIT 20",
                          (path,)).fetchall()
    finally:
        db.close()
    return sorted(r[0] for r in rows)


def resolve(name: str, *, progress=lambda _: None) -> Resolution:
    """The source package whose -dev files satisfy NAME, with the files that show it. Evidence comes in tiers, and
    the first tier with any file decides: a header at its own path beats copies other packages vendor below
    usr/include/<their-name>/ (gdcm ships a jpeglib.h too)."""
    db = _open(progress)
    tiers = _wanted_files(name)
    try:
        for tier in tiers:
            votes: Counter[str] = Counter()
            evidence: list[str] = []
            for pattern, weight in tier:
                rows = db.execute("SELECT f.path, f.binary, b.source FROM files f LEFT JOIN binaries b "
                                  "ON b.binary = f.binary WHERE f.path GLOB ? LIMIT 20", (pattern,)).fetchall()
                for path, binary, source in rows:
                    source = source or binary
                    # development files: a -dev package's, a header, or what find_package or pkg-config reads,
                    # whatever the package is called (an Architecture: all package of CMake modules)
                    if binary.endswith("-dev") or path.startswith("usr/include/") or path.endswith(_CONSUMED):
                        votes[source] += weight
                        line = f"{path} in {binary} (source {source})"
                        if len(evidence) < 6 and line not in evidence:
                            evidence.append(line)
            if votes:
                ranked = [s for s, _ in votes.most_common()]
                return Resolution(name, ranked[0], evidence, ranked[1:5])
    finally:
        db.close()
    shown = [p for tier in tiers for p, _ in tier][:4]
    return Resolution(name, None, [f"no file of {', '.join(shown)} in the index"])


_CONSUMED = (".cmake", ".pc")  # Config files and the modules include() reads


def _wanted_files(name: str) -> list[list[tuple[str, int]]]:
    """Tiers of GLOB patterns over Contents paths that would satisfy NAME, each with how strongly it speaks for a
    package: the file itself where it belongs, then what CMake's Find module searches for, then looser places."""
    n = name.strip().removeprefix("-l")
    n = re.sub(r"::.*$", "", n)  # PNG::PNG -> PNG
    if n.endswith(".cmake") and "/" not in n:  # a module include() could not find (ECMSetupVersion.cmake)
        return [[(f"usr/share/*/{n}", 3), (f"usr/share/*/*/{n}", 3), (f"usr/lib/{TRIPLET}/cmake/*/{n}", 3)]]
    if n.endswith((".h", ".hpp", ".hh")) or "/" in n:
        return [[(f"usr/include/{n}", 3), (f"usr/include/{TRIPLET}/{n}", 3)], [(f"usr/include/*/{n}", 1)]]
    lib = re.sub(r"^lib", "", n) if n.lower().startswith("lib") and len(n) > 4 else n
    own = [(f"usr/lib/{TRIPLET}/pkgconfig/{n}.pc", 3), (f"usr/share/pkgconfig/{n}.pc", 3),
           (f"usr/lib/{TRIPLET}/cmake/*/{n}Config.cmake", 3),
           (f"usr/lib/{TRIPLET}/cmake/*/{n.lower()}-config.cmake", 3),
           (f"usr/lib/cmake/*/{n}Config.cmake", 3), (f"usr/share/cmake/*/{n}Config.cmake", 3),
           # CMake's search also looks in <prefix>/share/<name>*/cmake/ (extra-cmake-modules' ECM)
           (f"usr/share/{n}*/cmake/{n}Config.cmake", 3), (f"usr/lib/{TRIPLET}/{n}*/cmake/{n}Config.cmake", 3),
           (f"usr/lib/{TRIPLET}/lib{lib.lower()}.so", 2), (f"usr/lib/{TRIPLET}/lib{lib}.so", 2)]
    if "-" in lib:  # a folder or project name (deps/http-parser) whose library is named with _: libhttp_parser.so
        own.append((f"usr/lib/{TRIPLET}/lib{lib.lower().replace('-', '_')}.so", 2))
    found = _find_module_names(n)  # reads CMake's Find module once for both lists
    module = [(f"usr/include/{h}", 3) for headers, _ in found for h in headers]
    module += [(f"usr/lib/{TRIPLET}/lib{x}.so", 2) for _, libraries in found for x in libraries]
    # not usr/include/*/<name>.h: other projects vendor such headers (find_package(Python) is not dlib/python.h)
    loose = [(f"usr/lib/*/lib{lib.lower()}.a", 1)]
    return [own, module, loose]


def _find_module_names(package: str) -> list[tuple[list[str], list[str]]]:
    """The headers and libraries CMake's own Find<PACKAGE>.cmake searches for (find_path / find_library NAMES)."""
    dirs = [*glob.glob("/usr/share/cmake-*/Modules"), *glob.glob(f"{sys.prefix}/lib/python*/site-packages/cmake/data"
                                                                 "/share/cmake-*/Modules")]
    for d in dirs:
        module = Path(d) / f"Find{package}.cmake"
        if not module.is_file():
            continue
        text = module.read_text(errors="replace")
        headers, libraries = [], []
        for kind, body in re.findall(r"find_(path|library)\s*\(([^)]*)\)", text, re.IGNORECASE):
            words = [w for w in re.split(r"\s+", body.strip()) if w]
            names = words[2:] if len(words) > 1 and words[1] == "NAMES" else words[1:2]
            names = [w for w in names if not w.isupper() and "$" not in w and "{" not in w][:4]
            (headers if kind.lower() == "path" else libraries).extend(
                w for w in names if kind.lower() == "path" and "." in w or kind.lower() == "library")
        return [(headers, [re.sub(r"^lib", "", x) for x in libraries])]
    return []


def ensure_index(progress) -> Path:
    """The Contents index's sqlite file, built from the archive the first time (PROGRESS gets a line per stage)."""
    path = index_path()
    if not path.is_file():
        _build(path, progress)
    return path


def _open(progress) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{ensure_index(progress)}?mode=ro", uri=True)


def _build(path: Path, progress) -> None:
    uri, suite = _archive()
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="index-", dir=path.parent))
    try:
        _fill(scratch / "index.sqlite", uri, suite, progress)
        (scratch / "index.sqlite").replace(path)  # whole or not at all; concurrent builders both land whole
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _fill(file: Path, uri: str, suite: str, progress) -> None:
    db = sqlite3.connect(file)
    try:
        db.execute("CREATE TABLE files (path TEXT, binary TEXT)")
        db.execute("CREATE TABLE binaries (binary TEXT PRIMARY KEY, source TEXT)")
        for rel in CONTENTS:
            url = f"{uri.rstrip('/')}/dists/{suite}/{rel}"
            progress(f"reading {url}")
            try:
                with urllib.request.urlopen(url, timeout=300) as r, gzip.open(r, "rt", errors="replace") as lines:
                    db.executemany("INSERT INTO files VALUES (?, ?)", _contents_rows(lines))
            except (OSError, EOFError) as e:  # unreachable archive, truncated download
                raise IndexError_(f"cannot read Debian's Contents index at {url}: {e}") from None
        progress("reading the Sources index (binary -> source package)")
        try:
            db.executemany("INSERT OR IGNORE INTO binaries VALUES (?, ?)", _source_rows())
        except (workspace.SourceError, OSError, subprocess.SubprocessError) as e:
            raise IndexError_(f"cannot read Debian's Sources index: {e}") from None
        db.execute("CREATE INDEX files_path ON files(path)")
        db.commit()
    finally:
        db.close()


def _contents_rows(lines):
    for line in lines:
        path, _, owners = line.rstrip("\n").rpartition(" ")
        path = path.strip()
        if not path or not _KEPT.search(path):
            continue
        for owner in owners.split(","):
            yield path, owner.rsplit("/", 1)[-1]


def _source_rows():
    workspace.update_source_lists()
    lists = workspace.source_lists()
    for f in lists:
        text = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", str(f)], capture_output=True, text=True,
                              timeout=300).stdout
        for stanza in text.split("\n\n"):
            source = re.search(r"^Package: (\S+)", stanza, re.MULTILINE)
            binaries = re.search(r"^Binary: (.+(?:\n .+)*)", stanza, re.MULTILINE)
            if source and binaries:
                for b in re.split(r"[,\s]+", binaries.group(1)):
                    if b:
                        yield b, source.group(1)


def _archive() -> tuple[str, str]:
    """The Debian archive and suite this machine's apt uses (the same one `debian:` sources come from)."""
    for stanza in workspace.debian_archives():
        uri = re.search(r"^URIs: (\S+)", stanza, re.MULTILINE)
        suites = re.search(r"^Suites: (\S+)", stanza, re.MULTILINE)
        if uri and suites and "security" not in uri.group(1):
            return uri.group(1), suites.group(1)
    raise IndexError_("no Debian archive in /etc/apt to read the Contents index from")
