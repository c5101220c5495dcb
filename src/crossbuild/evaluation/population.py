"""The evaluation's population: every Debian 12 source package a written rule admits (C and C++ libraries with a
`lib*-dev` package, built by CMake, Meson, autotools or make, under a size bound), read mechanically from Debian's
own indices, and reproducible stratified samples of it written as corpus manifests."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import lzma
import math
import random
import re
import sqlite3
import subprocess
import tarfile
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import httpx

from crossbuild.env import debian_index, workspace

SIZE_BOUND = 10_000_000  # bytes of the upstream tarball, compressed, as the Sources index lists it
TIERS = (("easy", 1_000_000), ("medium", 3_000_000), ("hard", SIZE_BOUND + 1))  # the first whose bound > size
SYSTEMS = ("cmake", "meson", "autotools", "make")
INDEX = "index.json"
FOREIGN = re.compile(r"^(cargo|rustc|dh-cargo|librust-.+|golang-.+|gccgo.*|dh-golang|ghc|haskell-.+|libghc-.+|"
                     r"default-jdk.*|openjdk-.+|javahelper|maven-.+|gradle|ant|gfortran.*|ocaml.*|dh-ocaml|dh-dune|"
                     r"fpc|fp-.+|gnat.*|dh-ada-library|gdc.*|ldc|valac.*|mono-.+|gobjc.*|gnustep-make)$")
AUTOTOOLS = re.compile(r"^(autoconf.*|automake.*|dh-autoreconf|autotools-dev|libtool(-bin)?)$")
CXX_DEPENDS = re.compile(r"^(g\+\+.*|libstdc\+\+.*-dev)$")
CXX_HEADER = re.compile(r"\.(hpp|hh|hxx|h\+\+)$")
AUTOTOOLS_FILES = {"configure.ac", "configure.in", "Makefile.am", "configure"}
MAKE_FILES = {"GNUmakefile", "Makefile", "makefile"}
RULE = f"""\
A source package of Debian 12 (bookworm) main, at the newest version its Sources indices (bookworm, bookworm-updates,
bookworm-security) list, is in the population when:
1. its Package-List names a binary package `lib*-dev` of type deb with arch=any;
2. no name in its Build-Depends or Build-Depends-Arch matches {FOREIGN.pattern};
3. its upstream tarball (NAME_UPSTREAM.orig.tar.* or a native package's tarball) is at most {SIZE_BOUND} bytes;
4. its lib*-dev arch=any packages install a library in the Contents index (usr/lib/[TRIPLET/]libX.so or libX.a; each
   becomes an expected artifact "libX.a|libX.so*"): header-only sources are left out;
5. its build system: meson when Build-Depends(-Arch) names meson, else cmake when it names cmake or dh-cmake, else
   autotools when it names {AUTOTOOLS.pattern}; else the top level of its upstream tarball decides: autotools with
   {', '.join(sorted(AUTOTOOLS_FILES))}, else make with {', '.join(sorted(MAKE_FILES))}, else left out;
6. the mirror serves every file its Checksums-Sha256 lists, at that size (else it is skipped with a line).
Language: C++ when Build-Depends(-Arch) names g++* or libstdc++*-dev, a lib* binary package of the source Depends on
libstdc++6 (Packages), or its lib*-dev packages install a .hpp/.hh/.hxx/.h++ header (Contents); else C.
Tier by the upstream tarball's size: easy < 1 MB, medium < 3 MB, hard up to the bound."""


class PopulationError(ValueError):
    """The population cannot be made or written as asked; the message says why."""


class _Unavailable(Exception):
    """A file of a source package is missing from the mirror or unreadable; the message says which."""


@dataclass
class Indices:
    sources: list[Path]  # Sources index files, as apt keeps them
    packages: list[Path]  # Packages index files
    contents: Path  # debian_index's sqlite: files(path, binary)
    archives: list[str]  # deb-src stanzas (URIs, Suites): the archive each Sources index came from

    @classmethod
    def from_apt(cls, say: Callable[[str], None]) -> Indices:
        """The private apt configuration's indices (fetched at most daily) and the Contents index (built once)."""
        try:
            workspace.update_source_lists()
            contents = debian_index.ensure_index(say)
        except (workspace.SourceError, debian_index.IndexError_) as e:
            raise PopulationError(str(e)) from None
        return cls(workspace.source_lists(), workspace.package_lists(), contents,
                   workspace.debian_archives())

    def dates(self) -> dict[str, str]:
        out = {"Contents (read)": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.contents.stat().st_mtime))}
        for f in self.sources:  # the Date of the Release file it came with
            release = f.with_name(re.sub(r"_[^_]+_source_Sources.*$", "_InRelease", f.name))
            found = re.findall(r"^Date: (.+)$", release.read_text(errors="replace") if release.is_file() else "", re.M)
            suite = re.search(r"_dists_([^_]+)_", f.name)  # the suite, not the mirror's file name
            out[f"Sources {suite.group(1) if suite else f.name}"] = found[0] if found else "unknown"
        return out


