"""Projects whose build tries to fool the verifier (issue 33): each is prepared as a workspace, configured and built
with crossbuild's real toolchain (CMake, Meson, make, zig, the host's cc), and judged by the real verifier; the
verdict (VerifyReport.ok and its reasons) is what is checked.

- a program for the build machine hidden where CMake and Meson keep their compiler checks is an artifact: probes are
  told by the build systems' records, never by a folder name (real configures' probes still are excluded);
- every folder the build wrote is scanned, the install folder and other folders of the workspace included;
- a program for the build machine is a generator only when crossbuild's build-machine compiler recorded writing it;
- a failed test's excuse must be tied to the failure: an assertion beside an incidental "Permission denied" blocks,
  and a missing file excuses only when the line names a path outside the workspace (issue 34).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from crossbuild.env import workspace
from crossbuild.env.toolchain import Toolchain
from crossbuild.env.zigwrap import build_outputs
from crossbuild.foundation.targets import parse_target
from crossbuild.proof.verify import VerifyReport, verify
from tests.conftest import run_in

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")]

AARCH64 = parse_target("aarch64-linux-musl")
MAIN = "int main(void){return 0;}\n"
HOST_C = '#include <stdio.h>\nint main(void){puts("I run on the build machine");return 0;}\n'


def prepared(tmp_path: Path, files: dict[str, str | bytes]) -> Toolchain:
    """FILES as a project, prepared as a workspace (with its pristine copy) and given the toolchain."""
    project = tmp_path / "project"
    for rel, content in files.items():
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
            path.chmod(0o755)
        else:
            path.write_text(content)
    ws = workspace.prepare(str(project), tmp_path / "ws")
    return Toolchain.for_target(AARCH64, ws.root, prefix=tmp_path / "prefix").materialise(warm=("c",))


def build(tc: Toolchain, *commands: str) -> None:
    """Run each shell command in the workspace with the build's own environment."""
    for command in commands:
        r = run_in(tc, ["sh", "-c", command], tc.workspace, timeout=600)
        assert r.returncode == 0, f"{command}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"


def host_binary(tmp_path: Path) -> bytes:
    """A program for the build machine, as the host's gcc makes it."""
    (tmp_path / "host.c").write_text(HOST_C)
    subprocess.run(["gcc", "-o", str(tmp_path / "host"), str(tmp_path / "host.c")], check=True)
    return (tmp_path / "host").read_bytes()


def wrong(report: VerifyReport) -> dict[str, str]:
    """The verdict's reasons about binaries that do not fit, by path."""
    return {r.split(": ", 1)[0]: r for r in report.reasons if "EM_X86_64" in r}


# -- (a) configure probes ---------------------------------------------------------------------------------------------

