"""Build-machine programs and data from Debian's archive (provide_build_tool), as a user meets them: a project
whose Makefile runs gperf and reads Debian's Unicode tables, neither on this machine, cross-built and verified with
`crossbuild build`; the host is checked afterwards. Names are checked before anything is looked up."""

from __future__ import annotations

import json
import shutil
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from crossbuild.env import build_tools, sandbox
from crossbuild.foundation import host
from tests.conftest import cb, outcome_of

MAKEFILE = """\
# a keyword table hashed by gperf and a count read from Debian's Unicode tables, both generated on the build machine
# (`python3 folds.py > $@` leaves folds.h empty when the script fails, as re2's table rules do)
all: lookup_check

keywords.c: keywords.gperf
\tgperf --output-file=$@ keywords.gperf
folds.h: folds.py
\tpython3 folds.py > $@
lookup_check: lookup_check.c keywords.c folds.h
\t$(CC) -o $@ lookup_check.c
"""
FOLDS = """\
lines = [l for l in open("/usr/share/unicode/CaseFolding.txt") if l.strip() and not l.startswith("#")]
print(f"#define FOLDS {len(lines)}")
"""
CHECK = """\
#include <stdio.h>
#include <string.h>
#include "keywords.c"
#include "folds.h"
int main(void) {
    if (!in_word_set("while", 5) || in_word_set("whilst", 6)) { fprintf(stderr, "gperf table wrong\\n"); return 1; }
    if (FOLDS < 1000) { fprintf(stderr, "only %d case foldings\\n", FOLDS); return 1; }
    return 0;
}
"""


@pytest.mark.parametrize("name", ["/usr/share/../../etc/shadow", "/etc/shadow", "/home/user/.ssh/id_rsa",
                                  "../bin/sh", "bin/bison", "bison; rm -rf /", "", "-rf", "XML::Parser; rm",
                                  "XML::../../etc", "::Parser"])
def test_a_name_that_is_neither_a_program_nor_a_usr_share_file_is_refused_before_any_lookup(name):
    with pytest.raises(build_tools.ToolError) as e:
        build_tools.wanted_paths(name)
    assert "\n" not in str(e.value)


def test_program_names_and_data_paths_become_the_archive_paths_that_would_satisfy_them():
    assert build_tools.wanted_paths("bison") == ["usr/bin/bison", "bin/bison", "usr/sbin/bison", "sbin/bison"]
    assert build_tools.wanted_paths("/usr/share/unicode/CaseFolding.txt") == ["usr/share/unicode/CaseFolding.txt"]
    assert build_tools.wanted_paths("XML::Parser") == ["usr/share/perl5/XML/Parser.pm",
                                                       "usr/lib/x86_64-linux-gnu/perl5/*/XML/Parser.pm"]


def _forget(*packages: str) -> None:
    """As on a machine that never provided them: without its completion mark a package is neither bound into
    sandboxes nor taken as present (other tests' sandboxes stop seeing it at once; its files are replaced only by
    the next provide, under the same lock)."""
    with host.exclusive(build_tools.root() / ".lock"):
        for p in packages:
            (build_tools.root() / p / ".crossbuild-complete").unlink(missing_ok=True)


@pytest.mark.slow
def test_a_build_that_needs_gperf_and_unicode_tables_gets_them_from_debian_without_touching_the_host(tmp_path):
    if shutil.which("gperf") or Path("/usr/share/unicode").exists():
        pytest.skip("this machine has gperf or unicode-data installed: nothing to provide")
    _forget("gperf", "unicode-data")
    project = tmp_path / "kw"
    project.mkdir()
    (project / "Makefile").write_text(MAKEFILE)
    (project / "keywords.gperf").write_text("%%\nwhile\nfor\nreturn\n%%\n")
    (project / "folds.py").write_text(FOLDS)
    (project / "lookup_check.c").write_text(CHECK)
    r = cb("build", str(project), "-t", "aarch64-linux-musl", "-w", str(tmp_path / "ws"), "--db",
           str(tmp_path / "runs.db"), "--json", cwd=tmp_path, timeout=1800)
    out = outcome_of(r.stdout)
    assert out.get("status") == "verified", r.stdout[-3000:] + r.stderr[-2000:]
    assert out["verify"]["rebuild"]["ok"]
    run = next(s for s in out["verify"]["smoke_runs"] if s["path"].endswith("lookup_check"))
    assert run["passed"], run
    db = sqlite3.connect(tmp_path / "runs.db")
    provided = [json.loads(row[0]) for row in db.execute(
        "SELECT result_json FROM tool_calls WHERE run_id=? AND name='provide_build_tool'", (out["run_id"],))]
    assert [(p["data"]["package"], bool(p["data"]["added"])) for p in provided] == [
        ("gperf", True), ("unicode-data", True)], provided
    assert "removed 1 empty file a failed generator left (src/folds.h)" in out["message"]
    # the host: no gperf on its PATH, no /usr/share/unicode; the packages live in crossbuild's cache only
    assert shutil.which("gperf") is None and not Path("/usr/share/unicode").exists()
    assert (build_tools.root() / "gperf" / "usr" / "bin" / "gperf").is_file()