@dataclass
class Member:
    name: str
    version: str
    dsc_sha256: str
    build_system: str | None  # None: decided by the upstream tarball's top level
    language: str
    size: int  # of the upstream tarball
    expected: list[str]
    files: list[tuple[str, int, str]] = field(default_factory=list)  # (URL, size, sha256) from Checksums-Sha256
    upstream: str = ""  # the upstream tarball's URL

    @property
    def tier(self) -> str:
        return next(t for t, bound in TIERS if self.size < bound)

    def manifest(self) -> str:
        return "".join(f"{key} = {json.dumps(value)}\n" for key, value in {
            "name": self.name, "source": f"debian:{self.name}={self.version}", "version": self.version,
            "dsc_sha256": self.dsc_sha256, "tier": self.tier, "build_system": self.build_system,
            "language": self.language, "expected": self.expected,
            "notes": f"generated by crossbuild eval corpus generate; upstream tarball {self.size} bytes"}.items())


@dataclass
class Population:
    members: list[Member]
    excluded: Counter[str]
    skipped: list[str]  # "NAME=VERSION: why", one per source package left out as unavailable
    dates: dict[str, str]

    def breakdown(self, key: str) -> dict[str, int]:
        return dict(sorted(Counter(getattr(m, key) for m in self.members).items()))


def generate(indices: Indices, cache: Path, say: Callable[[str], None] = lambda _: None) -> Population:
    """Apply RULE to INDICES; the top levels of upstream tarballs read are cached under CACHE."""
    newest = _newest(indices.sources)
    candidates = [(where, st, devs) for where, st in (newest[k] for k in sorted(newest)) if (devs := _devs(st))]
    excluded: Counter[str] = Counter({"1. no lib*-dev package for arch=any": len(newest) - len(candidates)})
    libs, cxx_devs = _libraries(indices.contents, {d for _, _, devs in candidates for d in devs})
    cxx_sources = _cxx_sources(indices.packages)
    members, skipped = [], []
    for where, st, devs in candidates:
        try:
            result = _member(where, st, devs, libs, cxx_devs, cxx_sources, indices.archives)
        except (_Unavailable, KeyError, ValueError, IndexError) as e:
            skipped.append(f"{st['Package']}={st['Version']}: its index entry cannot be read ({e})")
            continue
        if isinstance(result, str):
            excluded[result] += 1
        else:
            members.append(result)
    say(f"checking {len(members)} source packages on the mirror ({sum(not m.build_system for m in members)} to list)")
    with httpx.Client(timeout=120) as client, ThreadPoolExecutor(max_workers=6) as pool:  # kept connections: a
        problems = list(pool.map(lambda m: _on_mirror(client, m, cache / "toplevel"), members))  # name lookup is slow
    for m, problem in zip(members, problems, strict=True):
        if problem:
            skipped.append(f"{m.name}={m.version}: {problem}")
        elif m.build_system is None:
            excluded["5. no CMake, Meson, autotools or Makefile"] += 1
    return Population([m for m, problem in zip(members, problems, strict=True) if not problem and m.build_system],
                      excluded, skipped, indices.dates())


