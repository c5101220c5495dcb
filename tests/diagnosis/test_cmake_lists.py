"""The block structure of CMake files: which if() branches enclose a line, read from the file's text."""

from __future__ import annotations

from crossbuild.diagnosis.cmake_lists import commands, enclosing_branches, switch_terms

TEXT = """cmake_minimum_required(VERSION 3.16) # a comment with if( in it
#[[ a bracket comment
if(NEVER)
]]
option(WITH_TLS "TLS (a \\"quoted\\" word)" ON)
set(doc [=[ text with ) and endif() inside ]=])
if(WITH_TLS AND NOT WIN32)
  if(USE_BUNDLED)
    add_subdirectory(third_party)
  elseif(HAVE_X STREQUAL "yes")
    message(STATUS x)
  else()
    find_package(OpenSSL
                 REQUIRED)
  endif()
  foreach(f a b)
    if(f)
    endif()
  endforeach()
  set(TLS_DONE 1)
endif()
"""


def test_commands_skip_comments_and_keep_quoted_and_bracket_arguments_whole():
    cmds = commands(TEXT)
    names = [(c.name, c.line) for c in cmds]
    assert ("if", 3) not in names  # inside the bracket comment
    assert names[:3] == [("cmake_minimum_required", 1), ("option", 5), ("set", 6)]
    assert cmds[1].args == ("WITH_TLS", '"TLS (a \\"quoted\\" word)"', "ON")
    assert cmds[2].args == ("doc", '" text with ) and endif() inside "')
    assert ("find_package", 13) in names


def test_the_branches_around_a_line_with_the_conditions_that_held_and_those_that_did_not():
    cmds = commands(TEXT)
    outer, inner = enclosing_branches(cmds, 13)
    assert (outer.kind, outer.line) == ("if", 7)
    assert [(c.line, held) for c, held in outer.conditions] == [(7, True)]
    assert inner.kind == "else"
    assert [(c.name, held) for c, held in inner.conditions] == [("if", False), ("elseif", False)]
    # after the inner block and the foreach closed, only the outer if encloses
    assert [b.line for b in enclosing_branches(cmds, 20)] == [7]
    assert enclosing_branches(cmds, 22) == []


def test_switch_terms_only_claim_values_that_are_certain():
    assert switch_terms(("WITH_TLS", "AND", "NOT", "WIN32"), True) == {"WITH_TLS": True, "WIN32": False}
    assert switch_terms(("USE_BUNDLED",), False) == {"USE_BUNDLED": False}
    assert switch_terms(("NOT", "USE_SYSTEM_ZLIB"), True) == {"USE_SYSTEM_ZLIB": False}
    assert switch_terms(("A", "OR", "B"), True) == {}  # either may have held
    assert switch_terms(("A", "AND", "B"), False) == {}  # either may have been false
    # operands of comparisons and tests that are not truth values are not switches
    assert switch_terms(("HAVE_X", "STREQUAL", '"yes"'), True) == {}
    assert switch_terms(("DEFINED", "FOO", "AND", "TARGET", "bar", "AND", "ON"), True) == {}


def test_a_parenthesised_group_claims_nothing():
    assert switch_terms(("NOT", "(", "WITH_BUNDLED_FOO", ")"), True) == {}
    assert switch_terms(("NOT", "(", "A", "AND", "B", ")"), True) == {}


def test_a_long_run_of_letters_is_read_once():
    """A word is skipped whole when no ( follows: a megabyte of letters is not scanned once per letter."""
    import time
    start = time.monotonic()
    assert commands("a" * 1_000_000 + "\nproject(x)\n")[0].name == "project"
    assert time.monotonic() - start < 5
