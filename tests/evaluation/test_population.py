"""`crossbuild eval corpus generate` on a small fixture archive (hand-made Sources and Packages stanzas, a tiny
Contents index, and a pool of real files served over HTTP from tmp_path) through the generator's own code paths;
the sample's reproducibility and stratification; the command's one-line errors; and one real run."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import sqlite3
import tarfile
import threading
import time
from collections import Counter
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from crossbuild.env import workspace
from crossbuild.evaluation import corpus, population
from crossbuild.foundation import host
from tests.conftest import cb

TRIPLET = "usr/lib/x86_64-linux-gnu"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def mirror(tmp_path):
    """A folder served over HTTP: (its path, its URL)."""
    root = tmp_path / "mirror"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _tarball(top: str, names: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in names:
            data = b"all:\n" if name else b""
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _stanza(pool: Path | None, name: str, version: str, *, depends: str = "debhelper-compat (= 13)",
            binaries: str = "", top: tuple[str, ...] = ("Makefile", "src/a.c"), archive: str = "debian",
            orig_size: int | None = None, checksums: bool = True) -> str:
    """A Sources stanza for NAME, with its files written into POOL (none when POOL is None): the .dsc, the upstream
    tarball (whose top level is TOP) and the Debian tarball, each listed with its real size and SHA-256."""
    upstream = version.split("-")[0]
    directory = f"pool/main/{name[0]}/{name}"
    files = {f"{name}_{version}.dsc": b"Format: 3.0 (quilt)\n",
             f"{name}_{upstream}.orig.tar.gz": _tarball(f"{name}-{upstream}", list(top)),
             f"{name}_{version}.debian.tar.xz": b"debian"}
    lines = []
    for fname, data in files.items():
        size = orig_size if orig_size and ".orig." in fname else len(data)
        lines.append(f" {hashlib.sha256(data).hexdigest()} {size} {fname}")
        if pool is not None:
            (pool / archive / directory).mkdir(parents=True, exist_ok=True)
            (pool / archive / directory / fname).write_bytes(data)
    package_list = "".join(f"\n {b}" for b in (binaries or f"lib{name}-dev deb libdevel optional arch=any")
                           .split(";"))
    return (f"Package: {name}\nBinary: lib{name}-dev\nVersion: {version}\nBuild-Depends: {depends}\n"
            f"Package-List:{package_list}\nDirectory: {directory}\n"
            + (("Checksums-Sha256:\n" + "\n".join(lines) + "\n") if checksums else ""))


def _contents(path: Path, rows: list[tuple[str, str]]) -> Path:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE files (path TEXT, binary TEXT)")
    db.execute("CREATE TABLE binaries (binary TEXT PRIMARY KEY, source TEXT)")
    db.executemany("INSERT INTO files VALUES (?, ?)", rows)
    db.execute("CREATE INDEX files_path ON files(path)")
    db.commit()
    db.close()
    return path


def _lists(folder: Path, host_port: str, main: list[str], security: list[str], packages: str) -> list[Path]:
    """Index files named as apt names them, with the InRelease files that date them."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, suite, stanzas in ((f"{host_port}_debian", "bookworm", main),
                                 (f"{host_port}_debian-security", "bookworm-security", security)):
        f = folder / f"{stem}_dists_{suite}_main_source_Sources"
        f.write_text("\n".join(stanzas))
        (folder / f"{stem}_dists_{suite}_InRelease").write_text(f"Origin: Debian\nDate: Sat, 11 Jul 2026 10:16:37 "
                                                                 f"UTC\nSuite: {suite}\n")
        written.append(f)
    (folder / f"{host_port}_debian_dists_bookworm_main_binary-amd64_Packages").write_text(packages)
    return written


