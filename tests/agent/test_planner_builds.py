"""`crossbuild build` with the offline planner on real projects, as a user runs it (the CLI, --json), verified:
the bundled example and Debian's zlib and json-c for aarch64-linux-musl and riscv64-linux-musl, and libpng1.6 (which
needs zlib cross-built into the prefix first, and whose tests run for minutes under qemu) for aarch64-linux-musl."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from crossbuild.env import dependency_cache as deps
from crossbuild.foundation import safefs
from crossbuild.proof.smoke import NOT_BUILT
from tests.conftest import EXAMPLE, GOLDEN_MISMATCH, cb, forget_cached_dependencies, outcome_of
from tests.diagnosis.test_autotools_log import make_configure
from tests.diagnosis.test_cmake_trace import TLS_FILE

TARGETS = ["aarch64-linux-musl", "riscv64-linux-musl"]


def _build(tmp_path, source, target, *extra):
    r = cb("build", source, "-t", target, "-w", str(tmp_path / "ws"), "--db", str(tmp_path / "runs.db"), "--json",
           *extra, cwd=tmp_path, timeout=3000)
    out = outcome_of(r.stdout)
    return r, out


def _project(folder: Path, files: dict[str, str]) -> Path:
    """A small project in FOLDER made of FILES (relative path -> text), with a main.c that does nothing."""
    for rel, text in {"main.c": "int main(void){return 0;}\n", **files}.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def _commands(db, run_id):
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT raw_arguments FROM tool_calls WHERE run_id=? AND name='run_command' ORDER BY id",
                        (run_id,)).fetchall()
    return [json.loads(r[0])["command"] for r in rows]


def _dependency_calls(db, run_id):
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT result_json FROM tool_calls WHERE run_id=? AND name='build_dependency'",
                        (run_id,)).fetchall()
    return [json.loads(r[0]) for r in rows]


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", [str(EXAMPLE), "debian:zlib", "debian:json-c"])
def test_planner_cross_builds_and_verifies(tmp_path, source, target):
    r, out = _build(tmp_path, source, target)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["ok"]
    assert out["verify"]["rebuild"]["ok"]
    machines = {a.get("machine") for a in out["verify"]["artifacts"] if a["kind"] != "unknown"}
    assert machines == {{"aarch64-linux-musl": "EM_AARCH64", "riscv64-linux-musl": "EM_RISCV"}[target]}
    if source == "debian:json-c":  # its -Werror meets warnings zig's clang adds: never made fatal, no failed build
        conn = sqlite3.connect(tmp_path / "runs.db")
        failed = conn.execute("SELECT raw_arguments FROM tool_calls WHERE run_id=? AND ok=0",
                              (out["run_id"],)).fetchall()
        assert failed == []


PNG_USER = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(pnguser C)\nenable_testing()\n"
                      "find_package(PNG REQUIRED)\nadd_library(pnguser STATIC pnguser.c)\n"
                      "target_link_libraries(pnguser PNG::PNG)\nadd_executable(t_png t_png.c)\n"
                      "target_link_libraries(t_png pnguser)\nadd_test(NAME png COMMAND t_png)\n"
                      "install(TARGETS pnguser)\n",
    "pnguser.c": "#include <png.h>\nint pnguser(void) { return png_access_version_number() >= 10600; }\n",
    "t_png.c": "int pnguser(void);\nint main(void) { return pnguser() ? 0 : 1; }\n",
}


@pytest.mark.slow
def test_libpng_needs_zlib_first_and_brings_it_along_wherever_its_cached_build_is_installed(tmp_path):
    """A project asks for PNG: libpng is cross-built as a dependency, zlib first (its build asks for it), and
    libpng's own tests pass on the target (those its time allows). A second project with a fresh prefix reuses
    libpng from the cache: zlib, which libpng's build used from the prefix, is installed first (a cached libxml2
    came alone into a fresh prefix, and every program linked to it failed to load for want of liblzma.so.5)."""
    stale = deps.lookup("aarch64-linux-musl", "libpng1.6", None)  # this crossbuild's entry: built here, not reused
    if stale is not None:
        safefs.remove_tree(stale.dir.parent, stale.dir.name)
    (tmp_path / "projects").mkdir()
    _write_projects(tmp_path / "projects", {"first": PNG_USER, "second": PNG_USER})
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        r, out = _build(tmp_path / name, str(tmp_path / "projects" / name), "aarch64-linux-musl",
                        "--prefix", str(tmp_path / name / "prefix"))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
        assert out["status"] == "verified" and out["verify"]["proof"] == "tested", out["message"]
        prefix = tmp_path / name / "prefix"
        assert (prefix / "include" / "zlib.h").is_file() and (prefix / "lib" / "pkgconfig" / "zlib.pc").is_file()
        assert (prefix / "include" / "png.h").is_file()
    conn = sqlite3.connect(tmp_path / "first" / "runs.db")
    [(run_id, status, verdict)] = conn.execute(
        "SELECT id, status, verify_json FROM runs WHERE source='debian:libpng1.6' AND verify_json IS NOT NULL")
    libpng = json.loads(verdict)
    # a dependency's own suite has a shorter overall limit than a project's: what ran of it passed on the target
    assert status == "verified" and libpng["proof_counts"]["failed"] == 0, libpng.get("proof_why")
    assert libpng["proof"] == "tested" or "did not finish within its overall limit" in libpng["proof_why"]
    by_name = {run["path"]: run for run in libpng["smoke_runs"]}
    assert by_name["pngtest"]["passed"] and by_name["pngvalid-standard"]["passed"]
    # Debian's pnggetset links a library no target is named: CTest runs its script, which cannot start it
    assert by_name["pnggetset"]["skipped"] == NOT_BUILT, by_name["pnggetset"]
    provided = [c["data"]["source"] for c in _dependency_calls(tmp_path / "first" / "runs.db", run_id) if c["ok"]]
    assert provided == ["zlib"], provided  # libpng's own build asked for zlib
    second = _dependency_calls(tmp_path / "second" / "runs.db", out["run_id"])
    assert [(c["data"]["source"], c["data"]["cached"]) for c in second] == [("libpng1.6", True)], second


ZLIB_USER = """cmake_minimum_required(VERSION 3.16)
project(zuser C)
find_package(ZLIB REQUIRED)
add_executable(zuser zuser.c)
target_link_libraries(zuser ZLIB::ZLIB)
install(TARGETS zuser)
"""


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_a_second_project_needing_the_same_dependency_reuses_its_cached_build(tmp_path, target):
    for name in ("first", "second"):
        project = tmp_path / name / "zuser"
        project.mkdir(parents=True)
        (project / "CMakeLists.txt").write_text(ZLIB_USER)
        (project / "zuser.c").write_text(
            '#include <stdio.h>\n#include <zlib.h>\nint main(void) { puts(zlibVersion()); return 0; }\n')
        r, out = _build(tmp_path / name, str(project), target, "--prefix", str(tmp_path / name / "prefix"))
        assert out.get("status") == "verified", r.stdout[-3000:] + r.stderr[-2000:]
        call = _dependency_calls(tmp_path / name / "runs.db", out["run_id"])[0]
        assert call["ok"] and call["data"]["source"] == "zlib", call
        assert (tmp_path / name / "prefix" / "lib" / "libz.a").is_file()
    assert call["data"]["cached"] is True and call["data"]["seconds"] < 5


MAKEFILE_RUNS_ITS_TESTS = """\
# like bzip2's: the default goal runs the program it just built, which cannot run on the build machine
all: libdemo.a demo test

libdemo.a: demo_lib.o
\t$(AR) rcs $@ demo_lib.o

demo: main.o libdemo.a
\t$(CC) -o demo main.o -L. -ldemo

