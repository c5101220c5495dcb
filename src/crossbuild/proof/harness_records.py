"""What a project's test harness recorded (harness.py runs it): CTest's verbose console and its test list
(`--show-only=json-v1`), automake's `.trs`/`.log` files or console lines, Meson's `testlog.json` and
`meson introspect --tests`, and Perl's Test::Harness (`prove`; OpenSSL's `make test`) on a test goal's console.
All of it is the build's writing: read with bounds (lines cut, at most MAX_TESTS
tests, each output tail a few KB), never trusted to name a host file, and parsed so that no text can crash or
stall the reader (no nested lazy patterns; numbers and JSON parsed defensively)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from crossbuild.foundation import safefs
from crossbuild.proof.smoke import NOT_BUILT, SmokeRun


@dataclass
class Harness:
    name: str  # ctest | meson test | make check
    argv: list[str]
    cwd: Path
    options: tuple[str, ...] = ()  # filled in when it runs: {jobs}, {limit} (one test's, s), {scale} (slowdown)
    listing: tuple[str, ...] = ()  # the command that prints its tests' commands as JSON (none for automake)
    env: tuple[tuple[str, str], ...] = ()  # the recorded step's own environment (a Makefile's test goal)


MAX_TESTS = 2000  # a harness's tests kept in one verdict; the rest are left out
MAX_LINE = 4096  # a console line is cut here before it is matched
_TAIL_BYTES = 8192  # what one test keeps of its output
_LOG_BYTES = 1 << 20  # read of one test's log
# CTest's verbose console: `    Start 3: name`, the test's output as `3: line`, then `3/8 Test #3: name ....***Failed
#    0.01 sec` (the status follows the last dot of the padding; a status has no dot)
_CTEST_START = re.compile(r"^\s*Start\s+(\d+): ")
_CTEST_RESULT = re.compile(r"^\s*\d+/\d+ Test\s+#(\d+): (.*)$")
_CTEST_END = re.compile(r"^\d+% tests passed|^No tests were found")
# CTest's own lines about a test in verbose mode (its command, folder, limit, environment), not the test's output
_CTEST_HEADER = re.compile(r"^(Test command:|Working Directory:|Test timeout computed|Environment variables:|"
                           r"\s+\w+=)|^$|^test \d+$")
_CTEST_SIGNALS = {"SegFault": 11, "Child aborted": 6, "Illegal": 4, "Bus error": 7, "Numerical": 8}
# automake: `PASS: name` on the console (both harnesses), `:test-result: FAIL` in a parallel harness's .trs files
_AUTOMAKE_LINE = re.compile(r"^(PASS|FAIL|XFAIL|XPASS|SKIP|ERROR): (.*)$")
_TRS_RESULT = re.compile(r"^:test-result:\s*(\w+)", re.MULTILINE)
_RESULTS = {  # the harnesses' words -> passed | skipped
    "Passed": "passed", "PASS": "passed", "XFAIL": "passed", "OK": "passed", "EXPECTEDFAIL": "passed",
    "Skipped": "skipped", "Not Run (Disabled)": "skipped", "SKIP": "skipped",
}


# Perl's Test::Harness: `02-test_errstr.t ...... ok`, `..... skipped: why`, or the name and dots alone, the test's
# output, then `Dubious, test returned 1` / `Failed 5/130 subtests`; its summary names each failed file again
_PROVE_FILE = re.compile(r"^(?P<name>[\w./+-]{1,200}\.t) \.{2,}\s?(?P<rest>.*)$")
_PROVE_FAILED = re.compile(r"^(?P<name>[\w./+-]{1,200}\.t)\s+\(Wstat: \d+")
_PROVE_RESULT = re.compile(r"^Result: (PASS|FAIL)\b")


def test_harness(console: list[str]) -> list[SmokeRun]:
    """The test files Perl's Test::Harness reported on CONSOLE, one SmokeRun each with the lines it printed, or none
    when the console has no Test::Harness summary (`Result: PASS|FAIL`): a goal of another kind. A file named
    again after its output (`t/a.t .. ok`) is one run; the summary's failed files are failed whatever came before."""
    if not any(_PROVE_RESULT.match(line) for line in console[-200:]):
        return []
    failed = {m.group("name") for line in console if (m := _PROVE_FAILED.match(line))}
    runs: dict[str, SmokeRun] = {}
    outputs: dict[str, list[str]] = {}
    current: str | None = None
    for line in console:
        m = _PROVE_FILE.match(line)
        if m is None:
            if current is not None:
                outputs[current] = [*outputs[current][-40:], line]
                if line.startswith(("Dubious,", "Failed ", "No subtests run")):
                    runs[current].passed, runs[current].exit_code = False, 1
            continue
        name, rest = m.group("name"), m.group("rest").strip()
        if name not in runs:
            if len(runs) >= MAX_TESTS:
                break
            runs[name], outputs[name] = SmokeRun(path=name, command=[], exit_code=0, passed=True), []
        current = name
        if rest.startswith("skipped"):
            runs[name].skipped, runs[name].passed = f"Test::Harness: {rest[:200]}", False
        elif rest and not rest.startswith("ok"):
            outputs[name].append(rest)
    for name, run in runs.items():
        run.output_tail = _tail(outputs[name])
        if name in failed:
            run.passed, run.exit_code = False, 1
    return list(runs.values())


