"""safefs, the one helper for trees a build can write: every trick a build can leave there, on a real filesystem."""

from __future__ import annotations

import os

import pytest

from crossbuild.foundation import safefs


@pytest.fixture
def planted(tmp_path):
    """A tree as a hostile build leaves it: links out and in, a FIFO, a link for a folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("SECRET\n")
    t = tmp_path / "tree"
    (t / "lib").mkdir(parents=True)
    (t / "lib" / "libz.so.1.3").write_text("real library\n")
    (t / "lib" / "libz.so").symlink_to("libz.so.1.3")  # internal: kept
    (t / "lib" / "abs").symlink_to(outside / "secret")  # out: dropped with "internal"
    (t / "lib" / "up").symlink_to("../../outside/secret")  # out by '..'
    (t / "linkdir").symlink_to(outside)
    os.mkfifo(t / "lib" / "fifo")
    return t, outside


def test_copy_tree_takes_files_and_internal_links_only(tmp_path, planted):
    t, outside = planted
    report = safefs.copy_tree(t, ".", tmp_path, "copy", links="internal")
    c = tmp_path / "copy"
    assert (c / "lib" / "libz.so.1.3").read_text() == "real library\n"
    assert os.readlink(c / "lib" / "libz.so") == "libz.so.1.3"
    assert not os.path.lexists(c / "lib" / "abs") and not os.path.lexists(c / "lib" / "up")
    assert not os.path.lexists(c / "linkdir") and not os.path.lexists(c / "lib" / "fifo")
    skipped = dict(report.skipped)
    assert skipped["lib/fifo"] == "FIFO" and "outside" in skipped["lib/abs"] and "linkdir" in skipped
    assert report.files == 1 and report.links == 1


def test_copy_tree_keeps_every_files_modification_time(tmp_path):
    """make decides from modification times: a copy whose configure.ac looks newer than its aclocal.m4 reruns
    aclocal (absent here) in a clean rebuild that the original build never needed."""
    t = tmp_path / "tree"
    t.mkdir()
    for name, size in (("configure.ac", 300), ("aclocal.m4", 40_000), ("empty", 0)):
        (t / name).write_bytes(b"x" * size)
        os.utime(t / name, ns=(1_400_000_000_000_000_000, 1_401_000_000_123_456_789))
    safefs.copy_tree(t, ".", tmp_path, "copy")
    for name in ("configure.ac", "aclocal.m4", "empty"):
        assert os.stat(tmp_path / "copy" / name).st_mtime_ns == 1_401_000_000_123_456_789, name


def test_copy_tree_never_follows_a_link_between_the_anchor_and_the_tree(tmp_path, planted):
    """A staged install at stage/<prefix path>: a build that makes a folder on that path a link to a host folder
    gets the copy refused, not the host folder copied."""
    t, outside = planted
    with pytest.raises(safefs.UnsafePath):
        safefs.copy_tree(t, "linkdir", tmp_path, "copy")
    assert not (tmp_path / "copy").exists()


def test_reads_refuse_links_fifos_and_oversize(planted):
    t, _ = planted
    for rel, why in (("lib/abs", "symbolic link"), ("lib/fifo", "FIFO"), ("linkdir/secret", "link")):
        with pytest.raises(safefs.UnsafePath, match=why):
            safefs.read_bytes(t, rel, max_bytes=1 << 20)
    with pytest.raises(safefs.UnsafePath, match="larger than"):
        safefs.read_bytes(t, "lib/libz.so.1.3", max_bytes=4)
    with pytest.raises(safefs.UnsafePath, match=r"'\.\.'"):
        safefs.read_bytes(t, "../outside/secret", max_bytes=100)
    assert safefs.read_text(t, "lib/libz.so.1.3", max_bytes=100) == "real library\n"


def test_an_optional_read_gives_none_for_what_a_read_refuses(planted):
    t, _ = planted
    for rel in ("lib/abs", "lib/fifo", "linkdir/secret", "lib/missing", "../outside/secret"):
        assert safefs.read_text_or_none(t, rel, max_bytes=1 << 20) is None, rel
    assert safefs.read_text_or_none(t, "lib/libz.so.1.3", max_bytes=4) is None
    assert safefs.read_text_or_none(t, "lib/libz.so.1.3", max_bytes=100) == "real library\n"


def test_writes_replace_a_planted_link_instead_of_following_it(planted):
    t, outside = planted
    safefs.write_atomic(t, "lib/abs", b"mine\n")
    assert (outside / "secret").read_text() == "SECRET\n"
    assert not (t / "lib" / "abs").is_symlink() and (t / "lib" / "abs").read_text() == "mine\n"
    with pytest.raises(safefs.UnsafePath):
        safefs.write_atomic(t, "linkdir/new", b"x")  # a folder that is a link is never entered
    with pytest.raises(FileExistsError):
        safefs.create_new(t, "lib/up")  # O_EXCL|O_NOFOLLOW: an existing link is not opened
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]


def test_remove_tree_removes_a_link_not_its_target(tmp_path, planted):
    t, outside = planted
    (outside / "zig").mkdir()
    (outside / "zig" / "precious").write_text("keep\n")
    with pytest.raises(safefs.UnsafePath):
        safefs.remove_tree(t, "linkdir/zig")  # a parent planted as a link: refused, not followed
    assert (outside / "zig" / "precious").read_text() == "keep\n"
    safefs.remove_tree(t, "linkdir")
    assert not os.path.lexists(t / "linkdir") and (outside / "secret").exists()
    safefs.remove_tree(tmp_path, "tree")
    safefs.remove_tree(tmp_path, "tree")  # already gone: nothing to do
    assert not t.exists() and (outside / "secret").read_text() == "SECRET\n"
