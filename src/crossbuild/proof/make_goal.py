"""A plain Makefile's own test goal, run on the target after the build: bzip2's `make check` (its round trips of the
sample files), giflib's regression renders, lua's `make test`. The planner leaves such goals out of the build
(they run target programs, which the build machine cannot), so the verifier runs them where it can: in the test
programs' sandbox, where binfmt hands every target program to qemu.

The command is the build's own last make step (in the folder whose test goals it left out, when it left some out;
its variables: CC=, AR=, prefixes; its options and environment; not its parallel jobs), its goals replaced by the
test goal: `check`, else `test`, else `tests`; silent, so that what the
goal printed is the tests' output only. When that step named goals
instead of the Makefile's default goal, the default goal is marked old (`-o all`): what the build left out
(documentation that needs host tools) stays out, and the test goal's recipe still runs.

A plain Makefile keeps no record of which programs a goal ran, so qemu keeps one: every qemu process opens its own
log file (QEMU_LOG_FILENAME with %d, its pid) in a folder crossbuild made, and every target program here runs
through qemu. The goal counts as a test on the target only when it started at least one; a goal that passed and
only built its test programs (libtommath's `make test` builds `./test`) has those run bare instead (harness.py).
A goal no line of the text defines (a rule `$(eval)` makes from a template, as libtommath's) is looked up in make's
own database, printed in the sandbox (`make -p -q .DEFAULT`: no goal is made; included makefiles with a rule are
remade, as any run of the goal would).
A build's test could write such files itself; this ties the goal to the target, it does not vouch for what the
project's tests check."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from crossbuild.env import recipes, wasirun
from crossbuild.env.recipes import BuildStep
from crossbuild.foundation import safefs

TEST_GOALS = ("check", "test", "tests")  # the GNU standard's name first
HARNESS = "Makefile"  # how verdicts name this harness: "the project's Makefile"
_LOG_NAME = re.compile(r"^(qemu|wasm)-\d+\.log$")  # qemu's per-process logs, wasirun's records
_JOBS = re.compile(r"^(-j\d*|--jobs(=\d+)?)$")
# make prints its database (-p) for a goal with no rule and runs no goal's recipe (-q; bash-completion's way); it
# still runs the project's $(shell) calls and remakes an included makefile that has a rule: all in the sandbox,
# as the goal itself runs
DATABASE_ARGS = ("-p", "-q", ".DEFAULT")


@dataclass(frozen=True)
class TestGoal:
    goal: str
    argv: list[str]
    cwd: str  # workspace-relative, as the step's
    env: tuple[tuple[str, str], ...] = ()


def find(steps: Sequence[BuildStep], workspace: Path, left_out: tuple[str, Sequence[str]] | None = None,
         database: Callable[[BuildStep, list[str]], str | None] | None = None) -> TestGoal | None:
    """The test goal of the folder the build's last plain make step ran in (not one naming its own Makefile with
    -f), and the command that runs it; None without such a step or goal. LEFT_OUT (folder, goals): the test goals
    the build left out of that folder's default goal (tests_off.make_goals_left_out): the step is that folder's,
    and the goal must be one of them or name one as a prerequisite (bzip2's `check: test`). When the text names no
    test goal, make's own database (DATABASE runs the step's make with these arguments, in the sandbox: a rule
    made by $(eval), an included file's or a variable's target) is read instead."""
    builds = [s for s in steps if s.argv and Path(s.argv[0]).name in ("make", "gmake")
              and not recipes.make_file_named(s.argv)
              and not any(recipes.builds_nothing(g) or g in TEST_GOALS for g in recipes.make_goals(s.argv))
              and (left_out is None or recipes.make_folder(s) == left_out[0])]
    if not builds:
        return None
    step = builds[-1]
    texts = recipes.makefile_texts(workspace, recipes.make_folder(step))
    if not texts:
        return None
    argv = _without_goals(list(step.argv))
    goal = _test_goal(rules(texts[0]), left_out)
    if goal is None and database is not None:
        goal = _test_goal(rules(database_rules_text(database(step, [*argv, *DATABASE_ARGS]) or "")), left_out)
    if goal is None:
        return None
    named = recipes.make_goals(step.argv)
    default = recipes.default_goal(texts[0])
    if named and default is not None and default.name not in named and default.name != goal:
        argv += ["-o", default.name]  # its recipe and prerequisites are not remade: what the build left out
    # -s: make does not echo the recipe, whose words ("expected", "No such file") would read as the tests' evidence
    return TestGoal(goal, [*argv, "-s", goal], step.cwd, step.env)


def _test_goal(found: dict[str, list[str]], left_out: tuple[str, Sequence[str]] | None) -> str | None:
    return next((g for g in TEST_GOALS if g in found and (
        left_out is None or g in left_out[1] or set(found[g]) & set(left_out[1]))), None)


def database_rules_text(database: str) -> str:
    """The rules of make's printed database (`make -p`), one per line as a Makefile writes them: the entries of its
    `# Files` section that make marks as targets (not those after `# Not a target:`), recipes left out."""
    out, in_files, not_target = [], False, False
    for line in database.splitlines():
        if line.startswith("# Files"):
            in_files = True
        elif line.startswith(("# files hash-table stats", "# VPATH Search Paths")):
            in_files = False
        elif not in_files or line.startswith("\t") or not line.strip():
            continue
        elif line.startswith("#"):
            not_target = line.startswith("# Not a target:")
        else:
            if not not_target:
                out.append(line)
            not_target = False
    return "\n".join(out)


def rules(makefile: str) -> dict[str, list[str]]:
    """The Makefile's rules, target -> prerequisites as written (variables not expanded: `$(PLATS) help test clean:`
    defines `test`), read line by line: recipe lines, comments, variable assignments and define blocks are not
    rules. Linear in the text: a Makefile is the build's writing."""
    out: dict[str, list[str]] = {}
    in_define = False
    for line in makefile.replace("\\\n", " ").splitlines():
        if in_define:
            in_define = not line.strip().startswith("endef")
            continue
        if line.startswith("\t"):
            continue
        line = line.split("#", 1)[0]
        if line.strip().startswith("define "):
            in_define = True
            continue
        left, colon, right = line.partition(":")
        if not colon or "=" in left or right.startswith("="):
            continue
        right = right.lstrip(":").split(";", 1)[0]  # `a:: b`, `a: b; recipe`
        if "=" in right:  # a target-specific variable (`test: MOREFLAGS += -g`) names no prerequisite
            right = ""
        for target in left.split():
            out.setdefault(target, []).extend(right.split())
    return out