PROBING_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(probing C)
include(CheckCSourceCompiles)
check_c_source_compiles("int main(void){return 0;}" HAVE_TRIVIAL)
check_c_source_compiles("int main(void){return nope;}" HAVE_NOPE)
add_executable(prog main.c)
"""
PROBING_MESON = """project('probing', 'c')
cc = meson.get_compiler('c')
cc.compiles('int main(void){return 0;}', name: 'trivial')
cc.links('int main(void){return 0;}', name: 'links')
executable('prog', 'main.c')
"""


def test_real_configures_probes_are_excluded_by_their_records_also_after_a_regeneration(tmp_path):
    """CMake keeps its try_compile folders with --debug-trycompile, a configure for the build machine leaves x86_64
    compiler checks, Meson always checks a build-machine compiler: all named by their build system's records, so
    not counted (and listed). Meson's regeneration rewrites its log without the sanity checks: its record of the
    compilers it detected still names them."""
    tc = prepared(tmp_path, {"CMakeLists.txt": PROBING_CMAKE, "meson.build": PROBING_MESON, "main.c": MAIN})
    build(tc, f"cmake -S src -B build --debug-trycompile {' '.join(tc.cmake_args())}",
          "cmake --build build",
          # a nested configure for the build machine, as projects that build their own generators do
          "CC=cc cmake -S src -B build-native --debug-trycompile -DCMAKE_TOOLCHAIN_FILE=",
          f"meson setup build-meson src {' '.join(tc.meson_args())}", "ninja -C build-meson")
    ws = tc.workspace
    assert list((ws / "build" / "CMakeFiles" / "CMakeScratch").glob("TryCompile-*/cmTC_*"))
    sanity = ws / "build-meson" / "meson-private" / "sanity_check_for_c.exe"
    assert sanity.read_bytes()[18] == 62  # EM_X86_64
    # what Meson leaves of a compile check when it is killed: the folder its log names, older than the log
    log = ws / "build-meson" / "meson-logs" / "meson-log.txt"
    check = re.search(r"-o (\S*/meson-private/(tmp\w+)/output\.exe)", log.read_text())
    left = ws / "build-meson" / "meson-private" / check.group(2) / "output.exe"
    left.parent.mkdir()
    shutil.copy(sanity, left)
    before = log.stat().st_mtime_ns - 10**9
    os.utime(left, ns=(before, before))

    report = verify(ws / "build", AARCH64, toolchain=tc, run_tests=False)
    assert report.ok, report.reasons
    assert report.probes_excluded >= 10
    listed = "\n".join(report.probe_mismatches)
    assert "../build-meson/meson-private/sanity_check_for_c.exe: machine EM_X86_64" in listed
    assert "../build-native/CMakeFiles/" in listed and "CompilerIdC/a.out: machine EM_X86_64" in listed
    assert f"../build-meson/meson-private/{check.group(2)}/output.exe: machine EM_X86_64" in listed

    shutil.rmtree(left.parent)
    build(tc, "touch src/meson.build && ninja -C build-meson")  # Meson regenerates: a new log
    assert "sanity_check_for_c" not in (ws / "build-meson" / "meson-logs" / "meson-log.txt").read_text()
    report = verify(ws / "build-meson", AARCH64, toolchain=tc, run_tests=False)
    assert report.ok, report.reasons
    assert "meson-private/sanity_check_for_c.exe: machine EM_X86_64" in "\n".join(report.probe_mismatches)


HIDING_SCRIPT = r"""#!/bin/sh
# A build step that hides a program for the build machine where CMake and Meson keep their compiler checks.
set -e
b=$1 host=$2
hide() { mkdir -p "$(dirname "$b/$1")"; cp "$host" "$b/$1"; }
if [ -f "$b/CMakeCache.txt" ]; then
    v=$(ls "$b/CMakeFiles" | grep '^[0-9][0-9.]*$' | head -1)
    hide CMakeFiles/CMakeScratch/TryCompile-evil/cmTC_evil
    hide CMakeFiles/CMakeTmp/cmTC_tmp
    hide "CMakeFiles/$v/CompilerIdC/a.out"                    # over the real compiler identification binary
    hide "CMakeFiles/$v/CMakeDetermineCompilerABI_C.bin"      # over the real ABI check
    hide "CMakeFiles/$v/CompilerIdCXX/a.out"                  # a language never identified
    # the folder of a failed check CMake's own log names
    d=$(sed -n "s|.*/CMakeFiles/CMakeScratch/\(TryCompile-[A-Za-z0-9]*\).*|\1|p" "$b"/CMakeFiles/CMake*.log \
        "$b"/CMakeFiles/CMakeConfigureLog.yaml 2>/dev/null | head -1)
    hide "CMakeFiles/CMakeScratch/$d/cmTC_named"
    hide meson-private/evil.exe                                 # Meson's folder in a CMake build
else
    hide meson-private/evil.exe
    hide meson-private/tmp1a2b3c4d/output.exe
    hide meson-private/sanity_check_for_c_cross.exe             # over Meson's own check for the target
