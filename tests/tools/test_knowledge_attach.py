"""Knowledge attached to a verdict with several failed tests: one entry for each failure, so that one test's
strong matches cannot crowd out another's (glog: a package-config test's CMake error had hidden the logging
tests' `unexpected new`, whose fix, -fno-builtin, makes them pass)."""

from __future__ import annotations

from crossbuild.tools.knowledge import KB_PER_RESULT, KB_PER_VERDICT, KB_TEXTS, attach_knowledge

PACKAGE_CONFIG = ("ctest cmake_package_config_generate: ctest reported it failed\n"
                  "CMake Error at CMakeLists.txt:4 (find_package):\n"
                  '  Could not find a package configuration file provided by "glog" with any of\n'
                  "  the following names:\n    glogConfig.cmake\n    glog-config.cmake\n")
UNEXPECTED_NEW = "ctest logging: ctest reported it failed\nFunction didn't die (unexpected new): { new int; }\n"
STACK = ("ctest symbolize: Check failed: stack_consumed < kStackConsumptionUpperLimit\n"
         "Stack consumption of Symbolize: 2192\nCheck failed: stack_consumed < kStackConsumptionUpperLimit\n")


def test_each_failed_test_of_a_verdict_gets_its_own_entry(ctx):
    data: dict = {}
    message, _ = attach_knowledge(ctx, [PACKAGE_CONFIG, UNEXPECTED_NEW, STACK], "NOT VERIFIED", None, data)
    ids = [k["id"] for k in data["kb"]]
    assert "test-expects-unused-allocation-kept" in ids and "test-bounds-its-stack-use" in ids, ids
    assert len(ids) == len(set(ids)) == 3 <= KB_PER_VERDICT
    assert "unexpected new" in message or "-fno-builtin" in message
    # the same failures again in this session: nothing new to attach
    again: dict = {}
    attach_knowledge(ctx, [PACKAGE_CONFIG, UNEXPECTED_NEW, STACK], "NOT VERIFIED", None, again)
    assert "kb" not in again


def test_one_failure_still_gets_its_best_entries_and_no_more(ctx):
    data: dict = {}
    attach_knowledge(ctx, PACKAGE_CONFIG + UNEXPECTED_NEW + STACK, "step failed", None, data)
    assert 1 <= len(data["kb"]) <= KB_PER_RESULT
    empty: dict = {}
    assert attach_knowledge(ctx, ["", "  \n"], "m", "h", empty) == ("m", "h") and "kb" not in empty


def test_a_suite_of_many_failures_is_searched_for_its_first_ones_only(ctx):
    quiet = ["ctest t: ctest reported it failed\nnothing telling here\n"] * KB_TEXTS
    data: dict = {}
    attach_knowledge(ctx, [*quiet, UNEXPECTED_NEW], "NOT VERIFIED", None, data)
    assert "kb" not in data  # the match after the first KB_TEXTS failures is not searched


INCLUDE_MISSING = ("CMake Error at CMakeLists.txt:12 (include):\n  include could not find requested file:\n\n"
                   "    ECMGenerateHeaders\n\n\n-- Configuring incomplete, errors occurred!\n")
# words of a missing package, but no symptom any entry was written from
WORDS_ONLY = ("CMake Error at cmake/Deps.cmake:9 (message):\n  the package configuration for frobnicate could not "
              "be found; set Frob_DIR to the folder with its config files (find_package, CMAKE_PREFIX_PATH)\n")


def test_an_exact_symptom_is_a_fix_to_apply_and_a_word_match_only_related(ctx):
    data: dict = {}
    message, hint = attach_knowledge(ctx, INCLUDE_MISSING, "step failed", None, data)
    assert [(k["id"], k["fit"]) for k in data["kb"]] == [("cmake-include-module-missing", "fix")]
    assert "(its exact symptom matched; apply the fix)" in message
    assert hint == 'call build_dependency(name="ECMGenerateHeaders.cmake") to cross-build it into the prefix, ' \
                   "then configure again"
    data = {}
    message, hint = attach_knowledge(ctx, WORDS_ONLY, "step failed", None, data)
    assert data["kb"] and {k["fit"] for k in data["kb"]} == {"related"}, data.get("kb")
    assert "Related knowledge (matched by words, not by its symptom; check it fits before applying)" in message
    assert "apply the fix" not in message and hint is None  # no call is named from words alone
