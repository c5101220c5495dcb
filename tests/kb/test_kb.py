"""The knowledge base: every fixture finds its entry, non-matching build output stays quiet, the retrieval goals
hold on the labelled set, actions validate, and the dependency mapping answers what builds ask for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from crossbuild import kb
from crossbuild.env import dependency_names
from crossbuild.kb.base import Action, Entry, KnowledgeBase, error_fingerprint, fingerprint
from crossbuild.kb.evaluation import evaluate, load_queries
from crossbuild.proof.tests_off import turns_tests_off

KB = kb.load()


def test_at_least_40_entries_each_with_a_fixture_and_a_fix():
    assert len(KB) >= 40
    for e in KB.entries.values():
        assert e.fixtures and e.fix and e.cause and e.symptoms, e.id


@pytest.mark.parametrize("entry_id", sorted(KB.entries))
def test_every_fixture_matches_its_entry_first(entry_id):
    e = KB.entries[entry_id]
    for fixture in e.fixtures:
        matches = KB.search(fixture, limit=3)
        assert matches and matches[0].entry.id == entry_id, (fixture, [m.entry.id for m in matches])
        assert matches[0].how == "fingerprint"


def test_build_output_that_matches_no_entry_stays_quiet():
    negatives = [q for q in load_queries(KB) if not q.expect]
    assert len(negatives) >= 25
    loud = [(q.text[:60], [m.entry.id for m in KB.search(q.text, limit=2)]) for q in negatives
            if KB.search(q.text, limit=2)]
    assert not loud


def test_retrieval_goals_on_the_labelled_set():
    r = evaluate(KB)
    assert r.queries >= 80
    assert r.kinds["unseen"].n >= 30
    assert r.kinds["unseen"].recall1 >= 0.9 and r.kinds["unseen"].recall3 >= 0.97
    assert r.false_attachment_rate <= 0.05


def test_the_readmes_knowledge_base_figures_are_what_kb_eval_prints_today():
    """Issue 35: the README's figures are produced by `crossbuild kb eval` (evaluate) and must not go stale when an
    entry or a labelled query is added."""
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    r = evaluate(KB)
    n = {k: s.n for k, s in r.kinds.items()}
    said = re.search(r"(\d+) entries \(`src/crossbuild/kb/entries\.toml`", readme)
    assert said and int(said[1]) == r.entries
    counts = re.search(r"`kb/queries\.toml`: (\d+) fixtures, (\d+) paraphrases, (\d+) unseen variants, (\d+) held "
                       r"out, (\d+) outputs that match nothing", readme)
    assert counts and tuple(map(int, counts.groups())) == (n["fixture"], n["paraphrase"], n["unseen"], n["heldout"],
                                                           r.negatives)
    recall = re.search(r"Recall@1 ([\d.]+) / Recall@3 ([\d.]+) on unseen variants, ([\d.]+) / ([\d.]+) held out",
                       readme)
    unseen, held = r.kinds["unseen"], r.kinds["heldout"]
    assert recall and recall.groups() == tuple(f"{x:.3f}" for x in (unseen.recall1, unseen.recall3, held.recall1,
                                                                    held.recall3))
    assert re.search(rf"\b{r.false_attachments} false attachments", readme)
    fix, related, weak = r.trust["fix"], r.words_alone["related"], r.words_alone["weak"]
    assert f"top-1 right {fix[1]} of {fix[0]} times" in readme
    assert f"by words alone {related[1]} of {related[0]}" in readme and f"matches ({weak[1]} of {weak[0]})" in readme


def test_captured_names_fill_dependency_actions():
    m = KB.search("CMake Error: Could NOT find LibLZMA (missing: LIBLZMA_LIBRARY)")[0]
    assert [a.name for a in m.actions()] == ["LibLZMA"]
    assert dependency_names.resolve("LibLZMA").source == "xz-utils"


def test_actions_are_validated():
    with pytest.raises(ValidationError, match="needs `args`"):
        Action(kind="cmake_args")
    with pytest.raises(ValidationError):
        Action(kind="reboot")
    with pytest.raises(ValueError, match="duplicate"):
        e = Entry(id="x", title="t", cause="c", fix="f", fixtures=["x"])
        KnowledgeBase([e, e])


def test_an_action_that_turns_tests_off_says_so():
    with pytest.raises(ValidationError, match="cannot turn tests off"):
        Action(kind="patch", file="a.c", old="x", new="y", turns_tests_off=True)
    with pytest.raises(ValidationError, match="turns_tests_off = true"):
        Action(kind="skip_test_goals")
    with pytest.raises(ValidationError):
        Action(kind="cmake_args", args=["-DBUILD_TESTING=OFF"], turns_tests_off="yes")


# option names projects turn their tests off with (CMake's, Meson's, configure's --disable-NAME as an option name)
_TEST_OPTIONS = ["BUILD_TESTING", "BUILD_TESTS", "FOO_BUILD_TESTS", "ENABLE_TESTS", "WITH_TESTS", "TESTS", "TEST",
                 "FOO_TESTS", "FOO_TEST", "UNITTESTS", "FOO_UNITTEST", "ENABLE_UNIT_TESTS", "TESTING",
                 "FOO_ENABLE_TESTING", "ENABLE_CHECK", "TESTSUITE", "BUILD_EXAMPLES_AND_TESTS", "TESTS_ENABLED",
                 "tests", "build_tests", "unit_tests", "enable-tests"]


@pytest.mark.parametrize("entry_id", sorted(KB.entries))
def test_every_action_that_would_turn_tests_off_carries_the_flag(entry_id):
    """Computed with proof.tests_off's one definition, so the flag cannot be forgotten, nor set on an action that
    turns no tests off. A disable_option pattern counts when it matches a test option's name, as the planner
    matches them (upper case, `-` as `_`)."""
    for action in KB.entries[entry_id].actions:
        args = [a for a in action.args if turns_tests_off(a)]
        names = [n for n in _TEST_OPTIONS if action.pattern and turns_tests_off(f"-D{n}=OFF") and
                 re.search(action.pattern, n.upper().replace("-", "_"), re.IGNORECASE)]
        turns_off = bool(args or names) or action.kind == "skip_test_goals"
        assert action.turns_tests_off == turns_off, (action, args, names)


def test_fingerprints_ignore_paths_numbers_and_names():
    a = fingerprint("/home/a/src/x.c:12:5: error: unknown type name 'off64_t'")
    b = fingerprint("/w/b/src/x.c:99:1: error: unknown type name 'loff_t'")
    assert a == b


def test_a_configure_error_is_fingerprinted_by_its_error_not_by_a_check_that_came_before_it():
    """libgit2 for Windows ended `stuck` after four configures, each failing on a different missing dependency,
    because each one's fingerprint was the check line `-- Looking for futimens - not found` they all printed."""
    def configure(error: str) -> str:
        return (f"-- Looking for futimens\n-- Looking for futimens - not found\nCMake Error at cmake/Select{error}"
                f".cmake:7 (add_subdirectory):\n  add_subdirectory given source\n-- Configuring incomplete")
    assert error_fingerprint(configure("WinHTTP")) != error_fingerprint(configure("Zlib"))
    assert error_fingerprint(configure("Zlib")).startswith("CMake Error at")
    assert error_fingerprint("-- Looking for futimens - not found").startswith("-- Looking for")  # nothing else


