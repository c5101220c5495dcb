"""Entries (TOML shipped in the package) and the search engine: regex fingerprints first, then BM25 over SQLite
FTS5, with a score threshold so that nothing irrelevant is returned."""

from __future__ import annotations

import itertools
import re
import sqlite3
import threading
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from typing import Literal

from pydantic import BaseModel, Field, model_validator

ENTRIES_PACKAGE = "crossbuild.kb"
ENTRIES_FILE = "entries.toml"
# Below this a BM25-only match is noise. Chosen with `crossbuild kb eval` (FTS5 scores with the column weights
# below): at 12.5 no negative of the labelled set gets an entry while every paraphrase and unseen query keeps its
# ranks (12.0 let a make-check segfault reach 12.1 once a 52nd entry shifted the word weights; 12.5 let it reach
# 12.55 with the 54th; 13.01 with the 60th, wasi-sockets-missing; 13.62 with the 67th, musl-limits-undeclared; 13.7
# with a 143rd fixture, a second wording of host-config-script). The same negative creeps up as the word weights
# shift, so the threshold keeps a margin over it: 14.0 gives unseen recall@1 1.0, recall@3 1.0, false attachments 0
# and the same related matches as 13.8 (2026-12-08, 67 entries; 14.5 loses 4 related ones).
MIN_BM25_SCORE = 14.0
# How far a match is trusted, measured by `crossbuild kb eval` (top-1 precision on the labelled queries that are not
# an entry's own fixture): an exact symptom (fingerprint) is right 91 of 92 times, so its fix is applied; a match by
# words alone at MIN_BM25_SCORE or more about 9 times in 10 (BM25 on its own: 64 of 73), so it is shown as related,
# to check before applying; an explicit search_knowledge also lists word matches down to MIN_RELATED_SCORE, where
# about half are right (15 of 33 from 8 to 13), as weak.
MIN_RELATED_SCORE = 8.0


ActionKind = Literal["cmake_args", "meson_args", "configure_args", "make_args", "cache_vars", "env", "disable_option",
                     "switch_system", "use_glibc", "patch", "dependency", "clean", "skip_test_goals",
                     "skip_doc_goals", "update_config_scripts", "system_option", "stub_file", "build_tool",
                     "make_rule_switch", "cross_libtool", "regenerate", "force_include"]
_NEEDS = {"cmake_args": "args", "meson_args": "args", "configure_args": "args", "make_args": "args",
          "cache_vars": "args", "env": "args", "disable_option": "pattern", "switch_system": "system", "patch": "file",
          "dependency": "name", "system_option": "name", "stub_file": "file", "build_tool": "name",
          "make_rule_switch": "name", "force_include": "file"}
_CAN_TURN_TESTS_OFF = {"cmake_args", "meson_args", "configure_args", "make_args", "disable_option", "skip_test_goals"}


class Action(BaseModel):
    """A fix precise enough for the offline planner to apply by itself."""

    model_config = {"extra": "forbid"}
    kind: ActionKind
    args: list[str] = Field(default_factory=list)  # *_args: extra arguments; cache_vars: NAME=value
    pattern: str | None = None  # disable_option: regex over option names (BUILD_TESTING, tests, examples, docs)
    system: str | None = None  # switch_system: cmake | meson | autotools | configure | make
    file: str | None = None  # patch: glob relative to src/; stub_file: the missing file's path as the build printed
    # it; force_include: the system header every C and C++ compile includes first (sys/types.h)
    old: str | None = None  # patch: exact text
    new: str | None = None  # patch: its replacement; stub_file: what the stand-in holds
    name: str | None = None  # dependency: what the build asked for (ZLIB, zlib.h, libpng ...); system_option: the
    # dependency whose choice option (USE_HTTP_PARSER "either system or builtin") is set to the system copy;
    # build_tool: the build-machine program (bison) or data file (/usr/share/unicode/...) to provide;
    # make_rule_switch: the target make has no rule for (a rule the Makefile has only when a variable is set)
    when: str | None = None  # only for this build system
    # the action turns the project's tests or test goals off (-DBUILD_TESTING=OFF, a disable_option pattern that
    # covers TESTS, skip_test_goals): the planner says "tests not built", and such a build cannot be `tested`
    turns_tests_off: bool = Field(False, strict=True)

    @model_validator(mode="after")
    def _required_fields(self) -> Action:
        need = _NEEDS.get(self.kind)
        if need and not getattr(self, need):
            raise ValueError(f"a {self.kind} action needs `{need}`")
        if self.kind == "patch" and (self.old is None or self.new is None):
            raise ValueError("a patch action needs `old` and `new`")
        if self.kind == "stub_file" and self.new is None:
            raise ValueError("a stub_file action needs `new` (what the stand-in holds)")
        if self.turns_tests_off and self.kind not in _CAN_TURN_TESTS_OFF:
            raise ValueError(f"a {self.kind} action cannot turn tests off (turns_tests_off)")
        if self.kind == "skip_test_goals" and not self.turns_tests_off:
            raise ValueError("a skip_test_goals action turns test goals off: it needs `turns_tests_off = true`")
        return self


