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
