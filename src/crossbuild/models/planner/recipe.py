"""What build_status says, taken into the plan: the recipe and the build system, Debian's own hints (debian/rules'
arguments and files), the make switches for cross-building, the project's options (to turn a feature off or
its tests on) and make's goals."""

from __future__ import annotations

import re
from typing import Any

from crossbuild.env import debian_args
from crossbuild.models.base import Message
from crossbuild.models.planner.state import ARG_KIND, HOW_BUILT, PlannerParts, action_key
from crossbuild.proof.tests_off import TEST_NAME, tests_off_by_default, turns_tests_off

_TRUE = frozenset({"ON", "TRUE", "1", "YES", "Y"})  # CMake's true values of an option in the cache
# A failed lookup's cache entry, named after what it looked for: find_package's <Name>_DIR, a Find module's
# <NAME>_INCLUDE_DIR / <NAME>_LIBRARY. Programs (<NAME>_EXECUTABLE, valgrind for the tests) are not dependencies.
_LOOKUP = re.compile(r"^(?P<name>[A-Za-z][\w.+-]*?)_(DIR|INCLUDE_DIRS?|INCLUDE_PATH|INCLUDES|LIBRARY(_RELEASE|_DEBUG)?|"
                     r"LIBRARIES|LIB)$", re.IGNORECASE)
_TEST_DEPENDENCIES = 3  # the most test-only dependencies built for one project