def _stanzas(lists: list[Path], needle: str = "") -> Iterator[tuple[Path, dict[str, str]]]:
    for f in lists:
        r = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", str(f)], capture_output=True, text=True,
                           errors="replace", timeout=600)
        if r.returncode != 0:
            raise PopulationError(f"cannot read the index {f}: {r.stderr.strip()[-300:]}")
        for block in r.stdout.split("\n\n"):  # a field's continuation lines are kept, each on its own line
            if needle in block and (fields := dict(re.findall(r"^([\w-]+):[ \t]*(.*(?:\n[ \t].*)*)", block, re.M))):
                yield f, fields


def _newest(lists: list[Path]) -> dict[str, tuple[Path, dict[str, str]]]:
    newest: dict[str, tuple[Path, dict[str, str]]] = {}
    for f, st in _stanzas(lists):
        name, version = st.get("Package"), st.get("Version")
        if name and version and (name not in newest or subprocess.run(
                ["dpkg", "--compare-versions", version, "gt", newest[name][1]["Version"]]).returncode == 0):
            newest[name] = (f, st)
    return newest


def _devs(st: dict[str, str]) -> list[str]:
    return [r[0] for r in map(str.split, st.get("Package-List", "").splitlines())
            if len(r) > 4 and re.fullmatch(r"lib.+-dev", r[0]) and r[1] == "deb" and "arch=any" in r[4:]]


def _cxx_sources(lists: list[Path]) -> set[str]:
    """Source packages one of whose lib* binary packages links libstdc++ (Depends: libstdc++6)."""
    return {st.get("Source", st.get("Package", "")).split(" ")[0] for _, st in _stanzas(lists, "libstdc++6")
            if st.get("Package", "").startswith("lib")
            and re.search(r"(^|[\s,|])libstdc\+\+6([\s,(]|$)", st.get("Depends", ""))}


def _libraries(contents: Path, devs: set[str]) -> tuple[dict[str, set[str]], set[str]]:
    """The libraries (libX) each -dev package of DEVS installs; and those of DEVS with C++ headers."""
    library = re.compile(rf"^usr/lib/(?:{re.escape(debian_index.TRIPLET)}/)?(lib[^/]+)\.(?:so|a)$")
    libs: dict[str, set[str]] = {}
    cxx = set()
    db = sqlite3.connect(f"file:{contents}?mode=ro", uri=True)
    try:
        for path, binary in db.execute("SELECT path, binary FROM files WHERE path GLOB 'usr/lib/*' "
                                       "OR path GLOB 'usr/include/*'"):
            if binary in devs and (m := library.match(path)):
                libs.setdefault(binary, set()).add(m.group(1))
            elif binary in devs and CXX_HEADER.search(path):
                cxx.add(binary)
    except sqlite3.DatabaseError as e:
        raise PopulationError(f"cannot read the Contents index {contents}: {e}") from None
    finally:
        db.close()
    return libs, cxx


