"""Why a test program failed under qemu-user, read from its own output.

The policy (README, "Verifying"): a test program that did not pass blocks verification, unless its output holds a
line that ties that failure to the emulator or the sandbox; such a run is "not counted" and shows that line. Only
these lines are evidence:
- qemu-user's own: its assertion failing (after a fork in a threaded program), or a syscall it does not emulate
  ("Unsupported syscall", ENOSYS / "Function not implemented", ptrace);
- the network the sandbox does not have: unreachable, refused, a name that does not resolve;
- a path the program hard-codes outside the sandbox: a "No such file or directory", "Permission denied",
  "Read-only file system", "Operation not permitted", "No such device" or cannot-open line that names an absolute
  path neither below the workspace (the project's source, build and install folders) nor in the sandbox's private
  /tmp: "cannot open /usr/share/foo/data.txt: No such file or directory", "open /dev/tty: No such device or
  address". Such a line that names no path, a relative one or one in the workspace is about the project's own files
  and is a failure; whether it fails the same way on every machine is the build-machine check's to tell
  (native_check.py, the fourth kind of evidence). Printed paths are compared as text, never looked up.
Nothing else excuses: no generic "needs a terminal", "the sandbox forbids it" or "test data missing". A line that
reports one of the program's own checks failing (an assertion, FAIL, "expected ... got") and is not itself
evidence outweighs any evidence, which may be incidental. A program stopped by its time limit (the base limit
multiplied by the emulator's measured slowdown, slowdown.py) failed whatever it printed: "timed out after Ns (limit
scaled xK for emulation)". Failing to load or dying of a signal is `crashed`, except an abort that follows a failed
check of the program's own (assert(), a test framework's): that is the check failing, `failed`. A program that
prints its usage and exits 1/2/64/255 is `usage` (it wants its harness's arguments; not counted, levels.py).

A TAP runner (libuv's, glib's) is read test by test: each failed test's lines are triaged as a program's are (one
its runner timed out failed), so a runner whose failed tests all show evidence does not block, and one real failure
among hundreds of passing tests still does, named with its evidence.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from crossbuild.proof import tap

# Failing to load or crashing is always the build's fault, whatever else the output says.
# "Exec format error" only as a failed start (`./prog: `, `execve(): `, `cannot execute binary file`): glog's
# logging test prints strerror(ENOEXEC) as data ("Plog every 2, iteration 9: Exec format error [8]").
_CRASH = re.compile(r"qemu: uncaught target signal|Segmentation fault|Illegal instruction|Bus error|"
                    r"Error relocating|Error loading shared library|error while loading shared libraries|"
                    r"cannot open shared object file|symbol not found|Could not open '|cannot execute binary file|"
                    r"(\bexec\w*(\(\))?|[\w.+-]*/[\w./+-]+): Exec format error|"
                    r"core dumped|Aborted|stack smashing detected|symbol lookup error|version `GLIBC_[\d.]+' not found|"
                    # the sandbox could not start it (its runner missing, a mount failing): nothing of it ran
                    r"^bwrap: ")
_QEMU_ITSELF = re.compile(r"ERROR:\S*\b(accel|tcg|linux-user|plugins|target|util)/\S+:\d+:\S+: assertion failed|"
                          r"qemu-\w+: \S+:\d+: \S+: Assertion .* failed")
# SIGABRT as the emulator, a shell (`Aborted (core dumped)`, `sh: line 1: 42 Aborted`) or CTest reports it
_ABORT = re.compile(r"uncaught target signal 6 \(Aborted\)|^\s*Aborted\b|\d Aborted\b|Exception: SubprocessAborted")
SIGABRT = 6
_TEST_TIMEOUT = re.compile(r"^#?\s*timeout\b|\btimed out\b", re.IGNORECASE)  # a TAP runner's own time limit
_TELLING = re.compile(r"assert|fail|error|expected|mismatch", re.IGNORECASE)
# A line that reports one of the program's own checks failing: an assertion (glibc's, musl's, glib's, libuv's
# wordings), a FAIL/FAILED verdict, glog's CHECK, gtest's `file:line: Failure`, what was expected against what came.
_CHECK_FAILED = re.compile(
    r"(?i:\bassert\w*\b.*\bfail|\bfail\w*\b.*\bassert)|\bFAIL(ED|URE|S)?\b|\bCheck failed\b|:\d+: Failure\b|"
    r"(?i:\bexpected\b.*\b(got|actual|but was|received)\b|\b(got|actual|received)\b.*\bexpected\b)")
_USAGE = re.compile(r"^\s*(usage|Usage|USAGE)\b|\b(usage|Usage|USAGE):|takes (exactly )?(\d+|one|two) arguments?")
_UNEMULATED = re.compile(r"[Uu]nsupported syscall|Function not implemented|\bENOSYS\b|\bptrace\b|PTRACE_")
# glibc's and musl's strerror/gai_strerror wordings: the test programs crossbuild builds use musl's
_NO_NETWORK = re.compile(
    r"Network is unreachable|Network unreachable|Network is down|Host is unreachable|No route to host|"
    r"Connection refused|Temporary failure in name resolution|Name or service not known|Name does not resolve|"
    r"Address family not supported|Cannot assign requested address|Address not available|"
    r"No address associated with hostname|"
    r"Failed to get an IP address|[Cc]ould not resolve|getaddrinfo|[Cc]onnect(ing)? to \S+ .*failed")
_NO_PATH = re.compile(
    r"No such file or directory|Permission denied|Read-only file system|Operation not permitted|No such device|"
    r"[Cc]an(no|')t (open|find|read|access|stat|create|write)|[Uu]nable to (open|find|read|access|create|locate)|"
    r"[Cc]ould not (open|find|read|access|create)|[Ff]ailed to (open|read|access|create)|\bnot found\b|"
    r"does not exist")
# an absolute path as programs print it: not a URL's (`http://`), and its end decides whether it is a source
# location (`/ws/src/t.c:12`), which names no file the program wanted
_ABS_PATH = re.compile(r"(?<![\w.~/:-])/[^\s:'\"`,;()\[\]<>{}]*")
_SOURCE_LOCATION = re.compile(r":\d")
_PROVIDED = ("/tmp",)  # the sandbox's own private /tmp: a failure there is the program's


@dataclass(frozen=True)
class Triage:
    kind: str  # crashed | usage | environment | failed
    why: str  # the evidence: the output line, or what stopped it
    aborted: bool = False  # `failed`, then abort()ed: its own check's assert() (_aborted_check)

    @property
    def blocks(self) -> bool:
        return self.kind in ("crashed", "failed")


def triage(exit_code: int | None, stopped: str | None, lines: list[str], timeout_s: float, *, scale: float = 1.0,
           workspace: str | Path | None = None) -> Triage:
    """LINES: the program's output (without crossbuild's header). Called only for a run that did not pass.
    TIMEOUT_S: the time limit it ran under, the base limit times SCALE (the emulator's slowdown). WORKSPACE: the
    folder holding the project's files (None: no printed path is known to be outside it, so none is evidence)."""
    lines = [line for line in lines if not line.startswith("[crossbuild:")]  # the sandbox's own notes
    inside = _inside(workspace)
    run = tap.parse(lines)
    if stopped == "timeout":
        return _timed_out(run, lines, timeout_s, scale, inside)
    if run is not None and run.failed and (exit_code is None or exit_code >= 0):
        return _triage_tap(run, stopped, inside)
    qemu = _first(_QEMU_ITSELF, lines)
    if qemu:
        return Triage("environment", f"qemu-user itself failed: {qemu[:200]}")
    crashes = [line for line in lines if _CRASH.search(line)]
    aborted = _aborted_check(exit_code, lines, crashes, inside)
    if aborted:
        return Triage("failed", f"{aborted[:200]} (then aborted)", aborted=True)
    if crashes:
        return Triage("crashed", _crash_evidence(lines, crashes[0]))
    if exit_code is not None and exit_code < 0:
        return Triage("crashed", f"killed by signal {-exit_code}")
    if stopped:
        return Triage("failed", stopped)
    check = _failed_check(lines, inside)  # the program's own verdict on itself outweighs any evidence
    if check:
        return Triage("failed", check[:200])
    if exit_code in (1, 2, 64, 255) and _first(_USAGE, lines[:20]):
        return Triage("usage", f"printed its usage (exit {exit_code}; needs arguments)")
    environment = _environment(lines, inside)
    if environment:
        what, line = environment
        return Triage("environment", f"{what}: {line[:200]}")
    return Triage("failed", f"exit {exit_code}")


def _timed_out(run: tap.TapRun | None, lines: list[str], timeout_s: float, scale: float,
               inside: tuple[str, ...] | None) -> Triage:
    """A program stopped by its time limit failed, whatever it printed; the why says what it had shown by then."""
    limit = f"limit scaled x{round(scale, 1):g} for emulation" if scale > 1 else "limit not scaled"
    said = f"timed out after {round(timeout_s, 1):g}s ({limit})"
    if run is not None:
        planned = f" of {run.planned} planned" if run.planned else ""
        first = f"; first: not ok {run.failed[0].label}" if run.failed else ""
        return Triage("failed", f"{said}; {len(run.tests)} tests run{planned}, {len(run.failed)} failed{first}"[:400])
    evidence = _failed_check(lines, inside) or _first(_CRASH, lines)
    if evidence:
        return Triage("failed", f"{said}; {evidence[:200]}")
    if any(line.strip() for line in lines):
        return Triage("failed", f"{said}; last output: {_last(lines)[:160]}")
    return Triage("failed", f"{said} without printing anything")


def _triage_tap(run: tap.TapRun, stopped: str | None, inside: tuple[str, ...] | None) -> Triage:
    crash = _first(_CRASH, run.header)  # the runner's own lines, before any test
    if crash:
        return Triage("crashed", crash)
    if stopped:
        return Triage("failed", stopped)
    verdicts = [(test, _triage_test(test.lines, inside)) for test in run.failed]
    counted = f"of {len(run.tests)} tests"
    blocking = [(test, v) for test, v in verdicts if v.blocks]
    if blocking:
        test, v = blocking[0]
        kind = "crashed" if any(v.kind == "crashed" for _, v in blocking) else "failed"
        return Triage(kind, f"{len(blocking)} {counted} failed without evidence of the emulator or the sandbox "
                            f"({len(verdicts) - len(blocking)} more with it); first: not ok {test.label}: "
                            f"{v.why}"[:400])
    reasons = "; ".join(f"{test.label}: {v.why}" for test, v in verdicts[:3])
    more = f"; and {len(verdicts) - 3} more" if len(verdicts) > 3 else ""
    return Triage("environment", f"{len(verdicts)} {counted} failed, each for the emulator or the sandbox: "
                                 f"{reasons}{more}"[:600])


def _triage_test(lines: list[str], inside: tuple[str, ...] | None) -> Triage:
    """One failed TAP test, from the lines its runner printed after its result. Such runners run each test in a
    child that abort()s when a check fails, so an abort after the evidence is that check failing for the
    environment's reason, not a crash; any other signal still is. A test its runner timed out failed."""
    lines = [line.removeprefix("# ") for line in lines]  # the runner's diagnostics prefix
    qemu = _first(_QEMU_ITSELF, lines)
    if qemu:
        return Triage("environment", f"qemu-user itself failed: {qemu[:160]}")
    crashes = [line for line in lines if _CRASH.search(line)]
    check = _failed_check(lines, inside)
    if check:  # a check of its own failed: whatever else it printed, that is the failure
        if crashes and not _aborted_check(None, lines, crashes, inside):
            return Triage("crashed", _crash_evidence(lines, crashes[0]))
        return Triage("failed", check[:200] + (" (then aborted)" if crashes else ""))
    timeout = _first(_TEST_TIMEOUT, lines)
    if timeout:
        return Triage("failed", f"timed out by its runner's own limit: {timeout[:160]}")
    environment = _environment(lines, inside)
    if crashes and not (environment and all(_ABORT.search(line) for line in crashes)):
        return Triage("crashed", _crash_evidence(lines, crashes[0]))
    if environment:
        what, line = environment
        return Triage("environment", f"{what}: {line[:160]}" + (" (then aborted)" if crashes else ""))
    return Triage("failed", (_first(_TELLING, lines) or _last(lines) or "no output")[:200])


def _aborted_check(exit_code: int | None, lines: list[str], crashes: list[str],
                   inside: tuple[str, ...] | None) -> str | None:
    """The program's own failed check, when the only crash is the abort() that followed it: assert() and most
    test frameworks abort when a check fails (serd's test_node on strtod's last digit). That is a failure of the
    program's own, which the build machine's run of the same program can tell apart (native_check.py), not a
    crash; any other signal, or an abort no failed check comes before, still is one."""
    if not (crashes or exit_code == -SIGABRT) or not all(_ABORT.search(line) for line in crashes):
        return None
    if exit_code is not None and exit_code < 0 and exit_code != -SIGABRT:
        return None
    return _failed_check(lines[:lines.index(crashes[0])] if crashes else lines, inside)


def telling_line(lines: list[str]) -> str | None:
    """The first line that says why a program failed (an assertion, an error, what was expected)."""
    return _first(_TELLING, lines)


def _crash_evidence(lines: list[str], crash: str) -> str:
    """The crash line with what the program said before it died: the failed assert() or check, when a line
    before the crash names one, else its last words ("Assertion failed: mul(2, 3) == 6 (check_mul.c: main: 3)
    (qemu: uncaught target signal 6 (Aborted) - core dumped)")."""
    before = lines[:lines.index(crash)]
    last_words = _first(_TELLING, before) or _last(before)
    return f"{last_words.strip()[:160]} ({crash.strip()[:80]})" if last_words else crash.strip()


def _failed_check(lines: list[str], inside: tuple[str, ...] | None) -> str | None:
    """The first line that reports one of the program's own checks failing and is not itself evidence ("FAIL:
    cannot open /usr/share/foo/data.txt: No such file or directory" is the sandbox's; an "Assertion failed" beside
    an incidental "Permission denied" is not, and neither is "FAIL: cannot open data.txt: ...")."""
    for line in lines:
        if _CHECK_FAILED.search(line) and _evidence(line, inside) is None:
            return line.strip()
    return None


def _environment(lines: list[str], inside: tuple[str, ...] | None) -> tuple[str, str] | None:
    """(what the emulator or the sandbox lacked, the line that shows it), or None: the first kind of evidence in
    the order of _evidence that any line holds."""
    best: tuple[int, str, str] | None = None
    for line in lines:
        found = _evidence(line, inside)
        if found and (best is None or found[0] < best[0]):
            best = (*found, line.strip())
    return (best[1], best[2]) if best else None


def _evidence(line: str, inside: tuple[str, ...] | None) -> tuple[int, str] | None:
    """Whether LINE ties a failure to the emulator or the sandbox: (its rank, what it lacked), or None."""
    if _UNEMULATED.search(line):
        return 0, "qemu-user does not emulate it"
    if _NO_NETWORK.search(line):
        return 1, "the sandbox has no network"
    if _NO_PATH.search(line) and (path := _outside(line, inside)):
        return 2, f"it needs {path}, outside the workspace, which the sandbox does not provide"
    return None


def _outside(line: str, inside: tuple[str, ...] | None) -> str | None:
    """The first absolute path LINE names that is outside INSIDE (the workspace and the sandbox's /tmp), compared
    as text: a printed path never selects a host file."""
    if inside is None:
        return None
    for m in _ABS_PATH.finditer(line):
        if _SOURCE_LOCATION.match(line, m.end()):
            continue
        path = posixpath.normpath(m.group())
        if not any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in inside):
            return path
    return None


def _inside(workspace: str | Path | None) -> tuple[str, ...] | None:
    """The folders whose paths are the project's or the sandbox's own: the workspace as given and resolved."""
    if workspace is None:
        return None
    given = os.path.abspath(workspace)
    return tuple(dict.fromkeys((given, os.path.realpath(given), *_PROVIDED)))


def _first(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    return next((line.strip() for line in lines if pattern.search(line)), None)


def _last(lines: list[str]) -> str:
    return next((line.strip() for line in reversed(lines) if line.strip()), "")
