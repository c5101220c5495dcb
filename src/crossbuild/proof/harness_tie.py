"""Whether a harness's tests ran on the target (harness.py): a test counts towards `tested` only when it is tied
to a target program, by its command as the project's test list defines it, or, when no passing test's command names
one, by qemu's own per-process record while a few passing tests run again alone (make_goal's evidence folder). A
CTest test that starts a program the build never made (by its emulator, or a script named with it) is listed as not
built."""

from __future__ import annotations

import os
import re
from pathlib import Path

from crossbuild.env import ninja_targets
from crossbuild.env.sandbox import Limits, Sandbox
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation import safefs
from crossbuild.proof import make_goal
from crossbuild.proof.harness_records import Harness
from crossbuild.proof.smoke import NOT_BUILT, SmokeRun

_ABSOLUTE = re.compile(r"/[^\s\"';=,:]+")  # an absolute path inside a command argument (`-DCLI=/ws/build/x`)
RUN_AGAIN = 3  # passing tests run again alone, with qemu's record, when no passing test's command names the target
AGAIN_MARGIN_S = 60.0  # added to what a test run again alone may take: the harness's own start
_PLAIN_NAME = re.compile(r"[\w+][\w.+-]*")  # a test or folder name that is neither an option nor a glob
_CMAKE_REGEX_SPECIAL = re.compile(r"[.^$*+?()\[\]{}|\\]")  # escaped with a backslash in CTest's -R


def tie(runs: list[SmokeRun], harness: Harness, commands: dict[str, list[str]], target_programs: set[str]) -> None:
    """Mark each run whose test starts a target program (on_target): by its command (CTest, Meson), or, for
    automake, by being one of TARGET_PROGRAMS itself (its wrapper's name)."""
    names = {Path(p).name.removeprefix("lt-").removesuffix(".exe") for p in target_programs}
    for r in runs:
        if harness.name == "make check":
            r.on_target = Path(r.path).name.removesuffix(".exe") in names
            continue
        command = commands.get(r.path) or commands.get(r.path.split(":", 1)[-1]) or []
        r.on_target = any(path in target_programs for arg in command for path in _ABSOLUTE.findall(arg))


def programs_not_built(runs: list[SmokeRun], commands: dict[str, list[str]], emulator: set[str],
                       workspace: Path, scanned: set[str], unbuilt: set[str]) -> None:
    """A failed test whose command starts the emulator on a program the build did not make (a test left out because
    it did not compile), or names in its arguments (a script's `-DTEST_COMMAND=/ws/build/x`) a program the build's
    own record says it links and did not make (UNBUILT, from unbuilt_programs), when its output says a program could
    not be started and no program it names is there: CTest cannot tell, since the emulator or the script is there, so
    it is listed as not built, not failed. Never a program the verifier found before the tests ran (SCANNED: a test
    that deleted its own program failed), and only one that is plainly absent below WORKSPACE (the command is the
    build's writing): a link on the way, or anything else odd, leaves the failure as it is."""
    for r in runs:
        command = commands.get(r.path) or []
        if r.passed or r.skipped or not command:
            continue
        named = [command[1]] if len(command) > 1 and command[0] in emulator else []
        if not named and _failed_to_start(r) and not any(  # a script's: only if no program it names is there
                os.path.normpath(path) in scanned for arg in command for path in _ABSOLUTE.findall(arg)):
            named = [path for arg in command[1:] for path in _ABSOLUTE.findall(arg)
                     if os.path.normpath(path) in unbuilt] or _named_not_found(r, unbuilt)
        for program in map(os.path.normpath, named):
            if program in scanned or not program.startswith(str(workspace) + "/"):
                continue
            if _absent(workspace, os.path.relpath(program, workspace)):
                r.skipped, r.triage, r.why = NOT_BUILT, None, None
                break


# what a script or CMake's execute_process says when a program it starts is not there
_NOT_STARTED = re.compile(r"No such file or directory|: not found$|command not found|cannot execute", re.MULTILINE)
_NOT_FOUND_LINE = re.compile(r"^.{0,400}?(No such file or directory|: not found$|command not found).*$", re.MULTILINE)


def _named_not_found(r: SmokeRun, unbuilt: set[str]) -> list[str]:
    """The programs of UNBUILT that the lines of R's output saying a program was not found name: a script test
    that finds its program by its own name (json-c's `test_util_file.test` runs `$builddir/test_util_file`), so no
    argument names it. Only compared with the build's record, never opened."""
    lines = [m.group(0) for m in _NOT_FOUND_LINE.finditer(r.output_tail or "")]
    return [path for line in lines for path in _ABSOLUTE.findall(line) if os.path.normpath(path) in unbuilt]


