"""Applying the knowledge base's typed actions (and the diagnosis' switches) to the plan: arguments, cache
variables, environment, edits and stand-in files, dependencies and build-machine tools, a switch of build system,
options to turn off; and building again from configuring with them."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from crossbuild.env import debian_rules, recipes
from crossbuild.models.planner.state import ARG_KIND, PlannerParts, action_key, innermost, restart_index
from crossbuild.proof.tests_off import turns_tests_off

FORCE_INCLUDE = "CROSSBUILD_FORCE_INCLUDE"  # the compiler wrapper's list of headers to include first (zigwrap.py)


class Fixes(PlannerParts):
    """Rounds of fixes: each applies at least one action not applied before."""

    def _rebuild_with_fixes(self, kb: list[dict[str, Any]], kinds: frozenset[str] | None = None,
                            keep_tests: bool = False) -> bool:
        """While rounds of fixes are left, apply the ones KB names (of KINDS) and build again, clean, from
        configuring (the steps before it, such as autoreconf, kept): True when it will. KEEP_TESTS (after a
        failed verdict): no argument that turns the project's tests off, or the failing tests would pass unrun."""
        s = self.state
        if s.attempts >= self.max_attempts or not self._apply_fixes(kb, kinds, keep_tests):
            return False
        s.attempts += 1
        s.phase, s.clean_first = "steps", True
        s.step = min(s.step, restart_index(s.recipe))
        return True

    def _without_dependency(self, name: str, *, keep: bool) -> None:
        """A dependency that cannot be had: turn off the project's option for the feature that needs it (found in
        the options build_status reads), unless the user asked to keep every feature."""
        s = self.state
        if keep:
            s.phase = "blocked"
            s.blocked_reason = (f"the dependency {name} cannot be cross-built, and --keep-features forbids building "
                                "without the feature that needs it")
            return
        kind = ARG_KIND.get(s.system or "", "cmake_args")
        if governing := [w for w in s.governing.pop(name.lower(), []) if w["arg"] not in s.extra[kind]]:
            # the switch around the call that looked for it, read from the build system's record: no name guessing
            chosen = innermost(governing)
            s.extra[kind].append(chosen["arg"])
            s.applied.add(action_key({"kind": kind, "args": [chosen["arg"]]}))
            s.notes.append(f"built without {name}: {chosen['arg'].removeprefix('-D')} ({chosen['why']})")
            if turns_tests_off(chosen["arg"]):
                s.notes.append(f"tests not built: diagnosis: {chosen['arg']}")
            return
        pattern = feature_option_pattern(name)
        if pattern and pattern not in s.feature_of:
            s.feature_of[pattern] = name
            s.pending_disable.append(pattern)

    def _next_alternative(self, name: str) -> bool:
        """NAME, the dependency configure looked for last before its error, cannot be had: build the next one it
        looked for before and went on past (any one may do: the diagnosis's alternatives), not yet tried, instead
        of building without the feature. True when one is queued."""
        s = self.state
        if not s.alternatives or name.lower() != s.alternative_of.lower():
            return False
        tried = self._tried_dependencies()
        while s.alternatives and "build_dependency" in self.tools:
            nxt = s.alternatives.pop(0)
            if nxt.lower() not in tried:
                s.applied.add(action_key({"kind": "dependency", "name": nxt}))
                s.pending_deps.append(nxt)
                s.alternative_of = nxt
                s.notes.append(f"{name} cannot be had; configure looked for {nxt} before it and went on past both "
                               f"(any one may do): building {nxt} instead")
                return True
        return False

    def _apply_fixes(self, kb_entries: list[dict[str, Any]], kinds: frozenset[str] | None = None,
                     keep_tests: bool = False) -> bool:
        """Apply the entries' actions (only those of KINDS, when given; without arguments that turn tests off, when
        KEEP_TESTS): True when one that changes the build was. Actions that turn tests off are the last resort:
        taken only when no other attached fix applies (googletest found missing: building it as a dependency
        comes first, and the tests are then built). A dependency build, the costliest fix (minutes, or most of an
        hour for a library whose own tests run), is held back too while an entry of higher priority, which knows
        this failure better, has its cheaper fix tried (googletest's sources under /usr/src provided, not googletest
        built)."""
        deferred: list[dict[str, Any]] = []
        applied = self._apply_actions(kb_entries, kinds, keep_tests, tests_off=False, deferred=deferred)
        if not applied and deferred:  # the better-placed entry had nothing to apply here: the dependency it is
            applied, deferred = self._apply_actions(kb_entries, kinds, keep_tests, tests_off=False), []
        if applied:
            held = [e for e in kb_entries if any(a.get("turns_tests_off") for a in e.get("actions", []))] \
                if not keep_tests else []
            self.state.held_kb = held + [e for e in deferred if e not in held]
            return True
        return not keep_tests and self._apply_actions(kb_entries, kinds, keep_tests, tests_off=True)

    def _apply_actions(self, kb_entries: list[dict[str, Any]], kinds: frozenset[str] | None, keep_tests: bool,
                       tests_off: bool, deferred: list[dict[str, Any]] | None = None) -> bool:
        s = self.state
        applied_any = False
        top = max((e.get("priority", 0) for e in kb_entries), default=0)
        for entry in kb_entries:
            for action in entry.get("actions", []):
                key = action_key(action)
                if key in s.applied or (action.get("when") and action["when"] != s.system) or (
                        kinds is not None and action["kind"] not in kinds) or (
                        bool(action.get("turns_tests_off")) != tests_off):
                    continue
                if deferred is not None and action["kind"] == "dependency" and entry.get("priority", 0) < top:
                    if entry not in deferred:
                        deferred.append(entry)
                    continue
                kind = action["kind"]
                if kind in ("cmake_args", "meson_args", "configure_args", "make_args"):
                    args = [a for a in action.get("args", []) if not (keep_tests and turns_tests_off(a))]
                    if (ARG_KIND.get(s.system or "") != kind and kind != "make_args") or not args:
                        continue
                    s.extra[kind] += args
                    action = {**action, "args": args}  # the note says what was taken
                    if off := [a for a in args if turns_tests_off(a)]:
                        s.notes.append(f"tests not built: {entry['id']}: {' '.join(off)}")
                elif kind == "cache_vars" and s.system in ("autotools", "configure"):
                    s.extra["configure_args"] += action.get("args", [])
                elif kind == "env":
                    s.env.update(dict(a.split("=", 1) for a in action.get("args", []) if "=" in a))
                elif kind == "force_include":  # every build system's compiles, through the wrapper's variable
                    headers = s.env.get(FORCE_INCLUDE, "").split()
                    s.env[FORCE_INCLUDE] = " ".join([*headers, action["file"]])
                elif kind == "clean":  # cmake, meson, autotools out of tree: every restart starts from a new folder
                    s.make_clean = s.system in ("make", "configure") or s.in_tree
                elif kind == "disable_option" and s.system in ("cmake", "meson", "autotools", "configure"):
                    s.pending_disable.append(action["pattern"])
                    if action.get("turns_tests_off"):  # said when build_status names the options it turns off
                        s.tests_off_by.setdefault(action["pattern"], entry["id"])
                elif kind in ("skip_test_goals", "skip_doc_goals") and s.system in ("make", "configure"):
                    s.pending_goals = True
                    s.tests_off_by.setdefault("make goals", entry["id"])  # both leave make's test goals out
                elif kind == "update_config_scripts" and s.system in ("autotools", "configure") and s.config_scripts:
                    # every copy in the project replaced by the current one crossbuild keeps in .xbuild/autotools/
                    at = restart_index(s.recipe)
                    s.recipe[at:at] = [{"argv": ["cp", f".xbuild/autotools/{Path(p).name}", p], "cwd": ".",
                                        "phase": "fix", "env": {}} for p in s.config_scripts]
                    s.notes.append(f"replaced {', '.join(s.config_scripts)} with current ones")
                elif kind == "regenerate" and s.system == "autotools" and (step := _regenerate(s.recipe)):
                    at = restart_index(s.recipe)  # before configuring again (dh_autoreconf, then dh_auto_configure)
                    s.recipe[at:at] = [step]
                elif kind == "switch_system" and (to := _switch_to(action["system"], s.other_systems)):
                    # the named system (zlib: its own configure), else the source's other one (re2: its Makefile)
                    s.pending_switch = to
                    s.other_systems = [o for o in s.other_systems if o != to]
                elif kind == "patch":
                    s.pending_edits.append({"path": f"src/{action['file']}", "old": action["old"],
                                            "new": action["new"]})
                elif kind == "stub_file":  # the path as the build printed it: write_file keeps it in the workspace
                    s.pending_edits.append({"path": action["file"], "content": action["new"]})
                elif kind == "dependency" and (path := debian_rules.file_named(s.debian_files, action["name"])):
                    # a file Debian's rules write and its patches include (lua5.4-deb-multiarch.h), not a library
                    s.pending_edits.append({"path": path, "content": s.debian_files[path]})
                    action = {"kind": "debian_file", "file": path}
                elif kind == "cross_libtool" and s.system in ("make", "configure") and s.workspace \
                        and not s.libtool:
                    self._make_libtool()
                elif kind == "dependency" and "build_dependency" in self.tools:
                    s.pending_deps.append(action["name"])
                elif kind == "make_rule_switch" and s.system in ("make", "configure") and (
                        switch := recipes.rule_switch(action["name"], s.conditional_rules)) \
                        and switch not in s.extra["make_args"]:
                    s.extra["make_args"].append(switch)  # re2: its table rules under `ifdef REBUILD_TABLES`
                elif kind == "build_tool" and "provide_build_tool" in self.tools:
                    s.pending_tools.append(action["name"])
                elif kind == "system_option" and s.system == "cmake":
                    s.pending_system.append(action["name"])
                else:
                    continue
                s.applied.add(key)
                s.notes.append(f"applied {entry['id']}: {_describe(action)}")
                # a clean build alone is a fix for a failed command (stale objects), not for a failed verdict
                applied_any = applied_any or kind != "clean" or kinds is None
        return applied_any


