"""The offline planner: a deterministic policy that speaks the same tool-calling protocol as an LLM. It asks
build_status for the build system and its standard recipe, runs the steps, and when a step fails applies the
structured actions of the knowledge-base entries attached to the result, then starts again — until the verifier
passes or it runs out of ideas, and then it says plainly what blocked it. It is the baseline every model is
compared against.

Longer than ~350 lines: one policy over one state (PlannerState); each phase is a short handler, and modules per
phase would only pass the state around."""

from __future__ import annotations

import json
import re
import shlex
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crossbuild.env import debian_args, debian_rules, recipes
from crossbuild.models.base import Message, ToolCall, Turn
from crossbuild.proof.tests_off import TEST_NAME, split_targets, tests_off_by_default, turns_tests_off
from crossbuild.tools.base import Toolset

MAX_ATTEMPTS = 6  # configure/build cycles, each after applying at least one new fix
BUILD_TIMEOUT_S = 3600
ARG_KIND = {"cmake": "cmake_args", "meson": "meson_args", "autotools": "configure_args",
            "configure": "configure_args", "make": "make_args"}


@dataclass
class PlannerState:
    phase: str = "start"  # start | steps | options | goals | targets | switching | finishing | blocked | done
    system: str | None = None
    recipe: list[dict[str, Any]] = field(default_factory=list)
    output_dir: str = "build"
    step: int = 0
    attempts: int = 0
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
    tests_on: str = ""  # "" | "asked" | "done": whether the CMake project's tests off by default were looked for
    # entries whose fixes that turn tests off were held back while others were tried: the last resort, when the
    # failure comes back with nothing attached (a dependency for an example could not be built)
    held_kb: list[dict[str, Any]] = field(default_factory=list)
    # a diagnosed configure failure's switches, by the dependency its failing call looked for: taken if that
    # dependency cannot be built (_without_dependency)
    governing: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    blocked_reason: str = ""