def lines_of(text: str) -> list[str]:
    """TEXT's lines as the harness wrote them: split at newlines only (a test printing a form feed or a line
    separator cannot start a line of CTest's framing), each cut to MAX_LINE."""
    return [line[:MAX_LINE] for line in text.split("\n")]


def ctest(lines: list[str]) -> tuple[list[SmokeRun], list[str]]:
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
            if len(output) < MAX_TESTS:
                names[last], output[last] = line.split(":", 1)[1].strip(), []
            continue
        if m := _CTEST_RESULT.match(line):
            number = m.group(1)
            if len(runs) < MAX_TESTS:
                runs.append(_ctest_run(m.group(2), output.pop(number, [])))
            names.pop(number, None)
            continue
        number, sep, text = line.partition(": ")
        if not (sep and number in output):
            number, text = last, line
        if number in output and not _CTEST_HEADER.match(text):
            kept = output[number]
            kept.append(text)
            if len(kept) > 80:
                del kept[:40]
    return runs, list(names.values())


def _ctest_run(rest: str, output: list[str]) -> SmokeRun:
    """One result line after `Test #N: `: the name, the padding of dots, the status, the time."""
    words = rest.rsplit(None, 2)
    duration = _number(words[-2]) if len(words) == 3 and words[-1] == "sec" else 0.0
    body = rest.rsplit(None, 2)[0] if len(words) == 3 else rest
    cut = body.rfind(".")
    name = body[:cut].rstrip(".").strip() if cut >= 0 else body.strip()
    status = body[cut + 1:].strip().lstrip("*").strip() if cut >= 0 else ""
    run = SmokeRun(path=name, command=[], duration_s=duration)
    kind = _RESULTS.get(status)
    if kind == "passed":
        run.passed, run.exit_code = True, 0
    elif kind == "skipped":
        run.skipped = f"ctest: {status}"
    elif status == "Not Run":
        run.skipped = NOT_BUILT
    elif status == "Timeout":
        run.stopped = "timeout"
    elif status.startswith("Exception"):
        what = status.partition(":")[2].strip()
        run.exit_code = -_CTEST_SIGNALS.get(what, 6)
        output = [*output, f"ctest: Exception: {what}"]
    run.output_tail = _tail(output)
    return run


def ctest_commands(text: str) -> dict[str, list[str]]:
    """Each test's command from `ctest --show-only=json-v1` (what CTestTestfile.cmake defines), by name."""
    return {name: command for name, (command, _) in ctest_tests(text).items()}


def ctest_tests(text: str) -> dict[str, tuple[list[str], str | None]]:
    """Each test's command and working folder (its WORKING_DIRECTORY property, None when unset) from `ctest
    --show-only=json-v1`, by name."""
    data = _json(text)
    tests = data.get("tests") if isinstance(data, dict) else None
    found = {}
    for t in (tests if isinstance(tests, list) else [])[:MAX_TESTS * 2]:
        if not (isinstance(t, dict) and isinstance(t.get("name"), str)):
            continue
        props = t.get("properties") if isinstance(t.get("properties"), list) else []
        folder = next((str(p.get("value")) for p in props if isinstance(p, dict)
                       and p.get("name") == "WORKING_DIRECTORY" and isinstance(p.get("value"), str)), None)
        found[t["name"]] = ([str(a) for a in t.get("command") or [] if isinstance(a, str | int)], folder)
    return found


