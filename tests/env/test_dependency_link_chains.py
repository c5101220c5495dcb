"""The prefix as dependencies' install steps attack it: a staged install whose links, each inside on paper, chain
out of the prefix; a second dependency whose files lie below that chain; crossbuild's own lock and records planted
as links. Checked afterwards on the host: the folder outside the prefix, the cache manifest, the prefix's links."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from crossbuild.env import dependency_cache as deps
from crossbuild.foundation import safefs
from tests.foundation.test_safefs_link_chains import _tree

TARGET = "x86_64-linux-musl"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSBUILD_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def outside(tmp_path):
    """Next to the prefix, where the chains lead: it must stay empty."""
    o = tmp_path / "outside"
    o.mkdir()
    return o


def _stage(tmp_path: Path, name: str, prefix: Path, entries: dict[str, str | None]) -> Path:
    """A DESTDIR as a dependency's install step leaves it: ENTRIES below the prefix's path (text, "->link", None for
    a folder)."""
    stage = tmp_path / f"stage-{name}"
    _tree(stage / str(prefix).lstrip("/"), {f"lib/lib{name}.a": "!<arch>\n", **entries})
    return stage


def _links_out(prefix: Path) -> list[tuple[str, str]]:
    with safefs.open_dir(prefix) as fd:
        return safefs.links_leaving(fd)


def _install(tmp_path, name, prefix, entries):
    entry = deps.store(TARGET, name, None, _stage(tmp_path, name, prefix, entries), prefix=prefix, build_s=1.0,
                       run_id=None)
    return entry, deps.install_report(entry, prefix)


def test_a_chain_of_links_is_rejected_when_stored_and_a_second_dependency_stays_in_the_prefix(tmp_path, cache,
                                                                                              outside):
    prefix = tmp_path / "prefix"
    first, _ = _install(tmp_path, "evila", prefix, {"x": "->.", "lib/a": "->../x", "lib/b": "->a/../outside"})
    assert any(r.startswith("lib/b ") for r in first.rejected), first.rejected
    assert "lib/b" not in first.files and json.loads((first.dir / "manifest.json").read_text())["rejected"]
    second, report = _install(tmp_path, "evilb", prefix, {"lib/b/pwned.txt": "pwned\n"})
    assert list(outside.iterdir()) == []
    assert not (prefix / "lib" / "b").is_symlink() and (prefix / "lib" / "b" / "pwned.txt").read_text() == "pwned\n"
    assert _links_out(prefix) == [] and deps.installed(prefix, first) and deps.installed(prefix, second)


def test_a_chain_completed_by_a_second_dependency_is_removed_and_a_third_writes_nothing_outside(tmp_path, cache,
                                                                                                outside):
    """Each staged install is harmless alone; in the prefix, the second one's link completes the first one's chain.
    No write passes through it, and it does not stay."""
    prefix = tmp_path / "prefix"
    _install(tmp_path, "evila", prefix, {"x": "->.", "lib/a": "->../x"})
    evilb, report = _install(tmp_path, "evilb", prefix, {"lib/a/dummy.txt": "d", "lib/b": "->a/../outside"})
    assert "lib/b" in evilb.files  # inside the staged tree, where lib/a is a folder
    rejected = dict(r.split(" ", 1) for r in report.rejected)
    assert "leads outside" in rejected["lib/b"] and "not written through" in rejected["lib/a/dummy.txt"]
    assert not os.path.lexists(prefix / "lib" / "b")
    _install(tmp_path, "evilc", prefix, {"lib/b/pwned.txt": "pwned\n", "lib/a/through.txt": "t"})
    assert list(outside.iterdir()) == [] and not (prefix / "through.txt").exists()
    assert (prefix / "lib" / "b" / "pwned.txt").is_file() and _links_out(prefix) == []


def test_an_escaping_link_an_older_install_left_in_the_prefix_is_never_written_through(tmp_path, cache, outside):
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "b").symlink_to("../../outside")
    (prefix / "lib" / "libz.so").symlink_to("../../outside/libz.so")
    (prefix / ".crossbuild-prefix.lock").symlink_to(outside / "lock")
    (prefix / ".crossbuild-deps").mkdir()
    (prefix / ".crossbuild-deps" / "evilb.json").symlink_to(outside / "record.json")
    entry, report = _install(tmp_path, "evilb", prefix, {"lib/b/pwned.txt": "pwned\n", "lib/libz.so": "mine"})
    assert list(outside.iterdir()) == []  # nothing written or created there: file, lock, record
    assert (prefix / "lib" / "libz.so").read_text() == "mine" and not (prefix / "lib" / "libz.so").is_symlink()
    assert not os.path.lexists(prefix / "lib" / "b") and any(r.startswith("lib/b/pwned.txt ") for r in
                                                             report.rejected)
    assert not (prefix / ".crossbuild-prefix.lock").is_symlink() and deps.installed(prefix, entry)


def test_a_dependency_cannot_bring_crossbuilds_own_bookkeeping(tmp_path, cache, outside):
    prefix = tmp_path / "prefix"
    entry, _ = _install(tmp_path, "evil", prefix, {".crossbuild-prefix.lock": f"->{outside}/../outside/lock",
                                                  ".crossbuild-deps/zlib.json": '{"key": "forged"}',
                                                  "include/evil.h": "int evil;\n"})
    assert sorted(entry.files) == ["include/evil.h", "lib/libevil.a"]
    assert {r.split(" ")[0] for r in entry.rejected} >= {".crossbuild-prefix.lock", ".crossbuild-deps"}
    assert list(outside.iterdir()) == [] and not (prefix / ".crossbuild-deps" / "zlib.json").exists()


def test_long_local_sources_sharing_a_prefix_keep_records_of_their_own():
    """Two local dependency folders whose paths share their first 60 characters: each has its own record in the
    prefix (the record was once named by the cut path alone, so each install overwrote the other's)."""
    from crossbuild.env import dependency_cache

    base = "/home/someone/projects/vendor/third_party/libraries/compression/"
    a, b = dependency_cache._record(base + "zlib-1.3"), dependency_cache._record(base + "zlib-ng-2.1")
    assert a != b and a.startswith(".crossbuild-deps/") and a.endswith(".json") and len(a) < 100