class Planner:
    name = "planner"
    rebuilds_state = True  # its next turn follows from the results it was shown: a resumed run asks it again

    def __init__(self, max_attempts: int = MAX_ATTEMPTS):
        self.max_attempts = max_attempts
        self.state = PlannerState()
        self.gave_up: str | None = None  # why, once the planner is out of ideas (`--model auto` hands over then)
        self.tools: Toolset | tuple[()] = ()  # the tools of the turn it is asked for (complete)
        self._n = 0

    # ---- protocol -------------------------------------------------------------------------------------------

    def complete(self, messages: list[Message], tools: Toolset, *, cancel: threading.Event | None = None) -> Turn:
        self.tools = tools
        results = _last_results(messages)
        for r in results:
            self._observe(r)
        return self._decide()

    def _call(self, tool: str, /, **arguments: Any) -> Turn:
        self._n += 1
        args = {k: v for k, v in arguments.items() if v is not None}
        return Turn(tool_calls=[ToolCall(id=f"planner-{self._n}", name=tool, arguments=json.dumps(args))],
                    finish_reason="tool_calls")

    def _finish(self, status: str, summary: str) -> Turn:
        self.state.phase = "done"
        if status == "blocked":
            self.gave_up = summary
        out = self.state.output_dir if status == "built" else None
        return self._call("finish", status=status, summary=summary, output_dir=out)

    # ---- policy ---------------------------------------------------------------------------------------------

    def _decide(self) -> Turn:
        s = self.state
        if s.phase == "start":
            return self._call("build_status")
        if s.phase == "done":
            return Turn(text="The planner has nothing more to do.")
        if s.phase == "blocked":
            tried = f" Tried: {'; '.join(s.notes)}." if s.notes else ""
            return self._finish("blocked", s.blocked_reason + tried)
        if s.pending_deps:  # dependencies first: nothing configures without them
            return self._call("build_dependency", name=s.pending_deps.pop(0))
        if s.pending_tools:
            return self._call("provide_build_tool", name=s.pending_tools.pop(0))
        if (s.pending_disable or s.pending_system) and s.phase == "steps":
            s.phase = "options"
            return self._call("build_status")
        if s.split == "asked" and s.phase == "steps":
            s.phase = "targets"
            return self._call("build_status")
        if s.pending_goals and s.phase == "steps":
            s.pending_goals = False
            s.phase = "goals"
            return self._call("build_status")
        if s.pending_switch:
            system, s.pending_switch = s.pending_switch, None
            s.phase = "switching"
            return self._call("build_status", system=system)
        if s.pending_edits:
            e = s.pending_edits.pop(0)
            if "content" in e:  # a stand-in for a file the source lacks
                return self._call("write_file", path=e["path"], content=e["content"])
            return self._call("edit_file", path=e["path"], edits=[{"old": e["old"], "new": e["new"]}])
        if s.phase == "steps":
            if s.step >= len(s.recipe):
                s.phase = "finishing"
                summary = f"{s.system} build with the standard recipe"
                if s.notes:
                    summary += "; " + "; ".join(s.notes)
                return self._finish("built", summary)
            step = s.recipe[s.step]
            if s.system == "cmake" and not s.tests_on and s.step and s.recipe[s.step - 1]["phase"] == "configure":
                s.tests_on, s.phase = "asked", "tests-on"  # configured: are its own tests built?
                return self._call("build_status")
            if s.remove_empty_outputs:  # the empty files this run's build made (newer than the pristine copy)
                s.remove_empty_outputs = False
                s.phase = "empty-outputs"
                return self._call("run_command", command=f"find {shlex.quote(s.source_dir)} -type f -size 0 "
                                                         "-newer .xbuild/pristine")
            if s.empty_outputs:
                s.cleaning = "optional"
                found, s.empty_outputs = s.empty_outputs, []
                s.notes.append(f"removed {len(found)} empty file{'s' if len(found) > 1 else ''} a failed generator "
                               f"left ({', '.join(found[:3])})")
                return self._call("run_command", command=shlex.join(["rm", "-f", "--", *found]))
            if s.clean_first and step["phase"] == "configure" and s.system in ("cmake", "meson"):
                s.clean_first = False
                s.cleaning = "required"
                return self._call("run_command", command="rm -rf build")
            remake = ["mkdir", "-p", s.output_dir]
            if s.clean_first and step["phase"] in ("fix", "configure") and s.system == "autotools" \
                    and remake in [r["argv"] for r in s.recipe[:s.step]]:
                # out of tree: a fresh folder, so nothing built with the old settings (a generator compiled for
                # the target before CC_FOR_BUILD was set, sqlite3's lemon) is reused
                s.clean_first = False
                s.cleaning = "required"
                s.step = [r["argv"] for r in s.recipe].index(remake)
                return self._call("run_command", command=f"rm -rf {shlex.quote(s.output_dir)}")
            if s.make_clean and step["phase"] == "build" and step["argv"][:1] == ["make"]:
                # in the source folder nothing removes the objects compiled before a fix that changes how they
                # compile (CROSSBUILD_PIE): make clean first, where the project has one. Only then: a clean target
                # can be broken (giflib's leaves a link its next `ln -s` trips on)
                s.make_clean = False
                s.cleaning = "optional"
                return self._call("run_command", command="make clean", cwd=step["cwd"])
            env = {**s.env, **step.get("env", {})}
            if step["phase"] in _PHASES_WITHOUT_WERROR:
                env.setdefault("CROSSBUILD_NO_WERROR", "1")
            return self._call("run_command", command=shlex.join(self._argv(step)), cwd=step["cwd"],
                              env=env or None, timeout=BUILD_TIMEOUT_S)
        return self._finish("blocked", "the planner lost track of its plan (unexpected state)")

    def _argv(self, step: dict[str, Any]) -> list[str]:
        argv = list(step["argv"])
        s = self.state
        if step["phase"] == "configure":
            argv += s.extra["cmake_args"] if s.system == "cmake" else \
                s.extra["meson_args"] if s.system == "meson" else s.extra["configure_args"]
        elif argv and argv[0] == "make" and step["phase"] in ("build", "check", "install"):
            argv += s.extra["make_args"]
            if step["phase"] == "build":
                argv += s.make_goals
        return argv

    def _observe(self, result: Message) -> None:
        """Take one tool result into the plan: build_status answers whatever the current phase asked (the recipe,
        the project's options, make's goals, another build system), finish and build_dependency may change course,
        and run_command moves through the recipe or applies the attached fixes."""
        s = self.state
        if result.name == "build_status":
            handler = {"start": self._on_recipe, "switching": self._on_switched, "options": self._on_options,
                       "goals": self._on_goals, "targets": self._on_targets,
                       "tests-on": self._on_tests_on}.get(s.phase)
            if handler:
                handler(result.data, result)
        elif result.name == "finish" and result.is_error:
            reasons = result.data.get("verify", {}).get("reasons") or [result.text[:500]]
            if self._rebuild_with_fixes(result.data.get("kb") or [], kinds=_VERDICT_FIX_KINDS, keep_tests=True):
                # the verdict's knowledge names a fix (a test's assumption about the compiler): build again with it
                s.notes.append("built again after the verdict: " + "; ".join(reasons[:2])[:300])
                return
            s.phase = "blocked"
            s.blocked_reason = "the build finished but was not verified: " + "; ".join(reasons[:5])
        elif result.name == "provide_build_tool" and not result.is_error:
            data = result.data
            s.remove_empty_outputs = not data.get("already")
            s.notes.append(f"{data.get('name')} for the build machine: " + (
                f"{data.get('package')} was already available" if data.get("already") else
                f"unpacked {', '.join(data.get('added') or [])} from Debian's archive"))
        elif result.name in ("build_dependency", "edit_file", "write_file", "provide_build_tool") and result.is_error:
            s.notes.append(f"{result.name} failed: {result.text.splitlines()[0][:200]}")
            if result.name == "build_dependency" and result.data.get("own_files") and self._build_in_tree(
                    "the out-of-tree build's own parts did not find the project's own headers"):
                return
            if result.name == "build_dependency" and result.data.get("name"):
                self._without_dependency(result.data["name"], keep=bool(result.data.get("keep_features")))
        elif result.name == "run_command" and s.phase == "steps":
            self._on_command(result)
        elif result.name == "run_command" and s.phase == "empty-outputs":
            s.phase = "steps"
            prefix = s.source_dir.rstrip("/") + "/"
            s.empty_outputs = [line.strip() for line in result.text.splitlines()[1:]
                               if line.strip().startswith(prefix) and ".." not in line][:50]

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
                    and not _HOW_BUILT.search(o) and switches[o] not in given]
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
        # and a variable the top CMakeLists.txt tests before building them, declared nowhere (libgd's BUILD_TEST):
        # typed BOOL, so the cache lists it with the options a later fix can turn off
        args += [f"-D{n}:BOOL=ON" for n in data.get("test_variables") or [] if n not in options
                 and n not in set_here and n not in names]
        if args:
            s.extra["cmake_args"] += args
            s.notes.append(f"tests turned on (off by default): {' '.join(args)}")
            s.step -= 1  # configure again

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

    def _on_command(self, result: Message) -> None:
        s = self.state
        data = result.data
        if s.cleaning:
            required, s.cleaning = s.cleaning == "required", ""
            if result.is_error and required:
                s.phase = "blocked"
                s.blocked_reason = f"could not remove the old build folder: {result.text.splitlines()[0][:200]}"
            return
        if s.split == "going":  # which targets built, whatever the exit: build_status reads it (_on_targets)
            if result.is_error:
                s.split = "asked"
            else:  # everything built this time: the step that did is the recipe's
                s.split, s.split_from["built"] = "done", s.split_from["going"]
                s.step += 1
            return
        if not result.is_error:
            if s.step < len(s.recipe) and s.recipe[s.step]["argv"][:2] == ["cmake", "--build"]:
                s.split_later = {}  # built past the tests' failure: nothing left to split for
            if s.split == "trying":
                s.split, split = "done", s.split_from
                s.notes.append(_split_note(split))
            s.step += 1
            return
        step = s.recipe[s.step]
        first = result.text.splitlines()[0][:200]
        if step["phase"] == "check":  # test programs that do not build are not the product: skip, say so
            exact = [k for k in data.get("kb") or [] if k.get("fit", "fix") == "fix"]
            if exact and self._rebuild_with_fixes(exact, keep_tests=True):
                return  # unless an exact fix keeps them (musl's x86-only sys/io.h): the product is built with it
            s.notes.append(f"tests not built: skipped `{shlex.join(step['argv'])}` (test programs failed to build)")
            s.step += 1
            return
        if step["phase"] == "install" and s.system == "make":  # a plain Makefile's install is its own invention
            s.notes.append(f"`{shlex.join(step['argv'][:2])}` failed ({first[:120]}); the "
                           "build is judged where it was built")
            s.step += 1
            return
        if s.split in ("trying", "done") and s.split_from.get("fine"):  # the tests that built break it: all out
            split = s.split_from
            s.recipe = [split["step"] if r is split["built"] else r for r in s.recipe]
            self._split_apart(split, split["keep"], split["all_left"])
            return
        if s.split in ("trying", "done"):  # it failed even without them: the whole build, with the fixes waiting
            split, s.split = s.split_from, "failed"
            s.recipe = [split["step"] if r is split["built"] else r for r in s.recipe]
            s.notes.append(f"building the targets apart did not finish (`{shlex.join(step['argv'][:3])}` failed)")
            data = {**data, "kb": [*split["data"].get("kb", []), *(data.get("kb") or [])]}
        elif self._split_first(step, data, first):
            return
        self._fix_or_block(step, data, first)

    def _fix_or_block(self, step: dict[str, Any], data: dict[str, Any], first: str) -> None:
        """STEP failed (FIRST, its result's first line): build again with the fixes named, or say what blocked."""
        s = self.state
        diagnosis = data.get("diagnosis") or {}
        for name in diagnosis.get("missing") or []:  # whichever fix asks for it, its switches are known
            s.governing.setdefault(name.lower(), [w for w in diagnosis.get("switches") or []
                                                  if not _HOW_BUILT.search(w["name"])])
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
            tried = ", ".join(diagnosis.get("missing") or []) or "nothing named"
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
        switches = [w for w in diagnosis.get("switches") or [] if not _HOW_BUILT.search(w["name"])
                    and _action_key({"kind": kind, "args": [w["arg"]]}) not in s.applied]
        wanted = [m for m in diagnosis.get("missing") or [] if m.lower() not in tried]
        if wanted and "build_dependency" in self.tools:
            action = {"kind": "dependency", "name": wanted[0]}
            s.notes.append(f"{diagnosis['failed'][:120]} at {diagnosis['where']} looked for {wanted[0]}")
        elif switches:
            chosen = _innermost(switches)
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

    def _split_first(self, step: dict[str, Any], data: dict[str, Any], first: str) -> bool:
        """Test or example programs of a CMake build failed to build, and the fixes attached would turn them off:
        first build the project's other targets by name (build_status reads them from build.ninja), so the library
        is built and the tests' failure said; the fixes wait, for when that fails too. Not while a dependency an
        attached entry names is untried: the tests may only need it. True when it will."""
        s = self.state
        entry = next((k["id"] for k in data.get("kb") or [] for a in k.get("actions", [])
                      if a.get("turns_tests_off") and a["kind"] in ("disable_option", "cmake_args")), None)
        if s.system != "cmake" or s.split or step["argv"][:2] != ["cmake", "--build"]:
            return False
        if entry and s.attempts < self.max_attempts and any(
                _action_key(a) not in s.applied and a.get("when") in (None, s.system) and not a.get("turns_tests_off")
                and (a["kind"] != "dependency" or "build_dependency" in self.tools)
                and (a["kind"] == "dependency" or (k["id"] != entry and k.get("fit", "fix") == "fix"))
                for k in data.get("kb") or [] for a in k.get("actions", [])):
            # a library the tests need (spdlog's catch2 header) is built first, an exact fix that keeps the tests
            # is applied first (WASI's sockets turned off where a test links them); split if the tests still fail
            s.split_later = {"data": data, "entry": entry, "first": first}
            return False
        if not entry:
            # the same failure after that dependency was built (shown once, it attaches nothing now); a failure
            # with fixes of its own is that failure's
            if not s.split_later or data.get("kb"):
                return False
            data, entry, first = s.split_later["data"], s.split_later["entry"], s.split_later["first"]
        s.split_later = {}
        s.split = "asked"
        s.split_from = {"step": step, "data": data, "entry": entry, "first": first, "log": data.get("log", "")}
        return True

    def _apart_last(self, step: dict[str, Any], data: dict[str, Any], first: str) -> bool:
        """A CMake build that failed with no fix left, its targets never built apart: build them apart (the
        same way as _split_first, without an entry), so the libraries are built and the programs the target
        cannot compile (a tool needing what WASI's libc lacks) are left out by name and said. True when it
        will."""
        s = self.state
        if s.system != "cmake" or s.split or step["argv"][:2] != ["cmake", "--build"] or \
                s.attempts >= self.max_attempts:
            return False
        s.split = "asked"
        s.split_from = {"step": step, "data": data, "entry": "no fix left", "first": first,
                        "log": data.get("log", "")}
        return True

    def _on_targets(self, data: dict[str, Any], result: Message) -> None:
        """The targets of the build whose tests failed to build: first the build keeps going past its failures
        (ninja's -k 0), so that every test that builds is built; then the targets that built are built by name,
        leaving out only the tests that did not (one test that newer libc++ rejects no longer leaves out
        hundreds). When that fails, or no test built, the tests and examples are all left out."""
        s = self.state
        s.phase = "steps"
        targets = data.get("cmake_targets") or []
        keep, left = split_targets(targets)
        split = s.split_from
        kinds = {t["name"]: t.get("type", "") for t in targets}
        programs = [n for n in keep if kinds[n] == "EXECUTABLE"]  # a program the target cannot compile: apart too
        if not keep or not (left or programs) or s.recipe[s.step] not in (split["step"], split.get("going")):
            s.split = "failed"
            s.notes.append("no test or example targets to build apart (build.ninja)")
            self._fix_or_block(split["step"], split["data"], split["first"])
            return
        built = {t["name"] for t in targets if t.get("built")}
        ninja = any("output" in t for t in targets) and "--" not in split["step"]["argv"]  # build.ninja's links
        if ninja and "going" not in split:  # keep going once; the recipe's step itself is kept for the rebuild
            split["going"] = {**split["step"], "argv": [*split["step"]["argv"], "--", "-k", "0"]}
            s.recipe = [split["going"] if i == s.step else r for i, r in enumerate(s.recipe)]
            s.split = "going"
            return
        s.recipe = [split["step"] if r is split.get("going") else r for r in s.recipe]
        if "going" in split:
            kept = self._without_failed_programs(split, targets, keep, built)
            if not left and kept == keep:  # nothing to leave out: the whole build's failure stands
                s.split = "failed"
                s.notes.append("building the targets apart left nothing out: every program built")
                self._fix_or_block(split["step"], split["data"], split["first"])
                return
            keep = kept
        # the product's targets are named whether they built or not (one outside `all`: fmt's bundled gmock_main);
        # if one cannot be built, building by name fails and everything is left out below
        if "going" in split and (tests := [t for t in left if t in built]):
            split.update(fine=True, keep=keep, all_left=left)
            self._split_apart(split, keep + tests, [t for t in left if t not in built], clean=False)
            return
        self._split_apart(split, keep, left)

    def _without_failed_programs(self, split: dict[str, Any], targets: list[dict[str, Any]], keep: list[str],
                                 built: set[str]) -> list[str]:
        """KEEP without its programs that did not build while the build kept going, when every library in it
        built: a tool the target's libc cannot compile (`ru_maxrss` on WASI, an app CMake adds with no option
        of its own) is left out by name, as the tests are, and the verdict names it (not built, not judged)."""
        kinds = {t["name"]: t.get("type", "") for t in targets}
        libraries = [n for n in keep if kinds.get(n, "").endswith("LIBRARY")]
        failed = [n for n in keep if kinds.get(n) == "EXECUTABLE" and n not in built]
        if not failed or not libraries or not all(n in built for n in libraries):
            return keep
        self.state.notes.append(f"programs not built: {' '.join(failed[:8])} were not built when the build kept "
                                "going past its failures, every library was; left out by name "
                                f"({split['log'] or split['first']})")
        return [n for n in keep if n not in failed]

    def _split_apart(self, split: dict[str, Any], names: list[str], left: list[str], clean: bool = True) -> None:
        """The failed build step of SPLIT again, naming the targets NAMES (LEFT: those left out). CLEAN: from a
        clean build folder, when test programs the whole build made are left out (libpng's pngvalid), which a
        build by name does not make and the clean rebuild would miss."""
        s = self.state
        split["fine"] = not clean
        s.split, split["left"] = "trying", left
        split["built"] = {**split["step"], "argv": [*split["step"]["argv"], "--target", *names]}
        index = s.recipe.index(split["step"]) if split["step"] in s.recipe else s.step
        s.recipe = [split["built"] if i == index else r for i, r in enumerate(s.recipe)]  # a copy: not the result's
        s.step = index
        if clean:
            s.clean_first, s.step = True, min(index, _restart_index(s.recipe))

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
        s.step = min(s.step, _restart_index(s.recipe))
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
        s.step = _restart_index(recipe)
        s.notes.append(f"built in {source}/ itself, as Debian builds autotools projects: {why}")
        return True

    def _make_libtool(self) -> None:
        """A libtool for the target in the source folder (so the clean rebuild makes it too), made before the build
        starts again, and make told to use it."""
        s = self.state
        folder = f"{s.source_dir}/{recipes.LIBTOOL_FOLDER}"
        s.pending_edits.append({"path": f"{folder}/configure.ac", "content": recipes.LIBTOOL_CONFIGURE_AC})
        at = _restart_index(s.recipe)
        s.recipe[at:at] = [{"argv": list(step.argv), "cwd": step.cwd, "phase": step.phase, "env": {}}
                           for step in recipes.libtool_steps(folder, s.configure_args)]
        s.libtool = f"{s.workspace}/{folder}/libtool"
        s.extra["make_args"] = [a for a in s.extra["make_args"] if not a.startswith("LIBTOOL=")]
        s.extra["make_args"].append(f"LIBTOOL={s.libtool}")

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
            chosen = _innermost(governing)
            s.extra[kind].append(chosen["arg"])
            s.applied.add(_action_key({"kind": kind, "args": [chosen["arg"]]}))
            s.notes.append(f"built without {name}: {chosen['arg'].removeprefix('-D')} ({chosen['why']})")
            if turns_tests_off(chosen["arg"]):
                s.notes.append(f"tests not built: diagnosis: {chosen['arg']}")
            return
        pattern = feature_option_pattern(name)
        if pattern and pattern not in s.feature_of:
            s.feature_of[pattern] = name
            s.pending_disable.append(pattern)

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
                key = _action_key(action)
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
                    at = _restart_index(s.recipe)
                    s.recipe[at:at] = [{"argv": ["cp", f".xbuild/autotools/{Path(p).name}", p], "cwd": ".",
                                        "phase": "fix", "env": {}} for p in s.config_scripts]
                    s.notes.append(f"replaced {', '.join(s.config_scripts)} with current ones")
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