def meson_commands(text: str) -> dict[str, list[str]]:
    """Each test's command from `meson introspect --tests`, by its name and by `suite:name` (testlog's form)."""
    data = _json(text)
    found: dict[str, list[str]] = {}
    for t in (data if isinstance(data, list) else [])[:MAX_TESTS * 2]:
        if not (isinstance(t, dict) and isinstance(t.get("name"), str)):
            continue
        cmd = [str(a) for a in t.get("cmd") or [] if isinstance(a, str)]
        found.setdefault(t["name"], cmd)
        for suite in t.get("suite") or []:
            if isinstance(suite, str):
                found.setdefault(f"{suite.split(':')[0]}:{t['name']}", cmd)
    return found


def automake(root: Path, started: float, console: list[str]) -> list[SmokeRun]:
    """Parallel harness: the .trs files written by this run, each with its .log; serial harness: the console."""
    runs = []
    for entry in safefs.walk_files(root, prune=lambda rel: rel.startswith(".")):
        if len(runs) >= MAX_TESTS:
            break
        if not entry.name.endswith(".trs") or entry.st.st_mtime < started - 1:
            continue
        text = safefs.read_text_or_none(root, entry.rel, max_bytes=1 << 16) or ""
        results = _TRS_RESULT.findall(text)
        if not results:
            continue
        rel = entry.rel[:-4]
        log = safefs.read_text_or_none(root, rel + ".log", max_bytes=_LOG_BYTES) or ""
        runs.append(_automake_run(rel, results, lines_of(log)))
    if runs:
        return runs
    before: list[str] = []
    for line in console:
        m = _AUTOMAKE_LINE.match(line)
        if m and len(runs) < MAX_TESTS:
            runs.append(_automake_run(m.group(2).strip(), [m.group(1)], before))
            before = []
        else:
            before = [*before[-40:], line]
    return runs


def _automake_run(name: str, results: list[str], log: list[str]) -> SmokeRun:
    run = SmokeRun(path=name, command=[], output_tail=_tail(log))
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


def meson(root: Path, started: float) -> list[SmokeRun]:
    """The tests of Meson's testlog.json, when this run wrote it."""
    rel = "meson-logs/testlog.json"
    try:
        with safefs.open_dir(root, "meson-logs") as fd:
            if os.stat("testlog.json", dir_fd=fd, follow_symlinks=False).st_mtime < started - 1:
                return []
    except OSError:
        return []
    runs = []
    # one JSON object a line, holding the test's whole environment: lines are not cut (a cut one would not parse)
    for line in (safefs.read_text_or_none(root, rel, max_bytes=32 << 20) or "").split("\n"):
        test = _json(line)
        if not isinstance(test, dict) or not isinstance(test.get("name"), str):
            continue
        if len(runs) >= MAX_TESTS:
            break
        result = str(test.get("result", ""))
        code = test.get("returncode")
        output = f"{test.get('stdout') or ''}\n{test.get('stderr') or ''}".strip()
        run = SmokeRun(path=test["name"][:400], command=[], output_tail=_tail(lines_of(output)),
                       duration_s=_number(test.get("duration")))
        kind = _RESULTS.get(result)
        if kind == "passed":
            run.passed, run.exit_code = True, 0
        elif kind == "skipped":
            run.skipped = f"meson test: {result}"
        else:
            run.exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
            run.stopped = "timeout" if result == "TIMEOUT" else None
        runs.append(run)
    return runs


def _json(text: str):
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _number(value) -> float:
    try:
        return round(float(value), 3)
    except (TypeError, ValueError, OverflowError):
        return 0.0


def _tail(lines: list[str]) -> str:
    return "\n".join(lines[-40:])[-_TAIL_BYTES:]