def _member(where: Path, st: dict[str, str], devs: list[str], libs: dict[str, set[str]], cxx_devs: set[str],
            cxx_sources: set[str], archives: list[str]) -> Member | str:
    """The source of stanza ST as a member, or the rule it fails."""
    files = [(w[2], int(w[1]), w[0]) for w in map(str.split, st.get("Checksums-Sha256", "").splitlines()) if w]
    dsc = [sha for name, _, sha in files if name.endswith(".dsc")]
    upstream = [f for f in files if re.search(r"\.tar\.\w+$", f[0]) and not re.search(r"\.debian\.tar\.|\.orig-", f[0])]
    base = _archive_for(where, archives)
    missing = [what for what, ok in (("archive in the apt configuration", base), (".dsc", dsc), ("Directory",
               st.get("Directory")), ("single upstream tarball", len(upstream) == 1)) if not ok]
    if missing:
        raise _Unavailable(f"no {', no '.join(missing)}")
    depends = {m.group(1) for alt in re.split(r"[,|]", f"{st.get('Build-Depends', '')},"
                                                      f"{st.get('Build-Depends-Arch', '')}")
               if (m := re.match(r"\s*([a-z0-9][a-z0-9+.-]*)", alt))}
    found = sorted(set().union(*(libs.get(d, set()) for d in devs)))
    if any(FOREIGN.match(d) for d in depends):
        return "2. another language's toolchain in Build-Depends"
    if upstream[0][1] > SIZE_BOUND:
        return "3. upstream tarball over the size bound"
    if not found:
        return "4. no library in its lib*-dev packages (header-only)"
    system = ("meson" if "meson" in depends else "cmake" if depends & {"cmake", "dh-cmake"} else
              "autotools" if any(AUTOTOOLS.match(d) for d in depends) else None)
    cxx = any(CXX_DEPENDS.match(d) for d in depends) or st["Package"] in cxx_sources or bool(cxx_devs & set(devs))
    urls = [(f"{base}/{st['Directory']}/{name}", size, sha) for name, size, sha in files]
    return Member(st["Package"], st["Version"], dsc[0], system, "C++" if cxx else "C", upstream[0][1],
                  [f"{lib}.a|{lib}.so*" for lib in found], urls, f"{base}/{st['Directory']}/{upstream[0][0]}")


def _archive_for(index: Path, archives: list[str]) -> str | None:
    """The archive URL an apt list file was fetched from (apt names it URI-without-scheme_dists_SUITE_...)."""
    for stanza in archives:
        fields = dict(re.findall(r"^(URIs|Suites): (.+)$", stanza, re.M))
        for uri, suite in itertools.product(fields.get("URIs", "").split(), fields.get("Suites", "").split()):
            if index.name.startswith(f"{uri.split('://', 1)[-1].rstrip('/').replace('/', '_')}_dists_{suite}_"):
                return uri.rstrip("/")
    return None


def _on_mirror(client: httpx.Client, m: Member, cache: Path) -> str | None:
    """None when the mirror serves every file of M with its size (the upstream tarball read for its top level
    where the build system is undecided), else why not."""
    try:
        for url, size, sha in m.files:
            if m.build_system is None and url == m.upstream:
                top = set(_top_level(client, url, sha, cache / sha))
                m.build_system = "autotools" if top & AUTOTOOLS_FILES else "make" if top & MAKE_FILES else None
            elif (length := _fetch(client, "HEAD", url).headers.get("Content-Length", str(size))) != str(size):
                return f"{url.rsplit('/', 1)[-1]} is {length} bytes on the mirror, {size} in the index"
    except _Unavailable as e:
        return str(e)
    return None


def _fetch(client: httpx.Client, method: str, url: str) -> httpx.Response:
    """METHOD URL's response, whole and with status 200: a transient failure is retried, a missing file raises."""
    for attempt in range(3):
        try:
            r = client.request(method, url)
        except httpx.HTTPError as e:
            problem = str(e) or type(e).__name__
        else:
            if r.status_code == 200:
                return r
            if r.status_code in (404, 410):
                raise _Unavailable(f"{url.rsplit('/', 1)[-1]} is not served by the mirror (HTTP {r.status_code})")
            problem = f"HTTP {r.status_code}"
        time.sleep(2 ** attempt)
    raise _Unavailable(f"{url.rsplit('/', 1)[-1]} cannot be fetched from the mirror ({problem})")