@pytest.fixture
def fixture_population(tmp_path, mirror):
    pool, url = mirror
    main = [
        _stanza(pool, "cmk", "1.0-1", depends="debhelper-compat (= 13), cmake (>= 3.13)"),
        _stanza(pool, "mes", "2.0-1", depends="meson,\n cmake, libglib2.0-dev"),
        _stanza(pool, "auto", "3.0-2", depends="dh-autoreconf, libssl-dev [!hurd-i386]"),
        _stanza(pool, "plainmake", "1.2-1", top=("Makefile", "README", "src/x.c")),
        _stanza(pool, "confd", "0.9-1", top=("configure.ac", "Makefile.am", "lib/y.c")),
        _stanza(pool, "sconsy", "1.0-1", top=("SConstruct", "src/z.c")),
        _stanza(pool, "cxx", "4.1-1", depends="cmake"),
        _stanza(pool, "newer", "1.0-1", depends="cmake"),
        _stanza(pool, "rusty", "0.1-1", depends="cargo, rustc, cmake"),
        _stanza(pool, "hdr", "1.0-1", depends="cmake"),
        _stanza(pool, "alldev", "1.0-1", depends="cmake", binaries="liballdev-dev deb libdevel optional arch=all"),
        _stanza(pool, "nodev", "1.0-1", depends="cmake", binaries="nodev-tools deb utils optional arch=any"),
        _stanza(pool, "big", "1.0-1", depends="cmake", orig_size=population.SIZE_BOUND + 1),
        _stanza(None, "gone", "1.0-1", depends="cmake"),
        _stanza(pool, "broken", "1.0-1", depends="cmake", checksums=False),
    ]
    security = [_stanza(pool, "newer", "1.0-1+deb12u1", depends="cmake", archive="debian-security")]
    packages = ("Package: libcxx4\nSource: cxx (4.1-1)\nDepends: libc6 (>= 2.34), libstdc++6 (>= 12)\n\n"
                "Package: libcmk1\nSource: cmk\nDepends: libc6 (>= 2.34)\n")
    libs = ["cmk", "mes", "auto", "plainmake", "confd", "sconsy", "cxx", "newer", "rusty", "alldev", "nodev",
            "big", "gone", "broken"]
    rows = [(f"{TRIPLET}/lib{n}.so", f"lib{n}-dev") for n in libs] + [
        (f"{TRIPLET}/libcmk.a", "libcmk-dev"), (f"{TRIPLET}/libcmk_extra.a", "libcmk-dev"),
        ("usr/include/hdr/hdr.hpp", "libhdr-dev"), ("usr/include/mes/mes.hpp", "libmes-dev"),
        (f"{TRIPLET}/libcmk.so.1", "libcmk1"), (f"{TRIPLET}/plugins/libplug.so", "libcmk-dev")]
    host_port = url.removeprefix("http://")
    indices = population.Indices(
        sources=_lists(tmp_path / "lists", host_port, main, security, packages),
        packages=[tmp_path / "lists" / f"{host_port}_debian_dists_bookworm_main_binary-amd64_Packages"],
        contents=_contents(tmp_path / "contents.sqlite", rows),
        archives=[f"Types: deb-src\nURIs: {url}/debian\nSuites: bookworm\nComponents: main",
                  f"Types: deb-src\nURIs: {url}/debian-security/\nSuites: bookworm-security\nComponents: main"])
    return population.generate(indices, tmp_path / "cache")


def test_the_rule_admits_and_excludes_each_case(fixture_population):
    pop = fixture_population
    by = {m.name: m for m in pop.members}
    assert set(by) == {"cmk", "mes", "auto", "plainmake", "confd", "cxx", "newer"}
    assert {n: m.build_system for n, m in by.items()} == {
        "cmk": "cmake", "mes": "meson", "auto": "autotools", "plainmake": "make", "confd": "autotools",
        "cxx": "cmake", "newer": "cmake"}
    assert pop.excluded == Counter({"1. no lib*-dev package for arch=any": 2,  # alldev (arch=all), nodev
                                    "2. another language's toolchain in Build-Depends": 1,  # rusty
                                    "3. upstream tarball over the size bound": 1,  # big
                                    "4. no library in its lib*-dev packages (header-only)": 1,  # hdr
                                    "5. no CMake, Meson, autotools or Makefile": 1})  # sconsy
    # one line each for the sources the mirror lacks or whose entry cannot be read; the run went on
    assert len(pop.skipped) == 2
    assert any(s.startswith("gone=1.0-1: gone_1.0-1.dsc is not served by the mirror (HTTP 404)") for s in pop.skipped)
    assert "broken=1.0-1: its index entry cannot be read (no .dsc, no single upstream tarball)" in pop.skipped
    # the expected artifacts are what the -dev package installs, never the runtime package's or a subfolder's
    assert by["cmk"].expected == ["libcmk.a|libcmk.so*", "libcmk_extra.a|libcmk_extra.so*"]
    assert by["newer"].version == "1.0-1+deb12u1" and "/debian-security/pool/" in by["newer"].upstream
    assert {n for n, m in by.items() if m.language == "C++"} == {"cxx", "mes"}  # libstdc++6 dependant; .hpp header
    assert by["cmk"].tier == "easy" and pop.dates["Contents (read)"]
    assert set(pop.dates.values()) >= {"Sat, 11 Jul 2026 10:16:37 UTC"}