def _without_goals(argv: list[str]) -> list[str]:
    """ARGV (a make command) with the goals it names left out, its options, their values and variables kept, and
    no parallel jobs: test rules often share files (the goal is one test, run serially)."""
    out, skip = [argv[0]], False
    rest = iter(argv[1:])
    for arg in rest:
        if arg in ("-j", "--jobs"):
            arg = next(rest, None)  # its count, when one follows, goes with it
            if arg is None or arg.isdigit():
                continue
        elif _JOBS.match(arg):
            continue
        keep = skip or arg.startswith("-") or "=" in arg or arg.isdigit()
        skip = not skip and arg in recipes.MAKE_VALUE_OPTIONS
        if keep:
            out.append(arg)
    return out


def evidence_folder(workspace: Path, scratch: str) -> str:
    """A fresh folder (workspace-relative) below the workspace's SCRATCH folder, writable inside the sandbox, for
    qemu's per-process log files; made without following a link on the way."""
    name = f"{scratch}/qemu-runs-{secrets.token_hex(8)}"
    with safefs.open_dir(workspace, name, create=True):
        pass
    return name


def evidence_env(folder: Path) -> dict[str, str]:
    """The environment that makes every qemu process open a log file of its own in FOLDER (`unimp`: it writes only
    what the emulator cannot do; the file is opened at start either way), and every wasirun leave its record."""
    return {"QEMU_LOG": "unimp", "QEMU_LOG_FILENAME": str(folder / "qemu-%d.log"),
            wasirun.RECORD: str(folder / "wasm-%d.log")}


def programs_started(workspace: Path, folder: str) -> int:
    """How many target programs ran under qemu with FOLDER's evidence environment (FOLDER workspace-relative, read
    without following a link); the folder is removed."""
    count = 0
    try:
        with safefs.open_dir(workspace, folder) as fd, os.scandir(fd) as entries:
            count = sum(1 for e in entries if _LOG_NAME.match(e.name))
    except OSError:
        count = 0
    try:
        safefs.remove_tree(workspace, folder)
    except OSError:
        pass
    return count
