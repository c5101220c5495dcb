"""`crossbuild build` with the offline planner on autotools sources, as a user runs it: what stops `autoreconf -fi`
(the sources that ship no configure script, and releases made with another automake), and what configure finds
that the target cannot give."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from crossbuild.env import build_tools
from crossbuild.env import dependency_cache as deps
from crossbuild.foundation import host, safefs
from tests.agent.test_planner_builds import _build, _dependency_calls, _project


@pytest.mark.slow
def test_automake_wanting_a_changelog_the_release_lacks_gets_an_empty_one_as_debian_gives_it(tmp_path):
    """No `foreign` in AM_INIT_AUTOMAKE: automake holds the project to the GNU standards and refuses to run without
    a top-level ChangeLog (`Makefile.am: error: required file './ChangeLog' not found`); Debian's rules `touch
    ChangeLog` for such a release. The planner writes the empty file and builds; the user's source is untouched."""
    src = _project(tmp_path / "gnu", {
        "configure.ac": "AC_INIT([gnu], [1.0])\nAM_INIT_AUTOMAKE\nAC_PROG_CC\nAC_PROG_RANLIB\n"
                        "AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
        "Makefile.am": "lib_LIBRARIES = libgnu.a\nlibgnu_a_SOURCES = gnu.c\ncheck_PROGRAMS = gnu_test\n"
                       "gnu_test_SOURCES = gnu_test.c\ngnu_test_LDADD = libgnu.a\nTESTS = gnu_test\n",
        "gnu.c": "int gnu(void) { return 42; }\n",
        "gnu_test.c": "int gnu(void);\nint main(void) { return gnu() == 42 ? 0 : 1; }\n",
        "NEWS": "", "README": "gnu\n", "AUTHORS": "", "COPYING": "",
    })
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    assert "automake-gnu-files-missing" in out["message"], out["message"]
    assert (tmp_path / "ws" / "src" / "ChangeLog").read_text() == ""
    assert not (src / "ChangeLog").exists()


@pytest.mark.slow
def test_a_release_another_automake_made_is_made_again_when_make_reruns_automake(tmp_path):
    """A release whose aclocal.m4 automake 1.16.1 made, and whose Makefile.am a patch left newer than Makefile.in:
    make's own rule reruns automake, and the automake here refuses the old aclocal.m4 (`error: version mismatch`).
    The planner makes the build system again with autoreconf -fi, as Debian's dh_autoreconf does, configures again,
    and the project's test runs on the target."""
    src = _project(tmp_path / "old", {
        "configure.ac": "AC_INIT([old], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\nAC_PROG_RANLIB\n"
                        "AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
        "Makefile.am": "lib_LIBRARIES = libold.a\nlibold_a_SOURCES = old.c\ncheck_PROGRAMS = old_test\n"
                       "old_test_SOURCES = old_test.c\nold_test_LDADD = libold.a\nTESTS = old_test\n",
        "old.c": "int old(void) { return 7; }\n",
        "old_test.c": "int old(void);\nint main(void) { return old() == 7 ? 0 : 1; }\n",
    })
    subprocess.run(["autoreconf", "-fi"], cwd=src, check=True, capture_output=True)
    version = re.search(r"AM_AUTOMAKE_VERSION\(\[([\d.]+)\]\)", (src / "aclocal.m4").read_text())[1]
    assert version != "1.16.1"
    # what the same release made with automake 1.16.1 says; then its files dated as a tarball, Makefile.am newer
    (src / "aclocal.m4").write_text((src / "aclocal.m4").read_text().replace(version, "1.16.1"))
    shutil.rmtree(src / "autom4te.cache")
    for path in src.rglob("*"):
        os.utime(path, (1_500_000_000, 1_500_000_000))
    (src / "Makefile.am").write_text((src / "Makefile.am").read_text() + "# a patch\n")
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    assert "automake-version-mismatch" in out["message"], out["message"]
    assert f"AM_AUTOMAKE_VERSION([{version}])" in (tmp_path / "ws" / "src" / "aclocal.m4").read_text()
    assert "1.16.1" in (src / "aclocal.m4").read_text()  # the user's source is untouched


@pytest.mark.slow
def test_a_configure_made_for_a_folder_the_source_lacks_is_made_again_from_the_patched_configure_ac(tmp_path):
    """gmp's Debian tarball (+dfsg) has no doc/: Debian's patch drops doc/Makefile from configure.ac and Makefile.am,
    and its rules run dh_autoreconf. The shipped configure still lists doc/Makefile, so config.status stops
    (`cannot find input file: doc/Makefile.in`). The planner makes the build system again from the patched
    configure.ac, as Debian does, and the project's test runs on the target."""
    src = _project(tmp_path / "stripped", {
        "configure.ac": "AC_INIT([stripped], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\nAC_PROG_RANLIB\n"
                        "AC_CONFIG_FILES([Makefile doc/Makefile])\nAC_OUTPUT\n",
        "Makefile.am": "SUBDIRS = doc\nlib_LIBRARIES = libstripped.a\nlibstripped_a_SOURCES = stripped.c\n"
                       "check_PROGRAMS = stripped_test\nstripped_test_SOURCES = stripped_test.c\n"
                       "stripped_test_LDADD = libstripped.a\nTESTS = stripped_test\n",
        "doc/Makefile.am": "",
        "stripped.c": "int stripped(void) { return 3; }\n",
        "stripped_test.c": "int stripped(void);\nint main(void) { return stripped() == 3 ? 0 : 1; }\n",
    })
    subprocess.run(["autoreconf", "-fi"], cwd=src, check=True, capture_output=True)
    shutil.rmtree(src / "doc")  # the archive's copy: the folder stripped, configure as the release made it
    shutil.rmtree(src / "autom4te.cache")
    for name in ("configure.ac", "Makefile.am"):  # the patch
        (src / name).write_text((src / name).read_text().replace(" doc/Makefile", "").replace("SUBDIRS = doc\n", ""))
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    assert "configure-input-file-missing" in out["message"], out["message"]
    assert "doc/Makefile" not in (tmp_path / "ws" / "src" / "configure").read_text()
    assert "doc/Makefile" in (src / "configure").read_text()  # the user's source is untouched


@pytest.mark.slow
def test_an_autotest_suite_is_listed_not_run_when_the_check_programs_are_built(tmp_path):
    """The autoconf manual's autotest rules (`check-local: ... $(SHELL) '$(TESTSUITE)' $(TESTSUITEFLAGS)`) run the
    whole suite on the build machine whatever TESTS says: building the check programs lists it instead (libtool's
    ran for over 20 minutes there), and the project's test runs on the target."""
    src = _project(tmp_path / "suited", {
        "configure.ac": "AC_INIT([suited], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\nAC_PROG_RANLIB\n"
                        "AC_CONFIG_TESTDIR([tests])\nAC_CONFIG_FILES([Makefile tests/Makefile tests/atlocal])\n"
                        "AC_OUTPUT\n",
        "Makefile.am": "SUBDIRS = . tests\nlib_LIBRARIES = libsuited.a\nlibsuited_a_SOURCES = suited.c\n"
                       "check_PROGRAMS = suited_test\nsuited_test_SOURCES = suited_test.c\n"
                       "suited_test_LDADD = libsuited.a\nTESTS = suited_test\n",
        "suited.c": "int suited(void) { return 3; }\n",
        "suited_test.c": "int suited(void);\nint main(void) { return suited() == 3 ? 0 : 1; }\n",
        "tests/Makefile.am": "TESTSUITE = $(srcdir)/testsuite\nEXTRA_DIST = testsuite.at package.m4 $(TESTSUITE)\n"
                             "check-local: atconfig atlocal $(TESTSUITE)\n"
                             "\t$(SHELL) '$(TESTSUITE)' $(TESTSUITEFLAGS)\n",
        "tests/atlocal.in": "",
        "tests/testsuite.at": "AT_INIT\nAT_SETUP([the suite ran])\nAT_CHECK([echo ran], [0], [ran\n])\nAT_CLEANUP\n",
        "tests/package.m4": "".join(f"m4_define([AT_PACKAGE_{k}], [{v}])\n" for k, v in (
            ("NAME", "suited"), ("TARNAME", "suited"), ("VERSION", "1.0"), ("STRING", "suited 1.0"),
            ("BUGREPORT", ""))),
    })
    # a release: its testsuite and configure made here, as `make dist` ships them
    subprocess.run(["autom4te", "-l", "autotest", "-I", ".", "-o", "testsuite", "testsuite.at"], cwd=src / "tests",
                   check=True, capture_output=True)
    subprocess.run(["autoreconf", "-fi"], cwd=src, check=True, capture_output=True)
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    logs = tmp_path / "ws" / ".xbuild" / "logs"
    check = [f.read_text() for f in sorted(logs.glob("*-make.log")) if "TESTSUITEFLAGS=--list" in f.read_text()]
    assert check and "testsuite.at:2" in check[0] and "the suite ran" in check[0], [f.name for f in logs.iterdir()]
    assert "test was successful" not in check[0] and "Test results" not in check[0]


@pytest.mark.slow
def test_x86_port_io_that_musls_header_offers_elsewhere_is_configured_away(tmp_path):
    """musl installs <sys/io.h> on aarch64 too, and defines ioperm/outb only on x86: a project that tests for the
    header takes its port-I/O path and its program fails to link (`undefined reference: ioperm`). Configured with
    the header absent, as glibc has it there, it takes its other path and its test runs on the target."""
    src = _project(tmp_path / "pio", {
        "configure.ac": "AC_INIT([pio], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\nAC_PROG_RANLIB\n"
                        "AC_CHECK_HEADERS([sys/io.h])\nAC_CONFIG_HEADERS([config.h])\n"
                        "AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
        "Makefile.am": "lib_LIBRARIES = libpio.a\nlibpio_a_SOURCES = pio.c\ncheck_PROGRAMS = pio_test\n"
                       "pio_test_SOURCES = pio_test.c\npio_test_LDADD = libpio.a\nTESTS = pio_test\n",
        "pio.c": "#include \"config.h\"\n#ifdef HAVE_SYS_IO_H\n#include <sys/io.h>\n"
                 "int pio_open(void) { return ioperm(0x378, 3, 1); }\n"
                 "#else\nint pio_open(void) { return 0; } /* ppdev */\n#endif\n",
        "pio_test.c": "int pio_open(void);\nint main(void) { return pio_open(); }\n",
    })
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["status"] == "verified" and out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    assert "ac_cv_header_sys_io_h=no" in out["message"], out["message"]


@pytest.mark.slow
def test_boost_headers_a_configure_check_requires_come_from_debians_headers_only_package(tmp_path):
    """librevenge: `AC_CHECK_HEADERS(boost/algorithm/string.hpp ..., [], [AC_MSG_ERROR(...)])`. The header resolves
    through Debian's Contents index to boost1.74, whose source builds with Boost's own b2, which the planner cannot
    drive; its -dev package (libboost1.74-dev) holds headers and no library, so those are taken into the prefix
    instead (nothing to compile for the target), and the project configures, builds and tests on the target."""
    src = _project(tmp_path / "rev", {
        "configure.ac": "AC_INIT([rev], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CXX\nAC_PROG_RANLIB\n"
                        "AC_LANG([C++])\nAC_CHECK_HEADERS([boost/algorithm/string.hpp], [],\n"
                        "  [AC_MSG_ERROR([Required boost headers not found.])])\n"
                        "AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
        "Makefile.am": "lib_LIBRARIES = librev.a\nlibrev_a_SOURCES = rev.cpp\ncheck_PROGRAMS = rev_test\n"
                       "rev_test_SOURCES = rev_test.cpp\nrev_test_LDADD = librev.a\nTESTS = rev_test\n",
        "rev.cpp": "#include <boost/algorithm/string.hpp>\n#include <string>\n"
                   "std::string rev_upper(std::string s) { boost::algorithm::to_upper(s); return s; }\n",
        "rev_test.cpp": "#include <string>\nstd::string rev_upper(std::string);\n"
                        "int main() { return rev_upper(\"abc\") == \"ABC\" ? 0 : 1; }\n",
    })
    for entry in deps.list_cached():  # the path under test, not an earlier run's cached headers
        if entry.source == "boost1.74" and entry.target == "aarch64-linux-musl":
            safefs.remove_tree(entry.dir.parent, entry.dir.name)
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl", "--prefix", str(tmp_path / "prefix"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    assert "configure-header-check-failed" in out["message"], out["message"]
    [boost] = _dependency_calls(tmp_path / "runs.db", out["run_id"])
    assert "headers taken from Debian's libboost1.74-dev, which holds no library" in boost["message"], boost
    assert (tmp_path / "prefix" / "include" / "boost" / "algorithm" / "string.hpp").is_file()
    assert not list((tmp_path / "prefix").rglob("*.so*")) and not list((tmp_path / "prefix").rglob("*.a"))


@pytest.mark.slow
def test_a_program_configure_looked_for_before_its_own_error_is_provided(tmp_path):
    """openpace's configure: `AC_PATH_PROG(HELP2MAN, help2man)`, then its own AC_MSG_ERROR ("Need help2man to
    generate man page ..."), which names the program in words no pattern knows. config.log's failed check before
    the error names it; the planner provides it for the build machine, and the build runs it."""
    shutil.rmtree(build_tools.root() / "help2man", ignore_errors=True)  # provided by this run, not found cached
    src = _project(tmp_path / "manned", {
        "configure.ac": "AC_INIT([manned], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\nAC_PROG_RANLIB\n"
                        "AC_PATH_PROG([HELP2MAN], [help2man])\n"
                        "AS_IF([test -z \"$HELP2MAN\"], [AC_MSG_ERROR([Need it to generate man pages])])\n"
                        "AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
        "Makefile.am": "lib_LIBRARIES = libman.a\nlibman_a_SOURCES = man.c\ncheck_PROGRAMS = man_test\n"
                       "man_test_SOURCES = man_test.c\nman_test_LDADD = libman.a\nTESTS = man_test\n"
                       "all-local:\n\t$(HELP2MAN) --version > help2man-version.txt\n",
        "man.c": "int man(void) { return 7; }\n",
        "man_test.c": "int man(void);\nint main(void) { return man() == 7 ? 0 : 1; }\n",
    })
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "looked for help2man on the build machine" in out["message"], out["message"]
    assert out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    assert "help2man" in (tmp_path / "ws" / "build" / "help2man-version.txt").read_text()


@pytest.mark.slow
def test_a_perl_module_configure_requires_is_provided_for_the_build_machines_perl(tmp_path):
    """autoconf-archive's AX_PROG_PERL_MODULES: `checking for perl module YAML::Tiny... no`, then the project's own
    error. The module (Debian's libyaml-tiny-perl) is unpacked for the build machine and found through PERL5LIB by
    configure and by the build's own perl."""
    with host.exclusive(build_tools.root() / ".lock"):  # provided by this run, not found cached
        (build_tools.root() / "libyaml-tiny-perl" / ".crossbuild-complete").unlink(missing_ok=True)
    check = ('AC_PATH_PROG([PERL], [perl])\nAC_MSG_CHECKING([for perl module YAML::Tiny])\n'
             'if $PERL -e "use YAML::Tiny; 1" >/dev/null 2>&1; then\n  AC_MSG_RESULT([ok])\nelse\n'
             '  AC_MSG_RESULT([no])\n  AC_MSG_ERROR([the table generator needs its Perl modules])\nfi\n')
    src = _project(tmp_path / "tabled", {
        "configure.ac": "AC_INIT([tabled], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\nAC_PROG_RANLIB\n"
                        + check + "AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
        "Makefile.am": "lib_LIBRARIES = libtab.a\nlibtab_a_SOURCES = tab.c\ncheck_PROGRAMS = tab_test\n"
                       "tab_test_SOURCES = tab_test.c\ntab_test_LDADD = libtab.a\nTESTS = tab_test\n"
                       "all-local:\n\t$(PERL) -MYAML::Tiny -e 'print \"$$YAML::Tiny::VERSION\\n\"' > yaml-tiny.txt\n",
        "tab.c": "int tab(void) { return 3; }\n",
        "tab_test.c": "int tab(void);\nint main(void) { return tab() == 3 ? 0 : 1; }\n",
    })
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "looked for YAML::Tiny on the build machine" in out["message"], out["message"]
    assert out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    assert (tmp_path / "ws" / "build" / "yaml-tiny.txt").read_text().strip()[:1].isdigit()


@pytest.mark.slow
def test_a_configure_that_stops_at_one_optional_feature_after_another_gets_a_round_for_each(tmp_path):
    """avahi's configure stops at one optional dependency after another (the distribution, glib, gobject, GTK 3,
    D-Bus, gdbm): each round of fixes moves it on to a failure not seen before. Nine such features, each turned
    off by the switch around its check, need more rounds than a build that keeps failing the same way gets."""
    features = "".join(
        f"AC_ARG_WITH([frob{n}], [AS_HELP_STRING([--without-frob{n}], [no frob{n}])], [], [with_frob{n}=yes])\n"
        f"AS_IF([test \"x$with_frob{n}\" != xno], [AC_CHECK_HEADER([frob{n}-nowhere.h], [],\n"
        f"  [AC_MSG_ERROR([the frob{n} backend is unusable on this system])])])\n" for n in range(1, 10))
    src = _project(tmp_path / "frobs", {
        "configure.ac": f"AC_INIT([frobs], [1.0])\nAM_INIT_AUTOMAKE([foreign])\nAC_PROG_CC\nAC_PROG_RANLIB\n"
                        f"{features}AC_CONFIG_FILES([Makefile])\nAC_OUTPUT\n",
        "Makefile.am": "lib_LIBRARIES = libfrobs.a\nlibfrobs_a_SOURCES = frobs.c\ncheck_PROGRAMS = frobs_test\n"
                       "frobs_test_SOURCES = frobs_test.c\nfrobs_test_LDADD = libfrobs.a\nTESTS = frobs_test\n",
        "frobs.c": "int frobs(void) { return 9; }\n",
        "frobs_test.c": "int frobs(void);\nint main(void) { return frobs() == 9 ? 0 : 1; }\n",
    })
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert r.returncode == 0, out.get("message", "") + r.stderr[-2000:]
    assert out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    configures = [line for line in (tmp_path / "ws" / ".xbuild" / "commands.jsonl").read_text().splitlines()
                  if "/configure" in line]
    assert all(f"--without-frob{n}" in configures[-1] for n in range(1, 10)), configures[-1]
