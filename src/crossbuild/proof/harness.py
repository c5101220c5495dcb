"""The project's own test harness, run on the target: CTest in a CMake build folder, Meson's `meson test`, automake's
`make check`. The harness gives each test the arguments, data folder and environment the project wrote for it
(libarchive's `-d DIR`, xz's and brotli's script round trips), which running its executables bare cannot.

It runs in the test programs' sandbox with the workspace's build environment: CTest and Meson start each program
through the toolchain's emulator (target-run), and every target program a script or a libtool wrapper starts is
handed to qemu by the sandbox's binfmt_misc registration (target_run.exec_handler). Each test becomes a SmokeRun
(named by the harness, `harness` set), triaged as a bare program's run is when it did not pass; a harness that
found no test leaves the verdict to the test-like executables (smoke.py).

What the harness reports is the build's writing (its console, automake's `.trs`/`.log` files, Meson's
testlog.json): it names tests, never a file crossbuild opens outside ROOT (files are read below ROOT, no link
followed).
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from dataclasses import dataclass
from pathlib import Path

from crossbuild.env.sandbox import Limits, Sandbox
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation import host, safefs
from crossbuild.foundation.targets import Target
from crossbuild.proof import slowdown
from crossbuild.proof.smoke import SmokeRun
from crossbuild.proof.target_run import runner_argv
from crossbuild.proof.triage import triage

JOBS = min(os.cpu_count() or 1, 4)  # tests side by side, as the build's own jobs
MAX_TESTS = 2000  # a harness's tests kept in one verdict; the rest are counted, not listed
_LOG_BYTES = 1 << 20  # read of one test's log
# CTest's verbose console: `    Start 3: name`, its output as `3: line`, then `3/8 Test #3: name ....***Failed
#    0.01 sec`
_CTEST_START = re.compile(r"^\s*Start\s+(\d+): ")
_CTEST_RESULT = re.compile(r"^\s*\d+/\d+ Test\s+#(\d+): (.+?) \.*\s*(\*\*\*)?(Passed|Failed|Timeout|Skipped|"
                           r"Not Run(?: \(Disabled\))?|Exception: ?.*?|[A-Za-z][\w ]*?)\s+[\d.]+ sec\s*$")
_CTEST_END = re.compile(r"^\d+% tests passed|^No tests were found")
# CTest's own lines about a test in verbose mode (its command, folder, limit, environment), not the test's output
_CTEST_HEADER = re.compile(r"^(Test command:|Working Directory:|Test timeout computed|Environment variables:|"
                           r"\s+\w+=)|^$|^test \d+$")
_CTEST_SIGNALS = {"SegFault": 11, "Child aborted": 6, "Illegal": 4, "Bus error": 7, "Numerical": 8}
# automake: `PASS: name` on the console (both harnesses), `:test-result: FAIL` in a parallel harness's .trs files
_AUTOMAKE_LINE = re.compile(r"^(PASS|FAIL|XFAIL|XPASS|SKIP|ERROR): (\S.*?)\s*$")
_TRS_RESULT = re.compile(r"^:test-result:\s*(\w+)", re.MULTILINE)
_RESULTS = {  # the harnesses' words -> passed | failed | skipped
    "Passed": "passed", "PASS": "passed", "XFAIL": "passed", "OK": "passed", "EXPECTEDFAIL": "passed",
    "Skipped": "skipped", "Not Run (Disabled)": "skipped", "SKIP": "skipped",
}


@dataclass
class Harness:
    name: str  # ctest | meson test | make check
    argv: list[str]
    cwd: Path
    options: tuple[str, ...] = ()  # filled in when it runs: {jobs}, {limit} (one test's, s), {scale} (slowdown)


def harness_runs(root: Path, target: Target, artifacts: list[dict], toolchain: Toolchain, box: Sandbox,
                 timeout: float, log_dir: Path, dependency_lib_dirs: list[str]) -> list[SmokeRun]:
    """The tests of ROOT's harness run on TARGET in BOX (the test programs' sandbox), each under TIMEOUT times the
    emulator's slowdown; none when there is no harness, it found no test, or the target's programs cannot run here
    (then the test-like executables are run bare, smoke.py, and say why), or none of its tests ran."""
    harness = find(root)
    built_for_target = any(a["ok"] and a["kind"] == "executable" for a in artifacts)
    # a script or libtool wrapper starts target programs: only where the sandbox hands them to qemu (binfmt)
    starts_them = box.exec_handler is not None or target.arch == platform.machine()
    if harness is None or not built_for_target or target.is_windows or not starts_them:
        return []
    if runner_argv(target, root, dynamic=True)[0] is None:  # qemu and the target's loader (built on first need)
        return []
    lib_dirs = sorted({str((root / a["path"]).parent) for a in artifacts
                       if a["ok"] and a["kind"] == "shared_library" and not a.get("member_of")})
    scale = slowdown.factor(target)
    runs = run(harness, root, toolchain, box, timeout * scale, scale, log_dir, [*lib_dirs, *dependency_lib_dirs],
               toolchain.workspace)
    # tests all skipped or not built (BUILD_TESTING off leaves CTest's file): the executables say what they can
    return runs if any(not r.skipped for r in runs) else []


def find(root: Path) -> Harness | None:
    """The harness a build folder ROOT has, from the files its build system wrote there, or None."""
    if _regular(root, "CTestTestfile.cmake") and (ctest := host.find_tool("ctest")):
        return Harness("ctest", [ctest, "--verbose", "--no-tests=ignore"], root, ("-j{jobs}", "--timeout", "{limit}"))
    if _regular(root, "meson-private/coredata.dat") and (meson := host.find_tool("meson")):
        return Harness("meson test", [meson, "test", "--no-rebuild", "--print-errorlogs"], root,
                       ("--num-processes", "{jobs}", "--timeout-multiplier", "{scale}"))
    if _regular(root, "Makefile") and _has_check_tests(root):
        return Harness("make check", ["make", "-k", "check"], root, ("-j{jobs}",))
    return None


def run(harness: Harness, root: Path, toolchain: Toolchain, box: Sandbox, limit: float, scale: float,
        log_dir: Path, lib_dirs: list[str], within: Path) -> list[SmokeRun]:
    """Run HARNESS in BOX, each test under LIMIT seconds where the harness has a limit of its own (the base limit
    times the emulator's slowdown SCALE), the whole under a multiple of it. LIB_DIRS: where the target's shared
    libraries are (the tree's and the dependencies'). Each test it reported, as a SmokeRun; none when it found
    no test."""
    argv = [*harness.argv, *(a.format(jobs=JOBS, limit=int(limit), scale=max(1, round(scale)))
                             for a in harness.options)]
    env = toolchain.env.as_dict()
    env["AM_COLOR_TESTS"] = "no"
    # the host's own programs skip a library of another machine on this path; target programs find theirs first
    env["LD_LIBRARY_PATH"] = ":".join([*lib_dirs, *filter(None, [env.get("LD_LIBRARY_PATH")])])
    total = min(max(limit * 4, 600.0), 2400.0)
    log_name = f"harness-{harness.name.replace(' ', '-')}.log"
    started = time.time()
    res = box.run(argv, cwd=harness.cwd, env=env, log_path=log_dir / log_name,
                  limits=Limits(timeout_s=total, max_output_bytes=64 << 20))
    console = safefs.read_text(log_dir, log_name, max_bytes=80 << 20).splitlines()[2:]  # after the header
    unfinished: list[str] = []
    if harness.name == "ctest":
        runs, unfinished = _ctest(console)
    elif harness.name == "meson test":
        runs = _meson(root, started)
    else:
        runs = _automake(root, started, console)
    runs = runs[:MAX_TESTS]
    for r in runs:
        r.harness, r.command = harness.name, argv
        if not r.passed and not r.skipped:
            _judge(r, limit, scale, within)
    if res.stopped and runs:
        # crossbuild's own limit on the whole suite, not the project's failure: what was running is listed, not
        # counted (a test over its own limit is a timeout, reported as such by CTest and Meson)
        what = ", ".join(unfinished[:3]) + (f" and {len(unfinished) - 3} more" if len(unfinished) > 3 else "")
        stop = SmokeRun(path=what or "(the tests still running)", command=argv, harness=harness.name,
                        duration_s=round(res.duration_s, 3), output_tail="\n".join(console[-8:]))
        stop.skipped = (f"not finished: the harness was still running at its overall limit ({res.duration_s:.0f} s)"
                        if res.stopped == "timeout" else f"not finished: the harness was stopped ({res.stopped})")
        runs.append(stop)
    return runs


def _judge(r: SmokeRun, limit: float, scale: float, within: Path) -> None:
    """Triage a test that did not pass from what it printed, as a bare program's run (triage.py)."""
    verdict = triage(r.exit_code, r.stopped, r.output_tail.splitlines(), limit, scale=scale, workspace=within)
    r.triage, r.why = verdict.kind, verdict.why
    if r.exit_code is None and not r.stopped and verdict.why == "exit None":
        r.why = f"{r.harness} reported it failed"
    r.needs_arguments = verdict.kind == "usage"


def _ctest(lines: list[str]) -> tuple[list[SmokeRun], list[str]]:
    """Each test CTest's verbose console reports, with what it printed (its lines are prefixed `N: `, so tests
    running side by side are told apart; a missing program's complaint is not prefixed and follows its start), and
    the names of the tests that started and never reported (the harness was stopped)."""
    runs: list[SmokeRun] = []
    names: dict[str, str] = {}
    output: dict[str, list[str]] = {}
    last = None
    for line in lines:
        if _CTEST_END.match(line):
            break
        if start := _CTEST_START.match(line):
            last = start.group(1)
            names[last], output[last] = line.split(":", 1)[1].strip(), []
            continue
        if m := _CTEST_RESULT.match(line):
            number = m.group(1)
            runs.append(_ctest_run(m.group(2).strip(), m.group(4), float(line.split()[-2]), output.pop(number, [])))
            names.pop(number, None)
            continue
        number, sep, text = line.partition(": ")
        if not (sep and number in output):
            number, text = last, line
        if number in output and not _CTEST_HEADER.match(text):
            output[number].append(text)
    return runs, list(names.values())


def _ctest_run(name: str, status: str, duration: float, output: list[str]) -> SmokeRun:
    run = SmokeRun(path=name, command=[], duration_s=duration)
    kind = _RESULTS.get(status)
    if kind == "passed":
        run.passed, run.exit_code = True, 0
    elif kind == "skipped":
        run.skipped = f"ctest: {status}"
    elif status == "Not Run":
        run.skipped = "ctest: Not Run (its program was not built)"
    elif status == "Timeout":
        run.stopped = "timeout"
    elif status.startswith("Exception"):
        what = status.partition(":")[2].strip()
        run.exit_code = -_CTEST_SIGNALS.get(what, 6)
        output = [*output, f"ctest: Exception: {what}"]
    run.output_tail = "\n".join(output[-40:])
    return run


def _automake(root: Path, started: float, console: list[str]) -> list[SmokeRun]:
    """Parallel harness: the .trs files written by this run, each with its .log; serial harness: the console."""
    runs = []
    for entry in safefs.walk_files(root, prune=lambda rel: rel.startswith(".")):
        if not entry.name.endswith(".trs") or entry.st.st_mtime < started - 1:
            continue
        text = safefs.read_text_or_none(root, entry.rel, max_bytes=1 << 16) or ""
        results = _TRS_RESULT.findall(text)
        if not results:
            continue
        rel = entry.rel[:-4]
        log = safefs.read_text_or_none(root, rel + ".log", max_bytes=_LOG_BYTES) or ""
        runs.append(_automake_run(rel, results, log.splitlines()))
    if runs:
        return runs
    before: list[str] = []
    for line in console:
        m = _AUTOMAKE_LINE.match(line)
        if m:
            runs.append(_automake_run(m.group(2), [m.group(1)], before))
            before = []
        else:
            before.append(line)
    return runs


def _automake_run(name: str, results: list[str], log: list[str]) -> SmokeRun:
    run = SmokeRun(path=name, command=[], output_tail="\n".join(log[-40:]))
    worst = next((r for r in results if r in ("FAIL", "XPASS", "ERROR")), None)
    if worst is None and all(r == "SKIP" for r in results):
        run.skipped = "make check: SKIP"
    elif worst is None:
        run.passed, run.exit_code = True, 0
    else:
        run.exit_code = 99 if worst == "ERROR" else 1
        if worst == "XPASS":
            run.why = "passed, but the project expects it to fail (XPASS)"
    return run


def _meson(root: Path, started: float) -> list[SmokeRun]:
    rel = "meson-logs/testlog.json"
    try:
        if os.stat(root / rel, follow_symlinks=False).st_mtime < started - 1:
            return []
    except OSError:
        return []
    runs = []
    for line in (safefs.read_text_or_none(root, rel, max_bytes=32 << 20) or "").splitlines():
        try:
            test = json.loads(line)
        except ValueError:
            continue
        if not isinstance(test, dict) or not isinstance(test.get("name"), str):
            continue
        result = str(test.get("result", ""))
        code = test.get("returncode")
        output = f"{test.get('stdout') or ''}\n{test.get('stderr') or ''}".strip().splitlines()
        run = SmokeRun(path=test["name"], command=[], output_tail="\n".join(output[-40:]),
                       duration_s=float(test.get("duration") or 0.0))
        kind = _RESULTS.get(result)
        if kind == "passed":
            run.passed, run.exit_code = True, 0
        elif kind == "skipped":
            run.skipped = f"meson test: {result}"
        else:
            run.exit_code = code if isinstance(code, int) else None
            run.stopped = "timeout" if result == "TIMEOUT" else None
        runs.append(run)
    return runs


def _regular(root: Path, rel: str) -> bool:
    """Whether REL is a regular file below ROOT, reached without links."""
    try:
        os.close(safefs.open_regular(root, rel))
        return True
    except OSError:
        return False


def _has_check_tests(root: Path) -> bool:
    """Whether an automake Makefile below ROOT runs tests (`check-TESTS:`, both harnesses have it)."""
    for entry in safefs.walk_files(root, prune=lambda rel: rel.startswith(".")):
        if entry.name == "Makefile":
            text = safefs.read_text_or_none(root, entry.rel, max_bytes=4 << 20) or ""
            if re.search(r"^check-TESTS:", text, re.MULTILINE):
                return True
    return False