def test_unpacked_packages_are_seen_read_only_in_the_sandbox_and_nowhere_on_the_host(tmp_path, monkeypatch):
    """A package in the cache: its program on PATH, its /usr/share folder at its own path inside the sandbox (over
    a cover of /usr/share that keeps the host's own folders), read-only; the host's /usr/share is unchanged. A
    folder without its completion mark (an unpack cut short) is not used."""
    monkeypatch.setenv("CROSSBUILD_CACHE_DIR", str(tmp_path / "cache"))
    package = build_tools.root() / "crossbuild-probe"
    (package / "usr" / "bin").mkdir(parents=True)
    (package / "usr" / "share" / "crossbuild-probe").mkdir(parents=True)
    (package / "usr" / "share" / "crossbuild-probe" / "table.txt").write_text("42\n")
    (package / "usr" / "bin" / "probe-tool").write_text("#!/bin/sh\ncat /usr/share/crossbuild-probe/table.txt\n")
    (package / "usr" / "bin" / "probe-tool").chmod(0o755)
    half = build_tools.root() / "half-unpacked"
    (half / "usr" / "share" / "half-unpacked").mkdir(parents=True)
    assert build_tools.installed() == []
    (package / ".crossbuild-complete").write_text("1.0\n")
    assert build_tools.installed() == [package]
    work = tmp_path / "work"
    box = sandbox._make([work], [], "auto")
    if box.backend != "bubblewrap":
        pytest.skip("bubblewrap is not usable here")
    env = {"PATH": ":".join(["/usr/bin", "/bin", *build_tools.program_dirs()]), "LC_ALL": "C"}
    host_child = sorted(p.name for p in Path("/usr/share").iterdir() if not p.is_symlink())[0]
    script = (f"probe-tool && ls /usr/share | grep -c . && test -e /usr/share/{host_child} && "
              "test ! -e /usr/share/half-unpacked && ! touch /usr/share/crossbuild-probe/x 2>/dev/null && echo ro")
    r = box.run(["sh", "-c", script], cwd=work, env=env, log_path=tmp_path / "log")
    out = (tmp_path / "log").read_text()
    assert r.returncode == 0, out
    lines = out.splitlines()
    assert "42" in lines and lines[-1] == "ro"
    assert int(lines[lines.index("42") + 1]) == len(list(Path("/usr/share").iterdir())) + 1  # the host's + one
    assert not Path("/usr/share/crossbuild-probe").exists()


def test_a_packages_set_id_programs_lose_their_set_id_bits_when_unpacked(tmp_path, monkeypatch):
    """Unpacked as root, a package such as sudo would leave a set-uid-root program in the cache."""
    monkeypatch.setenv("CROSSBUILD_CACHE_DIR", str(tmp_path / "cache"))
    tree = tmp_path / "pkg"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text("Package: setid-probe\nVersion: 1.0\nArchitecture: all\n"
                                             "Maintainer: t <t@example.org>\nDescription: probe\n")
    (tree / "usr" / "bin").mkdir(parents=True)
    (tree / "usr" / "bin" / "probe").write_text("#!/bin/sh\n")
    (tree / "usr" / "bin" / "probe").chmod(0o6755)
    deb = tmp_path / "setid-probe.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)], check=True,
                   capture_output=True)
    build_tools.root().mkdir(parents=True)
    assert build_tools._unpack(deb, tmp_path) == "setid-probe 1.0"
    mode = (build_tools.root() / "setid-probe" / "usr" / "bin" / "probe").stat().st_mode
    assert stat.S_IMODE(mode) == 0o755
    assert build_tools.installed() == [build_tools.root() / "setid-probe"]