class Entry(BaseModel):
    model_config = {"extra": "forbid"}

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    symptoms: list[str] = Field(default_factory=list, description=(
        "Regular expressions over the output as printed, then normalised (paths cut to their last part). A "
        "symptom that rules a path out (`(?!/usr/src/)`) is matched on the printed output only."))
    keywords: list[str] = Field(default_factory=list)
    cause: str
    fix: str
    fixtures: list[str] = Field(min_length=1, description="Real error texts the entry was written from.")
    actions: list[Action] = Field(default_factory=list)
    priority: int = Field(0, description="A specific entry (musl's off64_t) outranks a generic one whose symptoms "
                                         "also match (any undeclared function).")

    @cached_property
    def patterns(self) -> list[re.Pattern[str]]:
        return [re.compile(s, re.IGNORECASE | re.MULTILINE) for s in self.symptoms]

    @cached_property
    def printed_only(self) -> frozenset[int]:
        """The indexes of the symptoms that rule a path out with a negative lookahead: normalisation cuts every
        path to its last part, which would slip past the lookahead (`/usr/src/googletest` -> `/googletest`)."""
        return frozenset(i for i, s in enumerate(self.symptoms) if _PATH_LOOKAHEAD.search(s))

    def render(self) -> str:
        return f"[{self.id}] {self.title}\n  cause: {self.cause}\n  fix: {self.fix}"


@dataclass
class Match:
    entry: Entry
    score: float
    how: str  # "fingerprint" | "bm25"
    groups: tuple[str, ...] = ()  # what the fingerprint captured (a package name...), for {1} in actions

    @property
    def fit(self) -> str:
        """How far to trust it (measured, see MIN_RELATED_SCORE): "fix" (its exact symptom: apply the fix),
        "related" (matched by words: check it fits first), "weak" (a few words in common)."""
        if self.how == "fingerprint":
            return "fix"
        return "related" if self.score >= MIN_BM25_SCORE else "weak"

    def actions(self) -> list[Action]:
        """The entry's actions with {1}, {2}... replaced by what the fingerprint captured."""
        out = []
        for a in self.entry.actions:
            raw = a.model_dump_json()
            for i, g in enumerate(self.groups, 1):
                raw = raw.replace(f"{{{i}}}", (g or "").replace('"', ""))
            if "{" not in raw or not re.search(r"\{\d\}", raw):
                out.append(Action.model_validate_json(raw))
        return out


# a negative lookahead whose first alternative starts with a path: `(?!/usr/src/)`, `(?!(?:/usr|/opt)/)`
_PATH_LOOKAHEAD = re.compile(r"\(\?<?!(?:\(\?:)?/")
_PATHS = re.compile(r"(?:[A-Za-z]:)?(?:/[\w.+@-]+)+/?")
_NUMBERS = re.compile(r"\b0x[0-9a-f]+\b|\b\d+(?:\.\d+)*\b", re.IGNORECASE)
_QUOTED = re.compile(r"'[^'\n]{1,80}'|\"[^\"\n]{1,80}\"|`[^`'\n]{1,80}'")


_FAILURE = re.compile(r"error|fail|not found|no such|cannot|can't|unable|undefined|missing|invalid|refus|denied|"
                      r"not recogni[sz]ed|abort|fatal|\*\*\*", re.IGNORECASE)


