"""A plain Makefile's own test goal, run on the target after the build: bzip2's `make check` (its round trips of the
sample files), giflib's regression renders, lua's `make test`. The planner leaves such goals out of the build
(they run target programs, which the build machine cannot), so the verifier runs them where it can: in the test
programs' sandbox, where binfmt hands every target program to qemu.

The command is the build's own last make step in that folder (its variables: CC=, AR=, prefixes; its options and
environment), its goals replaced by the test goal: `check`, else `test`, else `tests`; silent, so that what the
goal printed is the tests' output only. When that step named goals
instead of the Makefile's default goal, the default goal is marked old (`-o all`): what the build left out
(documentation that needs host tools) stays out, and the test goal's recipe still runs.

A plain Makefile keeps no record of which programs a goal ran, so qemu keeps one: every qemu process opens its own
log file (QEMU_LOG_FILENAME with %d, its pid) in a folder crossbuild made, and every target program here runs
through qemu. The goal counts as a test on the target only when it started at least one; a goal that passed and
only built its test programs (libtommath's `make test` builds `./test`) has those run bare instead (harness.py).
A build's test could write such files itself; this ties the goal to the target, it does not vouch for what the
project's tests check."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from crossbuild.env import recipes
from crossbuild.env.recipes import BuildStep
from crossbuild.foundation import safefs

TEST_GOALS = ("check", "test", "tests")  # the GNU standard's name first
HARNESS = "Makefile"  # how verdicts name this harness: "the project's Makefile"
_LOG_NAME = re.compile(r"^qemu-\d+\.log$")
_NOT_BUILDS = {"install", "clean", "distclean", "mostlyclean", "maintainer-clean", "uninstall", "dist"}


@dataclass(frozen=True)
class TestGoal:
    goal: str
    argv: list[str]
    cwd: str  # workspace-relative, as the step's
    env: tuple[tuple[str, str], ...] = ()


def find(steps: Sequence[BuildStep], workspace: Path) -> TestGoal | None:
    """The test goal of the folder the build's last plain make step ran in (not one with -f: its Makefile is not
    the folder's), and the command that runs it; None without such a step or goal."""
    builds = [s for s in steps if s.argv and Path(s.argv[0]).name in ("make", "gmake")
              and not {"-f", "--file"} & set(s.argv) and not any(a.startswith("--file=") for a in s.argv)
              and not set(recipes.make_goals(s.argv)) & (_NOT_BUILDS | set(TEST_GOALS))]
    if not builds:
        return None
    step = builds[-1]
    texts = recipes.makefile_texts(workspace, recipes.make_folder(step))
    if not texts:
        return None
    goal = next((g for g in TEST_GOALS if defines(texts[0], g)), None)
    if goal is None:
        return None
    named = recipes.make_goals(step.argv)
    argv = _without_goals(list(step.argv))
    default = recipes.default_goal(texts[0])
    if named and default is not None and default.name not in named and default.name != goal:
        argv += ["-o", default.name]  # its recipe and prerequisites are not remade: what the build left out
    # -s: make does not echo the recipe, whose words ("expected", "No such file") would read as the tests' evidence
    return TestGoal(goal, [*argv, "-s", goal], step.cwd, step.env)


def defines(makefile: str, goal: str) -> bool:
    """Whether the Makefile text has a rule for GOAL (`check: test`, `$(PLATS) help test clean:`)."""
    text = makefile.replace("\\\n", " ")
    rule = re.compile(r"^(?:[^\s#=:][^#=:]*\s)?" + re.escape(goal) + r"(?:\s[^#=:]*)?\s*::?(?!=)", re.MULTILINE)
    return bool(rule.search(text))


def _without_goals(argv: list[str]) -> list[str]:
    """ARGV (a make command) with the goals it names left out, its options, their values and variables kept."""
    out, skip = [argv[0]], False
    for arg in argv[1:]:
        keep = skip or arg.startswith("-") or "=" in arg or arg.isdigit()
        skip = not skip and arg in ("-C", "-f", "-o", "-W", "-I", "--directory", "--file")
        if keep:
            out.append(arg)
    return out


def evidence_folder(scratch: Path) -> Path:
    """A fresh folder, writable inside the sandbox (the workspace's scratch), for qemu's per-process log files."""
    scratch.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="qemu-runs-", dir=scratch))


def evidence_env(folder: Path) -> dict[str, str]:
    """The environment that makes every qemu process open a log file of its own in FOLDER (`unimp`: it writes only
    what the emulator cannot do; the file is opened at start either way)."""
    return {"QEMU_LOG": "unimp", "QEMU_LOG_FILENAME": str(folder / "qemu-%d.log")}


def programs_started(folder: Path) -> int:
    """How many target programs ran under qemu with FOLDER's evidence environment; the folder is removed."""
    count = 0
    if safefs.is_dir(folder.parent, folder.name):  # never counted through a link the test put in its place
        with os.scandir(folder) as entries:
            count = sum(1 for e in entries if _LOG_NAME.match(e.name))
    shutil.rmtree(folder, ignore_errors=True)
    return count
