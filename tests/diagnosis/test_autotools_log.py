"""Failed autoconf configures read from config.log and the script: a real script made by autoconf, run for real."""

from __future__ import annotations

import subprocess
from pathlib import Path

from crossbuild.diagnosis import autotools_log
from crossbuild.diagnosis.shell_blocks import enclosing_conditions, option_variables

# the wording names neither the option nor "not found": only the script's blocks tie it to --with-frob
CONFIGURE_AC = """AC_INIT([frobber], [1.0])
AC_PROG_CC
AC_ARG_WITH([frob], [AS_HELP_STRING([--without-frob], [build without the frob backend])], [], [with_frob=yes])
AC_ARG_ENABLE([docs], [AS_HELP_STRING([--enable-docs], [build the manual])])
if test "x$enable_docs" = xyes; then
  AC_MSG_NOTICE([docs])
fi
AS_IF([test "x$with_frob" != xno], [
  AC_CHECK_HEADER([frobnicate-nowhere.h], [],
                  [AC_MSG_ERROR([the frob backend is unusable on this system; if unsure read INSTALL])])
])
AC_CONFIG_FILES([Makefile])
AC_OUTPUT
"""


def make_configure(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "configure.ac").write_text(CONFIGURE_AC)
    subprocess.run(["autoconf"], cwd=folder, check=True, capture_output=True, timeout=120)


def test_the_error_its_check_and_the_option_around_it(tmp_path):
    make_configure(tmp_path / "src")
    (tmp_path / "build").mkdir()
    r = subprocess.run(["../src/configure"], cwd=tmp_path / "build", capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    d = autotools_log.read(tmp_path, "build/config.log", "src/configure")
    assert d is not None and d.record == "config.log"
    assert d.message == "the frob backend is unusable on this system; if unsure read INSTALL"
    assert d.where.startswith("src/configure:") and "as_fn_error" in d.failed
    assert d.missing == ("frobnicate-nowhere.h",)
    assert [(s.name, s.arg) for s in d.switches] == [("--with-frob", "--without-frob")]  # not --enable-docs
    assert "with_frob" in d.switches[0].why


def test_without_an_error_in_config_log_there_is_no_diagnosis(tmp_path):
    (tmp_path / "config.log").write_text("configure:10: checking for gcc\nconfigure:11: result: gcc\n")
    assert autotools_log.read(tmp_path, "config.log", "configure") is None


def test_blocks_skip_here_documents_and_quoted_words_and_keep_case_subjects():
    script = """\
cat <<_ACEOF
  if you want fi and case here
_ACEOF
if test "x$with_ssl" != xno; then
  echo "if this fi then"
  case $enable_gnutls in #(
  yes) :
    if test "$have_x" = yes; then :; fi
    as_fn_error $? "no TLS"
    ;;
  esac
elif test "$with_ssl" = auto
then
  :
fi
"""
    at_error = [c for c in enclosing_conditions(script, 9)]
    assert [(c.line, c.held) for c in at_error] == [(4, True), (6, True)]
    assert [v for c in at_error for v in option_variables(c.text)] == [("with", "ssl"), ("enable", "gnutls")]
    assert [(c.line, c.held) for c in enclosing_conditions(script, 13)] == [(4, False), (12, True)]


def test_an_option_the_condition_shows_already_off_is_no_remedy(tmp_path):
    script = ('# Check whether --with-included-zlib was given.\nif test ${with_included_zlib+y}\nthen :\n'
              '  withval=$with_included_zlib;\nfi\n'
              'if test "x$with_included_zlib" = xno; then\n  as_fn_error $? "zlib missing"\nfi\n'
              'case $with_sysroot in #(\n  /home/user/.ssh) :\n    ;;\n  *) as_fn_error $? "x" ;;\nesac\n')
    (tmp_path / "configure").write_text(script)
    for line in (7, 12):
        (tmp_path / "config.log").write_text(f"configure:{line}: error: in `/w':\nconfigure:{line}: error: stop\n")
        d = autotools_log.read(tmp_path, "config.log", "configure")
        assert d is not None and d.message == "stop" and d.switches == ()  # already no; a path is never a value


def test_only_the_check_just_before_the_error_names_what_was_missing(tmp_path):
    (tmp_path / "configure").write_text("#!/bin/sh\n")
    (tmp_path / "config.log").write_text(
        "configure:5: checking for sys/nosuchthing.h\nconfigure:6: result: no\n"
        "configure:7: checking whether mmap works\nconfigure:8: result: yes\n"
        "configure:9: error: cannot run test program while cross compiling\n")
    d = autotools_log.read(tmp_path, "config.log", "configure")
    assert d is not None and d.missing == ()


# AM_PATH_SDL2's way, and AC_PATH_PROG's: checks that fail one after another before the error, none named by it
PROGRAMS_AC = """AC_INIT([framer], [1.0])
AC_PROG_CC
PKG_CONFIG=false
AC_MSG_CHECKING([for frob-nowhere >= 1.2])
AS_IF([AC_RUN_LOG([$PKG_CONFIG --exists --print-errors "frob-nowhere >= 1.2"])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])])
AC_PATH_PROG([FROB_CONFIG], [frob-nowhere-config], [no])
AC_MSG_CHECKING([for FROB - version >= 1.2])
AC_MSG_RESULT([no])
AC_PATH_PROG([MANPAGER], [manpager-nowhere])
AS_IF([test -z "$MANPAGER" || test "x$with_frob" = xcheck],
      [AC_MSG_ERROR([*** FROB 1.2 or the manual's tool was not found!])])
AC_OUTPUT
"""


def test_each_failed_check_before_the_error_names_what_is_missing(tmp_path):
    """Modules and headers become dependencies; a program looked for on PATH becomes a program, but not a
    dependency's own -config script (the target's comes with the dependency)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "configure.ac").write_text(PROGRAMS_AC)
    subprocess.run(["autoconf"], cwd=tmp_path / "src", check=True, capture_output=True, timeout=120)
    (tmp_path / "build").mkdir()
    r = subprocess.run(["../src/configure"], cwd=tmp_path / "build", capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "manual's tool was not found" in r.stderr
    d = autotools_log.read(tmp_path, "build/config.log", "src/configure")
    assert d is not None and d.missing == ("frob-nowhere",)
    assert d.programs == ("manpager-nowhere",)


def test_a_failed_function_check_is_not_a_program(tmp_path):
    """`checking for ioperm... no` compiled and linked a test: a function the C library lacks, not a program."""
    (tmp_path / "config.log").write_text(
        "configure:10: checking for ioperm\n"
        "configure:11: zcc -o conftest conftest.c >&5\n"
        "ld.lld: error: undefined symbol: ioperm\n"
        "configure:11: $? = 1\n"
        "configure:12: result: no\n"
        "configure:20: error: ioperm is needed\n")
    (tmp_path / "configure").write_text("\n" * 30)
    d = autotools_log.read(tmp_path, "config.log", "configure")
    assert d is not None and d.programs == () and d.missing == ()