def test_a_missing_package_is_fingerprinted_by_its_name_not_by_the_cmake_module_that_reports_it():
    """libxml2 for Windows ended `stuck` after four configures, each missing another package (Iconv, LibLZMA,
    Python2, ZLIB): each one's first error line was `CMake Error at .../FindPackageHandleStandardArgs.cmake:230`."""
    def configure(package: str) -> str:
        return ("-- Found Threads: TRUE\nCMake Error at /usr/share/cmake-3.25/Modules/FindPackageHandleStandardArgs"
                f".cmake:230 (message):\n  Could NOT find {package} (missing: {package}_LIBRARY {package}_INCLUDE_DIR)"
                "\nCall Stack (most recent call first):\n  /usr/share/cmake-3.25/Modules/FindPackageHandleStandard"
                "Args.cmake:600 (_FPHSA_FAILURE_MESSAGE)\n-- Configuring incomplete, errors occurred!")
    assert error_fingerprint(configure("ZLIB")) != error_fingerprint(configure("Python2"))
    assert error_fingerprint(configure("ZLIB")) == ("CMake Error at /FindPackageHandleStandardArgs.cmake:N (message): "
                                                    "Could NOT find ZLIB (missing: ZLIB_LIBRARY ZLIB_INCLUDE_DIR)")


