"""What crossbuild reads from a project's build files without running them: make's default goal."""

from __future__ import annotations

from crossbuild.env import recipes
from crossbuild.env.recipes import cross_switches, default_goal


def test_plain_variables_in_the_default_goal_are_expanded_and_its_own_commands_noticed():
    goal = default_goal("""\
INSTALLABLE = \\
\tgif2rgb \\
\tgiftool
UTILS = $(INSTALLABLE) \\
\tgifbg
UTILS += gifecho
VERSION:=$(shell ./getversion)

all: libgif.so libgif.a ${UTILS} doc/gif2rgb.1 tests
\t$(MAKE) -C doc

libgif.a: a.o
\t$(AR) rcs $@ a.o
""")
    assert goal is not None
    assert goal.name == "all" and goal.has_recipe
    assert goal.prerequisites == ["libgif.so", "libgif.a", "gif2rgb", "giftool", "gifbg", "gifecho", "doc/gif2rgb.1",
                                  "tests"]
    assert goal.essential() == ["libgif.so", "libgif.a", "gif2rgb", "giftool", "gifbg", "gifecho"]


def test_a_goal_that_needs_more_of_make_than_plain_variables_is_not_guessed():
    assert default_goal("OBJS = $(SRCS:.c=.o)\nall: $(OBJS)\n") is None
    assert default_goal("V := $(shell uname)\nall: prog-$(V)\n") is None
    assert default_goal("all: $(UNDEFINED)\n") is None


def test_a_goal_without_commands_and_an_explicit_default():
    goal = default_goal(".DEFAULT_GOAL := build\ninstall: build\nbuild: lib prog check\n")
    assert goal is not None and goal.name == "build" and not goal.has_recipe
    assert goal.essential() == ["lib", "prog"]


def test_a_makefiles_own_cross_building_switch_is_found_in_its_conditionals():
    # sqlite3's Makefile.in as Debian patches it: lemon is built with $(BCC) only when CROSS_BUILDING=yes
    sqlite = ("lemon-for-build$(BEXE):\t$(TOP)/tool/lemon.c\n\t$(BCC) -o $@ $(TOP)/tool/lemon.c\n\n"
              "ifeq ($(CROSS_BUILDING),yes)\nLEMON_FOR_BUILD = lemon-for-build$(BEXE)\nelse\n"
              "LEMON_FOR_BUILD = lemon$(TEXE)\nendif\n")
    assert cross_switches(sqlite) == ["CROSS_BUILDING=yes"]
    assert cross_switches('ifdef CROSS_COMPILING\nendif\nifeq "$(IS_CROSS_BUILDING)" "1"\nendif\n') == [
        "CROSS_COMPILING=1", "IS_CROSS_BUILDING=1"]
    # kbuild's CROSS_COMPILE is a tool prefix, and a branch for the native case is not a switch to turn on
    assert cross_switches("ifdef CROSS_COMPILE\nCC = $(CROSS_COMPILE)gcc\nendif\n"
                          "ifeq ($(CROSS_BUILDING),no)\nendif\n") == []


def test_rules_a_makefile_keeps_behind_a_variable_are_found_with_the_switch_that_turns_them_on():
    """re2's table rules live under `ifdef REBUILD_TABLES`; a rule in the `else` branch, one under another kind of
    conditional, and special targets (.PRECIOUS) are not taken."""
    makefile = ("all: lib\n"
                "ifdef REBUILD_TABLES\n.PRECIOUS: re2/perl_groups.cc\nre2/perl_groups.cc: re2/make_perl_groups.pl\n"
                "\tperl $< > $@\n\nre2/unicode_%.cc: re2/make_unicode_%.py re2/unicode.py\n\tpython3 $< > $@\n"
                "else\nstale.cc:\n\ttouch $@\nendif\n"
                "ifeq ($(OS),Windows)\nwin.o: win.c\nendif\n"
                "ifneq ($(WITH_DOCS),)\nmanual.html: manual.txt\nendif\n")
    rules = recipes.conditional_rules(makefile)
    assert rules == {"re2/perl_groups.cc": "REBUILD_TABLES=1", "re2/unicode_%.cc": "REBUILD_TABLES=1",
                     "manual.html": "WITH_DOCS=1"}
    assert recipes.rule_switch("re2/unicode_casefold.cc", rules) == "REBUILD_TABLES=1"
    assert recipes.rule_switch("re2/perl_groups.cc", rules) == "REBUILD_TABLES=1"
    assert recipes.rule_switch("obj/re2/perl_groups.o", rules) == "REBUILD_TABLES=1"  # make names the object
    assert recipes.rule_switch("obj/so/re2/unicode_groups.o", rules) == "REBUILD_TABLES=1"
    assert recipes.rule_switch("obj/xre2/perl_groups.o", rules) is None
    assert recipes.rule_switch("stale.cc", rules) is None and recipes.rule_switch("unicode_x.cc", rules) is None


