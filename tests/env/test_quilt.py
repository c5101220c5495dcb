"""Debian's patches undone from quilt's backups (.pc/), as --no-source-hints prepares a source: real trees on disk,
including a source whose .pc/ points outside it."""

from __future__ import annotations

import os

from crossbuild.env import quilt


def _patched(src, series: list[str]):
    (src / ".pc").mkdir(parents=True)
    (src / ".pc" / "applied-patches").write_text("".join(f"{name}\n" for name in series))


def test_patches_are_undone_last_first_created_files_removed_and_modes_kept(tmp_path):
    src = tmp_path / "src"
    _patched(src, ["01-config.patch", "debian-changes/02-multiarch.patch"])
    # 01 changed luaconf.h from "upstream"; 02 changed it again and created a header; run.sh kept its mode
    first, second = src / ".pc" / "01-config.patch", src / ".pc" / "debian-changes/02-multiarch.patch"
    (first / "src").mkdir(parents=True)
    (second / "src").mkdir(parents=True)
    (first / "src" / "luaconf.h").write_text("upstream\n")
    (second / "src" / "luaconf.h").write_text("after 01\n")
    (second / "src" / "deb-multiarch.h").write_bytes(b"")
    (first / "run.sh").write_text("#!/bin/sh\necho upstream\n")
    os.chmod(first / "run.sh", 0o755)
    (src / "src").mkdir()
    (src / "src" / "luaconf.h").write_text('after 02\n#include "deb-multiarch.h"\n')
    (src / "src" / "deb-multiarch.h").write_text("#define MULTIARCH 1\n")
    (src / "run.sh").write_text("#!/bin/sh\necho debian\n")

    assert quilt.unapply(src) == ["debian-changes/02-multiarch.patch", "01-config.patch"]
    assert (src / "src" / "luaconf.h").read_text() == "upstream\n"
    assert not (src / "src" / "deb-multiarch.h").exists()
    assert (src / "run.sh").read_text() == "#!/bin/sh\necho upstream\n" and os.stat(src / "run.sh").st_mode & 0o111


def test_no_series_or_no_backups_changes_nothing(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.c").write_text("int a;\n")
    assert quilt.unapply(src) == []
    _patched(src, ["only-debian.patch"])  # a patch that touched only debian/ leaves no backup folder dpkg keeps
    assert quilt.unapply(src) == [] and (src / "a.c").read_text() == "int a;\n"


def test_a_hostile_pc_neither_reads_nor_writes_the_host(tmp_path):
    """A source is untrusted, its .pc/ too: a series naming a path out of .pc/, a backup folder that is a link to a
    host folder, a backup that is a link to a host file. The host's files are checked afterwards."""
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text("HOST-SECRET\n")
    (host / "victim.c").write_text("host file\n")

    src = tmp_path / "a" / "src"
    _patched(src, ["../../../host"])  # climbs out: nothing is undone at all
    (src / "victim.c").write_text("patched\n")
    assert quilt.unapply(src) == [] and (src / "victim.c").read_text() == "patched\n"

    src = tmp_path / "b" / "src"
    _patched(src, ["good.patch", "evil.patch"])
    (src / ".pc" / "good.patch").mkdir()
    (src / ".pc" / "good.patch" / "a.c").write_text("upstream a\n")
    (src / "a.c").write_text("patched a\n")
    (src / ".pc" / "evil.patch").symlink_to(host)  # its "backups" would be the host's files
    assert quilt.unapply(src) == [] and (src / "a.c").read_text() == "patched a\n"  # a half-undone series is worse
    assert not (src / "secret.txt").exists() and not (src / "victim.c").exists()

    src = tmp_path / "c" / "src"
    _patched(src, ["p.patch"])
    (src / ".pc" / "p.patch").mkdir()
    (src / ".pc" / "p.patch" / "stolen.txt").symlink_to(host / "secret.txt")
    (src / ".pc" / "p.patch" / "a.c").write_text("upstream a\n")
    (src / "a.c").write_text("patched a\n")
    (src / "stolen.txt").write_text("from the package\n")
    assert quilt.unapply(src) == ["p.patch"] and (src / "a.c").read_text() == "upstream a\n"
    assert (src / "stolen.txt").read_text() == "from the package\n"  # the link is not a backup: never read

    src = tmp_path / "d" / "src"  # the patched files themselves are links to the host's
    _patched(src, ["p.patch"])
    (src / ".pc" / "p.patch" / "sub").mkdir(parents=True)
    (src / ".pc" / "p.patch" / "victim.c").write_text("upstream\n")
    (src / ".pc" / "p.patch" / "sub" / "secret.txt").write_text("upstream\n")
    (src / "victim.c").symlink_to(host / "victim.c")
    (src / "sub").symlink_to(host)
    assert quilt.unapply(src) == ["p.patch"]
    assert (src / "victim.c").read_text() == "upstream\n" and not (src / "victim.c").is_symlink()

    assert (host / "secret.txt").read_text() == "HOST-SECRET\n" and (host / "victim.c").read_text() == "host file\n"
    assert sorted(p.name for p in host.iterdir()) == ["secret.txt", "victim.c"]