@pytest.mark.parametrize(("asked", "source"), [
    ("ZLIB", "zlib"), ("zlib.h", "zlib"), ("libz", "zlib"), ("PNG::PNG", "libpng1.6"), ("png.h", "libpng1.6"),
    ("absl", "abseil"), ("OpenSSL", "openssl"), ("openssl/ssl.h", "openssl"), ("libzstd", "libzstd"),
    ("zstd", "libzstd"), ("BZip2", "bzip2"), ("LibLZMA", "xz-utils"), ("GTest", "googletest"),
    ("libxml-2.0", "libxml2"), ("debian:zlib", "zlib"), ("debian:libfoo2", "libfoo2"),
    # an include path as the header-not-found entry names it (`.h` stripped), looked up in Debian's Contents
    ("gmock/gmock", "googletest"), ("benchmark/benchmark", "benchmark"), ("benchmark/benchmark.h", "benchmark"),
    ("cutl/compiler/context.hxx", "libcutl"),
])
def test_dependency_mapping(asked, source):
    assert dependency_names.resolve(asked).source == source


@pytest.mark.parametrize("asked", ["/root/.config/secrets", "../../etc", "./vendor/zlib", "~/src/zlib",
                                   "https://example.org/zlib.tar.gz", "zlib-1.3.tar.gz", "debian:../zlib",
                                   "debian:Zlib Thing", "a/../etc/passwd", "include/.hidden/x.h",
                                   "/usr/include/zlib.h", "github.com/google/googletest", "deps/zlib-1.3.tar.gz"])
def test_dependency_names_never_select_a_host_path(asked):
    with pytest.raises(dependency_names.UnknownDependencyError, match="path or a URL|not a Debian source package name"):
        dependency_names.resolve(asked)


def test_only_the_user_vouches_for_local_dependency_sources(tmp_path):
    assert dependency_names.resolve("zlib", {"zlib": str(tmp_path)}).source == str(tmp_path)
    with pytest.raises(dependency_names.UnknownDependencyError):
        dependency_names.resolve(str(tmp_path), {"zlib": str(tmp_path)})


def test_unknown_dependency_names_close_ones():
    with pytest.raises(dependency_names.UnknownDependencyError, match="close: zlib"):
        dependency_names.resolve("zlibb")


def test_the_dependency_named_is_the_one_the_error_is_about_not_an_optional_one_reported_before():
    # libzip's configure (Debian 12): Nettle is optional and only reported; ZLIB is required and the error
    log = ("-- Could NOT find Nettle (missing: Nettle_LIBRARY Nettle_INCLUDE_DIR) (Required is at least version "
           "\"3.0\")\n-- Performing Test HAVE_NULLABLE - Success\n"
           "CMake Error at /usr/share/cmake-3.25/Modules/FindPackageHandleStandardArgs.cmake:230 (message):\n"
           "  Could NOT find ZLIB (missing: ZLIB_LIBRARY ZLIB_INCLUDE_DIR) (Required is\n  at least version "
           "\"1.1.2\")\n-- Configuring incomplete, errors occurred!\n")
    [match] = [m for m in KB.search(log) if m.entry.id == "cmake-package-not-found"]
    assert [a.name for a in match.actions()] == ["ZLIB"]
    only_status = "-- Could NOT find Nettle (missing: Nettle_LIBRARY Nettle_INCLUDE_DIR)\n"
    [match] = [m for m in KB.search(only_status) if m.entry.id == "cmake-package-not-found"]
    assert [a.name for a in match.actions()] == ["Nettle"]