class RecipeFacts(PlannerParts):
    """The handlers of build_status's answers."""

    def _on_recipe(self, data: dict[str, Any], result: Message) -> None:
        s = self.state
        s.system = data.get("build_system")
        s.recipe = data.get("recipe") or []
        s.output_dir = data.get("output_dir", "build")
        s.source_dir = data.get("source_dir", "src")
        s.config_scripts = data.get("config_scripts") or []
        s.other_systems = data.get("other_build_systems") or []
        s.debian_system = (data.get("debian_rules") or {}).get("system") or ""
        s.conditional_rules = data.get("make_conditional_rules") or {}
        s.debian_files = dict(data.get("debian_files") or {})
        s.workspace = data.get("workspace") or ""
        s.configure_args = data.get("configure_args") or []
        if not s.recipe:
            s.phase = "blocked"
            s.blocked_reason = f"no build system found ({s.system})"
            return
        s.phase = "steps"
        self._take_cross_switches(data)
        self._take_debian_hints(data.get("debian_rules") or {})

    def _take_cross_switches(self, data: dict[str, Any]) -> None:
        """The Makefile's own switch for cross-building (`CROSS_BUILDING=yes`), once, when make runs it: at the
        start, or after a switch from CMake or Meson to the project's configure or Makefile."""
        s = self.state
        cross = [w for w in data.get("make_cross_switches") or [] if w not in s.extra["make_args"]]
        if cross and s.system in ("make", "configure", "autotools"):
            s.extra["make_args"] += cross
            s.notes.append(f"the Makefile's own switch for cross-building: make {' '.join(cross)}")

    def _take_debian_hints(self, rules: dict[str, Any]) -> None:
        """Debian's own configure switches that can only turn a feature off (debian_args.switches_off) or name
        the upstream version (version_args), and the variables its rules export when cross-building (every
        command gets them)."""
        off = debian_args.switches_off(rules.get("configure_args", []), rules.get("system"))
        for key, args in debian_args.version_args(rules.get("configure_args", []), rules.get("system"),
                                                   rules.get("upstream_version")).items():
            off[key] = off.get(key, []) + args
        for key, args in off.items():
            self.state.extra[key] += args
        if off:
            self.state.notes.append(f"from debian/rules: {' '.join(a for args in off.values() for a in args)}")
        self._take_debian_make_args(rules)
        cross = {name: value for name, value in rules.get("cross_env") or []}
        if cross:
            self.state.env.update(cross)
            self.state.notes.append("from debian/rules, as Debian cross-builds it: "
                                    + " ".join(f"{k}={v}" for k, v in cross.items()))

    def _take_debian_make_args(self, rules: dict[str, Any]) -> None:
        """The goals and variables debian/rules passes to make (re2: REBUILD_TABLES=1), once, when make runs the
        build: at the start, or after a switch to the project's Makefile."""
        s = self.state
        build = [w for w in rules.get("build_args") or [] if w not in s.extra["make_args"] + s.make_goals]
        if build and s.system in ("make", "configure", "autotools"):
            s.make_goals += [w for w in build if "=" not in w]
            s.extra["make_args"] += [w for w in build if "=" in w]
            s.notes.append(f"from debian/rules: make {' '.join(build)}")

    def _on_switched(self, data: dict[str, Any], result: Message) -> None:
        s = self.state
        if result.is_error or not data.get("recipe"):
            s.phase = "blocked"
            s.blocked_reason = f"could not switch build system: {result.text.splitlines()[0][:200]}"
            return
        s.system, s.recipe, s.step = data["build_system"], data["recipe"], 0
        if s.switched_from and s.switched_from != data.get("source_dir", s.source_dir):
            # the given-up system's configured folder would confuse the next one (CMake's cache in build/)
            s.recipe = [{"argv": ["rm", "-rf", s.switched_from], "cwd": ".", "phase": "prepare", "env": {}},
                        *s.recipe]
        s.switched_from = ""
        s.output_dir = data.get("output_dir", "build")
        s.source_dir = data.get("source_dir", s.source_dir)
        s.phase = "steps"
        s.conditional_rules = data.get("make_conditional_rules") or {}
        self._take_cross_switches(data)
        self._take_debian_make_args(data.get("debian_rules") or {})

    def _on_options(self, data: dict[str, Any], result: Message) -> None:
        s = self.state
        s.phase = "steps"
        wanted, s.pending_system = s.pending_system, []
        for name, option in _system_choices(wanted, data.get("choice_options") or {}).items():
            s.extra["cmake_args"].append(f"-D{option}=system")
            s.notes.append(f"uses the {name} built for the target: {option}=system")
        patterns, s.pending_disable = s.pending_disable, []
        switches = _off_switches(s.system or "", data)
        given = set(s.extra[ARG_KIND.get(s.system or "", "cmake_args")])
        for pattern in patterns:
            # a switch already given changes nothing: taking it again would only spend a round on the same failure
            hits = [o for o in switches if re.search(pattern, o.upper().replace("-", "_"), re.IGNORECASE)
                    and not HOW_BUILT.search(o) and switches[o] not in given]
            feature = s.feature_of.get(pattern)
            if hits:
                s.extra[ARG_KIND[s.system]] += [switches[o] for o in hits]
                shown = ", ".join(switches[o].removeprefix("-D") for o in hits)
                s.notes.append(f"built without {feature}: {shown}" if feature else f"disabled {shown}")
                if off := [switches[o] for o in hits if turns_tests_off(switches[o])]:
                    who = s.tests_off_by.get(pattern) or (f"without {feature}" if feature else pattern)
                    s.notes.append(f"tests not built: {who}: {' '.join(off)}")
            else:  # the other fixes of this round still run; if none helps, the same failure ends the plan
                s.notes.append(f"no project option turns off {feature}" if feature
                               else f"no project option matches {pattern}")

    def _on_tests_on(self, data: dict[str, Any], result: Message) -> None:
        """The strongest proof is the project's own tests run on the target: a CMake project whose tests are off
        by default (BUILD_TESTING, ABSL_BUILD_TESTING) is configured again with them on. Building them can fail
        like any build step, and the knowledge base's fixes then apply (a missing googletest is built as a
        dependency; turning them off again is the last resort, and the verdict says so)."""
        s = self.state
        s.phase, s.tests_on = "steps", "done"
        set_here = {a.removeprefix("-D").split("=")[0].split(":")[0] for a in s.extra["cmake_args"]}
        # never one this plan set: a switch a fix turned off (fmt's FMT_TEST, its googletest missing) stays off
        options = data.get("options") or {}
        names = [n for n in tests_off_by_default(options, data.get("cmake_projects") or []) if n not in set_here]
        args = [f"-D{n}=ON" for n in names]
        # and a variable the top CMakeLists.txt tests before building them: an option of its own that is off
        # (libyang's ENABLE_TESTS), or one declared nowhere (libgd's BUILD_TEST), typed BOOL so that the cache lists
        # it with the options a later fix can turn off
        for n in data.get("test_variables") or []:
            if n in set_here or n in names:
                continue
            if n not in options:
                args.append(f"-D{n}:BOOL=ON")
            elif options[n].upper() not in _TRUE:
                args.append(f"-D{n}=ON")
        if args:
            s.extra["cmake_args"] += args
            s.notes.append(f"tests turned on (off by default): {' '.join(args)}")
            s.step -= 1  # configure again
            s.tests_on, s.not_found_before = "recheck", list(data.get("not_found") or [])

    def _on_tests_deps(self, data: dict[str, Any], result: Message) -> None:
        """With the tests turned on, the configure passed, but a project may drop its tests itself when a test
        framework is missing (libyang: `find_package(CMocka)`, else `set(ENABLE_TESTS OFF)` and a status line):
        the lookups the cache records as failed that the tests-off configure did not make are the tests' own
        dependencies. Each is built as one, once, and the project configured again; one that cannot be had leaves
        the tests as the project leaves them."""
        s = self.state
        s.phase = "steps"
        tried = self._tried_dependencies()
        new = [n for n in data.get("not_found") or [] if n not in s.not_found_before]
        names = [n for n in dict.fromkeys(_looked_up(e) for e in new) if n and n.lower() not in tried]
        if names:
            s.pending_deps += names[:_TEST_DEPENDENCIES]
            s.applied.update(action_key({"kind": "dependency", "name": n}) for n in names[:_TEST_DEPENDENCIES])
            s.notes.append(f"the tests looked for {', '.join(names[:_TEST_DEPENDENCIES])} (the cache's failed "
                           f"lookups with them on: {', '.join(new[:4])})")
            s.step -= 1  # configure again with them in the prefix

    def _on_goals(self, data: dict[str, Any], result: Message) -> None:
        """Build the default goal's own prerequisites by name, without its test and documentation goals and
        without its recipe (which is what failed: running the tests, or `$(MAKE) -C doc` with a missing tool)."""
        s = self.state
        s.phase = "steps"
        goals = data.get("make_goals") or {}
        chosen = goals.get("essential") or []
        left_out = [p for p in goals.get("prerequisites", []) if p not in chosen]
        if chosen and (left_out or goals.get("has_recipe")):
            s.make_goals = chosen
            why = (f"left out: {' '.join(left_out)}, test or documentation goals" if left_out else
                   "its own commands, which failed, are not run")
            s.notes.append(f"built make goals {' '.join(chosen)} instead of `{goals['default']}` ({why})")
            if tests := [g for g in left_out if TEST_NAME.search(g)]:
                s.notes.append(f"tests not built: {s.tests_off_by.get('make goals', 'skip_test_goals')}: make's test "
                               f"goals {' '.join(tests)} left out")
        else:
            s.notes.append("make's default goal has no test or documentation goals to leave out")


