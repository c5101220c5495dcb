"""Debian source packages fetched through crossbuild's private apt configuration, as several processes meet it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PREPARE = "import sys; from crossbuild.env import workspace; workspace.prepare('debian:zlib', sys.argv[1])"


@pytest.mark.slow
def test_two_processes_on_a_fresh_cache_both_get_the_source(tmp_path):
    """Two builds started at once on a machine that never fetched the indices: before the lock, the second one's
    apt-get update found the first one's half-written lists and failed ("You must put some 'deb-src' URIs")."""
    env = {**os.environ, "CROSSBUILD_CACHE_DIR": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-c", PREPARE, str(tmp_path / f"ws{i}")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    results = [(p.wait(timeout=900), p.stderr.read()) for p in procs]
    assert [rc for rc, _ in results] == [0, 0], results
    for i in range(2):
        assert (tmp_path / f"ws{i}" / "src" / "zlib.h").is_file()
    assert len(list((tmp_path / "cache" / "debian-src" / "zlib").glob("*.dsc"))) == 1


@pytest.mark.slow
def test_a_fresh_stamp_without_index_files_fetches_them_again(tmp_path):
    """An update that failed half-way once left the day's stamp and no Sources index: every later fetch failed."""
    env = {**os.environ, "CROSSBUILD_CACHE_DIR": str(tmp_path / "cache")}
    lists = tmp_path / "cache" / "apt" / "state" / "lists"
    lists.mkdir(parents=True)
    (lists.parent / "updated").touch()
    r = subprocess.run([sys.executable, "-c", PREPARE, str(tmp_path / "ws")], env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    assert list(lists.glob("*_Sources*"))


@pytest.mark.slow
def test_a_source_being_downloaded_is_never_seen_half_there(tmp_path):
    """The evaluation checks a pinned source's checksums without the download lock: two evaluations started at once
    failed with "googletest_1.12.1.orig.tar.gz (listed in ...dsc) is missing from the cache" while the other one
    was still downloading it. The folder must appear whole or not at all."""
    import re
    import time
    from pathlib import Path

    from crossbuild.evaluation import corpus

    manifest = Path(__file__).resolve().parents[2] / "corpus" / "dev" / "zlib.toml"
    version = corpus.load(manifest)[0].source.split("=", 1)[1]
    env = {**os.environ, "CROSSBUILD_CACHE_DIR": str(tmp_path / "cache")}
    fetch = "import sys; from crossbuild.evaluation import corpus; corpus.fetch(corpus.load(sys.argv[1])[0])"
    proc = subprocess.Popen([sys.executable, "-c", fetch, str(manifest)], env=env, stderr=subprocess.PIPE, text=True)
    folder = tmp_path / "cache" / "debian-src" / f"zlib_{version}"
    half_there, looks = [], 0
    while proc.poll() is None:
        for dsc in folder.glob("*.dsc"):
            looks += 1
            listed = re.findall(r"^ [0-9a-f]{64} (\d+) (\S+)$", dsc.read_text(errors="replace"), re.MULTILINE)
            if not listed or any(not (folder / name).is_file() or (folder / name).stat().st_size != int(size)
                                 for size, name in listed):
                half_there.append(sorted(p.name for p in folder.iterdir()))
        time.sleep(0.002)
    assert proc.returncode == 0, proc.stderr.read()
    assert not half_there, half_there[:3]
    assert list(folder.glob("*.dsc")) and not folder.with_name(folder.name + ".part").exists()


def test_the_source_lists_are_never_seen_empty_while_another_process_rewrites_them(tmp_path):
    """Every source fetch rewrites the private source lists, and `apt-get source` reads them without the update
    lock. Written in place, a second evaluation's fetch once read the file truncated and failed with "You must put
    some 'deb-src' URIs in your sources.list"."""
    cache = tmp_path / "cache"
    (cache / "apt" / "state" / "lists").mkdir(parents=True)
    (cache / "apt" / "state" / "lists" / "deb.debian.org_debian_dists_bookworm_main_source_Sources.lz4").touch()
    (cache / "apt" / "state" / "updated").touch()  # a fresh day's update: each call only rewrites the lists
    rewrite = "from crossbuild.env import workspace\nfor _ in range(3000): workspace.update_source_lists()"
    env = {**os.environ, "CROSSBUILD_CACHE_DIR": str(cache)}
    proc = subprocess.Popen([sys.executable, "-c", rewrite], env=env, stderr=subprocess.PIPE, text=True)
    lists = cache / "apt" / "sources.d" / "crossbuild.sources"
    reads, empty = 0, 0
    while proc.poll() is None:
        try:
            text = lists.read_text()
        except FileNotFoundError:  # before the first write
            continue
        reads += 1
        empty += "deb-src" not in text
    assert proc.returncode == 0, proc.stderr.read()
    assert reads > 100 and empty == 0, (reads, empty)


@pytest.mark.slow
def test_a_pinned_version_is_that_source_packages_version_not_its_binarys_candidate(tmp_path, monkeypatch):
    """`apt-get source brotli=1.0.9-2` reads brotli as the binary package and fetched its candidate's source,
    1.0.9-2+deb12u1, from a security mirror that did not serve it: every evaluation of the corpus's pinned brotli
    failed before building. The pinned version is fetched, whatever newer version the archive lists."""
    from crossbuild.env import workspace

    monkeypatch.setenv("CROSSBUILD_CACHE_DIR", str(tmp_path / "cache"))  # a cached copy would hide the fetch
    workspace.prepare("debian:brotli=1.0.9-2", tmp_path / "ws")
    assert (tmp_path / "ws" / "src" / "debian" / "changelog").read_text().startswith("brotli (1.0.9-2)")


def test_a_test_suites_private_keys_stay_in_a_source_from_debians_archive_and_the_tools_still_refuse_them(tmp_path):
    """OpenSSL's tests read their own private test keys (test/recipes/*_data/*.pem): left out, its suite failed on
    files it ships. Every file of a Debian source is public; the same key in the user's own folder is left out."""
    import json

    from crossbuild.env import workspace
    from crossbuild.foundation.targets import parse_target
    from crossbuild.tools import default_toolset
    from crossbuild.tools.context import RunContext

    key = "test/recipes/04-test_pem_read_depr_data/rsaprivatekey.pem"
    ws = workspace.prepare("debian:openssl", tmp_path / "ws")
    assert b"PRIVATE KEY" in (ws.src / key).read_bytes() and not any(key in why for why in ws.left_out)
    assert (ws.root / workspace.PRISTINE / "src" / key).is_file()  # the clean rebuild has it too
    ctx = RunContext.create(ws.root, parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix",
                            sandbox_backend="none")
    r = default_toolset().dispatch(ctx, "read_file", json.dumps({"path": f"src/{key}"}))
    assert not r.ok and r.error_type == "permission_denied", r.message
    # DSA and X9.42 parameters are public material: a local copy keeps them; the private key is left out
    local = tmp_path / "local"
    (local / "data").mkdir(parents=True)
    for name in ("dsaparams.pem", "x942params.pem", "rsaprivatekey.pem"):
        (local / "data" / name).write_bytes((ws.src / key).parent.joinpath(name).read_bytes())
    copied = workspace.prepare(str(local), tmp_path / "ws2")
    assert sorted(p.name for p in (copied.src / "data").iterdir()) == ["dsaparams.pem", "x942params.pem"]
    assert copied.left_out == ("data/rsaprivatekey.pem (credential file)",)