def test_the_archivers_operation_a_makefile_keeps_in_ar_is_kept():
    from crossbuild.env.recipes import archiver_flags

    assert archiver_flags(["CC= gcc -std=gnu99\nAR= ar rcu\nRANLIB= ranlib\n"]) == ("rcu",)  # Lua's
    assert archiver_flags(["AR ?= $(CROSS_COMPILE)ar cr  # archive\n"]) == ("cr",)
    assert archiver_flags(["ARFLAGS = rcs\nlib.a:\n\t$(AR) $(ARFLAGS) $@ $^\n"]) == ()  # its rules pass it
    assert archiver_flags(["AR = $(CC) -o\n"]) == ()  # not an archiver
    # one Makefile's AR holds the operation, another's is the archiver alone: its rules pass their own
    assert archiver_flags(["AR= ar rcu\n", "AR = ar\nlib.a:\n\t$(AR) rcs $@ $^\n"]) == ()
    assert archiver_flags(["AR= ar rcu\n", "AR= ar rcs\n"]) == ()  # disagreeing: nothing guessed


def test_a_makefiles_own_name_for_its_installation_prefix_is_found():
    from crossbuild.env.recipes import install_prefix_variables

    lua = "INSTALL_TOP= /usr/local\nINSTALL_BIN= $(INSTALL_TOP)/bin\nSHELL = /usr/local/bin/bash\n"
    assert install_prefix_variables([lua, "PREFIX ?= /usr/local  # where\nDESTROOT := /usr/local/\n"]) == [
        "INSTALL_TOP", "PREFIX", "DESTROOT"]
    assert install_prefix_variables(["prefix = /usr\nBINDIR = /usr/local/bin\n"]) == []  # not /usr/local itself


def test_meson_options_that_are_on_by_default_get_the_argument_that_turns_them_off():
    options = """\
option('tests', type : 'boolean', value : true, description : 'Build the tests (needs (a) lot)')
option('docs', type: 'boolean', value: false)
option('zstd',
       type : 'feature',
       description : 'zstd compression')
option('lzma', type: 'feature', value: 'enabled')
option('brotli', type: 'feature', value: 'disabled')
option('strict', type : 'boolean')
option('backend', type : 'combo', choices : ['a', 'b'], value : 'a')
"""
    assert recipes.meson_switches(options) == {
        "tests": "-Dtests=false", "zstd": "-Dzstd=disabled", "lzma": "-Dlzma=disabled", "strict": "-Dstrict=false"}
    assert recipes.meson_switches("# no options\n") == {}


def test_a_configure_autoconf_wrote_is_autotools_and_a_hand_written_one_is_not(tmp_path):
    """An autoconf `configure` takes --host; the hand-written recipe (zlib's kind) runs it without, and configure
    then takes the build for a native one ("cannot run C compiled programs"). Offering it as the source's other
    build system after autotools failed (avahi) only failed again."""
    generated = "#! /bin/sh\n# Guess values for system-dependent variables and create Makefiles.\n" \
                "# Generated by GNU Autoconf 2.71 for avahi 0.8.\n"
    both = tmp_path / "both"
    both.mkdir()
    (both / "configure.ac").write_text("AC_INIT([x], [1])\n")
    (both / "configure").write_text(generated)
    assert recipes.detect(both) == "autotools"
    assert [s for s in recipes.BUILD_SYSTEMS if recipes.present(s, both)] == ["autotools"]
    only_script = tmp_path / "only"
    only_script.mkdir()
    (only_script / "configure").write_text(generated)
    assert recipes.detect(only_script) == "autotools"
    hand = tmp_path / "hand"
    hand.mkdir()
    (hand / "configure").write_text("#!/bin/sh\n# configure script for zlib.\n")
    (hand / "Makefile").write_text("all:\n")
    assert recipes.detect(hand) == "configure"
    assert [s for s in recipes.BUILD_SYSTEMS if recipes.present(s, hand)] == ["configure", "make"]
    linked = tmp_path / "linked"
    linked.mkdir()
    (tmp_path / "outside").write_text(generated)
    (linked / "configure").symlink_to(tmp_path / "outside")  # a link is never read
    assert not recipes.autoconf_generated(linked)


def test_gnulibs_gnumakefile_before_configure_is_no_build_system_of_its_own(tmp_path):
    """gnutls ships gnulib's GNUmakefile: it includes the Makefile configure writes, and before that runs the
    maintainer's ./bootstrap, which a release does not have. After its configure failed, the planner took it for a
    plain Makefile and the run ended on `./bootstrap: No such file or directory` instead of configure's reason."""
    gnulib = tmp_path / "gnulib"
    gnulib.mkdir()
    (gnulib / "configure.ac").write_text("AC_INIT([x], [1])\n")
    (gnulib / "GNUmakefile").write_text("_gl-Makefile := $(wildcard [M]akefile)\nifneq ($(_gl-Makefile),)\n"
                                        "include Makefile\n-include $(srcdir)/cfg.mk\nelse\n"
                                        "all:\n\t@echo 'There seems to be no Makefile in this directory.'\nendif\n")
    assert [s for s in recipes.BUILD_SYSTEMS if recipes.present(s, gnulib)] == ["autotools"]
    (gnulib / "configure.ac").unlink()
    assert recipes.detect_or_none(gnulib) is None
    (gnulib / "Makefile").write_text("all:\n")  # configure's output (or a project's own): the GNUmakefile wraps it
    assert recipes.detect(gnulib) == "make"
    own = tmp_path / "own"
    own.mkdir()
    (own / "GNUmakefile").write_text("include config.mk\nall: libown.a\n")  # a project's only Makefile
    assert recipes.detect(own) == "make" and recipes.present("make", own)
