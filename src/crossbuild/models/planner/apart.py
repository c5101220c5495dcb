"""Building a CMake project's targets apart: when test or example programs (or a program the target's libc cannot
compile) fail to build, the build keeps going (ninja -k 0) to learn which targets build, then builds those by name,
so the libraries are built and what was left out is said."""

from __future__ import annotations

from typing import Any

from crossbuild.models.base import Message
from crossbuild.models.planner.state import PlannerParts, action_key, restart_index
from crossbuild.proof.tests_off import split_targets


class BuildApart(PlannerParts):
    """The build-apart family (PlannerState.split)."""

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
                action_key(a) not in s.applied and a.get("when") in (None, s.system) and not a.get("turns_tests_off")
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
            s.clean_first, s.step = True, min(index, restart_index(s.recipe))


def split_note(split: dict[str, Any]) -> str:
    """What building the targets apart left out, and why."""
    why = f"their build failed: {split['log'] or split['first']}"
    if split.get("fine"):
        return (f"tests not built: {split['entry']}: {len(split['left'])} test or example targets did not build "
                f"and were left out, {' '.join(split['left'][:8])} ({why}); every other target was built by name")
    return (f"tests not built: {split['entry']}: built the other targets by name, without the test and example "
            f"targets {' '.join(split['left'][:8])} ({why})")
