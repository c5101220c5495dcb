"""Dependencies whose install steps plant chains of links, as a user meets them: `crossbuild build` of a project that
needs three local dependencies (`--dep-source NAME=PATH`), built by the planner with their own install steps. The
first plants a chain that leads out of the prefix (each link inside on paper), the second completes a chain with
the first one's links, the third installs files below both. Afterwards, on the host: nothing in the folder the
chains lead to, no link in the prefix that leads out, and what was left out recorded."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from crossbuild.env import dependency_cache as deps
from crossbuild.foundation import safefs
from tests.conftest import cb, forget_cached_dependencies, outcome_of

LIBRARY = """cmake_minimum_required(VERSION 3.16)
project({name} C)
add_library({name} STATIC {name}.c)
target_include_directories({name} PUBLIC $<INSTALL_INTERFACE:include>)
install(TARGETS {name} EXPORT {name}Targets ARCHIVE DESTINATION lib)
install(FILES {name}.h DESTINATION include)
install(EXPORT {name}Targets FILE {name}Config.cmake DESTINATION lib/cmake/{name})
{extra}
"""

# each link stays inside the prefix on paper; followed, lib/b is prefix/.. /outside
CHAIN = """install(CODE [[
  set(top "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
  file(CREATE_LINK "." "${top}/x" SYMBOLIC)
  file(CREATE_LINK "../x" "${top}/lib/a" SYMBOLIC)
  file(CREATE_LINK "a/../outside" "${top}/lib/b" SYMBOLIC)
]])"""
# lib/a is a real folder here, so lib/d stays inside this staged tree; in the prefix, lib/a is the first one's link
COMPLETES_A_CHAIN = """install(FILES dummy.txt DESTINATION lib/a)
install(CODE [[
  file(CREATE_LINK "a/../outside" "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/lib/d" SYMBOLIC)
]])"""
WRITES_BELOW_THEM = "install(FILES pwned.txt DESTINATION lib/b)\ninstall(FILES pwned.txt DESTINATION lib/d)"

CONSUMER = """cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(evila REQUIRED)
find_package(evilc REQUIRED)
find_package(evilb REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer evila evilb evilc)
install(TARGETS consumer)
"""


def _library(root: Path, name: str, extra: str) -> Path:
    d = root / name
    d.mkdir()
    (d / "CMakeLists.txt").write_text(LIBRARY.format(name=name, extra=extra))
    (d / f"{name}.c").write_text(f"int {name}(void) {{ return 1; }}\n")
    (d / f"{name}.h").write_text(f"int {name}(void);\n")
    (d / "dummy.txt").write_text("dummy\n")
    (d / "pwned.txt").write_text("pwned\n")
    return d


@pytest.fixture
def sources(tmp_path):
    """The three dependencies and the project; their entries leave the shared dependency cache afterwards."""
    root = tmp_path / "sources"
    root.mkdir()
    paths = {name: _library(root, name, extra) for name, extra in
             (("evila", CHAIN), ("evilb", WRITES_BELOW_THEM), ("evilc", COMPLETES_A_CHAIN))}
    consumer = root / "consumer"
    consumer.mkdir()
    (consumer / "CMakeLists.txt").write_text(CONSUMER)
    (consumer / "main.c").write_text("#include <evila.h>\n#include <evilb.h>\n#include <evilc.h>\n"
                                     "int main(void) { return evila() + evilb() + evilc() == 3 ? 0 : 1; }\n")
    yield paths, consumer
    forget_cached_dependencies(root)


@pytest.mark.slow
def test_chains_of_links_from_dependency_installs_lead_nowhere_outside_the_prefix(tmp_path, sources):
    paths, consumer = sources
    outside = tmp_path / "outside"  # where prefix/lib/b and prefix/lib/d lead, followed
    outside.mkdir()
    prefix = tmp_path / "prefix"
    r = cb("build", str(consumer), "-t", "x86_64-linux-musl", "-w", str(tmp_path / "ws"), "--db",
           str(tmp_path / "runs.db"), "--prefix", str(prefix), "--json", "--no-config",
           *[a for name, path in paths.items() for a in ("--dep-source", f"{name}={path}")],
           cwd=tmp_path, timeout=1800)
    out = outcome_of(r.stdout)
    assert out, r.stdout[-2000:] + r.stderr[-2000:]

    # the host: nothing written where the chains lead
    assert list(outside.iterdir()) == []
    # the attack ran: every dependency was built and installed, the third one's files below both chains' names
    assert {"libevila.a", "libevilb.a", "libevilc.a"} <= set(os.listdir(prefix / "lib"))
    assert (prefix / "lib" / "b" / "pwned.txt").is_file() and (prefix / "lib" / "d" / "pwned.txt").is_file()
    assert not (prefix / "lib" / "b").is_symlink() and not (prefix / "lib" / "d").is_symlink()
    assert not (prefix / "dummy.txt").exists()  # evilc's lib/a/dummy.txt was not written through lib/a
    with safefs.open_dir(prefix) as fd:
        assert safefs.links_leaving(fd) == []
    for dirpath, dirnames, filenames in os.walk(prefix):  # and no link in the prefix resolves outside it
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink() and p.exists():
                assert p.resolve().is_relative_to(prefix.resolve()), p

    # what was left out is recorded: the first one's chain in its cache manifest, the second chain at install
    cached = {e.source: e for e in deps.list_cached() if e.source in map(str, paths.values())}
    assert any(r.startswith("lib/b ") for r in cached[str(paths["evila"])].rejected)
    rows = sqlite3.connect(tmp_path / "runs.db").execute(
        "SELECT result_json FROM tool_calls WHERE run_id=? AND name='build_dependency'", (out["run_id"],)).fetchall()
    said = {json.loads(row)["data"]["name"]: json.loads(row)["message"] for (row,) in rows}
    assert "lib/d (link to a/../outside leads outside" in said["evilc"], said
    assert "lib/a/dummy.txt" in said["evilc"] and "not written through" in said["evilc"], said
    assert out["status"] == "verified", out.get("message")  # an honest consumer still builds and verifies