def test_written_manifests_load_as_a_corpus(fixture_population, tmp_path):
    out = tmp_path / "population"
    written = population.write(fixture_population, out)
    projects = {p.name: p for p in corpus.load(out)}
    assert set(projects) == {m.name for m in written}
    newer = projects["newer"]
    assert newer.source == "debian:newer=1.0-1+deb12u1" and len(newer.dsc_sha256 or "") == 64
    index = json.loads((out / population.INDEX).read_text())
    assert index["population"]["size"] == 7 and index["population"]["by_build_system"]["cmake"] == 3
    assert "\n".join(index["rule"]) == population.RULE and len(index["population"]["skipped_unavailable"]) == 2
    # written again, a sample replaces the manifests; a folder of someone else's manifests is refused
    population.write(fixture_population, out, n=3, seed=1)
    assert len(list(out.glob("*.toml"))) == 3
    (tmp_path / "hand").mkdir()
    (tmp_path / "hand" / "zlib.toml").write_text("name = 'zlib'\n")
    with pytest.raises(population.PopulationError, match="did not write"):
        population.write(fixture_population, tmp_path / "hand")


def _synthetic(sizes: dict[tuple[str, str], int]) -> list[population.Member]:
    size_of = {"easy": 10_000, "medium": 2_000_000, "hard": 5_000_000}
    return [population.Member(f"{system}-{tier}-{i}", "1-1", "0" * 64, system, "C", size_of[tier], ["liba.a"])
            for (system, tier), count in sizes.items() for i in range(count)]


def test_the_sample_is_reproducible_and_stratified():
    strata = {("cmake", "easy"): 120, ("cmake", "hard"): 30, ("meson", "easy"): 17, ("autotools", "easy"): 200,
              ("autotools", "medium"): 55, ("make", "easy"): 41, ("make", "hard"): 3}
    members = _synthetic(strata)
    first = population.sample(members, 60, 20261204)
    assert [m.name for m in first] == [m.name for m in population.sample(list(reversed(members)), 60, 20261204)]
    assert [m.name for m in first] != [m.name for m in population.sample(members, 60, 7)]
    drawn = Counter((m.build_system, m.tier) for m in first)
    assert sum(drawn.values()) == 60 and len({m.name for m in first}) == 60
    for key, count in strata.items():  # each stratum in proportion: its exact share rounded down or up
        share = 60 * count / len(members)
        assert math.floor(share) <= drawn[key] <= math.ceil(share), key
    with pytest.raises(population.PopulationError, match="cannot draw a sample of 500"):
        population.sample(members, 500, 1)


def test_bad_command_lines_get_one_line_errors(tmp_path):
    for args, says in ((["--out", str(tmp_path / "no" / "such")], "does not exist"),
                       (["--out", str(tmp_path / "s"), "--sample", "5", "--seed", "abc"], "--seed"),
                       (["--out", str(tmp_path / "s"), "--sample", "5", "--seed", "-1"], "--seed"),
                       (["--out", str(tmp_path / "s"), "--sample", "5"], "go together")):
        r = cb("eval", "corpus", "generate", *args, timeout=120)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


@pytest.mark.skipif(not workspace.debian_archives(), reason="no Debian archive in /etc/apt")
def test_a_sample_larger_than_the_population_is_a_one_line_error(tmp_path):
    """Through the private apt configuration, pointed at a cache whose indices admit nothing (no mirror is asked)."""
    cache = tmp_path / "cache"
    lists = cache / "apt" / "state" / "lists"
    lists.mkdir(parents=True)
    (lists / "mirror.example_debian_dists_bookworm_main_source_Sources").write_text(
        _stanza(None, "rusty", "0.1-1", depends="cargo") + "\n" + _stanza(None, "hdr", "1.0-1", depends="cmake"))
    (lists / "mirror.example_debian_dists_bookworm_main_binary-amd64_Packages").write_text("Package: x\n")
    (cache / "apt" / "state" / "updated").touch()  # fresh: no apt-get update
    (cache / "debian-index").mkdir()
    from crossbuild.env.debian_index import index_path
    _contents(cache / "debian-index" / index_path().name, [("usr/include/hdr.h", "libhdr-dev")])
    r = cb("eval", "corpus", "generate", "--out", str(tmp_path / "s"), "--sample", "5", "--seed", "1",
           env={"CROSSBUILD_CACHE_DIR": str(cache)}, timeout=300)
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.returncode == 2 and errors == ["error: cannot draw a sample of 5 from a population of 0 projects"]
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_a_real_run_on_debian_12(tmp_path):
    """The rule on the real indices: several hundred projects, every manifest loads (the mirror is asked)."""
    try:
        indices = population.Indices.from_apt(lambda _: None)
    except population.PopulationError as e:
        pytest.skip(f"no Debian indices here: {e}")
    started = time.monotonic()
    pop = population.generate(indices, host.cache_root() / "population")
    assert len(pop.members) >= 300, (len(pop.members), pop.breakdown("build_system"), len(pop.skipped))
    assert set(pop.breakdown("build_system")) == set(population.SYSTEMS)
    written = population.write(pop, tmp_path / "population")
    assert len(corpus.load(tmp_path / "population")) == len(written) == len(pop.members)
    assert time.monotonic() - started < 900