# After a failed verdict only fixes that change how the same code is compiled are taken (-fno-builtin for a test
# that counts allocations): one that drops tests or goals would hide the failing test it was attached for.
# What turns tests off is proof.tests_off's one definition (turns_tests_off); the knowledge base flags such actions.
# Warnings made errors stop builds whose code is right (zig's clang warns where the authors' gcc did not), and the
# planner always met them first and always fixed them the same way; the code compiled is the same without them,
# so build steps never make them fatal. Configure steps keep them: a check may read -Werror to decide support.
_PHASES_WITHOUT_WERROR = frozenset({"build", "check", "install"})
_VERDICT_FIX_KINDS = frozenset({"cmake_args", "meson_args", "configure_args", "make_args", "cache_vars", "env",
                                "clean"})


# Options about how the project is built, never a feature to drop (libpng: a test links -lpng_shared, the project's
# own target; turning PNG_SHARED off would remove the library itself).
_HOW_BUILT = re.compile(r"SHARED|STATIC|PIC\b|INSTALL|FRAMEWORK|(^|_)LIBS?$", re.IGNORECASE)


def _action_key(action: dict[str, Any]) -> str:
    """How an applied action is remembered (PlannerState.applied): its canonical JSON."""
    return json.dumps(action, sort_keys=True)


