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


# AM_PATH_SDL2's way: checks that fail one after another before the error, the last naming nothing
SDL_LIKE_AC = """AC_INIT([framer], [1.0])
AC_PROG_CC
PKG_CONFIG=false
AC_PATH_PROG([MANPAGER], [manpager-optional-nowhere])
AC_MSG_CHECKING([for frob-nowhere >= 1.2])
AS_IF([AC_RUN_LOG([$PKG_CONFIG --exists --print-errors "frob-nowhere >= 1.2"])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])])
AC_PATH_PROG([FROB_CONFIG], [frob-nowhere-config], [no])
AC_MSG_CHECKING([for FROB - version >= 1.2])
AC_MSG_RESULT([no])
AC_MSG_ERROR([*** FROB version 1.2 not found!])
AC_OUTPUT
"""
# AC_PATH_PROG's, after an optional module that failed too
PROGRAM_AC = """AC_INIT([manned], [1.0])
AC_PROG_CC
PKG_CONFIG=false
AC_MSG_CHECKING([for optional-nowhere])
AS_IF([AC_RUN_LOG([$PKG_CONFIG --exists --print-errors "optional-nowhere"])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])])
AC_PATH_PROG([MANPAGER], [manpager-nowhere])
AS_IF([test -z "$MANPAGER"], [AC_MSG_ERROR([Need it to generate man pages of the command line tools])])
AC_OUTPUT
"""


def _failed_configure(folder: Path, configure_ac: str):
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "configure.ac").write_text(configure_ac)
    subprocess.run(["autoconf"], cwd=folder / "src", check=True, capture_output=True, timeout=120)
    (folder / "build").mkdir()
    r = subprocess.run(["../src/configure"], cwd=folder / "build", capture_output=True, text=True, timeout=300)
    assert r.returncode != 0, r.stdout[-2000:]
    return autotools_log.read(folder, "build/config.log", "src/configure")


def test_the_nearest_failed_check_that_names_something_is_what_is_missing(tmp_path):
    """A macro's version test names nothing, a dependency's own -config script is no program the build machine
    lacks (the target's comes with the dependency): the pkg-config module before them is the dependency."""
    d = _failed_configure(tmp_path, SDL_LIKE_AC)
    assert d is not None and d.missing == ("frob-nowhere",) and d.programs == ()


# a library with several backends: each looked for in turn (a module, then the build machine's -config script and
# a header), configure going on past each, a Windows-only one disabled, and one error after them all
ANY_OF_AC = """AC_INIT([sealer], [1.0])
AC_PROG_CC
PKG_CONFIG=false
AC_CHECK_HEADER([gtls-nowhere/gtls.h])
AC_MSG_CHECKING([for ossl-nowhere])
AS_IF([AC_RUN_LOG([$PKG_CONFIG --exists --print-errors "ossl-nowhere >= $MIN_VERSION"])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])])
AC_MSG_CHECKING([for libossl-nowhere])
AS_IF([AC_RUN_LOG([$PKG_CONFIG --exists --print-errors "libossl-nowhere >= $MIN_VERSION"])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])])
AC_MSG_CHECKING([for libgcr-nowhere])
AS_IF([AC_RUN_LOG([$PKG_CONFIG --exists --print-errors "libgcr-nowhere >= $MIN_VERSION"])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])])
AC_PATH_PROG([GCR_CONFIG], [pkg-config])
AC_MSG_CHECKING([for mswincrypt])
AC_MSG_RESULT([disabled])
AC_MSG_CHECKING([for default crypto library])
AC_MSG_ERROR([At least one crypto library should exist])
AC_OUTPUT
"""


def test_dependencies_configure_went_on_past_before_its_error_are_alternatives_nearest_first(tmp_path):
    """The nearest dependency is what is missing; those before it (one library under two names once) are
    alternatives, back to the header check, whose default includes succeeded before it; the build machine's
    -config script found and the backend this platform never has end nothing."""
    d = _failed_configure(tmp_path, ANY_OF_AC)
    assert d is not None and d.missing == ("libgcr-nowhere",) and d.programs == ()
    assert d.alternatives == ("libossl-nowhere", "gtls-nowhere/gtls.h")
    assert "or any one of these" in d.summary()


def test_an_optional_failure_before_a_program_is_no_alternative(tmp_path):
    d = _failed_configure(tmp_path, PROGRAM_AC)
    assert d is not None and d.programs == ("manpager-nowhere",) and d.alternatives == ()


def test_a_program_looked_for_on_path_before_the_error_is_a_program(tmp_path):
    """Not the optional module that failed before it, which the error is not about."""
    d = _failed_configure(tmp_path, PROGRAM_AC)
    assert d is not None and d.programs == ("manpager-nowhere",) and d.missing == ()


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


CASE_ALIAS_AC = """AC_INIT([viewer], [1.0])
AC_PROG_CC
AC_ARG_ENABLE([gui], [AS_HELP_STRING([--disable-gui], [build without the window])],
              [case "${enableval}" in
                 yes) HAVE_GUI=yes ;;
                 no)  HAVE_GUI=no ;;
                 *) AC_MSG_ERROR([bad value ${enableval} for --enable-gui]) ;;
               esac], [HAVE_GUI=yes])
if test "x$HAVE_GUI" = "xyes" ; then
  AC_CHECK_HEADER([gui-nowhere.h], [], [AC_MSG_ERROR([the window needs its toolkit])])
fi
AC_OUTPUT
"""


def test_an_option_the_manuals_case_idiom_mirrors_in_a_variable_governs_the_branch(tmp_path):
    """The autoconf manual's AC_ARG_ENABLE example (avahi's --enable-gtk3): the option's value is mapped by a case
    onto a variable of the project's own, and that variable is what the branch tests."""
    d = _failed_configure(tmp_path, CASE_ALIAS_AC)
    assert d is not None and d.missing == ("gui-nowhere.h",)
    assert [(s.name, s.arg) for s in d.switches] == [("--enable-gui", "--disable-gui")]


INTLTOOL_LIKE_AC = """AC_INIT([translated], [1.0])
AC_MSG_CHECKING([for XML::Nowhere])
if `perl -e "require XML::Nowhere" 2>/dev/null`; then
   AC_MSG_RESULT([ok])
else
   AC_MSG_ERROR([XML::Nowhere perl module is required for intltool])
fi
AC_OUTPUT
"""


def test_a_perl_module_check_the_error_cuts_short_names_the_module(tmp_path):
    """IT_PROG_INTLTOOL checks XML::Parser with no result line before its error: the check the error interrupted
    is the failed one, and a Perl module is for the build machine's perl (provide_build_tool)."""
    d = _failed_configure(tmp_path, INTLTOOL_LIKE_AC)
    assert d is not None and d.programs == ("XML::Nowhere",) and d.missing == ()