def feature_option_pattern(dependency: str) -> str | None:
    """Option names that switch off the feature needing DEPENDENCY, in the conventions projects use: LibLZMA ->
    LIBXML2_WITH_LZMA, ENABLE_LZMA, USE_LIBLZMA...; OpenSSL -> USE_OPENSSL; zstd.h -> WITH_ZSTD; OpenMP_C ->
    USE_OPENMP."""
    base = re.sub(r"\.(h|hpp|pc)$", "", dependency.rsplit("/", 1)[-1].removeprefix("debian:"))
    # CMake reports a package's per-language result (FindOpenMP's OpenMP_C, FindMPI's MPI_CXX): the option is named
    # after the package (USE_OPENMP)
    base = re.sub(r"_(C|CXX|Fortran)$", "", base)
    words = {w for w in {base, re.sub(r"^lib", "", base, flags=re.IGNORECASE)} if len(w) >= 2}
    words |= {w.rstrip("0123456789") for w in words if len(w.rstrip("0123456789")) >= 2}
    if not words:
        return None
    alternatives = "|".join(sorted((re.escape(w.upper().replace("-", "_")) for w in words), key=len, reverse=True))
    switch = "WITH|ENABLE|USE|HAVE|BUILD|SUPPORT"  # after a project prefix the switch word is required:
    # LIBXML2_WITH_LZMA, but never USE_BUNDLED_ZLIB (turning that off is the opposite of dropping zlib)
    return rf"(^({switch})?_?|_({switch})_)(LIB)?({alternatives})(_SUPPORT|_BACKEND)?$"