def _innermost(switches: list[dict[str, Any]]) -> dict[str, Any]:
    """Of a diagnosis' switches (outermost first), the innermost that keeps the tests, else the innermost: the
    narrowest feature to drop."""
    return ([w for w in switches if not turns_tests_off(w["arg"])] or switches)[-1]


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
    if kind == "cross_libtool":
        return "a libtool for the target, made with the toolchain's configure"
    if kind == "stub_file":
        return f"an empty stand-in for the missing {Path(action['file']).name} (built without what it held)"
    if kind == "patch":
        return f"patch src/{action['file']}"
    return kind


def _restart_index(recipe: list[dict[str, Any]]) -> int:
    """Start again from configuring, after the fixes that go before it (prepare steps such as autoreconf are
    kept); with nothing to configure, from the first step after the prepare steps (a plain Makefile's libtool for
    the target is made once, not at every restart)."""
    for i, step in enumerate(recipe):
        if step["phase"] in ("fix", "configure"):
            return i
    return next((i for i, step in enumerate(recipe) if step["phase"] != "prepare"), 0)


def _last_results(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    for m in reversed(messages):
        if m.role != "tool":
            break
        out.append(m)
    return list(reversed(out))


def _split_note(split: dict[str, Any]) -> str:
    """What building the targets apart left out, and why."""
    why = f"their build failed: {split['log'] or split['first']}"
    if split.get("fine"):
        return (f"tests not built: {split['entry']}: {len(split['left'])} test or example targets did not build "
                f"and were left out, {' '.join(split['left'][:8])} ({why}); every other target was built by name")
    return (f"tests not built: {split['entry']}: built the other targets by name, without the test and example "
            f"targets {' '.join(split['left'][:8])} ({why})")