def test_a_package_already_shown_gives_way_to_the_next_one_the_log_names():
    """libgit2 (Debian 12), real output: GSSAPI was shown and tried; the same log also lacks PCRE and ZLIB, and the
    error itself is a bundled folder Debian removed. What was shown is not shown again; what comes next is."""
    log = ("-- Could NOT find GSSAPI (missing: GSSAPI_LIBRARIES GSSAPI_INCLUDE_DIR)\n"
           "-- Could NOT find PCRE (missing: PCRE_LIBRARY PCRE_INCLUDE_DIR) \n"
           "-- Looking for regcomp_l - not found\n"
           "CMake Error at cmake/SelectRegex.cmake:46 (add_subdirectory):\n  add_subdirectory given source\n"
           '  "/work/eval/w/libgit2-aarch64-linux-musl-r1/ws/src/deps/pcre"\n  which is not an existing directory.\n'
           "-- Could NOT find ZLIB (missing: ZLIB_LIBRARY ZLIB_INCLUDE_DIR) \n"
           "CMake Error at cmake/SelectZlib.cmake:30 (add_subdirectory):\n  add_subdirectory given source\n"
           '  "/work/eval/w/libgit2-aarch64-linux-musl-r1/ws/src/deps/zlib"\n  which is not an existing directory.\n'
           "-- Configuring incomplete, errors occurred!\n")
    shown: set[tuple[str, str]] = set()

    def seen(m):
        return (m.entry.id, m.groups) in shown

    names = []
    for _ in range(4):
        found = {m.entry.id: m for m in KB.search(log, seen=seen)}
        bundled, package = found.get("bundled-dependency-removed"), found.get("cmake-package-not-found")
        names.append((bundled and bundled.groups[0], package and package.groups[0]))
        shown |= {(m.entry.id, m.groups) for m in found.values()}
    assert names == [("pcre", "GSSAPI"), ("zlib", "PCRE"), (None, "ZLIB"), (None, None)]
    assert [a.kind for a in KB.search(log)[0].actions()] == ["dependency", "system_option"]


def test_a_cmake_message_wrapped_inside_a_symptoms_phrase_still_matches():
    """CMake breaks its messages at ~80 columns wherever a path ends, so the same error wraps differently in each
    project: the symptom is matched against the message with its continuation lines joined too."""
    wrapped = ("CMake Error at CMakeLists.txt:120 (add_subdirectory):\n  add_subdirectory given source\n"
               "  \"/work/eval/a-rather-long-workspace-name/ws/src/third_party/googletest\"\n"
               "  which is not an existing directory.\n\n\n-- Configuring incomplete, errors occurred!")
    found = KB.search(wrapped, limit=1)
    assert [(m.entry.id, m.how, m.groups) for m in found] == [("test-only-dependency-missing", "fingerprint",
                                                              ("googletest",))]


def test_a_symptom_that_rules_a_path_out_is_not_fooled_by_the_path_cut_short():
    """Debian's fmtlib builds its tests from /usr/src/googletest (googletest's source package), which the
    test-only entry rules out with `(?!/usr/src/)`: that folder is the Debian-source entry's. Normalised, the
    path is `/googletest` and the lookahead passed, so the entry matched the printed text's shortened copy."""
    printed = ("CMake Error at test/CMakeLists.txt:3 (add_subdirectory):\n  add_subdirectory given source "
               "\"/usr/src/googletest\" which is not an\n  existing directory.\n")
    assert "test-only-dependency-missing" not in {m.entry.id for m in KB.search(printed) if m.how == "fingerprint"}
    vendored = printed.replace("/usr/src/googletest", "/w/src/third_party/googletest")
    assert KB.search(vendored)[0].entry.id == "test-only-dependency-missing"


