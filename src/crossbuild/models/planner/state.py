"""The offline planner's state: what one plan knows and has tried (PlannerState), its limits, and the helpers
every part of the policy reads."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from crossbuild.proof.tests_off import turns_tests_off
from crossbuild.tools.base import Toolset

MAX_ATTEMPTS = 6  # configure/build cycles, each after applying at least one new fix
# rounds given back when a round's fixes moved the failure on to one not seen before (avahi's configure: the
# distribution, then glib, gobject, GTK 3, D-Bus, gdbm, each a new optional dependency): progress, not a loop
PROGRESS_ROUNDS = 8

BUILD_TIMEOUT_S = 3600

ARG_KIND = {"cmake": "cmake_args", "meson": "meson_args", "autotools": "configure_args",
            "configure": "configure_args", "make": "make_args"}

# Options about how the project is built, never a feature to drop (libpng: a test links -lpng_shared, the project's
# own target; turning PNG_SHARED off would remove the library itself).
HOW_BUILT = re.compile(r"SHARED|STATIC|PIC\b|INSTALL|FRAMEWORK|(^|_)LIBS?$", re.IGNORECASE)



@dataclass
class PlannerState:
    phase: str = "start"  # start | steps | options | goals | targets | switching | finishing | blocked | done
    system: str | None = None
    recipe: list[dict[str, Any]] = field(default_factory=list)
    output_dir: str = "build"
    step: int = 0
    attempts: int = 0
    failures_seen: list[str] = field(default_factory=list)  # what each failed step said (failure_identity)
    progress_rounds: int = 0  # rounds given back for progress (PROGRESS_ROUNDS)
    extra: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in (
        "cmake_args", "meson_args", "configure_args", "make_args")})
    applied: set[str] = field(default_factory=set)
    pending_edits: list[dict[str, Any]] = field(default_factory=list)
    pending_deps: list[str] = field(default_factory=list)
    pending_tools: list[str] = field(default_factory=list)  # build-machine programs and data to provide
    # a generator that failed for want of a tool can leave its output empty (`python3 gen.py > table.cc`, kept
    # when the Makefile marks it .PRECIOUS, as re2 does), and make would take it as up to date
    remove_empty_outputs: bool = False
    empty_outputs: list[str] = field(default_factory=list)
    pending_switch: str | None = None
    pending_disable: list[str] = field(default_factory=list)  # option-name patterns waiting for build_status
    pending_system: list[str] = field(default_factory=list)  # dependencies whose choice option should say "system"
    feature_of: dict[str, str] = field(default_factory=dict)  # disable pattern -> the dependency it replaces
    # the dependencies a diagnosis named as alternatives to ALTERNATIVE_OF (any one may do), tried in turn when it
    # cannot be built, before building without it
    alternatives: list[str] = field(default_factory=list)
    alternative_of: str = ""
    source_dir: str = "src"  # the project's root folder (build_status's source_dir)
    in_tree: bool = False  # an autotools build moved into the source folder (_build_in_tree)
    config_scripts: list[str] = field(default_factory=list)  # the project's config.sub/config.guess copies
    other_systems: list[str] = field(default_factory=list)  # the other build systems the source also has
    debian_system: str = ""  # the build system debian/rules uses, when the source has debian/
    switched_from: str = ""  # the output folder of a build system given up for another (removed first)
    conditional_rules: dict[str, str] = field(default_factory=dict)  # Makefile target -> `VAR=1` that enables it
    debian_files: dict[str, str] = field(default_factory=dict)  # what debian/rules writes (workspace path -> text)
    workspace: str = ""  # the workspace's absolute path (make runs sub-makes in other folders)
    configure_args: list[str] = field(default_factory=list)  # the toolchain's ./configure arguments
    libtool: str = ""  # the libtool made for the target, once made
    pending_goals: bool = False  # build make's default goal's prerequisites by name (asks build_status for them)
    make_goals: list[str] = field(default_factory=list)  # explicit goals for the build step's make
    clean_first: bool = False  # remove the build folder before configuring again (no stale objects, fresh cache)
    make_clean: bool = False  # a fix asked for a clean build: an in-tree make restart runs `make clean` first
    cleaning: str = ""  # the command running removes old outputs: "required", or "optional" (make clean may fail)
    env: dict[str, str] = field(default_factory=dict)
    tests_off_by: dict[str, str] = field(default_factory=dict)  # disable pattern or "make goals" -> the entry's id
    # test or example programs failed to build (CMake): build the other targets by name before turning tests off;
    # split: "" (not tried) | "asked" (build_status asked for the targets) | "going" (the build kept going past
    # its failures, ninja -k 0, to see which targets build) | "trying" | "done" | "failed"
    split: str = ""
    split_from: dict[str, Any] = field(default_factory=dict)  # the failed build step, its result's data and entry
    serial: bool = False  # a parallel make build that failed was run again serially (_serially)
    split_later: dict[str, Any] = field(default_factory=dict)  # tests failed to build; a dependency is tried first
    # "" | "asked" | "recheck" | "done": whether the CMake project's tests off by default were looked for, and
    # whether the configure that turned them on is still to be read for what the tests alone looked for
    tests_on: str = ""
    not_found_before: list[str] = field(default_factory=list)  # the cache's failed lookups with the tests off
    # entries whose fixes that turn tests off were held back while others were tried: the last resort, when the
    # failure comes back with nothing attached (a dependency for an example could not be built)
    held_kb: list[dict[str, Any]] = field(default_factory=list)
    # a diagnosed configure failure's switches, by the dependency its failing call looked for: taken if that
    # dependency cannot be built (_without_dependency)
    governing: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    blocked_reason: str = ""



class PlannerParts:
    """What every part of the policy reads (the mixins Planner is made of): its state, the tools of the turn it is
    asked for, and how many rounds of fixes it may try."""

    state: PlannerState
    tools: Toolset | tuple[()]
    max_attempts: int


def action_key(action: dict[str, Any]) -> str:
    """How an applied action is remembered (PlannerState.applied): its canonical JSON."""
    return json.dumps(action, sort_keys=True)



def innermost(switches: list[dict[str, Any]]) -> dict[str, Any]:
    """Of a diagnosis' switches (outermost first), the innermost that keeps the tests, else the innermost: the
    narrowest feature to drop."""
    return ([w for w in switches if not turns_tests_off(w["arg"])] or switches)[-1]



def restart_index(recipe: list[dict[str, Any]]) -> int:
    """Start again from configuring, after the fixes that go before it (prepare steps such as autoreconf are
    kept); with nothing to configure, from the first step after the prepare steps (a plain Makefile's libtool for
    the target is made once, not at every restart)."""
    for i, step in enumerate(recipe):
        if step["phase"] in ("fix", "configure"):
            return i
    return next((i for i, step in enumerate(recipe) if step["phase"] != "prepare"), 0)


_NUMBERS = re.compile(r"\d+")


def failure_identity(data: dict[str, Any], text: str) -> str:
    """What a failed step's result says failed, for telling a new failure from one seen before: what the diagnosis
    names as missing, the knowledge-base entries that matched, and the last line that says `error` (numbers
    aside); not the command line, which every round's fixes change."""
    diagnosis = data.get("diagnosis") or {}
    named = sorted({*(diagnosis.get("missing") or []), *(diagnosis.get("programs") or []),
                    *(k.get("id", "") for k in data.get("kb") or [])})
    errors = [line for line in text.splitlines()[1:] if "error" in line.lower()]
    return json.dumps([named, _NUMBERS.sub("#", errors[-1].strip())[:200] if errors else ""])


def count_progress(s: PlannerState, data: dict[str, Any], text: str) -> None:
    """A failure not seen before, after a round of fixes: that round moved the build on (an optional dependency
    built or turned off, and configure stops at the next one), so it is given back, up to PROGRESS_ROUNDS. A
    failure seen before gives nothing back: a loop still ends."""
    seen = failure_identity(data, text)
    if seen in s.failures_seen:
        return
    s.failures_seen.append(seen)
    if s.attempts and len(s.failures_seen) > 1 and s.progress_rounds < PROGRESS_ROUNDS:
        s.attempts -= 1
        s.progress_rounds += 1
