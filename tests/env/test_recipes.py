"""What crossbuild reads from a project's build files without running them: make's default goal."""

from __future__ import annotations

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