fi
touch "$3"
"""
HIDING_CMAKE = PROBING_CMAKE + (
    'add_custom_target(hide ALL COMMAND sh ${CMAKE_SOURCE_DIR}/hide.sh ${CMAKE_BINARY_DIR} '
    '${CMAKE_SOURCE_DIR}/prebuilt/host ${CMAKE_BINARY_DIR}/hidden.stamp VERBATIM)\n')
HIDING_MESON = PROBING_MESON + (
    "custom_target('hide', output: 'hidden.stamp', build_by_default: true, command: [find_program('sh'), "
    "files('hide.sh'), meson.current_build_dir(), meson.current_source_dir() / 'prebuilt/host', '@OUTPUT@'])\n")


def test_a_program_hidden_in_probe_folders_by_a_build_step_is_counted(tmp_path):
    tc = prepared(tmp_path, {"CMakeLists.txt": HIDING_CMAKE, "meson.build": HIDING_MESON, "main.c": MAIN,
                             "hide.sh": HIDING_SCRIPT, "prebuilt/host": host_binary(tmp_path)})
    build(tc, f"cmake -S src -B build {' '.join(tc.cmake_args())}", "cmake --build build")
    report = verify(tc.workspace / "build", AARCH64, toolchain=tc, run_tests=False)
    assert not report.ok
    hidden = wrong(report)
    version = next(p.name for p in (tc.workspace / "build" / "CMakeFiles").iterdir() if p.name[0].isdigit())
    for rel in ("CMakeFiles/CMakeScratch/TryCompile-evil/cmTC_evil", "CMakeFiles/CMakeTmp/cmTC_tmp",
                f"CMakeFiles/{version}/CompilerIdC/a.out", f"CMakeFiles/{version}/CMakeDetermineCompilerABI_C.bin",
                f"CMakeFiles/{version}/CompilerIdCXX/a.out", "meson-private/evil.exe"):
        assert rel in hidden, (rel, report.reasons)
    named = [p for p in hidden if p.endswith("/cmTC_named")]  # in a folder CMake's log does name
    assert named and "TryCompile-" in named[0] and "TryCompile-evil" not in named[0], report.reasons
    assert not {m.split(": ", 1)[0] for m in report.probe_mismatches} & set(hidden)

    build(tc, f"meson setup build-meson src {' '.join(tc.meson_args())}", "ninja -C build-meson")
    report = verify(tc.workspace / "build-meson", AARCH64, toolchain=tc, run_tests=False)
    assert not report.ok
    hidden = wrong(report)
    for rel in ("meson-private/evil.exe", "meson-private/tmp1a2b3c4d/output.exe",
                "meson-private/sanity_check_for_c_cross.exe"):
        assert rel in hidden, (rel, report.reasons)
    # Meson's own check for the build machine, which no build step touched, is still a probe
    assert "meson-private/sanity_check_for_c.exe" not in hidden
    assert any(m.startswith("meson-private/sanity_check_for_c.exe:") for m in report.probe_mismatches)


# -- (b) every folder the build wrote ---------------------------------------------------------------------------------

SPREADING_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(spreading C)
add_executable(prog main.c)
install(TARGETS prog)
# at install time, a program for the build machine straight into the install folder, one beside the build folder
# and one into the source folder (a file the source did not have)
set(S ${CMAKE_SOURCE_DIR})
install(CODE "execute_process(COMMAND /usr/bin/cc -o \\${CMAKE_INSTALL_PREFIX}/bin/helper ${S}/host.c)")
install(CODE "file(MAKE_DIRECTORY ${S}/../extra)")
install(CODE "execute_process(COMMAND /usr/bin/cc -o ${S}/../extra/hidden ${S}/host.c)")
install(CODE "execute_process(COMMAND /usr/bin/cc -o ${S}/gen/written ${S}/host.c)")
install(CODE "execute_process(COMMAND /usr/bin/cc -o ${S}/../.scratch/tmp/own ${S}/host.c)")
"""


