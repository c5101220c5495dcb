"""Chains of links, each inside its tree on paper, that lead out once followed: safefs resolves every link through
the links the tree holds (resolve_link), drops the ones that leave when copying or installing, and never writes
through a link into a tree that others share (install_tree). Checked on the host afterwards: the outside folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crossbuild.foundation import safefs


def _tree(root: Path, entries: dict[str, str | None]) -> Path:
    """ENTRIES: relative path -> link target ("->x"), file text, or None for a folder."""
    for rel, what in entries.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if what is None:
            p.mkdir(exist_ok=True)
        elif what.startswith("->"):
            p.symlink_to(what[2:])
        else:
            p.write_text(what)
    return root


def _state(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = f"->{os.readlink(p)}" if p.is_symlink() else \
                ("dir" if p.is_dir() else p.read_text())
    return out


@pytest.fixture
def outside(tmp_path):
    """What the links reach for, next to the trees: it must stay as it is."""
    o = tmp_path / "outside"
    o.mkdir()
    (o / "bashrc").write_text("# the user's\n")
    return o


CHAIN = {"lib/a": "->../x", "x": "->.", "lib/b": "->a/../outside", "lib/libz.so.1": "z", "lib/libz.so": "->libz.so.1"}


def test_each_link_of_a_chain_is_inside_on_paper_but_the_chain_leads_out(tmp_path):
    t = _tree(tmp_path / "tree", {**CHAIN, "bin": None, "share/doc": None, "share/doc/z": "->../../lib/libz.so",
                                  "up": "->.", "deep": "->up/up/up/../../..", "lib/c": "->missing/../..",
                                  "l1": "->l2", "l2": "->l1", "abs": "->/etc", "lib/d": "->../lib/a/lib/a/lib"})
    # lexically every one of these stays inside: only following the links shows where they go
    for rel in ("lib/b", "deep", "lib/c"):
        assert safefs.link_stays_inside(rel, os.readlink(t / rel)), rel
    with safefs.open_dir(t) as fd:
        where = {rel: safefs.resolve_link(fd, rel, os.readlink(t / rel))
                 for rel in ("lib/a", "x", "lib/b", "lib/libz.so", "share/doc/z", "up", "deep", "lib/c", "l1", "abs",
                             "lib/d")}
    assert where == {"lib/a": ".", "x": ".", "lib/b": None, "lib/libz.so": "lib/libz.so.1",
                     "share/doc/z": "lib/libz.so.1", "up": ".", "deep": None,
                     "lib/c": None,  # '..' out of a missing name: a later install could make it a link
                     "l1": None, "abs": None, "lib/d": "lib"}


@pytest.mark.parametrize(("chain", "dropped"), [
    ({"lib/a": "->../x", "x": "->.", "lib/b": "->a/../outside"}, "lib/b"),  # through two links
    ({"lib/a": "->..", "lib/b": "->a/../outside"}, "lib/b"),
    ({"up": "->.", "lib/b": "->../up/up/up/../outside"}, "lib/b"),  # one link, used again and again
    ({"lib/a": "->../x", "x": "->../../../..", "lib/b": "->a/outside"}, "x"),  # its last hop is out on paper too
])
def test_copy_tree_drops_a_chain_that_leads_out_and_reports_it(tmp_path, outside, chain, dropped):
    t = _tree(tmp_path / "tree", {**chain, "lib/libz.so.1": "z", "lib/libz.so": "->libz.so.1"})
    assert not (t / "lib" / "b").resolve().is_relative_to(t.resolve())  # followed, the chain leads out
    report = safefs.copy_tree(t, ".", tmp_path, "copy", links="internal")
    c = tmp_path / "copy"
    assert not os.path.lexists(c / dropped)
    assert dropped in dict(report.skipped), report.skipped
    assert not (c / "lib" / "b").exists()  # whatever is left of the chain leads nowhere
    assert os.readlink(c / "lib" / "libz.so") == "libz.so.1"
    with safefs.open_dir(c) as fd:
        assert safefs.links_leaving(fd) == []  # what is left of the chain leads nowhere outside
    for rel in ("lib/a", "x", "up"):
        if os.path.lexists(c / rel):
            assert (c / rel).resolve().is_relative_to(c.resolve()), rel
    assert report.links == sum(1 for p in c.rglob("*") if p.is_symlink())


def test_install_tree_never_writes_through_a_link_in_the_prefix(tmp_path, outside):
    """A prefix holding a chain that leads out (as an earlier install could have left it), and a second install
    whose files lie below it: nothing is written outside, the chain's last link is removed, both are reported."""
    prefix = _tree(tmp_path / "prefix", {**CHAIN, "lib/e": "->../../outside/bashrc", "share/f": "->../x"})
    before = _state(outside)
    src = _tree(tmp_path / "dep2", {"lib/b/pwned.txt": "pwned\n",  # below the chain's last link
                                    "lib/e": "mine\n",  # a file where the prefix has a link out: replaced
                                    "share/f/g.txt": "through an inner link\n",  # below a link that stays inside
                                    "lib/libz.so.1": "z2", "include/dep2.h": "int dep2;\n"})
    report = safefs.install_tree(src, ".", prefix)
    assert _state(outside) == before  # the host: nothing written, nothing created
    skipped = dict(report.skipped)
    assert "not written through" in skipped["lib/b/pwned.txt"] and "not written through" in skipped["share/f/g.txt"]
    assert "lib/b" in skipped  # the link out, removed after the install
    assert not os.path.lexists(prefix / "lib" / "b") and not (prefix / "g.txt").exists()
    assert not (prefix / "lib" / "e").is_symlink() and (prefix / "lib" / "e").read_text() == "mine\n"
    assert (prefix / "lib" / "libz.so.1").read_text() == "z2" and (prefix / "include" / "dep2.h").is_file()
    with safefs.open_dir(prefix) as fd:
        assert safefs.links_leaving(fd) == []
    # installed again: the folder the link held is now a real one, inside the prefix
    again = safefs.install_tree(src, ".", prefix)
    assert (prefix / "lib" / "b" / "pwned.txt").read_text() == "pwned\n" and _state(outside) == before
    assert "lib/b/pwned.txt" not in dict(again.skipped)


def test_install_tree_removes_a_chain_completed_across_two_installs(tmp_path, outside):
    """Each install is harmless alone: the first brings `x -> .` and `lib/a -> ../x`; the second has a real folder
    lib/a and `lib/b -> a/../outside`, which stays inside its own tree. In the prefix, lib/b leads out."""
    prefix = tmp_path / "prefix"
    safefs.install_tree(_tree(tmp_path / "dep1", {"x": "->.", "lib/a": "->../x", "lib/one.a": "1"}), ".", prefix)
    dep2 = _tree(tmp_path / "dep2", {"lib/a/keep.txt": "k", "lib/b": "->a/../outside", "lib/two.a": "2"})
    with safefs.open_dir(dep2) as fd:
        assert safefs.links_leaving(fd) == []  # inside on its own
    report = safefs.install_tree(dep2, ".", prefix)
    skipped = dict(report.skipped)
    assert "lib/b" in skipped and "not written through" in skipped["lib/a/keep.txt"]
    assert not os.path.lexists(prefix / "lib" / "b") and (prefix / "lib" / "two.a").read_text() == "2"
    assert not (prefix / "keep.txt").exists() and _state(outside) == {"bashrc": "# the user's\n"}