def normalise(text: str) -> str:
    """Build output without what differs between machines and runs: paths (to their last part), numbers."""
    text = _PATHS.sub(lambda m: "/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)
    return _NUMBERS.sub("N", text)


def fingerprint(text: str) -> str:
    """An error line reduced to its shape (paths, numbers and quoted names removed), to group recurring failures."""
    return _QUOTED.sub("'Q'", normalise(text)).strip()


_ERROR_LINE = re.compile(r"\b(error|Error|ERROR|fatal)\b|undefined (reference|symbol)|No such file|not found|"
                         r"cannot find|\*\*\*")


def error_fingerprint(output: str) -> str | None:
    """The first error-looking line of a failed command's output, reduced to its shape: the same failure coming
    back across configure/build cycles has the same fingerprint."""
    all_lines = output.splitlines()
    lines = [line for line in all_lines if _ERROR_LINE.search(line) and not line.startswith("[full log")]
    # a configure step's status lines (`-- Looking for futimens - not found`) report checks, not the failure: they
    # come back unchanged on every configure while the real error changes
    errors = [line for line in lines if not line.lstrip().startswith("--")] or lines
    if not errors:
        return None
    first = errors[0]
    if first.startswith("CMake Error"):  # where it failed, then what: every missing package fails in the same
        # FindPackageHandleStandardArgs.cmake line; the body names the package
        body = itertools.takewhile(lambda line: line.startswith("  ") and line.strip(), all_lines[
            all_lines.index(first) + 1:])
        first = " ".join([first, *(line.strip() for line in itertools.islice(body, 3))])
    return fingerprint(first.strip())[:200]


def _error_matches(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """Every match, those outside a configure step's status lines first (`-- Could NOT find Nettle` is CMake
    reporting an optional package; the error is further down)."""
    status = []
    for m in pattern.finditer(text):
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        if line.lstrip().startswith("--"):
            status.append(m)
        else:
            yield m
    yield from status


def _first_text_matches(pattern: re.Pattern[str], texts: Sequence[str]) -> Iterator[re.Match[str]]:
    """PATTERN's matches in the first of TEXTS it matches at all: the later texts are the same output normalised,
    whose captures name the same things worse (`gobject-introspection-N`, which no package provides, once the
    module `gobject-introspection-1.0` captured from the output itself had been tried)."""
    for text in texts:
        matches = list(_error_matches(pattern, text))
        if matches:
            yield from matches
            return


# CMake wraps a message's body at ~80 columns, each line indented by two spaces, so a phrase a symptom names can
# break wherever a long path before it ends (`add_subdirectory given source\n  "/usr/src/googletest/" which ...`)
_CMAKE_MESSAGE = re.compile(r"^CMake (Error|Warning|Deprecation)", re.MULTILINE)
_CMAKE_CONTINUATION = re.compile(r"\n  (?=\S)")


def _cmake_unwrapped(text: str) -> tuple[str, ...]:
    """TEXT with CMake's continuation lines joined to the line before them (and that normalised), when it holds a
    CMake message; nothing otherwise."""
    if not _CMAKE_MESSAGE.search(text):
        return ()
    joined = _CMAKE_CONTINUATION.sub(" ", text)
    return joined, normalise(joined)


class KnowledgeBase:
    def __init__(self, entries: list[Entry]):
        ids = [e.id for e in entries]
        dupes = {i for i in ids if ids.count(i) > 1}
        if dupes:
            raise ValueError(f"duplicate knowledge-base ids: {', '.join(sorted(dupes))}")
        self.entries = {e.id: e for e in entries}
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._lock = threading.Lock()
        self._db.execute("CREATE VIRTUAL TABLE kb USING fts5(id UNINDEXED, title, keywords, body)")
        self._db.executemany("INSERT INTO kb VALUES (?, ?, ?, ?)", [
            (e.id, e.title, " ".join(e.keywords), " ".join([e.cause, e.fix, *map(normalise, e.fixtures)]))
            for e in entries])

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, entry_id: str) -> Entry | None:
        return self.entries.get(entry_id)

    def search(self, query: str, limit: int = 5, *, min_score: float | None = None,
               seen: Callable[[Match], bool] | None = None) -> list[Match]:
        """Entries whose symptoms match QUERY (fingerprints first, ties broken by BM25), then the best BM25-only
        matches above the threshold, so that nothing irrelevant is returned. A fingerprint match that SEEN says was
        shown already gives way to the entry's next match with other captures (the next missing package)."""
        threshold = MIN_BM25_SCORE if min_score is None else min_score
        norm = normalise(query)
        bm25 = dict(self._bm25(norm, 64))
        found: dict[str, Match] = {}
        recognised = False
        unwrapped = _cmake_unwrapped(query)
        texts, printed = (query, norm, *unwrapped), (query, *unwrapped[:1])
        for e in self.entries.values():
            score = 100.0 + 100.0 * e.priority + bm25.get(e.id, 0.0)
            for m in (m for i, p in enumerate(e.patterns)
                      for m in _first_text_matches(p, printed if i in e.printed_only else texts)):
                recognised = True
                match = Match(e, score, "fingerprint", tuple(g or "" for g in m.groups()))
                if seen is None or not seen(match):
                    found[e.id] = match
                    break
        # BM25 is the fallback: when a fingerprint recognised the failure, word overlap adds only noise; and
        # output that reports no failure gets nothing
        use_bm25 = not recognised and bool(_FAILURE.search(query))
        for entry_id, score in bm25.items():
            if use_bm25 and score >= threshold:
                found[entry_id] = Match(self.entries[entry_id], score, "bm25")
        return sorted(found.values(), key=lambda m: -m.score)[:limit]

    def words_only(self, query: str, limit: int = 1) -> list[tuple[str, float]]:
        """The best entries by words alone (BM25 over the normalised text), fingerprints ignored."""
        return self._bm25(normalise(query), limit)

    def _bm25(self, text: str, limit: int) -> list[tuple[str, float]]:
        words = list(dict.fromkeys(w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", text)))[:64]
        if not words:
            return []
        q = " OR ".join(f'"{w}"' for w in words)
        with self._lock:
            rows = self._db.execute("SELECT id, -bm25(kb, 0.0, 3.0, 2.0, 1.0) FROM kb WHERE kb MATCH ? "
                                    "ORDER BY bm25(kb, 0.0, 3.0, 2.0, 1.0) LIMIT ?", (q, limit)).fetchall()
        return [(r[0], float(r[1])) for r in rows]


def load() -> KnowledgeBase:
    """The entries shipped inside the package."""
    text = resources.files(ENTRIES_PACKAGE).joinpath(ENTRIES_FILE).read_text()
    return KnowledgeBase([Entry(**raw) for raw in tomllib.loads(text).get("entry", [])])