def test_the_install_folder_and_every_other_folder_the_build_wrote_are_scanned(tmp_path):
    tc = prepared(tmp_path, {"CMakeLists.txt": SPREADING_CMAKE, "main.c": MAIN, "host.c": HOST_C,
                             "gen/.keep": "", "prebuilt/shipped": host_binary(tmp_path)})
    build(tc, f"cmake -S src -B build {' '.join(tc.cmake_args())} -DCMAKE_INSTALL_PREFIX={tc.workspace}/install",
          "cmake --build build", "cmake --install build")
    assert (tc.workspace / "install" / "bin" / "helper").is_file()
    report = verify(tc.workspace / "build", AARCH64, toolchain=tc, run_tests=False)
    assert not report.ok
    assert set(wrong(report)) == {"../install/bin/helper", "../extra/hidden", "../src/gen/written"}, report.reasons
    assert {a["path"] for a in report.elsewhere if a["ok"]} == {"../install/bin/prog"}
    # the source's own prebuilt file, as prepared, is the project's, not the build's; crossbuild's folders stay out
    assert not any("prebuilt/shipped" in r or ".scratch" in r for r in report.reasons)
    # judged from the install folder, the build folder is scanned too
    (tc.workspace / "install" / "bin" / "helper").unlink()
    shutil.copy(tc.workspace / "extra" / "hidden", tc.workspace / "build" / "left-behind")
    report = verify(tc.workspace / "install", AARCH64, toolchain=tc, run_tests=False)
    assert set(wrong(report)) == {"../build/left-behind", "../extra/hidden", "../src/gen/written"}, report.reasons
    assert report.counts["executable"] == 1 and report.artifacts[0]["path"] == "bin/prog"


# -- (c) programs for the build machine -------------------------------------------------------------------------------

GENERATOR_MAKEFILE = """\
# like sqlite3's lemon: a generator built with the build machine's compiler, run to make a header
O = ../build
all: $(O)/table_check
$(O)/gen: gen.c
\tmkdir -p $(O) && $(CC_FOR_BUILD) -o $@ gen.c
$(O)/table.h: $(O)/gen
\t$(O)/gen > $@
$(O)/table_check: table_check.c $(O)/table.h
\t$(CC) -I$(O) -o $@ table_check.c
install: $(O)/table_check
\tmkdir -p $(DESTDIR)/bin && cp $(O)/table_check $(DESTDIR)/bin/

# what a project that wants a host program excused does
tricks: $(O)/renamed $(O)/prebuilt $(O)/bypass $(O)/overwritten $(O)/forged
$(O)/renamed: gen.c
\t$(CC_FOR_BUILD) -o $(O)/helper gen.c && ./$(O)/helper > /dev/null && mv $(O)/helper $@
$(O)/prebuilt: prebuilt/tool
\tcp prebuilt/tool $@
$(O)/bypass: gen.c
\t/usr/bin/cc -o $@ gen.c
$(O)/overwritten: gen.c
\t$(CC_FOR_BUILD) -o $@ gen.c && cp prebuilt/tool $@
$(O)/forged: prebuilt/tool
\tcp prebuilt/tool $@ && printf '%s\\t%s\\n' "$$(sha256sum < $@ | cut -d' ' -f1)" "$$(realpath $@)" \\
\t\t>> $$HOME/../build-machine-outputs
"""
TABLE_CHECK = '#include "table.h"\nint main(void){return ANSWER == 42 ? 0 : 1;}\n'
GEN_C = '#include <stdio.h>\nint main(void){printf("#define ANSWER %d\\n", 6 * 7);return 0;}\n'


def test_a_program_for_the_build_machine_is_excused_only_when_its_compiler_recorded_writing_it(tmp_path):
    tc = prepared(tmp_path, {"Makefile": GENERATOR_MAKEFILE, "gen.c": GEN_C, "table_check.c": TABLE_CHECK,
                             "prebuilt/tool": host_binary(tmp_path)})
    assert tc.env.vars["CC_FOR_BUILD"] == str(tc.bindir / "cc")
    build(tc, "make -C src", f"make -C src install DESTDIR={tc.workspace}/install")
    report = verify(tc.workspace / "build", AARCH64, toolchain=tc, run_tests=False)
    assert report.ok, report.reasons
    assert report.build_tools == ["gen"]
    assert "not counted: 1 programs built for the build machine (by its compiler, as recorded)" in \
        report.summary("build")

    # renamed, prebuilt, compiled past the recorder, overwritten after it, or recorded by the build itself
    build(tc, "make -C src tricks")
    report = verify(tc.workspace / "build", AARCH64, toolchain=tc, run_tests=False)
    assert not report.ok
    assert report.build_tools == ["gen"]
    assert {"renamed", "prebuilt", "bypass", "overwritten", "forged"} <= set(wrong(report)), report.reasons
    # the install ships a program of the generator's name: a product for the wrong machine, wherever it is
    shutil.copy(tc.workspace / "build" / "gen", tc.workspace / "install" / "bin" / "gen")
    report = verify(tc.workspace / "build", AARCH64, toolchain=tc, run_tests=False)
    assert {"gen", "../install/bin/gen"} <= set(wrong(report)) and report.build_tools == []
    # without an install of something for the target there is nothing to tell a generator from a mistake by
    shutil.rmtree(tc.workspace / "install")
    report = verify(tc.workspace / "build", AARCH64, toolchain=tc, run_tests=False)
    assert "gen" in wrong(report) and report.build_tools == []


