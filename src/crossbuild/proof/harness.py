"""The project's own test harness, run on the target: CTest in a CMake build folder, Meson's `meson test`, automake's
`make check`. The harness gives each test the arguments, data folder and environment the project wrote for it
(libarchive's `-d DIR`, xz's and brotli's script round trips), which running its executables bare cannot.

It runs in the test programs' sandbox with the workspace's build environment: CTest and Meson start each program
through the toolchain's emulator (target-run), and every target program a script or a libtool wrapper starts is
handed to qemu by the sandbox's binfmt_misc registration (target_run.exec_handler). Each test becomes a SmokeRun
(named by the harness, `harness` set), triaged as a bare program's run is when it did not pass; a harness that
found no test leaves the verdict to the test-like executables (smoke.py).

A test counts towards `tested` only when it is tied to a target program (levels.py): its command, as the
project's own test list defines it (`ctest --show-only=json-v1`, `meson introspect --tests`), names the emulator or
one of the target executables the verifier found; for automake, the test is one of those executables. When no
passing test is tied so (scripts that find their programs themselves: json-c's), a few passing tests run again,
each alone, with qemu keeping a record of every process it runs (make_goal.py): one during which qemu ran a target
program is tied. A harness of scripts around build-machine programs proves nothing about the target. What the
harness recorded is read by harness_records.py; the target's library folders reach target programs only through
qemu (QEMU_SET_ENV), never the host programs that start the sandbox.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from crossbuild.env.recipes import BuildStep
from crossbuild.env.sandbox import Limits, Sandbox
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation import host, safefs
from crossbuild.foundation.targets import Target
from crossbuild.proof import harness_records as records
from crossbuild.proof import harness_tie as tie
from crossbuild.proof import make_goal, slowdown
from crossbuild.proof.artifacts import check_artifact, scan_tree
from crossbuild.proof.harness_records import Harness
from crossbuild.proof.smoke import UNFINISHED, SmokeRun, own_folders, smoke_runs
from crossbuild.proof.target_run import harness_environment, library_link_folders, runner_argv
from crossbuild.proof.triage import triage

JOBS = min(os.cpu_count() or 1, 4)  # tests side by side, as the build's own jobs
# a harness's test is often a whole suite (libgit2's `offline`: 465 s under qemu on aarch64), not one program: its
# base limit is at least this, times the emulator's slowdown. Not more: a test that hangs (libxml2's testapi under
# qemu) costs the whole limit, and twice after a verdict's fix, within an evaluation cell's hour.
SUITE_S = 150.0
ALONE_AGAIN = 8  # failed tests of a harness that ran them side by side, run again one at a time
SLOW_AGAIN = 2  # tests stopped at their limit, run again alone with SLOW_FACTOR times as long
SLOW_FACTOR = 3.0
SLOW_MAX_S = 600.0  # never longer than this: a test that already ran minutes is not given three times as many


def harness_runs(root: Path, target: Target, artifacts: list[dict], toolchain: Toolchain, box: Sandbox,
                 timeout: float, log_dir: Path, dependency_lib_dirs: list[str], steps: Sequence[BuildStep] = (),
                 left_out: tuple[str, Sequence[str]] | None = None, budget: float | None = None) -> list[SmokeRun]:
    """The tests of ROOT's harness run on TARGET in BOX (the test programs' sandbox), each under TIMEOUT (at least
    SUITE_S) times the emulator's slowdown, the whole under BUDGET seconds when given (else a multiple of that);
    none when there is no harness, it found no test, or the target's programs cannot run here (then the test-like
    executables are run bare, smoke.py, and say why), or none of its tests ran. Without a harness of its own, a
    plain Makefile's test goal, run with the build's recorded make step STEPS (make_goal.py). LEFT_OUT (folder,
    goals): only that goal, of the test goals the steps left out there."""
    harness = None if left_out else find(root)
    if harness is None and box.exec_handler is not None:  # its tie is qemu's own record: binfmt must start qemu
        harness = _make_goal(steps, toolchain.workspace, left_out,
                             lambda step, argv: _make_database(step, argv, toolchain, box, log_dir))
    executables = {path for a in artifacts if a["ok"] and a["kind"] == "executable" and not a.get("member_of")
                   for path in (str(root / a["path"]), os.path.realpath(root / a["path"]))}
    # a script or libtool wrapper starts target programs: only where the sandbox hands them to qemu (binfmt)
    starts_them = box.exec_handler is not None or (target.arch == platform.machine() and target.is_linux)
    # Windows, WebAssembly: the harnesses that start each test through the emulator (CTest's emulator, Meson's
    # exe_wrapper: target-run); a script would start a .exe bare (a module: to wasmtime by binfmt, exec_handler)
    through_emulator = target.runs_through_target_run and harness is not None and harness.name in (
        "ctest", "meson test")
    no_runner = target.qemu is None and not through_emulator and box.exec_handler is None
    if harness is None or no_runner or not (starts_them or through_emulator) or (
            not executables and harness.name != make_goal.HARNESS):  # a goal may build its test programs itself
        return []
    if runner_argv(target, root, dynamic=True, workspace=toolchain.workspace)[0] is None:  # qemu and the loader
        return []
    libraries = [a["path"] for a in artifacts if a["ok"] and a["kind"] == "shared_library" and not a.get("member_of")]
    lib_dirs = sorted({str((root / rel).parent) for rel in libraries} | {*library_link_folders(root, libraries)})
    scale = slowdown.factor(target)
    env = harness_environment(toolchain, [*lib_dirs, *dependency_lib_dirs])
    if harness.name == make_goal.HARNESS:
        return _run_make_goal(harness, root, target, toolchain, box, env, timeout, scale, log_dir,
                              dependency_lib_dirs, budget)
    commands = _listing(harness, box, env, log_dir)
    suite_started = time.monotonic()
    runs = run(harness, root, box, env, max(timeout, SUITE_S) * scale, scale, log_dir, toolchain.workspace,
               total=budget)
    suite_s = time.monotonic() - suite_started
    if budget is None:  # a budget is the suite's whole time: no test runs again after it (a hung one would, twice)
        _failed_alone_again(runs, harness, root, box, env, max(timeout, SUITE_S) * scale, scale, log_dir,
                            toolchain.workspace, suite_s)
        _slow_alone_again(runs, harness, root, box, env, max(timeout, SUITE_S) * scale, scale, log_dir,
                          toolchain.workspace)
    emulator = {str(toolchain.emulator), os.path.realpath(toolchain.emulator)} if toolchain.emulator else set()
    tie.tie(runs, harness, commands, executables | emulator)
    tie.programs_not_built(runs, commands, emulator, toolchain.workspace, executables, tie.unbuilt_programs(root))
    if box.exec_handler is not None and not any(r.passed and r.on_target for r in runs):  # qemu's record needs binfmt
        tie.tie_by_running_again(runs, harness, toolchain, box, env, max(timeout, SUITE_S) * scale, log_dir, suite_s)
    # tests all skipped or not built (BUILD_TESTING off leaves CTest's file): the executables say what they can
    return runs if any(not r.skipped for r in runs) else []


def _run_make_goal(harness: Harness, root: Path, target: Target, toolchain: Toolchain, box: Sandbox,
                   env: dict[str, str], timeout: float, scale: float, log_dir: Path,
                   dependency_lib_dirs: list[str], budget: float | None) -> list[SmokeRun]:
    """A Makefile's test goal, tied to the target by qemu's per-process record (make_goal.py): its one run when it
    started a target program; the test programs it built and did not run, run bare, when it only built them;
    none otherwise (the executables the build made say what they can)."""
    ws = toolchain.workspace
    evidence, evidence_env = tie.fresh_evidence(toolchain)
    env = env | dict(harness.env) | evidence_env
    goal_start = time.time()
    runs = run(harness, root, box, env, max(timeout, SUITE_S) * scale, scale, log_dir, ws, total=budget)
    started = make_goal.programs_started(ws, evidence)
    for r in runs:
        r.on_target = started > 0
        r.why = r.why if not r.passed else f"{started} target program run(s) under qemu"
    if not started and runs and runs[0].passed:  # it built its test programs and ran none (libtommath's)
        built = _built_since(harness.cwd, target, goal_start, own_folders(harness.cwd, toolchain))
        return smoke_runs(harness.cwd, target, built, box, timeout, log_dir, dependency_lib_dirs,
                          within=ws) if built else []
    # a goal stopped at its limit stays in the verdict (unfinished: not `tested`), not replaced by bare runs
    return runs if started and any(not r.skipped or r.skipped.startswith(UNFINISHED) for r in runs) else []


def _failed_alone_again(runs: list[SmokeRun], harness: Harness, root: Path, box: Sandbox, env: dict[str, str],
                        limit: float, scale: float, log_dir: Path, within: Path, suite_s: float) -> None:
    """Tests run side by side (JOBS, crossbuild's choice, not the project's) can race on files the project never
    meant to share: jsoncpp's two reader tests write the same `.actual` files in one folder. Each test that failed
    without crashing (the first ALONE_AGAIN; not one stopped at its limit) runs again alone, twice, each time bounded
    as tie.alone_limit says, and read from the harness's own record; one that passes both times, with
    nothing else in that record failing, is not counted, with that evidence: it is no pass either, since a flaky
    test passes alone too. A crash is never excused this way."""
    if JOBS < 2 or sum(1 for r in runs if not r.skipped) < 2:
        return
    again = [r for r in runs if r.failed and r.triage == "failed" and not r.stopped and r.harness][:ALONE_AGAIN]
    for n, r in enumerate(again):
        if (argv := tie.one_test(harness, r.path)) is None:
            continue
        alone = dataclasses.replace(harness, argv=argv)
        passes = 0
        for attempt in range(2):
            results = run(alone, root, box, env, limit, scale, log_dir, within, jobs=1,
                          log_name=f"harness-alone-{n}-{attempt}.log", total=tie.alone_limit(r, limit, suite_s))
            mine = [x for x in results if x.path == r.path]
            if len(mine) != 1 or not mine[0].passed or any(x.failed or x.skipped for x in results):
                break
            passes += 1
        if passes == 2:
            r.triage = "environment"
            r.why = (f"passed twice when run again alone; it failed beside other tests run side by side "
                     f"({r.why or f'exit {r.exit_code}'})")


def _slow_alone_again(runs: list[SmokeRun], harness: Harness, root: Path, box: Sandbox, env: dict[str, str],
                      limit: float, scale: float, log_dir: Path, within: Path) -> None:
    """A test stopped at its limit may only be slower under emulation than the measured slowdown allows, or slowed
    by the tests beside it: the first SLOW_AGAIN whose limit came within seconds or minutes (never one that already
    ran for SLOW_MAX_S / SLOW_FACTOR) run again alone with SLOW_FACTOR times the time they had. One that then
    passes, with nothing else in that run failing, passed: its run replaces the first, and says how long it took.
    A limit the project set on the test itself (CTest's TIMEOUT property) is the project's, and stays."""
    slow = [r for r in runs if r.failed and r.stopped == "timeout" and r.harness
            and max(r.duration_s, 1.0) * SLOW_FACTOR <= SLOW_MAX_S][:SLOW_AGAIN]
    for n, r in enumerate(slow):
        if (argv := tie.one_test(harness, r.path)) is None:
            continue
        longer = min(limit, max(r.duration_s, 1.0)) * SLOW_FACTOR
        # the limit where the harness takes one (CTest), the multiplier where it scales its own (meson test)
        results = run(dataclasses.replace(harness, argv=argv), root, box, env, longer, scale * SLOW_FACTOR, log_dir,
                      within, jobs=1, log_name=f"harness-slow-{n}.log", total=longer + 60)
        mine = [x for x in results if x.path == r.path]
        if len(mine) == 1 and mine[0].passed and not any(x.failed for x in results):
            first = r.duration_s
            for f in dataclasses.fields(SmokeRun):
                setattr(r, f.name, getattr(mine[0], f.name))
            r.why = (f"passed in {mine[0].duration_s:.0f} s when run again alone with {longer:.0f} s; it had "
                     f"reached its limit of {limit:.0f} s after {first:.0f} s beside other tests")


def find(root: Path) -> Harness | None:
    """The harness a build folder ROOT has, from the files its build system wrote there, or None."""
    if safefs.is_regular(root, "CTestTestfile.cmake") and (ctest := host.find_tool("ctest")):
        return Harness("ctest", [ctest, "--verbose", "--no-tests=ignore"], root, ("-j{jobs}", "--timeout", "{limit}"),
                       (ctest, "--show-only=json-v1"))
    if safefs.is_regular(root, "meson-private/coredata.dat") and (meson := host.find_tool("meson")):
        return Harness("meson test", [meson, "test", "--no-rebuild", "--print-errorlogs"], root,
                       ("--num-processes", "{jobs}", "--timeout-multiplier", "{scale}"),
                       (meson, "introspect", "--tests"))
    if safefs.is_regular(root, "Makefile") and _has_check_tests(root):
        return Harness("make check", ["make", "-k", "check"], root, ("-j{jobs}",))
    return None


def run(harness: Harness, root: Path, box: Sandbox, env: dict[str, str], limit: float, scale: float,
        log_dir: Path, within: Path, *, jobs: int = JOBS, log_name: str | None = None,
        total: float | None = None) -> list[SmokeRun]:
    """Run HARNESS in BOX, each test under LIMIT seconds where the harness has a limit of its own (the base limit
    times the emulator's slowdown SCALE), the whole under a multiple of it. Each test it reported, as a SmokeRun;
    none when it found no test."""
    argv = [*harness.argv, *(a.format(jobs=jobs, limit=int(limit), scale=max(1, round(scale)))
                             for a in harness.options)]
    total = total or min(max(limit * 4, 600.0), 2400.0)
    log_name = log_name or f"harness-{harness.name.replace(' ', '-')}.log"
    started = time.time()
    res = box.run(argv, cwd=harness.cwd, env=env, log_path=log_dir / log_name,
                  limits=Limits(timeout_s=total, max_output_bytes=64 << 20))
    console = records.lines_of(safefs.read_text(log_dir, log_name, max_bytes=80 << 20))[2:]  # after the header
    unfinished: list[str] = []
    if harness.name == "ctest":
        runs, unfinished = records.ctest(console)
    elif harness.name == make_goal.HARNESS and not res.stopped and (runs := records.test_harness(console)):
        pass  # a goal that runs Perl's Test::Harness (OpenSSL's `make test`): each test file it reported
    elif harness.name == make_goal.HARNESS:  # the goal is one test: its exit status
        goal = SmokeRun(path=" ".join(["make", *harness.argv[-1:]]), command=argv, harness=harness.name,
                        exit_code=res.returncode, passed=res.ok, duration_s=round(res.duration_s, 3),
                        output_tail="\n".join(console[-40:]))
        if res.stopped:  # crossbuild's limit on the whole goal: not finished, not failed
            goal.skipped = f"{UNFINISHED}: the goal was still running at its overall limit ({res.duration_s:.0f} s)"
        elif not goal.passed:
            _judge(goal, limit, scale, within)
        return [goal]
    elif harness.name == "meson test":
        runs = records.meson(root, started)
    else:
        runs = records.automake(root, started, console)
    for r in runs:
        r.harness, r.command = harness.name, argv
        if not r.passed and not r.skipped:
            _judge(r, limit, scale, within)
    if not runs:
        return runs
    if res.stopped:
        # crossbuild's own limit on the whole suite: what was running is listed, not finished, and the verdict
        # cannot be `tested` (levels.py); a test over its own limit is a timeout, a failure (CTest, Meson)
        what = ", ".join(unfinished[:3]) + (f" and {len(unfinished) - 3} more" if len(unfinished) > 3 else "")
        stop = SmokeRun(path=what or "(the tests still running)", command=argv, harness=harness.name,
                        duration_s=round(res.duration_s, 3), output_tail="\n".join(console[-8:]))
        stop.skipped = (f"{UNFINISHED}: the harness was still running at its overall limit ({res.duration_s:.0f} s)"
                        if res.stopped == "timeout" else f"{UNFINISHED}: the harness was stopped ({res.stopped})")
        runs.append(stop)
    elif res.returncode and not any(r.failed or r.skipped == records.NOT_BUILT for r in runs):
        # the harness failed where no test did: check programs that did not build, a directory's goal that broke
        failed = SmokeRun(path=f"{harness.name} (exit {res.returncode})", command=argv, harness=harness.name,
                          exit_code=res.returncode, output_tail="\n".join(console[-8:]))
        failed.triage, failed.why = "failed", f"the harness exited {res.returncode}, though no test it reported failed"
        runs.append(failed)
    return runs


def _built_since(folder: Path, target: Target, since: float, prune: frozenset[str]) -> list[dict]:
    """The executables for TARGET below FOLDER written since SINCE (a test goal's test programs), as the verifier's
    artifact entries; links are never followed (scan_tree)."""
    out = []
    for a in scan_tree(folder, prune=prune).artifacts:
        if a.kind != "executable" or a.member_of or check_artifact(a, target):
            continue
        try:
            with safefs.open_dir(folder, os.path.dirname(a.path) or ".") as dfd:
                written = os.stat(os.path.basename(a.path), dir_fd=dfd, follow_symlinks=False).st_mtime
        except OSError:
            continue
        if written >= since:
            out.append({**a.to_dict(), "ok": True})
    return out


def _make_goal(steps: Sequence[BuildStep], workspace: Path, left_out: tuple[str, Sequence[str]] | None,
               database: Callable[[BuildStep, list[str]], str | None]) -> Harness | None:
    """A plain Makefile's test goal as a harness: the recorded make step, its goals replaced (make_goal.py)."""
    goal = make_goal.find(steps, workspace, left_out, database)
    if goal is None or not safefs.is_dir(workspace, goal.cwd):
        return None
    return Harness(make_goal.HARNESS, goal.argv, workspace / goal.cwd, env=goal.env)


def _make_database(step: BuildStep, argv: list[str], toolchain: Toolchain, box: Sandbox,
                   log_dir: Path) -> str | None:
    """What make prints of its database with ARGV, run as the recorded STEP ran (its folder and environment) in
    BOX; None when it could not run."""
    ws = toolchain.workspace
    if not safefs.is_dir(ws, step.cwd):
        return None
    box.run(argv, cwd=ws / step.cwd, env=toolchain.env.as_dict() | dict(step.env),
            log_path=log_dir / "make-database.log", limits=Limits(timeout_s=60, max_output_bytes=32 << 20))
    return safefs.read_text_or_none(log_dir, "make-database.log", max_bytes=33 << 20)


def _listing(harness: Harness, box: Sandbox, env: dict[str, str], log_dir: Path) -> dict[str, list[str]]:
    """Each test's command, as the project's test list defines it; empty without one or when it cannot be read."""
    text = _listing_text(harness, box, env, log_dir)
    if text is None:
        return {}
    return records.ctest_commands(text) if harness.name == "ctest" else records.meson_commands(text)


def ctest_tests(root: Path, box: Sandbox, log_dir: Path) -> dict[str, tuple[list[str], str | None]]:
    """Each CTest test of the build folder ROOT: its command and working folder (records.ctest_tests); empty when
    ROOT's harness is not CTest or its list cannot be read."""
    harness = find(root)
    if harness is None or harness.name != "ctest":
        return {}
    text = _listing_text(harness, box, {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}, log_dir, "ctest-tests.log")
    return records.ctest_tests(text) if text is not None else {}


def _listing_text(harness: Harness, box: Sandbox, env: dict[str, str], log_dir: Path,
                  log_name: str | None = None) -> str | None:
    if not harness.listing:
        return None
    log_name = log_name or f"harness-{harness.name.replace(' ', '-')}-list.log"
    res = box.run(list(harness.listing), cwd=harness.cwd, env=env, log_path=log_dir / log_name,
                  limits=Limits(timeout_s=120, max_output_bytes=16 << 20))
    if not res.ok:
        return None
    return safefs.read_text(log_dir, log_name, max_bytes=17 << 20).split("\n", 2)[-1]  # after the header


def _judge(r: SmokeRun, limit: float, scale: float, within: Path) -> None:
    """Triage a test that did not pass from what it printed, as a bare program's run (triage.py)."""
    verdict = triage(r.exit_code, r.stopped, r.output_tail.splitlines(), limit, scale=scale, workspace=within)
    r.triage, r.why = verdict.kind, verdict.why
    if r.exit_code is None and not r.stopped and verdict.why == "exit None":
        r.why = f"{r.harness} reported it failed"
    r.needs_arguments = verdict.kind == "usage"


def _has_check_tests(root: Path) -> bool:
    """Whether an automake Makefile below ROOT runs tests (`check-TESTS:`, both harnesses have it)."""
    for entry in safefs.walk_files(root, prune=lambda rel: rel.startswith(".")):
        if entry.name == "Makefile":
            text = safefs.read_text_or_none(root, entry.rel, max_bytes=4 << 20) or ""
            if re.search(r"^check-TESTS:", text, re.MULTILINE):
                return True
    return False
