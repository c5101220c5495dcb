"""The workspace's compile cache, as a user meets it: the verifier's clean rebuild takes the first build's objects
where its compiles are the same (the source and every header it reads, byte for byte) and compiles the others; a
build that leaves a link in the cache's place reaches nothing on the host through the rebuild's sandbox."""

from __future__ import annotations

import shutil

import pytest

from crossbuild.env.zigwrap import through_compile_cache
from tests.conftest import cb, outcome_of

pytestmark = pytest.mark.skipif(shutil.which("ccache") is None, reason="ccache is installed by scripts/setup.sh")

# gen.h differs in each build (a random seed written at configure time): what includes it must compile again
CHANGING_HEADER = """cmake_minimum_required(VERSION 3.16)
project(p C)
string(RANDOM LENGTH 12 seed)
file(WRITE ${CMAKE_BINARY_DIR}/gen.h "#define SEED \\"${seed}\\"\\n")
add_library(p a.c b.c)
target_include_directories(p PRIVATE ${CMAKE_BINARY_DIR})
add_executable(tool main.c)
target_link_libraries(tool p)
install(TARGETS p tool)
"""


def _project(folder, cmake: str):
    folder.mkdir()
    (folder / "CMakeLists.txt").write_text(cmake)
    (folder / "a.c").write_text("int a(void) { return 1; }\n")
    (folder / "b.c").write_text('#include "gen.h"\nconst char *b(void) { return SEED; }\n')
    (folder / "main.c").write_text('#include <stdio.h>\nint a(void); const char *b(void);\n'
                                   'int main(void) { printf("%d %s\\n", a(), b()); return 0; }\n')
    return folder


def _build(tmp_path, project):
    r = cb("build", str(project), "-t", "aarch64-linux-musl", "-w", str(tmp_path / "ws"), "--db",
           str(tmp_path / "runs.db"), "--json", cwd=tmp_path)
    return r, outcome_of(r.stdout)


@pytest.mark.slow
def test_the_clean_rebuild_reuses_the_same_compiles_and_compiles_what_changed(tmp_path):
    r, out = _build(tmp_path, _project(tmp_path / "p", CHANGING_HEADER))
    assert out.get("status") == "verified", r.stdout[-3000:] + r.stderr[-2000:]
    compiles = out["verify"]["rebuild"]["compiles"]
    assert compiles["compiled"] == 1, compiles  # b.c: gen.h has another seed in the rebuild
    assert compiles["reused"] >= 2, compiles  # a.c and main.c, byte for byte the same


@pytest.mark.slow
def test_a_link_a_build_leaves_in_the_caches_place_reaches_nothing_on_the_host(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    # after its compiles, the build swaps the cache folder for a link to a host folder the rebuild would then write
    # (in the rebuild the folder is a mount point it cannot remove: it goes on regardless)
    plants = CHANGING_HEADER + "add_custom_command(TARGET tool POST_BUILD COMMAND sh ${CMAKE_SOURCE_DIR}/plant.sh)\n"
    project = _project(tmp_path / "p", plants)
    (project / "plant.sh").write_text(f'echo pwned > {host}/pwned 2>/dev/null\n'  # wherever the host folder shows
                                      f'rm -rf "$CCACHE_DIR" && ln -s {host} "$CCACHE_DIR" && touch planted\nexit 0\n')
    r, out = _build(tmp_path, project)
    assert out.get("status") == "verified", r.stdout[-3000:] + r.stderr[-2000:]
    assert out["verify"]["rebuild"]["ok"]
    assert list(host.iterdir()) == []  # the host afterwards: neither the rebuild's compiles nor its steps wrote there
    assert (tmp_path / "ws" / "build" / "planted").is_file()  # the first build did leave the link


def test_only_compiles_to_objects_go_through_the_cache():
    compile_ = ["/z/zig", "cc", "-target", "aarch64-linux-musl", "-c", "a.c", "-o", "a.o"]
    assert through_compile_cache(compile_, "/ws/.xbuild/bin", "/usr/bin/ccache") == \
        ["/usr/bin/ccache", "/ws/.xbuild/bin/zig-cc", "-target", "aarch64-linux-musl", "-c", "a.c", "-o", "a.o"]
    link = ["/z/zig", "c++", "a.o", "-o", "a"]
    assert through_compile_cache(link, "/ws/.xbuild/bin", "/usr/bin/ccache") == link
    assert through_compile_cache(["/z/zig", "ar", "-c", "x.a"], "/b", "/usr/bin/ccache")[0] == "/z/zig"
    assert through_compile_cache(compile_, "/b", None) == compile_  # no ccache on the machine: as before