def _top_level(client: httpx.Client, url: str, sha: str, cached: Path) -> list[str]:
    """The names at the top of the tarball at URL (below its single top folder, if any), checked against SHA and
    cached by it; the tarball itself (at most SIZE_BOUND bytes) is read in memory, not kept."""
    if cached.is_file():
        return cached.read_text().split("\n")
    name = url.rsplit("/", 1)[-1]
    try:
        data = _fetch(client, "GET", url).content
        if hashlib.sha256(data).hexdigest() != sha:
            raise _Unavailable(f"{name} does not match the SHA-256 in the index")
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            paths = [parts for t in tar if (parts := tuple(p for p in PurePosixPath(t.name).parts if p != "."))]
    except (OSError, EOFError, tarfile.TarError, lzma.LZMAError, zlib.error) as e:
        raise _Unavailable(f"{name} cannot be read as a tarball ({e})") from None
    if len({p[0] for p in paths}) == 1 and any(len(p) > 1 for p in paths):
        paths = [p[1:] for p in paths if len(p) > 1]
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.with_name(cached.name + ".part").write_text("\n".join(sorted({p[0] for p in paths})))
    cached.with_name(cached.name + ".part").replace(cached)
    return cached.read_text().split("\n")


def sample(members: list[Member], n: int, seed: int) -> list[Member]:
    """N members drawn at random (SEED) in proportion to each stratum (build system, tier) of MEMBERS: quotas by
    largest remainder, ties in stratum order; within a stratum, `random.Random(SEED).sample` of its sorted names."""
    if not 0 < n <= len(members):
        raise PopulationError(f"cannot draw a sample of {n} from a population of {len(members)} projects")
    order = [(s, t) for s in SYSTEMS for t, _ in TIERS]
    strata = {k: sorted((m for m in members if (m.build_system, m.tier) == k), key=lambda m: m.name) for k in order}
    exact = {k: n * len(strata[k]) / len(members) for k in order}
    quota = {k: math.floor(exact[k]) for k in order}
    for k in sorted(order, key=lambda k: (quota[k] - exact[k], order.index(k)))[:n - sum(quota.values())]:
        quota[k] += 1
    rng = random.Random(seed)
    return sorted((m for k in order for m in rng.sample(strata[k], quota[k])), key=lambda m: m.name)


def check_out(out: Path) -> None:
    """OUT can take the manifests: its parent exists, and it is new, empty, or written by this generator before."""
    if not out.parent.is_dir():
        raise PopulationError(f"{out.parent} does not exist: give --out a folder whose parent exists")
    if out.exists() and (not out.is_dir() or any(out.glob("*.toml")) and not (out / INDEX).is_file()):
        raise PopulationError(f"{out} is a file or holds manifests this generator did not write: give --out a new "
                              "folder")


def write(pop: Population, out: Path, *, n: int | None = None, seed: int = 0) -> list[Member]:
    """Write the population's manifests, or a sample of N drawn with SEED, and the index file into OUT."""
    check_out(out)
    chosen = sample(pop.members, n, seed) if n is not None else pop.members
    out.mkdir(exist_ok=True)
    for old in out.glob("*.toml"):
        old.unlink()
    for m in chosen:
        (out / f"{m.name}.toml").write_text(m.manifest())
    index = {
        "rule": RULE.splitlines(), "size_bound_bytes": SIZE_BOUND, "indices": pop.dates,
        "population": {"size": len(pop.members), "by_build_system": pop.breakdown("build_system"),
                       "by_tier": pop.breakdown("tier"), "by_language": pop.breakdown("language"),
                       "excluded": dict(sorted(pop.excluded.items())),
                       "skipped_unavailable": pop.skipped},
        "sample": None if n is None else {"n": n, "seed": seed, "strata": dict(sorted(Counter(
            f"{m.build_system}/{m.tier}" for m in chosen).items()))},
        "written": [f"{m.name}={m.version} {m.build_system} {m.tier} {m.language}" for m in chosen],
    }
    (out / INDEX).write_text(json.dumps(index, indent=1) + "\n")
    return chosen