test: demo
\t./demo > out.txt
\tgrep -q 42 out.txt
"""


@pytest.mark.slow
def test_a_makefile_whose_default_goal_runs_target_programs_runs_them_under_the_emulator(tmp_path):
    """bzip2's `all: libbz2.a bzip2 bzip2recover test`: the default goal runs what it built. Its test goal is not
    left out: the build runs again with the target's programs started under qemu, and the goal passes there."""
    project = tmp_path / "demo"
    project.mkdir()
    (project / "Makefile").write_text(MAKEFILE_RUNS_ITS_TESTS)
    (project / "demo_lib.c").write_text("int answer(void){return 42;}\n")
    (project / "main.c").write_text('#include <stdio.h>\nint answer(void);\nint main(void){printf("%d\\n", answer());'
                                    "return 0;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["rebuild"]["ok"]
    assert "CROSSBUILD_EMULATE_TARGET=1" in out["message"] and "built make goals" not in out["message"]
    assert out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    assert (tmp_path / "ws" / "src" / "out.txt").read_text().strip() == "42"  # the target's demo, run by `all`
    kinds = {a["path"]: a["kind"] for a in out["verify"]["artifacts"]}
    assert kinds["demo"] == "executable" and kinds["libdemo.a"] == "static_library"


@pytest.mark.slow
def test_a_makefile_whose_ar_variable_holds_the_archivers_operation_keeps_it(tmp_path):
    """Lua's upstream layout: the top Makefile runs `$(MAKE)` in src/, whose Makefile says `AR= ar rcu` and archives
    with `$(AR) $@ $(OBJS)`. The toolchain's archiver alone in AR printed ar's usage; it keeps the operation. And
    it installs below `INSTALL_TOP= /usr/local`, which is given the stage."""
    project = tmp_path / "demo"
    (project / "src").mkdir(parents=True)
    (project / "Makefile").write_text("all:\n\tcd src && $(MAKE) all\ninstall:\n\tcd src && $(MAKE) install\n")
    (project / "src" / "Makefile").write_text(
        "CC= gcc -std=gnu99\nAR= ar rcu\nRANLIB= ranlib\nINSTALL_TOP= /usr/local\n\nall: demo\n\n"
        "libdemo.a: demo_lib.o\n\t$(AR) $@ demo_lib.o\n\t$(RANLIB) $@\n\n"
        "demo: main.o libdemo.a\n\t$(CC) -o $@ main.o libdemo.a\n\n"
        "install: all\n\tmkdir -p $(INSTALL_TOP)/lib\n\tcp libdemo.a $(INSTALL_TOP)/lib/\n")
    (project / "src" / "demo_lib.c").write_text("int answer(void){return 42;}\n")
    (project / "src" / "main.c").write_text("int answer(void);\nint main(void){return answer() == 42 ? 0 : 1;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["rebuild"]["ok"]
    arts = {a["path"]: a for a in out["verify"]["artifacts"]}
    assert arts["src/libdemo.a"]["kind"] == "static_library" and arts["src/demo"]["machine"] == "EM_AARCH64"
    assert (tmp_path / "ws" / "install" / "lib" / "libdemo.a").is_file()  # its INSTALL_TOP was given the stage


@pytest.mark.slow
def test_a_test_program_that_links_libdl_can_dlopen_on_musl(tmp_path):
    """libuv's dlerror test in its static-library runner: a static musl program's dlopen always fails ("Dynamic
    loading not supported", without the path the test looks for). Linked dynamically, as a native musl gcc links
    it, the program gets the loader's real error and passes under qemu."""
    project = tmp_path / "dl"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(dl C)\nadd_library(plug STATIC plug.c)\n"
        "add_executable(test_dl test_dl.c)\ntarget_link_libraries(test_dl plug ${CMAKE_DL_LIBS})\n"
        "enable_testing()\nadd_test(NAME test_dl COMMAND test_dl)\n")
    (project / "plug.c").write_text("int plug(void){return 7;}\n")
    (project / "test_dl.c").write_text(
        '#include <dlfcn.h>\n#include <stdio.h>\n#include <string.h>\nint plug(void);\n'
        'int main(void){void *h = dlopen("fixtures/missing.so", RTLD_NOW); const char *e = dlerror();\n'
        'printf("dlerror: %s\\n", e ? e : "(none)");\n'
        'return !h && e && strstr(e, "fixtures/missing.so") && plug() == 7 ? 0 : 1;}\n')
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified", out["message"]
    [run] = [s for s in out["verify"]["smoke_runs"] if s["path"].endswith("test_dl")]
    assert run["passed"] and "fixtures/missing.so" in run["output_tail"], run
    arts = {a["path"]: a for a in out["verify"]["artifacts"]}
    assert arts["test_dl"]["linkage"] == "dynamic" and arts["test_dl"]["machine"] == "EM_AARCH64"


MAKEFILE_BUILDS_ITS_MANUAL = """\
# like giflib's: the default goal's own commands build the manual with xmlto, which this machine lacks
PROGRAMS = demo
ALL = libdemo.a $(PROGRAMS)

all: $(ALL)
\t$(MAKE) -C doc

libdemo.a: demo_lib.o
\t$(AR) rcs $@ demo_lib.o

demo: main.o libdemo.a
\t$(CC) -o demo main.o -L. -ldemo
"""


@pytest.mark.slow
def test_a_makefile_whose_default_goal_builds_its_manual_with_a_missing_tool_is_built_without_it(tmp_path):
    project = tmp_path / "demo"
    (project / "doc").mkdir(parents=True)
    (project / "Makefile").write_text(MAKEFILE_BUILDS_ITS_MANUAL)
    (project / "doc" / "Makefile").write_text("all: demo.html\ndemo.html: demo.xml\n\txmlto xhtml-nochunks demo.xml\n")
    (project / "doc" / "demo.xml").write_text("<article/>\n")
    (project / "demo_lib.c").write_text("int answer(void){return 42;}\n")
    (project / "main.c").write_text('#include <stdio.h>\nint answer(void);\nint main(void){printf("%d\\n", answer());'
                                    "return 0;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["rebuild"]["ok"]
    assert "built make goals libdemo.a demo instead of `all` (its own commands" in out["message"]
    assert "doc-tool-missing" in cb("runs", "show", out["run_id"], "--db", str(tmp_path / "runs.db")).stdout
    assert not (tmp_path / "ws" / "src" / "doc" / "demo.html").exists()
    # the restart needs no clean tree: a project's clean target can be broken (giflib's leaves a link behind)
    assert "make clean" not in _commands(tmp_path / "runs.db", out["run_id"])


@pytest.mark.slow
def test_an_autotools_project_whose_tests_miss_its_own_header_out_of_tree_is_built_in_its_source_folder(tmp_path):
    # like libconfig's: tests/Makefile.am says -I../lib, which is the build folder's lib/, not the source's
    project = tmp_path / "vp"
    for d in ("lib", "tests"):
        (project / d).mkdir(parents=True)
    (project / "configure.ac").write_text("AC_INIT([vp], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\n"
                                          "AC_PROG_RANLIB\nAM_PROG_AR\n"
                                          "AC_CONFIG_FILES([Makefile lib/Makefile tests/Makefile])\nAC_OUTPUT\n")
    (project / "Makefile.am").write_text("SUBDIRS = lib tests\n")
    (project / "lib" / "Makefile.am").write_text("lib_LIBRARIES = libvp.a\nlibvp_a_SOURCES = vp.c\n"
                                                 "include_HEADERS = vp.h\n")
    (project / "lib" / "vp.h").write_text("int vp(void);\n")
    (project / "lib" / "vp.c").write_text('#include "vp.h"\nint vp(void){return 42;}\n')
    (project / "tests" / "Makefile.am").write_text("noinst_PROGRAMS = vp_test\nvp_test_SOURCES = vp_test.c\n"
                                                   "vp_test_CPPFLAGS = -I../lib\nvp_test_LDADD = ../lib/libvp.a\n")
    (project / "tests" / "vp_test.c").write_text("#include <vp.h>\nint main(void){return vp() == 42 ? 0 : 1;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["rebuild"]["ok"]
    assert "built in src/ itself" in out["message"] and out["output_dir"] == "src"
    assert any(s["path"].endswith("vp_test") and s["passed"] for s in out["verify"]["smoke_runs"])


@pytest.mark.slow
def test_an_autotools_rule_that_runs_a_source_script_by_a_relative_path_is_built_in_the_source_folder(tmp_path):
    """A release whose generated files are made by a rule running `./script` (admesh's `./fortag.sh >ChangeLog`,
    a file its tarball lacks): out of tree the script is not there, and nothing in the knowledge base names that.
    Debian's dh builds autotools projects in their source folder, where it is."""
    project = tmp_path / "gen"
    project.mkdir()
    (project / "configure.ac").write_text("AC_INIT([gen], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\n"
                                          "AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n")
    (project / "Makefile.am").write_text("bin_PROGRAMS = gen\ngen_SOURCES = gen.c\ncheck_PROGRAMS = gen_test\n"
                                         "gen_test_SOURCES = gen_test.c\nTESTS = gen_test\n"
                                         "all-local: HISTORY\nHISTORY:\n\t./history.sh >$@\n")
    (project / "history.sh").write_text("#!/bin/sh\necho 1.0: first\n")
    (project / "history.sh").chmod(0o755)
    (project / "gen.c").write_text("int main(void){return 0;}\n")
    (project / "gen_test.c").write_text("int main(void){return 0;}\n")
    # one job, as the evaluation builds (admesh's cell): built in parallel, the serial retry comes first, and finds
    # the empty HISTORY the failed redirection left (the clean rebuild then refuses the build, truthfully)
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl", "-j", "1")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["rebuild"]["ok"] and out["output_dir"] == "src"
    assert "built in src/ itself, as Debian builds autotools projects" in out["message"]
    assert "`make -j1` failed out of tree with no fix left" in out["message"]
    assert out["verify"]["proof"] == "tested"


OLD_CONFIG_SUB = """\
#!/bin/sh
# as a release from before riscv64 answers
case "$1" in
  riscv64*) echo "Invalid configuration \\`$1': machine \\`riscv64' not recognized" >&2; exit 1;;
  *) exec "$(dirname "$0")/config.sub.real" "$@";;
esac
"""


@pytest.mark.slow
def test_an_autotools_release_whose_config_sub_predates_the_target_gets_current_ones(tmp_path):
    import subprocess

    project = tmp_path / "old"
    project.mkdir()
    (project / "configure.ac").write_text("AC_INIT([old], [1.0])\nAC_CONFIG_AUX_DIR([build-aux])\n"
                                          "AM_INIT_AUTOMAKE([foreign])\nAC_CANONICAL_HOST\nAC_PROG_CC\n"
                                          "AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n")
    (project / "Makefile.am").write_text("bin_PROGRAMS = old\nold_SOURCES = old.c\n")
    (project / "old.c").write_text("int main(void){return 0;}\n")
    subprocess.run(["autoreconf", "-fi"], cwd=project, check=True, capture_output=True)  # a release's configure
    aux = project / "build-aux"
    (aux / "config.sub").rename(aux / "config.sub.real")
    (aux / "config.sub").write_text(OLD_CONFIG_SUB)
    (aux / "config.sub").chmod(0o755)
    r, out = _build(tmp_path, str(project), "riscv64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["rebuild"]["ok"]
    assert "replaced src/build-aux/config.guess, src/build-aux/config.sub with current ones" in out["message"]
    ws = tmp_path / "ws"
    assert (ws / "src/build-aux/config.sub").read_bytes() == (ws / ".xbuild/autotools/config.sub").read_bytes()


FEATURE_PROJECT = """\
cmake_minimum_required(VERSION 3.16)
project(feat C)
option(FEAT_WITH_FROBNICATE "Frobnicate the output with libfrobnicate" ON)
if(FEAT_WITH_FROBNICATE)
  find_package(Frobnicate REQUIRED)
endif()
add_executable(feat main.c)
install(TARGETS feat)
"""


@pytest.mark.slow
@pytest.mark.parametrize("keep", [False, True])
def test_an_optional_feature_whose_dependency_cannot_be_had_is_turned_off_and_said(tmp_path, keep):
    project = tmp_path / "feat"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(FEATURE_PROJECT)
    (project / "main.c").write_text("int main(void){return 0;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl", *(["--keep-features"] if keep else []))
    if keep:
        assert r.returncode != 0 and out["status"] == "failed"
        assert "Frobnicate cannot be cross-built, and --keep-features forbids" in out["message"]
        return
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified"
    assert "built without Frobnicate: FEAT_WITH_FROBNICATE=OFF" in out["message"]
    shown = cb("runs", "show", out["run_id"], "--db", str(tmp_path / "runs.db"))
    assert "built without Frobnicate" in shown.stdout


OPENMP_PROJECT = """cmake_minimum_required(VERSION 3.16)
project(omp C)
option(USE_OPENMP "Build with OpenMP" ON)
add_executable(omp main.c)
if(USE_OPENMP)
  find_package(OpenMP REQUIRED)
  target_link_libraries(omp OpenMP::OpenMP_C)
endif()
install(TARGETS omp)
"""


@pytest.mark.slow
def test_openmp_which_zig_cannot_give_is_turned_off_by_the_projects_own_option(tmp_path):
    """zig has no OpenMP runtime: FindOpenMP reports the C component missing (`Could NOT find OpenMP_C`), which no
    Debian package cross-builds; the project's switch is named after the package (dmlc-core's USE_OPENMP)."""
    project = tmp_path / "omp"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(OPENMP_PROJECT)
    (project / "main.c").write_text("int main(void){return 0;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out["status"] == "verified", out["message"]
    assert "built without OpenMP_C: USE_OPENMP=OFF" in out["message"]


OWN_CHECK_PROJECT = """cmake_minimum_required(VERSION 3.16)
project(ownz C)
find_library(Z_LIBRARY z)
if(NOT Z_LIBRARY)
  message(FATAL_ERROR "libz not found.")
endif()
add_executable(ownz main.c)
target_link_libraries(ownz ${Z_LIBRARY})
install(TARGETS ownz)
"""


@pytest.mark.slow
def test_a_library_the_projects_own_check_did_not_find_is_cross_built_into_the_prefix(tmp_path):
    """czmq's CMakeLists looks for libzmq itself and stops with its own message (`libzmq not found.`), which no
    find_package wording names: the library is resolved through Debian's index and cross-built first."""
    project = tmp_path / "ownz"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(OWN_CHECK_PROJECT)
    (project / "main.c").write_text("int zlibVersion(void);\nint main(void){return zlibVersion() ? 0 : 1;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl", "--prefix", str(tmp_path / "prefix"))
    assert out["status"] == "verified", out["message"]
    calls = _dependency_calls(tmp_path / "runs.db", out["run_id"])
    assert calls and calls[0]["ok"] and calls[0]["data"]["source"] == "zlib", calls


TEST_NEEDS_HEADER = """cmake_minimum_required(VERSION 3.16)
project(zver C)
enable_testing()
add_library(zver zver.c)
add_executable(zver_test tests/zver_test.c)
target_link_libraries(zver_test zver)
find_package(ZLIB)  # only the tests use it
if(ZLIB_FOUND)
  target_link_libraries(zver_test ZLIB::ZLIB)
endif()
add_test(NAME zver_test COMMAND zver_test)
install(TARGETS zver)
"""


@pytest.mark.slow
def test_a_library_only_the_tests_need_is_built_before_the_tests_are_left_out(tmp_path):
    """spdlog's tests include <catch2/catch.hpp>, which Debian removed from the source: the test program failed to
    build and the planner built the library alone, so nothing ran on the target. A header a Debian package
    provides is cross-built into the prefix first, and the tests then build and run."""
    project = tmp_path / "zver"
    (project / "tests").mkdir(parents=True)
    (project / "CMakeLists.txt").write_text(TEST_NEEDS_HEADER)
    (project / "zver.c").write_text("int zver(void) { return 1; }\n")
    (project / "tests" / "zver_test.c").write_text(
        "#include <zlib.h>\n#include <string.h>\nint zver(void);\n"
        "int main(void) { return strlen(ZLIB_VERSION) > 0 && zver() == 1 ? 0 : 1; }\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl", "--prefix", str(tmp_path / "prefix"))
    assert out["status"] == "verified", out["message"]
    assert "tests not built" not in out["message"], out["message"]
    assert out["verify"]["proof"] == "tested", out["verify"]["proof_why"]
    calls = _dependency_calls(tmp_path / "runs.db", out["run_id"])
    assert calls and calls[0]["data"]["source"] == "zlib", calls


@pytest.mark.slow
def test_the_prefix_is_searched_like_the_targets_sysroot(tmp_path):
    """A Debian-patched project includes <zlib.h> and links -lz in its tests with no find_package (leveldb's tests
    link `gmock gtest` so), as its cross compiler finds them in the multiarch folders: once zlib is cross-built
    into the prefix, the compiler finds it there too."""
    project = tmp_path / "zver"
    (project / "tests").mkdir(parents=True)
    (project / "CMakeLists.txt").write_text(TEST_NEEDS_HEADER.split("find_package")[0]
                                            + "target_link_libraries(zver_test z)\ninstall(TARGETS zver)\n")
    (project / "zver.c").write_text("int zver(void) { return 1; }\n")
    (project / "tests" / "zver_test.c").write_text(
        "#include <zlib.h>\nint zver(void);\nint main(void) { return zlibVersion()[0] && zver() == 1 ? 0 : 1; }\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl", "--prefix", str(tmp_path / "prefix"))
    assert out["status"] == "verified", out["message"]
    assert "applied header-not-found: cross-build dependency zlib" in out["message"]
    assert out["verify"]["proof"] == "tested", out["verify"]["proof_why"]


@pytest.mark.slow
def test_tests_that_still_fail_to_build_after_the_dependency_are_left_out_and_said(tmp_path):
    """A header no Debian package provides: the dependency cannot be had, and the project's other targets are then
    built by name, as before, with the tests' failure said."""
    project = tmp_path / "zver"
    (project / "tests").mkdir(parents=True)
    (project / "CMakeLists.txt").write_text(TEST_NEEDS_HEADER.split("find_package")[0] + "install(TARGETS zver)\n")
    (project / "zver.c").write_text("int zver(void) { return 1; }\n")
    (project / "tests" / "zver_test.c").write_text("#include <frobnicator_harness.h>\nint main(void) { return 0; }\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl", "--prefix", str(tmp_path / "prefix"))
    assert out["status"] == "verified", out["message"]
    assert "built the other targets by name, without the test and example targets zver_test" in out["message"]


@pytest.mark.slow
def test_one_test_that_does_not_compile_leaves_out_only_itself_and_the_others_run_on_the_target(tmp_path):
    """A C++ project whose one test newer libc++ rejects: the build keeps going, the tests that built are built by
    name and run by CTest on the target; the verdict is `tested`, the test that did not build listed, not run."""
    project = tmp_path / "zver"
    (project / "tests").mkdir(parents=True)
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(zver C)\nenable_testing()\nadd_library(zver zver.c)\n"
        "foreach(t zver_test zver_more_test chars_test)\n  add_executable(${t} tests/${t}.c)\n"
        "  target_link_libraries(${t} zver)\n  add_test(NAME ${t} COMMAND ${t})\n"
        # like libpng's: a CMake script is the test's command, its program an argument
        "  add_test(NAME ${t}_script COMMAND ${CMAKE_COMMAND} -DTEST_COMMAND=$<TARGET_FILE:${t}>"
        " -P ${CMAKE_CURRENT_SOURCE_DIR}/tests/run.cmake)\nendforeach()\n"
        "install(TARGETS zver)\n")
    (project / "tests" / "run.cmake").write_text(
        'execute_process(COMMAND ${TEST_COMMAND} RESULT_VARIABLE rc)\nif(NOT rc EQUAL 0)\n'
        '  message(FATAL_ERROR "${TEST_COMMAND}: ${rc}")\nendif()\n')
    (project / "zver.c").write_text("int zver(void) { return 1; }\n")
    for name in ("zver_test", "zver_more_test"):
        (project / "tests" / f"{name}.c").write_text("int zver(void);\nint main(void) { return zver() != 1; }\n")
    (project / "tests" / "chars_test.c").write_text('#error "char_traits<unsigned char> is gone"\n')
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl", "--prefix", str(tmp_path / "prefix"))
    assert out["status"] == "verified", out["message"]
    assert "1 test or example targets did not build and were left out, chars_test" in out["message"]
    verdict = out["verify"]
    assert verdict["proof"] == "tested", verdict["proof_why"]
    runs = {run["path"]: run for run in verdict["smoke_runs"]}
    assert runs["zver_test"]["passed"] and runs["zver_more_test"]["passed"]
    assert runs["chars_test"]["skipped"] == NOT_BUILT, runs["chars_test"]
    assert runs["zver_test_script"]["passed"]
    assert runs["chars_test_script"]["skipped"] == NOT_BUILT, runs["chars_test_script"]


FEATURES = ("Frobnicate", "Quuxify", "Zorblax", "Wibblify")


@pytest.mark.slow
def test_four_missing_packages_reported_by_one_cmake_module_are_four_errors_not_one_coming_back(tmp_path):
    """libxml2 for Windows: Iconv, LibLZMA, Python2 and ZLIB were each missing in turn, each reported from the same
    line of FindPackageHandleStandardArgs.cmake; the run was stopped as making no progress at the fourth."""
    project = tmp_path / "four"
    (project / "cmake").mkdir(parents=True)
    text = ("cmake_minimum_required(VERSION 3.16)\nproject(four C)\n"
            "list(APPEND CMAKE_MODULE_PATH ${CMAKE_SOURCE_DIR}/cmake)\n")
    for name in FEATURES:
        upper, lower = name.upper(), name.lower()
        text += (f'option(FOUR_WITH_{upper} "use lib{lower}" ON)\n'
                 f"if(FOUR_WITH_{upper})\n  find_package({name} REQUIRED)\nendif()\n")
        (project / "cmake" / f"Find{name}.cmake").write_text(
            f"find_path({upper}_INCLUDE_DIR {lower}.h)\nfind_library({upper}_LIBRARY {lower})\n"
            "include(FindPackageHandleStandardArgs)\n"
            f"find_package_handle_standard_args({name} REQUIRED_VARS {upper}_LIBRARY {upper}_INCLUDE_DIR)\n")
    (project / "CMakeLists.txt").write_text(text + "add_executable(four main.c)\ninstall(TARGETS four)\n")
    (project / "main.c").write_text("int main(void){return 0;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified", out["message"]
    for name in FEATURES:
        assert f"built without {name}: FOUR_WITH_{name.upper()}=OFF" in out["message"]


@pytest.mark.slow
def test_a_meson_feature_whose_dependency_cannot_be_had_is_turned_off_with_its_own_option(tmp_path):
    # the switch is found in the project's options file, as `meson introspect --buildoptions` reports it
    project = tmp_path / "feat"
    project.mkdir()
    (project / "meson.build").write_text("project('feat', 'c')\n"
                                         "frob = dependency('frobnicate', required : get_option('frobnicate'))\n"
                                         "executable('feat', 'main.c', dependencies : frob, install : true)\n")
    (project / "meson_options.txt").write_text(
        "option('frobnicate', type : 'feature', value : 'enabled', description : 'Frobnicate the output')\n")
    (project / "main.c").write_text("int main(void){return 0;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified"
    assert "built without frobnicate: frobnicate=disabled" in out["message"]


@pytest.mark.slow
def test_a_project_one_folder_down_is_built_from_its_own_root_not_from_its_tests(tmp_path):
    # like a Debian source package whose top level holds only debian/ and docs: the project lives in a subfolder,
    # next to a test folder that has a CMakeLists.txt of its own
    project = tmp_path / "pkg"
    (project / "debian").mkdir(parents=True)
    (project / "debian" / "rules").write_text("#!/usr/bin/make -f\n%:\n\tdh $@ --sourcedirectory=lib\n")
    (project / "README").write_text("a library\n")
    (project / "tests").mkdir()
    (project / "tests" / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(t C)\n"
                                                      "message(FATAL_ERROR \"not the project\")\n")
    (project / "lib").mkdir()
    (project / "lib" / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(answer C)\n"
                                                    "add_library(answer STATIC answer.c)\n"
                                                    "install(TARGETS answer)\n")
    (project / "lib" / "answer.c").write_text("int answer(void){return 42;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["rebuild"]["ok"]
    assert {a["path"] for a in out["verify"]["artifacts"] if a["kind"] == "static_library"} == {"libanswer.a"}


CONFIGURE = r"""#!/bin/sh
# a hand-written configure with autoconf's --help layout: its switches are read from this text, never run on the host
EXAMPLES=yes
PREFIX=/usr/local
for a in "$@"; do
  case "$a" in
    --help) cat <<'HELP'
Optional Features:
  --disable-examples      do not build the example programs
HELP
      exit 0;;
    --disable-examples) EXAMPLES=no;;
    --prefix=*) PREFIX="${a#--prefix=}";;
  esac
done
{ echo "PREFIX=$PREFIX"; echo "EXAMPLES=$EXAMPLES"; cat Makefile.in; } > Makefile
"""
MAKEFILE_IN = """\
SUBDIRS = lib
ifeq ($(EXAMPLES),yes)
SUBDIRS += examples
endif
all:
\tfor d in $(SUBDIRS); do $(MAKE) -C $$d || exit 1; done
install: all
\tmkdir -p $(DESTDIR)$(PREFIX)/lib && cp lib/libanswer.a $(DESTDIR)$(PREFIX)/lib/
"""


@pytest.mark.slow
def test_examples_that_do_not_build_are_switched_off_with_the_configure_switch_the_script_offers(tmp_path):
    project = tmp_path / "answer"
    (project / "lib").mkdir(parents=True)
    (project / "examples").mkdir()
    (project / "configure").write_text(CONFIGURE)
    (project / "configure").chmod(0o755)
    (project / "Makefile.in").write_text(MAKEFILE_IN)
    (project / "lib" / "Makefile").write_text("libanswer.a: answer.o\n\t$(AR) rcs libanswer.a answer.o\n")
    (project / "lib" / "answer.c").write_text("int answer(void){return 42;}\n")
    (project / "examples" / "Makefile").write_text("example: example.c\n\t$(CC) -o example example.c\n")
    (project / "examples" / "example.c").write_text("#include <frobnicate.h>\nint main(void){return 0;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified"
    assert "--disable-examples" in out["message"]
    assert {a["path"] for a in out["verify"]["artifacts"] if a["kind"] == "static_library"} == {"lib/libanswer.a"}


@pytest.mark.slow
def test_a_project_whose_tests_miss_its_own_header_is_not_built_as_its_own_dependency(tmp_path):
    # libconfig's tests cannot find libconfig.h in a VPATH build. Asking to build libconfig as a dependency must end
    # at once (it used to wait forever on its own build lock) and say why; the planner then builds in src/ itself
    r, out = _build(tmp_path, "debian:libconfig", "aarch64-linux-musl")
    assert out.get("status") == "verified", r.stdout[-3000:] + r.stderr[-2000:]
    assert "libconfig is the project's own (src/lib/libconfig.h)" in out["message"]
    assert "built in src/ itself" in out["message"] and out["verify"]["rebuild"]["ok"]


@pytest.mark.slow
def test_debian_rules_switches_that_only_turn_features_off_are_followed_and_said(tmp_path):
    """Debian's maintainers turned documentation off: the planner does too. Their tests switch and a switch that
    turns a feature on (it could need a dependency) are not taken; the tests stay the proof."""
    project = tmp_path / "calc"
    shutil.copytree(EXAMPLE, project)
    (project / "debian").mkdir()
    (project / "debian" / "rules").write_text(
        "#!/usr/bin/make -f\n%:\n\tdh $@ --buildsystem=cmake\noverride_dh_auto_configure:\n"
        "\tdh_auto_configure -- -DCALC_DOCS=OFF -DBUILD_TESTING=OFF -DWITH_FROB=ON "
        "-DLIBDIR=lib/$(DEB_HOST_MULTIARCH)\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and "from debian/rules: -DCALC_DOCS=OFF" in out["message"]
    conn = sqlite3.connect(tmp_path / "runs.db")
    commands = [json.loads(a)["command"] for (a,) in conn.execute(
        "SELECT parsed_arguments_json FROM tool_calls WHERE run_id=? AND name='run_command'", (out["run_id"],))]
    configure = next(c for c in commands if c.startswith("cmake -S"))
    assert "-DCALC_DOCS=OFF" in configure
    assert "BUILD_TESTING=OFF" not in configure and "WITH_FROB" not in configure and "LIBDIR" not in configure
    assert [run for run in out["verify"]["smoke_runs"] if run["passed"]]  # the tests still ran


@pytest.mark.slow
def test_the_version_debian_passes_for_a_tarball_without_git_is_passed_too(tmp_path):
    """Like google benchmark's: the CMake project reads its version from git, which a release tarball lacks (an
    empty VERSION property stops the configure); Debian passes it from its changelog through dpkg's pkg-info.mk,
    and so does the planner. Debian's switch to the system's copy of a test framework is not a test switch."""
    project = tmp_path / "calc"
    shutil.copytree(EXAMPLE, project)
    text = (project / "CMakeLists.txt").read_text()
    (project / "CMakeLists.txt").write_text(text.replace("VERSION ${PROJECT_VERSION}", "VERSION ${GIT_VERSION}"))
    (project / "debian").mkdir()
    (project / "debian" / "changelog").write_text("libcalc (1.0.0-2) unstable; urgency=medium\n\n  * Upload.\n")
    (project / "debian" / "rules").write_text(
        "#!/usr/bin/make -f\ninclude /usr/share/dpkg/pkg-info.mk\n%:\n\tdh $@ --buildsystem=cmake\n"
        "override_dh_auto_configure:\n\tdh_auto_configure -- -DGIT_VERSION=\"$(DEB_VERSION_UPSTREAM)\" "
        "-DCALC_USE_BUNDLED_GTEST=OFF\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out["status"] == "verified", r.stdout[-3000:] + r.stderr[-2000:]
    assert "from debian/rules: -DCALC_USE_BUNDLED_GTEST=OFF -DGIT_VERSION=1.0.0" in out["message"]
    assert out["verify"]["proof"] == "tested"


def _program_with_library(tmp_path, name, main_c, build_file, text):
    """A project of MAIN_C and lib.c (`int lib(void)` returns 1) built by BUILD_FILE (Makefile, CMakeLists.txt)."""
    project = tmp_path / name
    project.mkdir()
    (project / "main.c").write_text(main_c)
    (project / "lib.c").write_text("int lib(void){return 1;}\n")
    (project / build_file).write_text(text)
    return project


COPIES_LIBC_DATA = """\
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>
/* like xz's args.c: one-byte globals, then getopt's optind/optarg, which a non-PIE executable copies */
bool verbose, quiet;
int lib(void);
int main(int argc, char **argv) {
    int c;
    while ((c = getopt(argc, argv, "vq")) != -1) { verbose |= c == 'v'; quiet |= c == 'q'; }
    printf("%d %d %d %s\\n", optind, verbose, quiet, optarg ? optarg : "-");
    return lib() == 1 ? 0 : 1;
}
"""


@pytest.mark.slow
def test_an_executable_whose_libc_data_copies_lld_misaligns_is_built_as_pie(tmp_path):
    """xz on aarch64: zig's stub libc.so gives optind and optarg too small an alignment, so lld misplaces their
    copy relocations in a non-PIE program. crossbuild compiles objects -fPIE, so this needs an object the project
    compiles -fno-pie itself; the knowledge entry then switches the compiler wrapper to PIE (any build system,
    -fno-pie dropped), and the program links and runs under qemu."""
    project = _program_with_library(  # compiled, then linked, as automake does (one zig step links as PIE)
        tmp_path, "getopt", COPIES_LIBC_DATA, "Makefile",
        "all: libl.so test_getopt\nlibl.so: lib.c\n\t$(CC) -fPIC -shared -o $@ lib.c\n"
        "main.o: main.c\n\t$(CC) -O2 -fno-pie -c -o $@ main.c\n"
        "test_getopt: main.o libl.so\n\t$(CC) -o $@ main.o -L. -ll\n"
        "clean:\n\trm -f main.o libl.so test_getopt\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    failed = sqlite3.connect(tmp_path / "runs.db").execute(
        "SELECT message FROM tool_calls WHERE run_id=? AND name='run_command' AND ok=0", (out["run_id"],)).fetchall()
    assert "improper alignment for relocation" in failed[0][0]  # the first link failed as xz's did
    assert "applied copy-relocation-alignment: env CROSSBUILD_PIE=1" in out["message"]
    prog = next(a for a in out["verify"]["artifacts"] if a["path"] == "test_getopt")
    assert prog["kind"] == "executable" and prog["linkage"] == "dynamic"
    assert [(s["path"], s["passed"]) for s in out["verify"]["smoke_runs"]] == [("test_getopt", True)]
    assert out["verify"]["rebuild"]["ok"]  # the clean rebuild replays the command with the variable
    assert "make clean" in _commands(tmp_path / "runs.db", out["run_id"])  # main.o was compiled without -fPIE


@pytest.mark.slow
def test_a_plain_makefile_is_built_with_the_goals_debian_rules_names_and_installed(tmp_path):
    """http-parser's default goal runs its tests; debian/rules builds `package` and `library` instead. A plain
    Makefile's install (PREFIX or prefix, DESTDIR for a dependency) puts the library where a dependent finds it."""
    r, out = _build(tmp_path, "debian:http-parser", "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "from debian/rules: make package library" in out["message"]
    installed = tmp_path / "ws" / "install"
    assert (installed / "include" / "http_parser.h").is_file() and (installed / "lib" / "libhttp_parser.a").is_file()
    assert out["verify"]["rebuild"]["ok"]


CHECKS_WHO_OWNS_ROOT = r"""
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
int lib(void);
int main(void) {
    struct stat st;
    FILE *f;
    /* libgit2's util_tests: a path owned by root is not the current user's (it runs as an ordinary user) */
    if (stat("/", &st) != 0 || st.st_uid == geteuid()) { puts("/ is owned by the user running the tests"); return 1; }
    if (geteuid() == 0) { puts("running as root"); return 1; }
    if (!(f = fopen("written-by-test", "w"))) { puts("cannot write the build folder"); return 1; }
    fclose(f);
    return lib() == 1 ? 0 : 1;
}
"""


@pytest.mark.slow
@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="only a root crossbuild changes who runs the tests")
def test_test_programs_run_as_an_ordinary_user_when_crossbuild_runs_as_root(tmp_path):
    """sbuild builds as an ordinary user for this reason: suites assert that `/` is not theirs (libgit2) or that a
    file they made unreadable cannot be read. The dynamic program runs through qemu -L, which answers stat("/")
    with the loader's folder."""
    project = _program_with_library(
        tmp_path, "owner", CHECKS_WHO_OWNS_ROOT, "Makefile",
        "all: libl.so test_owner\nlibl.so: lib.c\n\t$(CC) -fPIC -shared -o $@ lib.c\n"
        "test_owner: main.c libl.so\n\t$(CC) -o $@ main.c -L. -ll\nclean:\n\trm -f libl.so test_owner\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    prog = next(a for a in out["verify"]["artifacts"] if a["path"] == "test_owner")
    assert prog["linkage"] == "dynamic"
    assert [(s["path"], s["passed"]) for s in out["verify"]["smoke_runs"]] == [("test_owner", True)]
    assert out["status"] == "verified"
    made = next((tmp_path / "ws").rglob("written-by-test")).stat()
    assert made.st_uid == 0  # on the host, what the test wrote stays the invoking user's


STARTS_ITSELF = r"""
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int lib(void);
int main(int argc, char **argv) {
    /* libuv's and glib's test runners start themselves (argv[0]) once per test */
    if (argc > 1 && strcmp(argv[1], "child") == 0) return lib() == 1 ? 42 : 1;
    pid_t pid = fork();
    if (pid == 0) { execl(argv[0], argv[0], "child", (char *)0); perror("execve()"); _exit(127); }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 42) {
        printf("the child did not run (status %d)\n", status);
        return 1;
    }
    puts("the child ran");
    return 0;
}
"""


@pytest.mark.slow
def test_a_test_program_that_starts_target_programs_gets_them_run_under_qemu_too(tmp_path):
    """qemu-user runs one program; the target programs it starts (a test runner starting itself per test) reached
    the kernel as ARM/AArch64 files, "Exec format error", and libuv1 was not verified on arm or riscv64. The test
    sandbox registers qemu for the target in its own user namespace (binfmt_misc), as qemu-user-binfmt does for a
    whole machine: a static child and a dynamic one (loader and shared library found) both run."""
    project = _program_with_library(
        tmp_path, "spawner", STARTS_ITSELF, "Makefile",
        "all: libl.so test_spawn test_spawn_static\nlibl.so: lib.c\n\t$(CC) -fPIC -shared -o $@ lib.c\n"
        "test_spawn: main.c libl.so\n\t$(CC) -o $@ main.c -L. -ll\n"
        "test_spawn_static: main.c lib.c\n\t$(CC) -static -o $@ main.c lib.c\n"
        "clean:\n\trm -f libl.so test_spawn test_spawn_static\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    linkage = {a["path"]: a.get("linkage") for a in out["verify"]["artifacts"]}
    assert linkage["test_spawn"] == "dynamic" and linkage["test_spawn_static"] == "static"
    runs = {s["path"]: s for s in out["verify"]["smoke_runs"]}
    assert {p: s["passed"] for p, s in runs.items()} == {"test_spawn": True, "test_spawn_static": True}, runs
    assert all("the child ran" in s["output_tail"] for s in runs.values())
    assert out["status"] == "verified"


READS_LIBC_DATA = r"""
#include <stdio.h>
#include <unistd.h>
extern char **environ;
int lib(void);
int main(void) {
    char **env = environ;
    /* zig's stub libc.so gives libc's data one address: copied into a non-PIE executable, they became one */
    if (stdout == stderr) { puts("stdout is stderr"); return 1; }
    optind = 5;
    if (environ != env) { puts("setting optind changed environ"); return 1; }
    return lib() == 1 ? 0 : 1;
}
"""


@pytest.mark.slow
def test_a_dynamic_program_that_reads_libcs_data_gets_its_own_streams(tmp_path):
    """CMake compiles and links in separate steps: objects compiled without -fPIE read stdout and stderr through
    copy relocations, and lld made one copy for both (and one for environ, optind and optarg), silently on
    riscv64 and arm (libuv's test runner crashed). Objects are compiled position-independent, as on Debian."""
    project = _program_with_library(
        tmp_path, "streams", READS_LIBC_DATA, "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.16)\nproject(streams C)\nadd_library(l SHARED lib.c)\n"
        "add_executable(test_streams main.c)\ntarget_link_libraries(test_streams l)\n"
        "install(TARGETS l test_streams)\n")
    r, out = _build(tmp_path, str(project), "riscv64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    prog = next(a for a in out["verify"]["artifacts"] if a["path"].endswith("test_streams"))
    assert prog["linkage"] == "dynamic"
    runs = out["verify"]["smoke_runs"]
    assert runs and all(s["passed"] for s in runs), runs
    assert out["status"] == "verified"


READS_ITS_FIXTURE = r"""
#include <stdio.h>
int main(void) {
    char got[16] = "";
    FILE *f = fopen("fixtures/answer.txt", "r");  /* relative: CTest runs it in the source folder */
    if (f) { fgets(got, sizeof got, f); fclose(f); }
    if (got[0] != '4' || got[1] != '2') { printf("mismatch: got '%s'\n", got); return 1; }
    return 0;
}
"""


@pytest.mark.slow
def test_a_test_program_runs_in_the_folder_ctest_runs_it_in(tmp_path):
    """libuv's tests open test/fixtures/... from the source folder, where its add_test(WORKING_DIRECTORY) runs
    them: CTest, the project's harness, runs them there (without a harness, the verifier's bare runs read the same
    folder from the CTestTestfile.cmake CMake wrote: test_ctest.py)."""
    project = tmp_path / "fixture"
    (project / "fixtures").mkdir(parents=True)
    (project / "fixtures" / "answer.txt").write_text("42\n")
    (project / "main.c").write_text(READS_ITS_FIXTURE)
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(fixture C)\nenable_testing()\n"
        "add_executable(test_fixture main.c)\n"
        "add_test(NAME fixture COMMAND test_fixture WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert [(s["path"], s["passed"]) for s in out["verify"]["smoke_runs"]] == [("fixture", True)]
    assert out["status"] == "verified"


@pytest.mark.slow
def test_a_test_program_that_fails_for_a_known_reason_ends_on_the_entry_that_names_it(tmp_path):
    """google-glog's logging tests expect their operator new to run for `{ new int; }`, which clang removes: the
    build is fine, the test fails, and the verdict says which knowledge-base entry explains it. This one fails on
    the target only, so the build for the build machine, made when the planner gives up, cannot excuse it: it stays
    failed, and says that it passes there."""
    project = tmp_path / "death"
    project.mkdir()
    (project / "test_death.c").write_text(
        '#include <stdio.h>\nint main(void){\n#ifdef __x86_64__\nreturn 0;\n#endif\n'
        'puts("Function didn\'t die (unexpected new): { new int; }");return 1;}\n')
    (project / "Makefile").write_text("all: test_death\ntest_death: test_death.c\n\t$(CC) -o $@ test_death.c\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out["status"] != "verified"
    assert "test-expects-unused-allocation-kept" in out["kb_attached"]
    shown = sqlite3.connect(tmp_path / "runs.db").execute(
        "SELECT message FROM tool_calls WHERE run_id=? AND name='finish' AND ok=0", (out["run_id"],)).fetchone()[0]
    assert "NOT VERIFIED" in shown and "clang removed the unused allocation" in shown
    [run] = out["verify"]["smoke_runs"]
    assert run["triage"] == "failed" and "it passes built for x86_64-linux-musl" in run["why"], run
    native = tmp_path / "ws" / ".xbuild" / "native" / "src" / "test_death"
    assert _elf_machine(native) == 62  # EM_X86_64: the program really was built for the build machine


@pytest.mark.slow
def test_a_program_a_test_script_starts_itself_runs_in_the_build_machine_check_too(tmp_path):
    """The test is a script that starts the program it is given, which links the project's shared library: built
    for x86_64 by the build-machine check, that program must start on this machine too (it has no musl loader in
    /lib), to fail the same way there and be the project's own failure. Only what the failing test's command names
    is built for it (clhep in the sample: the whole project again for one test, 15 minutes): the project's other
    programs are not."""
    project = _program_with_library(
        tmp_path, "golden", GOLDEN_MISMATCH, "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.16)\nproject(golden C)\nenable_testing()\n"
        "add_library(l SHARED lib.c)\nadd_executable(logging_unittest main.c)\n"
        "target_link_libraries(logging_unittest l)\nadd_executable(unrelated_tool tool.c)\n"
        "add_test(NAME golden COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/run.sh $<TARGET_FILE:logging_unittest>)\n"
        "install(TARGETS l unrelated_tool)\n")
    (project / "run.sh").write_text('#!/bin/sh\nexec "$1"\n')
    (project / "tool.c").write_text("int main(void){return 0;}\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out["status"] == "verified", out["message"]
    [run] = out["verify"]["smoke_runs"]
    assert run["triage"] == "project" and "fails the same way built for the build machine" in run["why"], run
    native = tmp_path / "ws" / ".xbuild" / "native" / "build"
    assert _elf_machine(native / "logging_unittest") == 62  # EM_X86_64
    assert not (native / "unrelated_tool").exists()  # built for the target, not for the check
    assert _elf_machine(tmp_path / "ws" / "build" / "unrelated_tool") == 183  # EM_AARCH64


def _plant_unbuildable_dependency(prefix: Path, monkeypatch) -> None:
    """PREFIX holds, as an earlier run's build_dependency leaves it, a dependency no source can build."""
    monkeypatch.setattr(deps, "deps_root", lambda: prefix.parent / "planted-cache")
    stage = prefix.parent / "planted-stage"
    for rel in ("include/unbuildable.h", "lib/libunbuildable.a"):
        (stage / str(prefix).lstrip("/") / rel).parent.mkdir(parents=True, exist_ok=True)
        (stage / str(prefix).lstrip("/") / rel).write_text("")
    deps.install(deps.store("riscv64-linux-musl", "crossbuild-unbuildable", None, stage, prefix=prefix,
                            build_s=1.0, run_id=None), prefix)


def _elf_machine(path):
    with open(path, "rb") as f:
        head = f.read(20)
    assert head[:4] == b"\x7fELF", path
    return int.from_bytes(head[18:20], "little")


SHARED_DEPENDENCY_WITH_A_SCRIPTED_TEST = {  # like libpng: a shared library, its test a script that starts a program
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(dyn C)\nenable_testing()\n"
                      "add_library(dyn SHARED dyn.c)\ntarget_include_directories(dyn PUBLIC "
                      "$<INSTALL_INTERFACE:include>)\nadd_executable(t_dyn t_dyn.c)\ntarget_link_libraries(t_dyn dyn)\n"
                      "add_test(NAME dyn COMMAND ${CMAKE_COMMAND} -DTEST_COMMAND=$<TARGET_FILE:t_dyn> "
                      "-P ${CMAKE_SOURCE_DIR}/run.cmake)\n"
                      "install(TARGETS dyn EXPORT dynTargets LIBRARY DESTINATION lib)\n"
                      "install(FILES dyn.h DESTINATION include)\n"
                      "install(EXPORT dynTargets FILE dynConfig.cmake DESTINATION lib/cmake/dyn)\n",
    "run.cmake": "execute_process(COMMAND ${TEST_COMMAND} RESULT_VARIABLE status)\n"
                 "if(NOT status EQUAL 0)\n  message(FATAL_ERROR \"Returned failed status ${status}!\")\nendif()\n",
    "dyn.h": "int dyn(void);\n",
    "dyn.c": "int dyn(void) { return 1; }\n",
    "t_dyn.c": "#include \"dyn.h\"\nint main(void) { return dyn() == 1 ? 0 : 1; }\n",
}


@pytest.mark.slow
def test_a_test_that_fails_the_same_way_built_for_the_build_machine_is_the_projects_own_failure(tmp_path,
                                                                                                monkeypatch):
    """The planner has no fix for a failing golden-file test and gives up; the judge then builds the same steps for
    x86_64, with the dependency the planner built built for x86_64 too, where it fails the same way: the failure is
    the project's, the build is verified with it not counted. The dependency is a shared library whose own test is
    a script that starts its program, as libpng's are (kissfft's check needed libpng): built for the check, its
    programs name crossbuild's musl loader, which this machine has not in /lib, so that test passes there too. The
    prefix also holds what an earlier run left there, which this build does not use and which cannot be built at
    all: the check must not wait for it."""
    _write_projects(tmp_path, {"dyn": SHARED_DEPENDENCY_WITH_A_SCRIPTED_TEST})
    project = _program_with_library(
        tmp_path, "golden", GOLDEN_MISMATCH, "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.16)\nproject(golden C)\nfind_package(dyn REQUIRED)\n"
        "add_library(l STATIC lib.c)\nadd_executable(logging_unittest main.c)\n"
        "target_link_libraries(logging_unittest l dyn)\ninstall(TARGETS l)\n")
    _plant_unbuildable_dependency(tmp_path / "prefix", monkeypatch)
    r, out = _build(tmp_path, str(project), "riscv64-linux-musl", "--prefix", str(tmp_path / "prefix"),
                    "--dep-source", f"dyn={tmp_path / 'dyn'}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified", out["message"]
    [run] = out["verify"]["smoke_runs"]
    assert run["triage"] == "project" and not run["passed"], run
    assert 'fails the same way built for the build machine (x86_64-linux-musl: exit 1, "golden mismatch' in run["why"]
    assert "logging_unittest fails the same way built for the build machine" in out["message"]
    native = tmp_path / "ws" / ".xbuild" / "native" / "build" / "logging_unittest"
    assert _elf_machine(native) == 62  # EM_X86_64
    assert _elf_machine(tmp_path / "ws" / "build" / "logging_unittest") == 243  # EM_RISCV: the product is untouched
    assert _elf_machine(tmp_path / "ws" / ".xbuild" / "native-prefix" / "lib" / "libdyn.so") == 62
    assert (tmp_path / "ws" / ".xbuild" / "native-prefix" / "include" / "dyn.h").is_file()
    assert not (tmp_path / "ws" / ".xbuild" / "native-prefix" / "include" / "unbuildable.h").exists()
    finishes = sqlite3.connect(tmp_path / "runs.db").execute(
        "SELECT raw_arguments FROM tool_calls WHERE run_id=? AND name='finish' ORDER BY id",
        (out["run_id"],)).fetchall()
    assert json.loads(finishes[-1][0])["status"] == "blocked"  # the planner's own fixes came first


@pytest.mark.slow
def test_an_assert_that_aborts_the_same_way_built_for_the_build_machine_is_the_projects_own_failure(tmp_path):
    """serd's test_node asserts on strtod's last digit and aborts, under qemu and natively alike. An abort right
    after the program's own failed check is that check failing, not a crash: the build-machine check runs it there,
    where the same assertion fails, so it is not counted and the project's other tests make the build `tested`."""
    project = _program_with_library(
        tmp_path, "precise", "int lib(void);\nint main(void){return lib() == 1 ? 0 : 1;}\n", "CMakeLists.txt",
        "cmake_minimum_required(VERSION 3.16)\nproject(precise C)\nenable_testing()\nadd_library(l STATIC lib.c)\n"
        "add_executable(t_lib main.c)\ntarget_link_libraries(t_lib l)\nadd_executable(t_strtod t_strtod.c)\n"
        "add_test(NAME lib COMMAND t_lib)\nadd_test(NAME lib_again COMMAND t_lib)\n"
        "add_test(NAME strtod COMMAND t_strtod)\ninstall(TARGETS l)\n")
    (project / "t_strtod.c").write_text(
        '#include <assert.h>\n#include <stdlib.h>\n'
        'int main(int argc, char **argv){double x = strtod(argc > 5 ? argv[1] : "0.1", 0);\n'
        'assert(x * 3 == 0.3);\nreturn 0;}\n')
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out["status"] == "verified", out["message"]
    runs = {run["path"]: run for run in out["verify"]["smoke_runs"]}
    assert runs["strtod"]["triage"] == "project" and not runs["strtod"]["passed"], runs["strtod"]
    assert ('fails the same way built for the build machine (x86_64-linux-musl: failed, "Assertion failed: x * 3 == '
            '0.3') in runs["strtod"]["why"], runs["strtod"]
    assert out["verify"]["proof"] == "tested", out["verify"]["proof_why"]
    native = tmp_path / "ws" / ".xbuild" / "native" / "build" / "t_strtod"
    assert _elf_machine(native) == 62  # EM_X86_64: the assertion really ran on the build machine too


@pytest.mark.slow
def test_two_fixes_that_each_add_c_flags_are_both_kept(tmp_path):
    """libdigidoc needed two of the knowledge base's C flags, one error after the other: the second fix's
    -DCMAKE_C_FLAGS replaced the first (CMake keeps the last -D given), the first error came back, and the planner
    gave up. Both flags reach the compiles, and the project's test runs on the target."""
    project = _project(tmp_path / "oldc", {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(oldc C)\nenable_testing()\n"
                          "add_library(oldc STATIC a.c b.c c.c)\nadd_executable(t_oldc t.c)\n"
                          "target_link_libraries(t_oldc oldc)\nadd_test(NAME oldc COMMAND t_oldc)\n"
                          "install(TARGETS oldc)\n",
        "a.c": "int a(void) { return helper() + 1; }\n",  # declared nowhere: C89's implicit declaration
        "b.c": "int helper(void);\nint b(void) { int (*f)(int) = helper; return f(0); }\n",  # wrong function type
        "c.c": "int helper(void) { return 1; }\n",
        "t.c": "int a(void);\nint b(void);\nint main(void) { return a() == 2 && b() == 1 ? 0 : 1; }\n",
    })
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl", "-j", "1")
    assert r.returncode == 0, out.get("message") or r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["proof"] == "tested", out["message"]
    configures = [c for c in _commands(tmp_path / "runs.db", out["run_id"]) if c.startswith("cmake -S")]
    flags = [c.count("-DCMAKE_C_FLAGS=") for c in configures]
    assert max(flags) == 1, configures  # one argument, holding both fixes' flags
    assert "implicit-function-declaration" in configures[-1] and "incompatible-function-pointer-types" in \
        configures[-1], configures[-1]


@pytest.mark.slow
def test_a_tests_folder_the_archive_left_out_gets_an_empty_stand_in_and_the_shipped_tests_run(tmp_path):
    """libgd2's release archive has no tests/gdmatrix, which tests/CMakeLists.txt still adds: configure stops. The
    missing folder gets an empty CMakeLists.txt in the workspace's copy, the tests that were shipped run on the
    target, and the user's source is untouched."""
    project = _project(tmp_path / "unshipped", {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(unshipped C)\nenable_testing()\n"
                          "add_library(unshipped STATIC lib.c)\ninstall(TARGETS unshipped)\nadd_subdirectory(tests)\n",
        "lib.c": "int lib(void) { return 5; }\n",
        "tests/CMakeLists.txt": "add_subdirectory(shipped)\nadd_subdirectory(gdmatrix)\n",
        "tests/shipped/CMakeLists.txt": "add_executable(t_shipped t.c)\ntarget_link_libraries(t_shipped unshipped)\n"
                                        "add_test(NAME shipped COMMAND t_shipped)\n",
        "tests/shipped/t.c": "int lib(void);\nint main(void) { return lib() == 5 ? 0 : 1; }\n",
    })
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, out.get("message") or r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["proof"] == "tested", out["message"]
    assert "test-folder-not-shipped" in out["message"], out["message"]
    assert [run["path"] for run in out["verify"]["smoke_runs"] if run["passed"]] == ["shipped"]
    assert (tmp_path / "ws" / "src" / "tests" / "gdmatrix" / "CMakeLists.txt").read_text().startswith("# crossbuild")
    assert not (project / "tests" / "gdmatrix").exists()


@pytest.mark.slow
def test_a_failed_verdict_never_turns_the_failing_tests_off(tmp_path):
    """The knowledge a verdict attaches may name a fix that drops tests (build-runs-target-binary turns a
    project's test option off, for builds that run them as a build step). Taken after the verdict, it removed the
    very program that failed and the build was "verified" without it (libuv1 on arm): after a verdict only fixes
    to how the same code is compiled are taken."""
    project = tmp_path / "hides"
    project.mkdir()
    (project / "test_helper.c").write_text(
        '#include <stdio.h>\nint main(void){puts("/bin/sh: 1: ./helper: Exec format error");return 1;}\n')
    (project / "lib.c").write_text("int lib(void){return 1;}\n")
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(hides C)\noption(HIDES_BUILD_TESTS \"tests\" ON)\n"
        "add_library(l STATIC lib.c)\nif(HIDES_BUILD_TESTS)\n  add_executable(test_helper test_helper.c)\n"
        "endif()\ninstall(TARGETS l)\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out["status"] != "verified", out["message"]
    assert "HIDES_BUILD_TESTS" not in out["message"] and "smoke run test_helper failed" in out["message"]


RESOURCE_PROJECT = """cmake_minimum_required(VERSION 3.16)
project(verinfo C)
add_library(verinfo SHARED verinfo.c)
if(MINGW)
  # as zlib does: the DLL's version resource compiled by hand, from a file a repacked source may lack
  add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/verinforc.obj
                     COMMAND ${CMAKE_RC_COMPILER} -I ${CMAKE_CURRENT_SOURCE_DIR} -o verinforc.obj
                             -i ${CMAKE_CURRENT_SOURCE_DIR}/win32/verinfo.rc)
  target_sources(verinfo PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/verinforc.obj)
endif()
install(TARGETS verinfo)
"""


@pytest.mark.slow
def test_a_dll_whose_resource_script_the_source_lacks_is_built_without_it_and_said(tmp_path):
    """Debian's zlib has no win32/ (its repack removed it), yet zlib's CMake build compiles win32/zlib1.rc for
    MinGW: libgit2, libpng and the rest could not get zlib for Windows. The resource is only version information."""
    project = tmp_path / "verinfo"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(RESOURCE_PROJECT)
    (project / "verinfo.c").write_text("int verinfo(void){return 1;}\n")
    # no test program, and crossbuild's probes are ELF's: only `built` can be proven, which the user accepts by name
    r, out = _build(tmp_path, str(project), "x86_64-windows-gnu", "--require", "built")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["proof"] == "built" and out["meets_requirement"]
    assert "empty stand-in for the missing verinfo.rc" in out["message"]
    assert (tmp_path / "ws" / "src" / "win32" / "verinfo.rc").is_file()
    assert not (project / "win32").exists()  # the user's own tree is untouched
    dll = next(a for a in out["verify"]["artifacts"] if a["path"].endswith(".dll"))
    assert dll["machine"] == "IMAGE_FILE_MACHINE_AMD64"


DLLIMPORT_HEADER = """#if defined(_WIN32) && !defined(DLI_STATIC)
# ifdef DLI_EXPORTS
#  define DLI_API __declspec(dllexport)
# else
#  define DLI_API __declspec(dllimport)
# endif
#else
# define DLI_API
#endif
DLI_API int dli(void);
"""


@pytest.mark.slow
def test_a_libtool_library_for_windows_is_a_dll_its_programs_can_import_from(tmp_path):
    """libtool builds a DLL only when `$LD --help` names auto-import; without it every libtool library for Windows
    was static, and libconfig's tests, which declare its functions dllimport as its users do, could not link."""
    project = tmp_path / "dli"
    (project / "lib").mkdir(parents=True)
    (project / "configure.ac").write_text("AC_INIT([dli], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\n"
                                          "AM_PROG_AR\nLT_INIT([win32-dll])\n"
                                          "AC_CONFIG_FILES([Makefile lib/Makefile])\nAC_OUTPUT\n")
    (project / "Makefile.am").write_text("SUBDIRS = lib\n")
    (project / "lib" / "Makefile.am").write_text(
        "lib_LTLIBRARIES = libdli.la\nlibdli_la_SOURCES = dli.c\nlibdli_la_CPPFLAGS = -DDLI_EXPORTS\n"
        "libdli_la_LDFLAGS = -no-undefined\ninclude_HEADERS = dli.h\n"
        "bin_PROGRAMS = usedli\nusedli_SOURCES = usedli.c\nusedli_LDADD = libdli.la\n")
    (project / "lib" / "dli.h").write_text(DLLIMPORT_HEADER)
    (project / "lib" / "dli.c").write_text('#include "dli.h"\nint dli(void){return 42;}\n')
    (project / "lib" / "usedli.c").write_text('#include "dli.h"\nint main(void){return dli() == 42 ? 0 : 1;}\n')
    # no test program, and crossbuild's probes are ELF's: only `built` can be proven, which the user accepts by name
    r, out = _build(tmp_path, str(project), "x86_64-windows-gnu", "--require", "built")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["proof"] == "built" and out["meets_requirement"]
    kinds = {a["path"].rsplit("/", 1)[-1]: a["kind"] for a in out["verify"]["artifacts"]}
    assert any(name.startswith("libdli") and name.endswith(".dll") and kind == "shared_library"
               for name, kind in kinds.items()), kinds
    assert any(name == "usedli.exe" for name in kinds), kinds


COUNTS_ITS_NEW = """#include <cstdio>
#include <cstdlib>
#include <new>
static int calls;
void* operator new(std::size_t n) {
    ++calls; void* p = std::malloc(n ? n : 1); if (!p) throw std::bad_alloc(); return p; }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
int main() {
  { new int; }  // as google-glog's logging tests do: the replaced operator new must run
  if (calls == 0) { std::puts("Function didn't die (unexpected new): { new int; }"); return 1; }
  return 0;
}
"""


@pytest.mark.slow
def test_a_fix_the_verdicts_knowledge_names_is_applied_and_the_project_built_again(tmp_path):
    """clang removes `{ new int; }` at -O1 and up, gcc keeps it: a test that counts on its operator new fails
    under the verifier although the build is fine. The verdict's knowledge entry names -fno-builtin; the planner
    builds again with it and says so."""
    project = tmp_path / "newcount"
    project.mkdir()
    (project / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(newcount CXX)\n"
                                            "add_executable(test_newcount test_newcount.cc)\n")
    (project / "test_newcount.cc").write_text(COUNTS_ITS_NEW)
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified"
    assert "test-expects-unused-allocation-kept: cmake_args -DCMAKE_CXX_FLAGS=-fno-builtin" in out["message"]
    assert "built again after the verdict" in out["message"]
    assert [(s["path"], s["passed"]) for s in out["verify"]["smoke_runs"]] == [("test_newcount", True)]
    finishes = sqlite3.connect(tmp_path / "runs.db").execute(
        "SELECT ok FROM tool_calls WHERE run_id=? AND name='finish' ORDER BY id", (out["run_id"],)).fetchall()
    assert [ok for (ok,) in finishes] == [0, 1]  # the first verdict failed: the fix is not taken blindly


TABLES_DEPENDENCY = {  # like pcre: a static library whose code reads its own exported table
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(tables C)\nadd_library(tables STATIC tables.c)\n"
                      "target_include_directories(tables PUBLIC $<INSTALL_INTERFACE:include>)\n"
                      "install(TARGETS tables EXPORT tablesTargets ARCHIVE DESTINATION lib)\n"
                      "install(FILES tables.h DESTINATION include)\n"
                      "install(EXPORT tablesTargets FILE tablesConfig.cmake DESTINATION lib/cmake/tables)\n",
    "tables.h": "extern int tables_lengths[4];\nint tables_sum(void);\n",
    "tables.c": "#include \"tables.h\"\nint tables_lengths[4] = {1, 2, 3, 4};  /* not const: never folded away */\n"
                "_Thread_local int tables_calls;  /* a PIE's TLS model is refused in a shared library */\n"
                "int tables_sum(void) {\n  int s = 0;\n  tables_calls++;\n"
                "  for (int i = 0; i < 4; i++) s += tables_lengths[i];\n  return s;\n}\n",
}

SHARED_LIBRARY_USING_TABLES = {  # like libgit2: its shared library links the dependency's static archive
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(usetables C)\nfind_package(tables REQUIRED)\n"
                      "add_library(usetables SHARED use.c)\ntarget_link_libraries(usetables PRIVATE tables)\n"
                      "add_executable(test_sum check.c)\ntarget_link_libraries(test_sum usetables)\n"
                      "enable_testing()\nadd_test(NAME sum COMMAND test_sum)\ninstall(TARGETS usetables test_sum)\n",
    "use.c": "#include <tables.h>\nint use_sum(void) { return 2 * tables_sum(); }\n",
    "check.c": "int use_sum(void);\nint main(void) { return use_sum() == 20 ? 0 : 1; }\n",
}


def _write_projects(tmp_path, projects):
    for name, files in projects.items():
        (tmp_path / name).mkdir(exist_ok=True)
        for file, text in files.items():
            (tmp_path / name / file).write_text(text)


@pytest.fixture(autouse=True)
def _forget_local_dependencies(tmp_path):
    """Dependencies built from this test's own folders (--dep-source) leave the shared cache afterwards."""
    yield
    forget_cached_dependencies(tmp_path)


@pytest.mark.slow
def test_a_shared_library_can_link_a_dependencys_static_archive(tmp_path):
    """libgit2 without Debian's hints: its libgit2.so linked the prefix's libpcre.a, whose objects were compiled
    without -fPIC/-fPIE, and lld asked to "recompile with -fPIC". Objects are now compiled -fPIE, which zig compiles
    as PIC code (GOT access to the library's own globals, TLS descriptors), so the archive links into a shared
    library. Fails when the wrapper's -fPIE default is taken out."""
    _write_projects(tmp_path, {"tables": TABLES_DEPENDENCY, "usetables": SHARED_LIBRARY_USING_TABLES})
    r, out = _build(tmp_path, str(tmp_path / "usetables"), "aarch64-linux-musl",
                    "--prefix", str(tmp_path / "prefix"), "--dep-source", f"tables={tmp_path / 'tables'}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    deps_calls = _dependency_calls(tmp_path / "runs.db", out["run_id"])
    assert deps_calls and deps_calls[0]["ok"], deps_calls
    assert (tmp_path / "prefix" / "lib" / "libtables.a").is_file()
    runs = out["verify"]["smoke_runs"]
    assert [s["passed"] for s in runs if s["path"] == "sum"] == [True], runs  # CTest's name for test_sum
    assert out["status"] == "verified"


@pytest.mark.slow
def test_an_edited_local_dependency_is_built_again_not_reused_from_the_cache(tmp_path):
    """--dep-source names a folder the user may change between builds: the cache follows what it holds."""
    _write_projects(tmp_path, {"tables": TABLES_DEPENDENCY, "usetables": SHARED_LIBRARY_USING_TABLES})
    dep = f"tables={tmp_path / 'tables'}"

    def build(name):
        run = tmp_path / name
        run.mkdir()
        r, out = _build(run, str(tmp_path / "usetables"), "aarch64-linux-musl", "--prefix", str(run / "prefix"),
                        "--dep-source", dep)  # a new prefix each time: the dependency comes from the shared cache
        assert out.get("status") == "verified", r.stdout[-3000:] + r.stderr[-2000:]
        return _dependency_calls(run / "runs.db", out["run_id"])[0]["data"]

    assert build("first")["cached"] is False
    assert build("same")["cached"] is True
    (tmp_path / "tables" / "tables.h").write_text(TABLES_DEPENDENCY["tables.h"] + "#define TABLES_EDITED 1\n")
    assert build("edited")["cached"] is False
    assert "TABLES_EDITED" in (tmp_path / "edited" / "prefix" / "include" / "tables.h").read_text()


GENERATED_TABLES_DEPENDENCY = {  # like sqlite3: its build compiles a generator with the build machine's compiler
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(gentables C)\n"
                      "add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/gen COMMAND $ENV{CC_FOR_BUILD} -o "
                      "${CMAKE_BINARY_DIR}/gen ${CMAKE_SOURCE_DIR}/gen.c DEPENDS gen.c)\n"
                      "add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/lengths.h COMMAND ${CMAKE_BINARY_DIR}/gen > "
                      "${CMAKE_BINARY_DIR}/lengths.h DEPENDS ${CMAKE_BINARY_DIR}/gen)\n"
                      "add_library(tables STATIC tables.c ${CMAKE_BINARY_DIR}/lengths.h)\n"
                      "target_include_directories(tables PRIVATE ${CMAKE_BINARY_DIR} PUBLIC "
                      "$<INSTALL_INTERFACE:include>)\n"
                      "install(TARGETS tables EXPORT tablesTargets ARCHIVE DESTINATION lib)\n"
                      "install(FILES tables.h DESTINATION include)\n"
                      "install(EXPORT tablesTargets FILE tablesConfig.cmake DESTINATION lib/cmake/tables)\n",
    "gen.c": "#include <stdio.h>\nint main(void) { puts(\"#define LENGTHS {1, 2, 3, 4}\"); return 0; }\n",
    "tables.h": TABLES_DEPENDENCY["tables.h"],
    "tables.c": "#include \"tables.h\"\n#include \"lengths.h\"\nint tables_lengths[4] = LENGTHS;\n"
                "int tables_sum(void) {\n  int s = 0;\n  for (int i = 0; i < 4; i++) s += tables_lengths[i];\n"
                "  return s;\n}\n",
}


@pytest.mark.slow
def test_a_dependency_whose_build_compiles_a_generator_for_the_build_machine_is_provided(tmp_path):
    """sqlite3 as a dependency (bzrtp's, in the sample): its lemon and mkkeywordhash, compiled by the build
    machine's compiler as recorded, were refused as products for the wrong machine, because a dependency installs
    into a staged prefix and the verdict looked for the install in the workspace's install/ alone."""
    _write_projects(tmp_path, {"gentables": GENERATED_TABLES_DEPENDENCY, "usetables": SHARED_LIBRARY_USING_TABLES})
    r, out = _build(tmp_path, str(tmp_path / "usetables"), "aarch64-linux-musl",
                    "--prefix", str(tmp_path / "prefix"), "--dep-source", f"tables={tmp_path / 'gentables'}")
    deps_calls = _dependency_calls(tmp_path / "runs.db", out["run_id"])
    assert deps_calls and deps_calls[0]["ok"], deps_calls
    assert out["status"] == "verified", r.stdout[-3000:] + r.stderr[-2000:]
    assert (tmp_path / "prefix" / "lib" / "libtables.a").is_file()
    assert [s["passed"] for s in out["verify"]["smoke_runs"] if s["path"] == "sum"] == [True]
    # the dependency's own verdict named the generator as a build-machine tool, not a product
    conn = sqlite3.connect(tmp_path / "runs.db")
    [dep_verdict] = [json.loads(v) for (v,) in conn.execute(
        "SELECT verify_json FROM runs WHERE source=? AND verify_json IS NOT NULL", (str(tmp_path / "gentables"),))]
    assert dep_verdict["build_tools"] == ["gen"], dep_verdict.get("reasons")




TAP_RUNNER = r"""
/* like libuv's uv_run_tests: each test in a child that abort()s when a check fails; the runner prints TAP, then
   the child's output prefixed "# " */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void adds(void) { if (1 + 1 != 2) abort(); }
static void connects(void) {
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(80)};
    int s = socket(AF_INET, SOCK_STREAM, 0);
    inet_pton(AF_INET, "192.0.2.1", &to.sin_addr);
    if (connect(s, (struct sockaddr *)&to, sizeof to) != 0) {
        fprintf(stderr, "connect: %%s\n", strerror(errno));
        abort();
    }
}
static void %(third)s(void) { %(third_body)s }

static int run(int n, const char *name, void (*test)(void)) {
    int out[2], status;
    char got[4096];
    ssize_t len, total = 0;
    pipe(out);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        dup2(out[1], 1); dup2(out[1], 2); close(out[0]);
        test();
        _exit(0);
    }
    close(out[1]);
    while (total < (ssize_t)sizeof got - 1 && (len = read(out[0], got + total, sizeof got - 1 - total)) > 0)
        total += len;
    got[total] = 0;
    waitpid(child, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("%%s %%d - %%s\n", ok ? "ok" : "not ok", n, name);
    for (char *line = strtok(got, "\n"); !ok && line; line = strtok(NULL, "\n")) printf("# %%s\n", line);
    return ok;
}

int main(void) {
    printf("1..3\n");
    int failed = !run(1, "adds", adds) + !run(2, "connects", connects) + !run(3, "%(third)s", %(third)s);
    return failed ? 1 : 0;
}
"""


@pytest.mark.slow
@pytest.mark.parametrize("third, body, verified", [
    ("subtracts", "if (2 - 1 != 1) abort();", True),
    ("multiplies", "if (2 * 3 != 7) { fprintf(stderr, \"2 * 3 is not 7\\n\"); abort(); }", False),
])
def test_a_tap_runners_failed_tests_are_triaged_one_by_one(tmp_path, third, body, verified):
    """The test whose child cannot connect (the sandbox has no network) aborts, which qemu reports as a crash;
    read test by test, that abort follows the environment's evidence and does not block, while a check that
    fails on its own still does, named in the verdict."""
    project = tmp_path / "taprunner"
    project.mkdir()
    (project / "runner.c").write_text(TAP_RUNNER % {"third": third, "third_body": body})
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(taprunner C)\nadd_executable(run_tests runner.c)\n"
        "enable_testing()\nadd_test(NAME all COMMAND run_tests)\ninstall(TARGETS run_tests)\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    run = next(s for s in out["verify"]["smoke_runs"] if s["path"] == "all")  # CTest's name for run_tests
    assert not run["passed"], run
    if verified:
        assert run["triage"] == "environment", run
        assert "2 - connects: the sandbox has no network: connect: Network unreachable (then aborted)" in run["why"]
        assert out["status"] == "verified", r.stdout[-3000:]
    else:
        assert run["triage"] == "crashed" and "not ok 3 - multiplies: 2 * 3 is not 7" in run["why"], run
        assert out["status"] != "verified"


GENERATOR_MAKEFILE = """\
# like sqlite3 as Debian patches it: the table generator is built for the build machine only on the Makefile's own
# cross-building branch, which nothing but the project's packaging sets
ifeq ($(CROSS_BUILDING),yes)
GEN = gen-for-build
else
GEN = gen
endif

all: table_check

gen-for-build: gen.c
\t$(CC_FOR_BUILD) -o $@ gen.c
gen: gen.c
\t$(CC) -o $@ gen.c
table.h: $(GEN)
\t./$(GEN) > $@
table_check: table_check.c table.h
\t$(CC) -o $@ table_check.c
install: table_check
\tmkdir -p $(DESTDIR)$(PREFIX)/bin && cp table_check $(DESTDIR)$(PREFIX)/bin/
clean:
\trm -f gen gen-for-build table.h table_check
"""


@pytest.mark.slow
def test_a_makefiles_own_cross_building_switch_is_turned_on(tmp_path):
    """Without the switch, the generator is compiled for the target and the shell reads its bytes as a script
    ("./gen: 1: Syntax error"); CC_FOR_BUILD from the knowledge base does not help, the rule uses $(CC)."""
    project = tmp_path / "gen"
    project.mkdir()
    (project / "Makefile").write_text(GENERATOR_MAKEFILE)
    (project / "gen.c").write_text('#include <stdio.h>\nint main(void){printf("#define ANSWER %d\\n", 6 * 7);}\n')
    (project / "table_check.c").write_text('#include "table.h"\nint main(void){return ANSWER == 42 ? 0 : 1;}\n')
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out.get("status") == "verified", r.stdout[-3000:] + r.stderr[-2000:]
    assert "CROSS_BUILDING=yes" in " ".join(_commands(tmp_path / "runs.db", out["run_id"]))
    runs = out["verify"]["smoke_runs"]
    assert [s["passed"] for s in runs if s["path"].endswith("table_check")] == [True], runs


@pytest.mark.slow
def test_a_test_programs_assert_is_compiled_in_and_checked_under_qemu(tmp_path):
    """CMake's Release adds -DNDEBUG, which turns assert() into nothing: a check program built so passes whatever
    it tests. The recipe builds Release at -O2 without it, as distributions do, so a failing assert refuses (a bug
    of the target's build only: the same check built for the build machine passes, so nothing excuses it)."""
    project = tmp_path / "asserts"
    project.mkdir()
    (project / "mul.c").write_text(  # the bug the check finds, on the target only
        "int mul(int a, int b) {\n#ifdef __aarch64__\n  return a + b;\n#else\n  return a * b;\n#endif\n}\n")
    (project / "check_mul.c").write_text(
        "#include <assert.h>\nint mul(int, int);\nint main(void) { assert(mul(2, 3) == 6); return 0; }\n")
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(asserts C)\nadd_library(mul mul.c)\n"
        "add_executable(check_mul check_mul.c)\ntarget_link_libraries(check_mul mul)\n"
        "enable_testing()\nadd_test(NAME mul COMMAND check_mul)\ninstall(TARGETS mul check_mul)\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    run = next(s for s in out["verify"]["smoke_runs"] if s["path"] == "mul")  # CTest's name for check_mul
    assert not run["passed"] and "Assertion failed: mul(2, 3) == 6" in run["why"], run
    assert out["status"] != "verified", r.stdout[-3000:]
    assert "it passes built for x86_64-linux-musl" in run["why"], run  # the abort was rechecked, and still blocks


LIBTOOL_MAKEFILE = """\
all: libgreet.la greet_check
libgreet.la: greet.c
\t$(LIBTOOL) --mode=compile --tag=CC $(CC) -c greet.c
\t$(LIBTOOL) --mode=link --tag=CC $(CC) -rpath /usr/lib -o libgreet.la greet.lo
greet_check: check.c libgreet.la
\t$(CC) -o greet_check check.c .libs/libgreet.a
install:
clean:
\trm -rf .libs *.lo *.o *.la greet_check
"""
ECHOED_HEADER_RULES = """\
#!/usr/bin/make -f
include /usr/share/dpkg/architecture.mk
GREET_H = greet-deb-multiarch.h
%:
\tdh $@
override_dh_auto_configure:
\techo "#define GREET_MULTIARCH \\"$(DEB_HOST_MULTIARCH)\\"" > $(GREET_H)
override_dh_auto_build:
\t$(MAKE) LIBTOOL=$(CURDIR)/debian/libtool/libtool
"""


@pytest.mark.slow
def test_a_makefile_that_runs_libtool_only_debian_rules_sets_gets_one_made_for_the_target(tmp_path):
    """lua5.4 as Debian patches it: the Makefile runs $(LIBTOOL), which only debian/rules sets (to a libtool it
    configures for the host architecture), and the code includes a header only debian/rules writes. The build
    machine's /usr/bin/libtool would link the shared library with its own gcc ("Relocations in generic ELF")."""
    project = tmp_path / "greet"
    (project / "debian").mkdir(parents=True)
    (project / "debian" / "rules").write_text(ECHOED_HEADER_RULES)
    (project / "Makefile").write_text(LIBTOOL_MAKEFILE)
    (project / "greet.c").write_text('#include "greet-deb-multiarch.h"\nconst char *greet(void) '
                                     '{ return GREET_MULTIARCH; }\n')
    (project / "check.c").write_text('#include <string.h>\nconst char *greet(void);\n'
                                     'int main(void) { return strcmp(greet(), "aarch64-linux-musl") != 0; }\n')
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out.get("status") == "verified", r.stdout[-3000:] + r.stderr[-2000:]
    commands = _commands(tmp_path / "runs.db", out["run_id"])
    assert any(c.startswith("./configure --host=aarch64-linux-musl") for c in commands), commands
    assert commands[-1].endswith("LIBTOOL=" + str(tmp_path / "ws" / "src" / "crossbuild-libtool" / "libtool"))
    assert "wrote src/greet-deb-multiarch.h as debian/rules does" in out["message"]
    shared = tmp_path / "ws" / "src" / ".libs" / "libgreet.so.0.0.0"
    assert shared.read_bytes()[18:20] == (183).to_bytes(2, "little")  # EM_AARCH64: linked by the target's linker
    runs = out["verify"]["smoke_runs"]
    assert [s["passed"] for s in runs if s["path"].endswith("greet_check")] == [True], runs
    assert out["verify"]["rebuild"]["ok"]


GLIBC_ONLY = r"""
#include <error.h>
#include <stdio.h>
int main(void) {
    /* glibc's error(3): musl has no error.h; error_message_count counts the messages printed */
    error(0, 0, "%s", "reported through glibc's error()");
    return error_message_count == 1 ? 0 : 1;
}
"""


@pytest.mark.slow
def test_a_musl_build_that_ends_on_what_musl_lacks_is_built_for_glibc_and_says_so(tmp_path):
    """The project includes glibc's error.h. For aarch64-linux-musl the build ends on musl-missing-glibc-header;
    crossbuild then builds the same machine's glibc target in a workspace beside it and says so in the outcome, and
    an evaluation does not count that as success on musl. --keep-libc stops at the musl failure."""
    project = tmp_path / "glibc-only"
    project.mkdir()
    (project / "error_check.c").write_text(GLIBC_ONLY)
    (project / "Makefile").write_text("all: error_check\nerror_check: error_check.c\n\t$(CC) -o $@ error_check.c\n"
                                      "install:\nclean:\n\trm -f error_check\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl", "--keep-libc")
    assert out["status"] == "failed" and out["libc_switch"] is None, r.stdout[-3000:]
    assert "musl-missing-glibc-header" in out["kb_attached"]
    assert not (tmp_path / "ws-aarch64-linux-gnu").exists()
    shutil.rmtree(tmp_path / "ws")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out["status"] == "verified", r.stdout[-3000:] + r.stderr[-2000:]
    switch = out["libc_switch"]
    assert (switch["from"], switch["to"], switch["because"]) == (
        "aarch64-linux-musl", "aarch64-linux-gnu", "musl-missing-glibc-header")
    assert out["message"].startswith("built for aarch64-linux-gnu, not aarch64-linux-musl: musl lacks what the "
                                     "project needs (musl-missing-glibc-header; run ")
    assert out["workspace"] == str(tmp_path / "ws-aarch64-linux-gnu")
    runs = [s["passed"] for s in out["verify"]["smoke_runs"] if s["path"].endswith("error_check")]
    assert runs == [True], out["verify"]["smoke_runs"]
    conn = sqlite3.connect(tmp_path / "runs.db")
    rows = conn.execute("SELECT target, status FROM runs ORDER BY started_at").fetchall()
    assert rows[-2:] == [("aarch64-linux-musl", "failed"), ("aarch64-linux-gnu", "verified")]


@pytest.mark.slow
def test_googletest_sources_debian_ships_under_usr_src_are_provided_and_the_tests_run(tmp_path):
    """fmtlib as Debian patches it: its tests compile googletest from /usr/src/googletest (Debian's googletest
    package), which this machine lacks. The planner provides that package from the archive, shown read-only at its
    path; the project compiles it with the cross compiler, and CTest runs the gtest program on the target."""
    project = tmp_path / "gt"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(gt CXX)\nenable_testing()\n"
        "add_library(twice twice.cc)\ninstall(TARGETS twice)\n"
        "add_subdirectory(/usr/src/googletest ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)\n"
        "add_executable(twice_test twice_test.cc)\ntarget_link_libraries(twice_test twice gtest_main)\n"
        "add_test(NAME twice_test COMMAND twice_test)\n")
    (project / "twice.cc").write_text("int twice(int x) { return 2 * x; }\n")
    (project / "twice_test.cc").write_text(
        "#include <gtest/gtest.h>\nint twice(int);\nTEST(Twice, Doubles) { EXPECT_EQ(twice(21), 42); }\n")
    from crossbuild.env import build_tools

    provided_before = "googletest" in {p.name for p in build_tools.installed()}  # the cache is the machine's
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    if not provided_before:
        assert "applied debian-source-folder-missing" in out["message"], out["message"]
    # the folder is the fix: googletest is never cross-built as a dependency for it (that took 20 minutes in CI)
    assert _dependency_calls(tmp_path / "runs.db", out["run_id"]) == []
    assert "googletest" in {p.name for p in build_tools.installed()}
    runs = out["verify"]["smoke_runs"]
    assert [(s["path"], s["passed"], s["harness"]) for s in runs] == [("twice_test", True, "ctest")], runs
    assert "[  PASSED  ] 1 test" in runs[0]["output_tail"]
    assert out["verify"]["proof"] == "tested"
    assert not Path("/usr/src/googletest").exists(), "the host is untouched"


RACY_MAKEFILE = """CC = gcc
all: stamp racy

stamp:
\tsleep 2 && touch stamp

racy: racy.c
\ttest -f stamp && $(CC) -o racy racy.c

install: racy
\tmkdir -p $(PREFIX)/bin && cp racy $(PREFIX)/bin/

.PHONY: all install
"""


@pytest.mark.slow
def test_a_makefile_whose_rules_race_in_parallel_is_built_again_serially(tmp_path):
    """`racy` needs `stamp` without saying so: with two jobs it fails (lua5.4's Makefile links one library twice at
    once), with one it builds. No knowledge-base entry names such a failure: the planner's last resort before
    giving up is the same step run serially, and the summary says so."""
    project = tmp_path / "racy"
    project.mkdir()
    (project / "Makefile").write_text(RACY_MAKEFILE)
    (project / "racy.c").write_text("int main(void) { return 0; }\n")
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl", "--jobs", "2")
    assert out["status"] == "verified", out["message"]
    assert "built again serially (-j1)" in out["message"]
    commands = _commands(tmp_path / "runs.db", out["run_id"])
    assert any(c.startswith("make -j2 ") for c in commands) and any(c.startswith("make -j1 ") for c in commands)


GADGET_PROJECT = """cmake_minimum_required(VERSION 3.16)
project(gadget C)
option(GADGET_SECURE_TRANSPORT "Talk to servers over TLS" ON)
add_executable(gadget main.c)
if(GADGET_SECURE_TRANSPORT AND NOT WIN32)
  include(cmake/tls.cmake)
  gadget_find_tls()
endif()
install(TARGETS gadget)
"""


@pytest.mark.slow
def test_a_feature_whose_switch_and_message_follow_no_convention_is_found_from_cmakes_trace(tmp_path):
    """No knowledge-base entry knows the message, and the switch is named after neither the module nor the word
    TLS the way the name patterns expect: the switch is read from the if() around the failing call."""
    project = _project(tmp_path / "gadget", {"CMakeLists.txt": GADGET_PROJECT, "cmake/tls.cmake": TLS_FILE})
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out["status"] == "verified", out["message"]
    assert "built without gadget-nonexistent-tls: GADGET_SECURE_TRANSPORT=OFF" in out["message"]
    calls = _dependency_calls(tmp_path / "runs.db", out["run_id"])
    assert [c["data"]["name"] for c in calls] == ["gadget-nonexistent-tls"] and not calls[0]["ok"]


FROBBER_MAKEFILE_IN = """CC = @CC@
CFLAGS = @CFLAGS@
prefix = @prefix@
srcdir = @srcdir@
all: frobber
frobber: $(srcdir)/main.c
\t$(CC) $(CFLAGS) -o $@ $(srcdir)/main.c
install: frobber
\tmkdir -p $(DESTDIR)$(prefix)/bin
\tcp frobber $(DESTDIR)$(prefix)/bin/
"""


@pytest.mark.slow
def test_an_autoconf_option_whose_error_names_nothing_is_found_from_config_log_and_the_script(tmp_path):
    """configure stops with a message that names neither the option nor a missing file; config.log gives the
    script's line, and the if() around it tests $with_frob: the build goes on --without-frob."""
    project = _project(tmp_path / "frobber", {"Makefile.in": FROBBER_MAKEFILE_IN})
    make_configure(project)
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out["status"] == "verified", out["message"]
    assert "built without frobnicate-nowhere.h: --without-frob" in out["message"]


@pytest.mark.slow
def test_a_release_whose_cmake_files_are_broken_is_built_with_the_configure_it_also_ships(tmp_path):
    """The CMake files name a folder the release left out; nothing fixes that, and the source's own autoconf
    configure works: the planner tries it, from a build folder without CMake's leftovers."""
    project = _project(tmp_path / "twosys", {
        "configure.ac": "AC_INIT([twosys], [1.0])\nAC_PROG_CC\nAC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
        "Makefile.in": FROBBER_MAKEFILE_IN,
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(twosys C)\nadd_subdirectory(generator)\n"
                          "add_executable(frobber main.c)\n"})
    subprocess.run(["autoconf"], cwd=project, check=True, capture_output=True, timeout=120)
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out["status"] == "verified", out["message"]
    assert "built with the source's autotools instead" in out["message"]
    commands = _commands(tmp_path / "runs.db", out["run_id"])
    assert commands.index("rm -rf build") < next(i for i, c in enumerate(commands) if "configure" in c)


@pytest.mark.slow
def test_a_meson_feature_option_that_requires_a_missing_dependency_is_turned_off(tmp_path):
    """Meson's error names the dependency; the option is found from the statement (`required: get_option()`) and
    the options file, not from its name."""
    project = _project(tmp_path / "gizmo", {
        "meson_options.txt": "option('secure', type : 'feature', value : 'enabled')\n",
        "meson.build": "project('gizmo', 'c')\ntls = dependency('gizmo-tls-nowhere', required : get_option('secure'))"
                       "\nexecutable('gizmo', 'main.c', install : true)\n"})
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl")
    assert out["status"] == "verified", out["message"]
    assert "built without gizmo-tls-nowhere: secure=disabled" in out["message"]


@pytest.mark.slow
def test_a_header_only_dependency_is_installed_into_the_prefix_and_found(tmp_path):
    """A header-only library (CMake config and a header, nothing to build): its own verdict refuses it for having
    no binary, but nothing built means nothing for the wrong machine; its installed files are what the consumer
    needs, and the consumer finds them and verifies."""
    _project(tmp_path / "hdr", {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(Hdr C)\nadd_library(hdr INTERFACE)\n"
                          "target_include_directories(hdr INTERFACE $<INSTALL_INTERFACE:include>)\n"
                          "install(TARGETS hdr EXPORT HdrTargets)\ninstall(FILES hdr.h DESTINATION include)\n"
                          "install(EXPORT HdrTargets NAMESPACE Hdr:: DESTINATION lib/cmake/Hdr FILE HdrConfig.cmake)\n",
        "hdr.h": "static inline int hdr_answer(void) { return 42; }\n"})
    (tmp_path / "hdr" / "main.c").unlink()
    project = _project(tmp_path / "uses", {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(uses C)\nfind_package(Hdr REQUIRED)\n"
                          "add_executable(uses main.c)\ntarget_link_libraries(uses Hdr::hdr)\ninstall(TARGETS uses)\n",
        "main.c": "#include <hdr.h>\nint main(void){return hdr_answer() == 42 ? 0 : 1;}\n"})
    r, out = _build(tmp_path, str(project), "aarch64-linux-musl", "--prefix", str(tmp_path / "prefix"),
                    "--dep-source", f"Hdr={tmp_path / 'hdr'}")
    assert out["status"] == "verified", out["message"]
    calls = _dependency_calls(tmp_path / "runs.db", out["run_id"])
    assert [c["data"]["name"] for c in calls] == ["Hdr"] and calls[0]["ok"]
    assert (tmp_path / "prefix" / "include" / "hdr.h").is_file()


TARGET_GENERATOR_MAKEFILE = """PREFIX ?= /usr/local
all: libtab.a
gen: gen.c
\t$(CC) -o gen gen.c
table.h: gen
\t./gen > table.h
tab.o: tab.c table.h
\t$(CC) -c tab.c -o tab.o
libtab.a: tab.o
\t$(AR) rc libtab.a tab.o
tab_test: tab_test.c libtab.a
\t$(CC) -o tab_test tab_test.c libtab.a
check: tab_test
\t./tab_test
install: all
\tmkdir -p $(PREFIX)/lib
\tcp libtab.a $(PREFIX)/lib/
clean:
\trm -f gen table.h tab.o libtab.a tab_test
"""


@pytest.mark.slow
def test_a_generator_the_build_compiles_for_the_target_and_runs_runs_under_the_emulator(tmp_path):
    """polyml's build runs its own freshly built program (`./polyimport`), compiled with $CC, which has no build
    machine's variant: `Exec format error`. The planner runs the build with the target's programs started under
    qemu (binfmt in the build's sandbox, as qemu-user-binfmt gives a machine), the table is generated by the target's
    code, and the clean rebuild replays it the same way. The generator writes its own machine into the table: the
    test on the target checks it came from there."""
    src = _project(tmp_path / "tab", {
        "Makefile": TARGET_GENERATOR_MAKEFILE,
        "gen.c": "#include <stdio.h>\nint main(void) {\n#if defined(__aarch64__)\n  puts(\"#define TAB_ARCH 64\");\n"
                 "#else\n  puts(\"#define TAB_ARCH 0\");\n#endif\n  return 0;\n}\n",
        "tab.c": "#include \"table.h\"\nint tab_arch(void) { return TAB_ARCH; }\n",
        "tab_test.c": "int tab_arch(void);\nint main(void) { return tab_arch() == 64 ? 0 : 1; }\n",
    })
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "CROSSBUILD_EMULATE_TARGET=1" in out["message"], out["message"]
    assert out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    assert out["verify"]["rebuild"]["ok"], out["verify"]["rebuild"]
    assert "TAB_ARCH 64" in (tmp_path / "ws" / "src" / "table.h").read_text()


# kissfft's psdpng: its first argument is the image to read, so `--version` is a file it cannot decode, and libpng's
# error handler aborts. IMAGE_TOOL does the same; ARM_ONLY crashes only where it was cross-compiled for.
IMAGE_TOOL = """#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argc > 1 ? argv[1] : "", "rb");
    if (!f) { fprintf(stderr, "imgtool error: Invalid IHDR data in %s\\n", argc > 1 ? argv[1] : "stdin"); abort(); }
    fclose(f);
    return 0;
}
"""
ARM_ONLY = """#include <stdio.h>
#include <stdlib.h>
int main(void) {
#ifdef __aarch64__
    fprintf(stderr, "imgtool error: Invalid IHDR data\\n"); abort();
#endif
    return 0;
}
"""


def _image_project(folder, tool: str):
    return _project(folder, {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.13)\nproject(img C)\n"
                          "add_library(img STATIC img.c)\nadd_executable(imgtool imgtool.c)\n"
                          "install(TARGETS img imgtool)\n",
        "img.c": "int img_width(void) { return 640; }\n",
        "imgtool.c": tool,
    })


@pytest.mark.slow
def test_a_product_that_crashes_on_its_probe_the_same_way_on_the_build_machine_is_not_counted(tmp_path):
    """The probe's `imgtool --version` aborts on the target: built for the build machine, the same program
    aborts the same way on the same invocation, so that invocation is not a harmless one for it. The probe is not
    counted, with that evidence, and the library's probe makes the build `exercised`."""
    r, out = _build(tmp_path, str(_image_project(tmp_path / "img", IMAGE_TOOL)), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    verdict = out["verify"]
    assert verdict["proof"] == "exercised", verdict.get("proof_why")
    probes = {p["path"]: p for p in verdict["probe_runs"]}
    tool = next(p for path, p in probes.items() if path.endswith("imgtool"))
    assert not tool["passed"] and "crashes the same way built for the build machine (x86_64-linux-musl: exit 134" \
        in tool["not_counted"], tool
    assert verdict["proof_counts"]["probes_not_counted"] == 1


@pytest.mark.slow
def test_a_product_that_crashes_only_on_the_target_still_blocks(tmp_path):
    r, out = _build(tmp_path, str(_image_project(tmp_path / "img", ARM_ONLY)), "aarch64-linux-musl")
    verdict = out["verify"]
    assert verdict["proof"] == "built", verdict.get("proof_why")
    tool = next(p for p in verdict["probe_runs"] if p["path"].endswith("imgtool"))
    assert not tool["passed"] and not tool["not_counted"] and "exits 0 otherwise" in tool["why"], tool
