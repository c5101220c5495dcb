"""The offline planner: a deterministic policy that speaks the same tool-calling protocol as an LLM. It asks
build_status for the build system and its standard recipe, runs the steps, and when a step fails tries the
families of remedies (remedies.py) - the knowledge base's typed actions (fixes.py), the build system's own records,
building targets apart (apart.py), another build system - then starts again, until the verifier passes or it runs
out of ideas, and then it says plainly what blocked it. It is the baseline every model is compared against. This
module is the protocol and the loop over one plan's steps; build_status's answers are read in recipe.py."""

from __future__ import annotations

import json
import shlex
import threading
from typing import Any

from crossbuild.env import flag_args
from crossbuild.models.base import FINISH_SUMMARY_MAX, Message, ToolCall, Turn
from crossbuild.models.planner.apart import BuildApart, split_note
from crossbuild.models.planner.fixes import Fixes
from crossbuild.models.planner.recipe import RecipeFacts
from crossbuild.models.planner.remedies import Remedies
from crossbuild.models.planner.state import BUILD_TIMEOUT_S, MAX_ATTEMPTS, PlannerState, count_progress
from crossbuild.tools import foreign_objects
from crossbuild.tools.base import Toolset

# After a failed verdict only fixes that change how the same code is compiled are taken (-fno-builtin for a test
# that counts allocations): one that drops tests or goals would hide the failing test it was attached for.
# What turns tests off is proof.tests_off's one definition (turns_tests_off); the knowledge base flags such actions.
# Warnings made errors stop builds whose code is right (zig's clang warns where the authors' gcc did not), and the
# planner always met them first and always fixed them the same way; the code compiled is the same without them,
# so build steps never make them fatal. Configure steps keep them: a check may read -Werror to decide support.
_PHASES_WITHOUT_WERROR = frozenset({"build", "check", "install"})

_VERDICT_FIX_KINDS = frozenset({"cmake_args", "meson_args", "configure_args", "make_args", "cache_vars", "env",
                                "clean"})


class Planner(RecipeFacts, Remedies, BuildApart, Fixes):
    name = "planner"
    rebuilds_state = True  # its next turn follows from the results it was shown: a resumed run asks it again

    def __init__(self, max_attempts: int = MAX_ATTEMPTS):
        self.max_attempts = max_attempts
        self.state = PlannerState()
        self.gave_up: str | None = None  # why, once the planner is out of ideas (`--model auto` hands over then)
        self.tools: Toolset | tuple[()] = ()  # the tools of the turn it is asked for (complete)
        self._n = 0

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
        return self._call("finish", status=status, summary=fitted(summary), output_dir=out)

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
            if s.system == "cmake" and s.tests_on in ("", "recheck") and s.step and \
                    s.recipe[s.step - 1]["phase"] == "configure":
                # configured: are its own tests built? Then, with them on: did they look for what is missing?
                s.tests_on, s.phase = ("asked", "tests-on") if not s.tests_on else ("done", "tests-deps")
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
        return flag_args.combined(argv)  # two fixes' CFLAGS: each build system keeps only the last one given

    def _observe(self, result: Message) -> None:
        """Take one tool result into the plan: build_status answers whatever the current phase asked (the recipe,
        the project's options, make's goals, another build system), finish and build_dependency may change course,
        and run_command moves through the recipe or applies the attached fixes."""
        s = self.state
        if result.name == "build_status":
            handler = {"start": self._on_recipe, "switching": self._on_switched, "options": self._on_options,
                       "goals": self._on_goals, "targets": self._on_targets,
                       "tests-on": self._on_tests_on, "tests-deps": self._on_tests_deps}.get(s.phase)
            if handler:
                handler(result.data, result)
        elif result.name == "finish" and result.is_error:
            reasons = result.data.get("verify", {}).get("reasons") or [result.text[:500]]
            # only an entry whose exact symptom a failed test printed: one matched by words alone (fmt's chrono test
            # and an allocator entry's C++20) changes how everything compiles on a guess, before the build-machine
            # check has said whether the failure is the target's at all
            exact = [k for k in result.data.get("kb") or [] if k.get("fit", "fix") == "fix"]
            if self._rebuild_with_fixes(exact, kinds=_VERDICT_FIX_KINDS, keep_tests=True):
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
            if result.name == "build_dependency" and result.data.get("name") and not self._next_alternative(
                    result.data["name"]):
                self._without_dependency(result.data["name"], keep=bool(result.data.get("keep_features")))
        elif result.name == "run_command" and s.phase == "steps":
            self._on_command(result)
        elif result.name == "run_command" and s.phase == "empty-outputs":
            s.phase = "steps"
            prefix = s.source_dir.rstrip("/") + "/"
            s.empty_outputs = [line.strip() for line in result.text.splitlines()[1:]
                               if line.strip().startswith(prefix) and ".." not in line][:50]

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
                s.notes.append(split_note(split))
            s.step += 1
            return
        step = s.recipe[s.step]
        first = result.text.splitlines()[0][:200]
        count_progress(s, data, result.text)
        if data.get("stopped") == foreign_objects.STOPPED:  # the host's compiler: no flag or retry changes that
            if not self._another_system(step, first):
                said = result.text.splitlines()[0]
                s.phase = "blocked"
                s.blocked_reason = f"`{shlex.join(step['argv'])}` was {said[1:said.rfind(']')]}"
            return
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


def _last_results(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    for m in reversed(messages):
        if m.role != "tool":
            break
        out.append(m)
    return list(reversed(out))


def fitted(summary: str, limit: int = FINISH_SUMMARY_MAX) -> str:
    """SUMMARY within what the finish tool takes: its start (what failed) and its end (what was tried), the middle
    cut (libxkbcommon's verdict listed every failed test, and the finish call itself was refused)."""
    if len(summary) <= limit:
        return summary
    cut = " [...] "
    head = (limit - len(cut)) * 2 // 3
    return summary[:head] + cut + summary[len(summary) - (limit - len(cut) - head):]