@pytest.mark.parametrize("log, module", [
    # pkgconf (Debian 12's pkg-config) words a missing module so, after autoconf names its variable prefix
    ("checking for GTK30... no\nconfigure: error: Package requirements ( gtk+-3.0 ) were not met:\n\n"
     "Package 'gtk+-3.0', required by 'virtual:world', not found\n", "gtk+-3.0"),
    ("checking for GLIB20... no\nconfigure: error: Package requirements ( glib-2.0 >= 2.4.0 ) were not met:\n\n"
     "Consider adjusting the PKG_CONFIG_PATH environment variable if you\ninstalled software in a non-standard "
     "prefix.\n\nAlternatively, you may set the environment variables GLIB20_CFLAGS\nand GLIB20_LIBS", "glib-2.0"),
])
def test_a_missing_pkg_config_module_is_named_by_the_module_not_by_autoconfs_variable(log, module):
    """The dependency asked for is the module (gtk+-3.0), which the diagnosis of config.log names too, so the
    switch read around the check (--disable-gtk3) is the one taken when it cannot be built; the variable prefix
    (GTK30) named nothing build_dependency could find."""
    m = KB.search(log)[0]
    assert m.entry.id == "pkg-config-module-missing" and [a.name for a in m.actions()] == [module]


def test_optional_meson_lookups_that_found_nothing_are_not_offered_as_what_the_build_needs():
    """Meson prints `Run-time dependency X found: NO` for every optional lookup and goes on; the build stopped
    elsewhere (a find_library of a required library). Offering the optional modules built dependencies that left
    the same error, round after round, until the run was stopped as stuck (real output of a Meson project,
    Debian 12)."""
    log = ("Run-time dependency dbus-1 found: NO  (tried pkg-config and cmake)\n"
           "Run-time dependency sndfile found: YES 1.2.0\n"
           "Run-time dependency libsystemd found: NO  (tried pkg-config and cmake)\n"
           "Run-time dependency gtk+-3.0 found: NO  (tried pkg-config and cmake)\n\n"
           "src/meson.build:648:16: ERROR: C shared or static library 'ltdl' not found\n")
    offered = [g for m in KB.search(log) if m.entry.id == "pkg-config-module-missing" for g in m.groups]
    assert offered == [], offered


def test_a_module_already_tried_is_not_offered_again_under_its_normalised_name():
    """gjs (Debian 12), real Meson output: gobject-introspection-1.0 was offered and its build failed; the next
    search offered `gobject-introspection-N` (the name with its numbers normalised away), which no package
    provides, and the planner spent a step on it. A module once shown is not shown again in another spelling."""
    log = ("Run-time dependency libffi found: YES 3.4.4\nFound CMake: NO\n"
           "Run-time dependency gobject-introspection-1.0 found: NO  (tried pkg-config and cmake)\n"
           "Looking for a fallback subproject for the dependency gobject-introspection-1.0\n"
           "ERROR: Subproject gobject-introspection is buildable: NO\n")
    first = {m.entry.id: m for m in KB.search(log)}
    assert first["pkg-config-module-missing"].groups[0] == "gobject-introspection-1.0"
    shown = {(m.entry.id, m.groups) for m in first.values()}
    again = {m.entry.id: m for m in KB.search(log, seen=lambda m: (m.entry.id, m.groups) in shown)}
    offered = [g for m in again.values() for g in m.groups]
    assert not any("gobject-introspection" in (g or "") for g in offered), offered
