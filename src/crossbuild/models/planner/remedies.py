"""The planner's families of remedies for a step that failed, tried in order of trust and cost: the knowledge
base's exact fixes, the build system's own records (the diagnosis), related entries, fixes held back, the same
step serially, an autotools build in its source folder, the source's other build system; and, when every family
is spent, the finish message saying what each showed."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from crossbuild.env import recipes
from crossbuild.models.planner.state import ARG_KIND, HOW_BUILT, PlannerParts, action_key, innermost, restart_index


class Remedies(PlannerParts):
    """Choosing the next remedy for a failed step, or saying what blocked."""

    def _fix_or_block(self, step: dict[str, Any], data: dict[str, Any], first: str) -> None:
        """STEP failed (FIRST, its result's first line): build again with the fixes named, or say what blocked."""
        s = self.state
        diagnosis = data.get("diagnosis") or {}
        for name in diagnosis.get("missing") or []:  # whichever fix asks for it, its switches are known
            s.governing.setdefault(name.lower(), [w for w in diagnosis.get("switches") or []
                                                  if not HOW_BUILT.search(w["name"])])
        # by measured trust: an entry whose exact symptom matched, the build system's own record, an entry related
        # by its words (kb eval: 99 %, then read from the code, then about 9 in 10)
        kb = data.get("kb") or []
        if self._rebuild_with_fixes([k for k in kb if k.get("fit", "fix") == "fix"]) or self._diagnosed(diagnosis) \
                or self._rebuild_with_fixes([k for k in kb if k.get("fit", "fix") != "fix"]):
            return
        held, s.held_kb = s.held_kb, []
        if held and self._rebuild_with_fixes(held):
            return
        if not data.get("kb") and self._serially(step, first):  # a failure nothing explains may be a race
            return
        if self._apart_last(step, data, first):
            return
        if step["phase"] == "build" and self._build_in_tree(
                f"`{shlex.join(step['argv'][:2])}` failed out of tree with no fix left ({first[:120]})"):
            return
        if self._another_system(step, first):
            return
        s.phase = "blocked"
        if s.attempts >= self.max_attempts:
            s.blocked_reason = (f"still failing after {self.max_attempts} rounds of fixes (`{shlex.join(step['argv'])}`"
                                f": {first}). {self._families(data)}")
            return
        s.blocked_reason = (f"`{shlex.join(step['argv'])}` failed ({first}); no fix left that the planner can apply. "
                            + self._families(data) + (f" Full log: {data['log']}" if data.get("log") else ""))

    def _families(self, data: dict[str, Any]) -> str:
        """What each family of remedies showed for the last failure, for the finish message."""
        s = self.state
        diagnosis = data.get("diagnosis")
        attached = ", ".join(k["id"] for k in data.get("kb") or [])
        shown = [f"knowledge base: {'entries ' + attached if attached else 'no entry matched'}"]
        if diagnosis:
            tried = ", ".join([*(diagnosis.get("missing") or []), *(diagnosis.get("programs") or [])]) \
                or "nothing named"
            switches = ", ".join(w["arg"] for w in diagnosis.get("switches") or []) or "no switch governs it"
            shown.append(f"diagnosis ({diagnosis.get('record') or s.system}): {diagnosis['failed'][:100]} at "
                         f"{diagnosis['where']}; looked for {tried}; {switches}")
        else:
            shown.append("diagnosis: the build system's records name no failing call")
        shown.append("other build systems: " + (f"{', '.join(s.other_systems)} left untried" if s.other_systems
                                                else "none left in the source"))
        return "Families: " + "; ".join(shown) + "."

    def _diagnosed(self, diagnosis: dict[str, Any] | None) -> bool:
        """A configure failure read from the build system's own records (the failing call, what it looked for,
        the switches around it), after the knowledge base's fixes: build what it looked for, once per name; when
        that was tried, take the failing branch away by its innermost switch not yet tried, one per round, one
        that turns the tests off last. True when the build goes again."""
        s = self.state
        kind = ARG_KIND.get(s.system or "")
        if not diagnosis or not kind:
            return False
        tried = self._tried_dependencies()
        switches = [w for w in diagnosis.get("switches") or [] if not HOW_BUILT.search(w["name"])
                    and action_key({"kind": kind, "args": [w["arg"]]}) not in s.applied]
        wanted = [m for m in diagnosis.get("missing") or [] if m.lower() not in tried]
        programs = [p for p in diagnosis.get("programs") or []
                    if action_key({"kind": "build_tool", "name": p}) not in s.applied]
        if programs and "provide_build_tool" in self.tools:  # a generator for the build machine: bison, byacc
            action = {"kind": "build_tool", "name": programs[0]}
            s.notes.append(f"{diagnosis['failed'][:120]} at {diagnosis['where']} looked for {programs[0]} on the "
                           "build machine")
        elif wanted and "build_dependency" in self.tools:
            action = {"kind": "dependency", "name": wanted[0]}
            s.alternative_of = wanted[0]
            s.alternatives = [a for a in diagnosis.get("alternatives") or [] if a.lower() not in tried]
            s.notes.append(f"{diagnosis['failed'][:120]} at {diagnosis['where']} looked for {wanted[0]}")
        elif switches:
            chosen = innermost(switches)
            action = {"kind": kind, "args": [chosen["arg"]]}
            s.notes.append(f"{diagnosis['failed'][:120]} at {diagnosis['where']} is governed by {chosen['name']} "
                           f"({chosen['why']}): {chosen['arg']}")
        else:
            return False
        return self._rebuild_with_fixes([{"id": "diagnosis", "actions": [action]}])

    def _tried_dependencies(self) -> set[str]:
        """The names of the dependencies this plan has asked for (lower case)."""
        found = set()
        for key in self.state.applied:
            action = json.loads(key)
            if action.get("kind") == "dependency":
                found.add(str(action.get("name", "")).lower())
        return found

    def _another_system(self, step: dict[str, Any], first: str) -> bool:
        """The source also ships another build system, and the one picked failed to configure or build with no fix
        left (a release whose CMake files are broken while its configure works): try the next, Debian's own choice
        first, then the project's own configure or Makefile before a generator. True when it will."""
        s = self.state
        if step["phase"] not in ("prepare", "configure", "build") or s.attempts >= self.max_attempts:
            return False
        order = [s.debian_system] * (s.debian_system in s.other_systems) + [
            o for o in ("configure", "target-configure", "autotools", "make", "meson", "cmake") if o in s.other_systems]
        if not order:
            return False
        to = order[0]
        s.other_systems = [o for o in s.other_systems if o != to]
        s.attempts += 1
        s.pending_switch, s.switched_from = to, s.output_dir
        s.governing = {}  # switches read from the given-up system's records are not the next one's
        s.notes.append(f"{s.system} failed at `{shlex.join(step['argv'][:3])}` with no fix left ({first[:120]}): "
                       f"built with the source's {to} instead" + (" (Debian's choice)" if to == s.debian_system
                                                                   else ""))
        return True

    def _serially(self, step: dict[str, Any], first: str) -> bool:
        """A parallel make build that failed with no fix left and nothing in the knowledge base explaining it: once,
        the same step serially (-j1), as Debian builds a package whose Makefile's rules race (two jobs linking one
        library: `ln: ... File exists`). True when it will run again."""
        s = self.state
        argv = step["argv"]
        parallel = [a for a in argv if re.fullmatch(r"-j\d*", a) and a != "-j1"]
        if s.serial or step["phase"] != "build" or argv[:1] != ["make"] or not parallel:
            return False
        s.serial = True
        step["argv"] = ["-j1" if a in parallel else a for a in argv]
        s.notes.append(f"`{shlex.join(argv[:2])}` failed built in parallel ({first[:120]}): built again serially "
                       "(-j1)")
        return True

    def _build_in_tree(self, why: str) -> bool:
        """An autotools build in build/ that failed WHY, where a build in the source folder would not: its own
        parts miss the project's own headers (a VPATH bug: `-I../lib` where `-I$(top_srcdir)/lib` was meant), or
        a rule runs a script of the source by a relative path (`./fortag.sh > ChangeLog`). Configure and build in
        the source folder instead, as the project's authors and Debian's dh do. True when the recipe changed."""
        s = self.state
        if s.system != "autotools" or s.in_tree or s.output_dir == s.source_dir:
            return False
        build, source = s.output_dir, s.source_dir
        recipe = []
        for step in s.recipe:
            if step["argv"] == ["mkdir", "-p", build]:
                continue
            argv = list(step["argv"])
            if step["phase"] == "configure" and argv[0].endswith("/configure"):
                argv[0] = "./configure"
            recipe.append({**step, "argv": argv, "cwd": source if step["cwd"] == build else step["cwd"]})
        s.recipe, s.output_dir, s.in_tree = recipe, source, True
        s.step = restart_index(recipe)
        s.notes.append(f"built in {source}/ itself, as Debian builds autotools projects: {why}")
        return True

    def _make_libtool(self) -> None:
        """A libtool for the target in the source folder (so the clean rebuild makes it too), made before the build
        starts again, and make told to use it."""
        s = self.state
        folder = f"{s.source_dir}/{recipes.LIBTOOL_FOLDER}"
        s.pending_edits.append({"path": f"{folder}/configure.ac", "content": recipes.LIBTOOL_CONFIGURE_AC})
        at = restart_index(s.recipe)
        s.recipe[at:at] = [{"argv": list(step.argv), "cwd": step.cwd, "phase": step.phase, "env": {}}
                           for step in recipes.libtool_steps(folder, s.configure_args)]
        s.libtool = f"{s.workspace}/{folder}/libtool"
        s.extra["make_args"] = [a for a in s.extra["make_args"] if not a.startswith("LIBTOOL=")]
        s.extra["make_args"].append(f"LIBTOOL={s.libtool}")