def _switch_to(wanted: str, others: list[str]) -> str | None:
    """The build system a switch goes to: WANTED when the source has it, else the first of the others in the order
    a person would try them (the project's own configure or Makefile before a second generator)."""
    if wanted in others:
        return wanted
    return next((o for o in ("configure", "autotools", "make", "meson", "cmake") if o in others), None)


def _regenerate(recipe: list[dict[str, Any]]) -> dict[str, Any] | None:
    """`autoreconf -fi` in the folder of the recipe's configure script (the release's own build system made again
    with the autotools here), or None when no step runs an autoconf configure."""
    for step in recipe:
        argv = step.get("argv") or []
        if step.get("phase") == "configure" and argv and Path(argv[0]).name == "configure":
            folder = os.path.normpath(os.path.join(step.get("cwd") or ".", os.path.dirname(argv[0])))
            return {"argv": ["autoreconf", "-fi"], "cwd": folder, "phase": "fix", "env": {}}
    return None


def _describe(action: dict[str, Any]) -> str:
    kind = action["kind"]
    if kind.endswith("_args") or kind in ("cache_vars", "env"):
        return f"{kind} {' '.join(action.get('args', []))}"
    if kind == "dependency":
        return f"cross-build dependency {action['name']} into the prefix"
    if kind == "build_tool":
        return f"provide {action['name']} for the build machine"
    if kind == "make_rule_switch":
        return f"turn on the Makefile's rule for {action['name']}"
    if kind == "debian_file":
        return f"wrote {action['file']} as debian/rules does"
    if kind == "regenerate":
        return "the build system made again with autoreconf -fi, as Debian's dh_autoreconf does"
    if kind == "cross_libtool":
        return "a libtool for the target, made with the toolchain's configure"
    if kind == "force_include":
        return f"-include {action['file']} in every C and C++ compile ({FORCE_INCLUDE})"
    if kind == "stub_file":
        return f"an empty stand-in for the missing {Path(action['file']).name} (built without what it held)"
    if kind == "patch":
        return f"patch src/{action['file']}"
    return kind