def _failed_to_start(r: SmokeRun) -> bool:
    """Whether a script test's output says a program could not be started (CMake's execute_process, a shell)."""
    return r.exit_code == 127 or bool(_NOT_STARTED.search(r.output_tail or "")) or bool(
        _NOT_STARTED.search(r.why or ""))


def unbuilt_programs(root: Path) -> set[str]:
    """The programs a CMake build folder ROOT generated for Ninja links (its build.ninja) and that are not there,
    as absolute paths; empty for other build folders."""
    return {os.path.normpath(root / t["output"]) for t in ninja_targets.cmake_targets(root.parent, root.name)
            if t["type"] == "EXECUTABLE" and t.get("output") and not t.get("built")}


def _absent(anchor: Path, rel: str) -> bool:
    """Whether ANCHOR/REL plainly does not exist: its folder is there (no link on the way) and holds no such name."""
    try:
        safefs.lstat(anchor, rel)
    except FileNotFoundError:
        return True
    except OSError:  # a link on the way (UnsafePath), a folder that is not one: not "never built"
        return False
    return False


def alone_limit(r: SmokeRun, limit: float, suite_s: float) -> float:
    """How long R may take when its harness runs it again alone: four times its first run, or, when the harness
    timed no test (automake's records hold no time), what the whole suite took (SUITE_S): `make check TESTS=x`
    first remakes what the check needs (gf-complete's test scripts, each written by a target program under qemu),
    which a test's own time never shows. Never more than LIMIT, a test's own limit, and AGAIN_MARGIN_S more."""
    return min(limit, 4 * r.duration_s if r.duration_s else suite_s) + AGAIN_MARGIN_S


def tie_by_running_again(runs: list[SmokeRun], harness: Harness, toolchain: Toolchain, box: Sandbox,
                          env: dict[str, str], limit: float, log_dir: Path, suite_s: float) -> None:
    """No passing test's command names a target program (json-c's tests are scripts that find their programs
    themselves): run up to RUN_AGAIN of the passing tests once more, each alone and the quickest first, with qemu
    keeping its per-process record (make_goal's evidence folder); the first that passes again and during which
    qemu ran a target program is tied to the target. One stopped at its limit ends the tries: the next would
    remake the same prerequisites (alone_limit)."""
    ws = toolchain.workspace
    for n, (r, argv) in enumerate(runnable_alone(runs, harness)[:RUN_AGAIN]):
        evidence, evidence_env = fresh_evidence(toolchain)
        res = box.run(argv, cwd=harness.cwd, env=env | evidence_env,
                      log_path=log_dir / f"harness-again-{n}.log",
                      limits=Limits(timeout_s=alone_limit(r, limit, suite_s), max_output_bytes=16 << 20))
        started = make_goal.programs_started(ws, evidence)
        if res.ok and started:
            r.on_target = True
            r.why = f"{started} target program run(s) under qemu when it ran again alone"
            return
        if res.stopped:
            return


def runnable_alone(runs: list[SmokeRun], harness: Harness) -> list[tuple[SmokeRun, list[str]]]:
    """The passing tests not yet tied to the target that HARNESS can run alone, the quickest first, each with its
    command (a Meson suite's test or a glob is left out, not the end of the list)."""
    passing = sorted((r for r in runs if r.passed and not r.on_target), key=lambda r: r.duration_s or 0.0)
    return [(r, argv) for r in passing if (argv := one_test(harness, r.path)) is not None]


def fresh_evidence(toolchain: Toolchain) -> tuple[str, dict[str, str]]:
    """A fresh qemu evidence folder (workspace-relative) below the toolchain's scratch folder, and the environment
    that makes each qemu process write its record there."""
    ws = toolchain.workspace
    folder = make_goal.evidence_folder(ws, os.path.relpath(toolchain.scratch, ws))
    return folder, make_goal.evidence_env(ws / folder)


def one_test(harness: Harness, name: str) -> list[str] | None:
    """The command that runs only the test NAME of HARNESS (its setup fixtures too, for CTest), or None."""
    if harness.name == "ctest":
        return [harness.argv[0], "--no-tests=error", "-R", "^" + _CMAKE_REGEX_SPECIAL.sub(r"\\\g<0>", name) + "$"]
    if harness.name == "meson test" and _PLAIN_NAME.fullmatch(name):  # a suite's test (`t - proj:suite`), a glob: no
        return [harness.argv[0], "test", "--no-rebuild", name]
    folder, _, base = name.rpartition("/")
    if harness.name == "make check" and _PLAIN_NAME.fullmatch(base) and (
            not folder or all(_PLAIN_NAME.fullmatch(part) and part != ".." for part in folder.split("/"))):
        if folder and not safefs.is_regular(harness.cwd, f"{folder}/Makefile"):
            return ["make", "check", f"TESTS={name}"]  # a non-recursive layout: the top Makefile lists it so
        return ["make", "-C", folder or ".", "check", f"TESTS={base}"]  # a recursive layout's test, in its folder
    return None