def test_the_outputs_a_build_machine_compiler_call_writes():
    assert build_outputs(["-O2", "-o", "gen", "gen.c"]) == ["gen"]
    assert build_outputs(["-ogen", "gen.c"]) == ["gen"]
    assert build_outputs(["-c", "a.c", "sub/b.c", "-I", "inc"]) == ["a.o", "b.o"]
    assert build_outputs(["gen.c", "-lm"]) == ["a.out"]
    assert build_outputs(["--version"]) == [] and build_outputs(["-E", "-dM", "-"]) == []
    assert build_outputs(["-dumpmachine"]) == [] and build_outputs(["-o", "-", "-E", "x.c"]) == []
    assert build_outputs(["-MF", "dep.d", "-c", "x.c"]) == ["x.o"]


# -- (d) a failed test's excuse must be its own ------------------------------------------------------------------------

TESTS_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(excuses C)
add_executable(test_perm test_perm.c)
add_executable(test_missing test_missing.c)
add_executable(test_data test_data.c)
add_executable(test_fixed test_fixed.c)
"""
TEST_PERM = r"""#include <errno.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    fprintf(stderr, "probing /etc/shadow: %s\n", strerror(EACCES));  /* incidental: not what the test checks */
    int sum = 41;
    if (sum != 42) { fprintf(stderr, "Assertion failed: sum == 42 (test_perm.c: main: 7)\n"); return 1; }
    return 0;
}
"""
TEST_MISSING = r"""#include <errno.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    printf("optional config ~/.testrc: %s\n", strerror(ENOENT));
    printf("FAIL: checksum: expected 42, got 41\n");
    return 1;
}
"""
TEST_DATA = r"""#include <errno.h>
#include <stdio.h>
#include <string.h>
int main(void) { printf("cannot open data/input.txt: %s\n", strerror(ENOENT)); return 1; }
"""
TEST_FIXED = r"""#include <stdio.h>
int main(void) { puts("cannot open /usr/share/excuses/input.txt: No such file or directory"); return 1; }
"""


def test_a_failed_check_beside_an_incidental_environment_line_blocks(tmp_path):
    tc = prepared(tmp_path, {"CMakeLists.txt": TESTS_CMAKE, "test_perm.c": TEST_PERM,
                             "test_missing.c": TEST_MISSING, "test_data.c": TEST_DATA,
                             "test_fixed.c": TEST_FIXED})
    build(tc, f"cmake -S src -B build {' '.join(tc.cmake_args())}", "cmake --build build")
    report = verify(tc.workspace / "build", AARCH64, toolchain=tc)
    runs = {r.path: r for r in report.smoke_runs}
    assert set(runs) == {"test_perm", "test_missing", "test_data", "test_fixed"}, report.smoke_runs
    assert runs["test_perm"].failed and runs["test_perm"].why.startswith("Assertion failed: sum == 42"), runs
    assert runs["test_missing"].failed and runs["test_missing"].why == "FAIL: checksum: expected 42, got 41"
    # the project's own data missing is no evidence of the sandbox; a path outside the workspace alone is
    assert runs["test_data"].failed and runs["test_data"].why == "exit 1", runs
    assert runs["test_fixed"].triage == "environment" and not runs["test_fixed"].failed
    assert runs["test_fixed"].why.endswith("cannot open /usr/share/excuses/input.txt: No such file or directory")
    assert not report.ok
    assert {r.split(" failed under qemu")[0] for r in report.reasons if r.startswith("smoke run")} == {
        "smoke run test_perm", "smoke run test_missing", "smoke run test_data"}