def _off_switches(system: str, status: dict[str, Any]) -> dict[str, str]:
    """The project's features that are on, each with the argument that turns it off, from build_status."""
    if system == "cmake":
        return {o: f"-D{o}=OFF" for o, v in (status.get("options") or {}).items() if v.upper() in ("ON", "TRUE", "1")}
    if system == "meson":
        return dict(status.get("meson_options") or {})
    if system in ("autotools", "configure"):
        return dict(status.get("configure_options") or {})
    return {}


def _system_choices(names: list[str], choices: dict[str, dict[str, str]]) -> dict[str, str]:
    """For each dependency NAME, the project's choice option for it whose help offers "system" (http-parser ->
    USE_HTTP_PARSER, "either system or builtin")."""
    found = {}
    for name in names:
        key = re.sub(r"[^A-Z0-9]+", "_", name.upper().removeprefix("LIB")).strip("_")
        for option, choice in choices.items():
            if re.search(rf"(^|_){re.escape(key)}($|_)", option) and re.search(r"\bsystem\b", choice["help"], re.I):
                found[name] = option
                break
    return found


def _looked_up(entry: str) -> str | None:
    """What a failed lookup's cache entry looked for (CMOCKA_INCLUDE_DIR -> CMOCKA), or None for any other entry."""
    m = _LOOKUP.match(entry)
    return m["name"] if m else None
