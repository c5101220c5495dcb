"""Why a test program failed under qemu-user, read from its own output.

The policy (README, "Verifying"): a program that fails to load, crashes with a signal, or fails without a reason
its output attributes to the test environment blocks verification. A program that ran and says it could not find
its test data, reach the network, get a terminal, make a syscall qemu-user does not emulate, or do something the
sandbox forbids, or that was still running when the emulated time limit struck, is reported with the line that
shows it and does not block: it proved the binary loads and runs on the target, and its own verdict is about the
machine it ran on. Nothing is excused without such a line in the log, and nothing is excused when the output also
holds a line reporting one of the program's own checks failing (an assertion, FAIL, "expected ... got") that is
not itself the environment's line: then the environment's line may be incidental, and the failed check is the
evidence (the same for a program stopped by the time limit, or one that also printed its usage).

A TAP runner (libuv's, glib's) is read test by test: each failed test's own lines are triaged as a program's
would be, so a runner whose failed tests all name the environment does not block, and one real failure among
hundreds of passing tests still does, named with its evidence. A line showing qemu-user's own assertion failing
(after a fork in a threaded program) is the emulator's fault, whatever the program printed after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
_ABORT = re.compile(r"uncaught target signal 6 \(Aborted\)|^\s*Aborted\b")
_TEST_TIMEOUT = re.compile(r"^#?\s*timeout\b|\btimed out\b", re.IGNORECASE)
_TELLING = re.compile(r"assert|fail|error|expected|mismatch", re.IGNORECASE)
# A line that reports one of the program's own checks failing: an assertion (glibc's, musl's, glib's, libuv's
# wordings), a FAIL/FAILED verdict, glog's CHECK, gtest's `file:line: Failure`, what was expected against what came.
_CHECK_FAILED = re.compile(
    r"(?i:\bassert\w*\b.*\bfail|\bfail\w*\b.*\bassert)|\bFAIL(ED|URE|S)?\b|\bCheck failed\b|:\d+: Failure\b|"
    r"(?i:\bexpected\b.*\b(got|actual|but was|received)\b|\b(got|actual|received)\b.*\bexpected\b)")
_USAGE = re.compile(r"^\s*(usage|Usage|USAGE)\b|\b(usage|Usage|USAGE):|takes (exactly )?(\d+|one|two) arguments?")
_ENVIRONMENT = [
    ("its test data is not where it looks", re.compile(
        r"Unable to locate (known )?reference file|[Cc]an(no|')t (open|find|locate|read) (the )?(test|data|reference|"
        r"input|sample)|(test|data|reference|input) (file|files|directory|folder)\b.*\b(not found|missing|does not "
        r"exist)|No such file or directory")),
    ("the sandbox has no network", re.compile(
        # glibc's and musl's strerror/gai_strerror wordings: the test programs crossbuild builds use musl's
        r"Network is unreachable|Network unreachable|Network is down|Host is unreachable|No route to host|"
        r"Connection refused|Temporary failure in name resolution|Name or service not known|Name does not resolve|"
        r"Address family not supported|Cannot assign requested address|Address not available|"
        r"No address associated with hostname|"
        r"Failed to get an IP address|[Cc]ould not resolve|getaddrinfo|[Cc]onnect(ing)? to \S+ .*failed")),
    ("qemu-user does not emulate it", re.compile(
        r"[Uu]nsupported syscall|Function not implemented|\bENOSYS\b|\bptrace\b|PTRACE_")),
    ("it needs a terminal", re.compile(r"Inappropriate ioctl for device|[Nn]ot a tty|\bisatty\b|/dev/tty")),
    ("the sandbox forbids it", re.compile(r"Operation not permitted|Permission denied|Read-only file system")),
]


@dataclass(frozen=True)
class Triage:
    kind: str  # crashed | usage | environment | failed
    why: str  # the evidence: the output line, or what stopped it

    @property
    def blocks(self) -> bool:
        return self.kind in ("crashed", "failed")


def triage(exit_code: int | None, stopped: str | None, lines: list[str], timeout_s: float) -> Triage:
    """LINES: the program's output (without crossbuild's header). Called only for a run that did not pass."""
    lines = [line for line in lines if not line.startswith("[crossbuild:")]  # the sandbox's own notes
    run = tap.parse(lines)
    if run is not None and run.failed and (exit_code is None or exit_code >= 0):
        return _triage_tap(run, stopped, timeout_s)
    qemu = _first(_QEMU_ITSELF, lines)
    if qemu:
        return Triage("environment", f"qemu-user itself failed: {qemu[:200]}")
    crashes = [line for line in lines if _CRASH.search(line)]
    if crashes:
        return Triage("crashed", _crash_evidence(lines, crashes[0]))
    if exit_code is not None and exit_code < 0:
        return Triage("crashed", f"killed by signal {-exit_code}")
    check = _failed_check(lines)  # the program's own verdict on itself outweighs any excuse
    if stopped == "timeout":
        if check:
            return Triage("failed", f"{check[:200]} (then still running after {timeout_s:.0f}s)")
        if any(line.strip() for line in lines):  # it loaded and was working; emulation is slow
            return Triage("environment", f"still running after {timeout_s:.0f}s under emulation "
                                         f"(last output: {_last(lines)[:160]})")
        return Triage("failed", f"timed out after {timeout_s:.0f}s without printing anything")
    if stopped:
        return Triage("failed", stopped)
    if check:
        return Triage("failed", check[:200])
    if exit_code in (1, 2, 64, 255) and _first(_USAGE, lines[:20]):
        return Triage("usage", f"printed its usage (exit {exit_code}; needs arguments)")
    environment = _environment(lines)
    if environment:
        what, line = environment
        return Triage("environment", f"{what}: {line[:200]}")
    return Triage("failed", f"exit {exit_code}")


def _triage_tap(run: tap.TapRun, stopped: str | None, timeout_s: float) -> Triage:
    crash = _first(_CRASH, run.header)  # the runner's own lines, before any test
    if crash:
        return Triage("crashed", crash)
    if stopped and stopped != "timeout":
        return Triage("failed", stopped)
    verdicts = [(test, _triage_test(test.lines)) for test in run.failed]
    counted = f"of {len(run.tests)} tests" + (" run" if stopped == "timeout" else "") + (
        f" ({run.planned} planned)" if stopped == "timeout" and run.planned else "")
    blocking = [(test, v) for test, v in verdicts if v.blocks]
    if blocking:
        test, v = blocking[0]
        kind = "crashed" if any(v.kind == "crashed" for _, v in blocking) else "failed"
        return Triage(kind, f"{len(blocking)} {counted} failed without a reason in the test environment "
                            f"({len(verdicts) - len(blocking)} more with one); first: not ok {test.label}: "
                            f"{v.why}"[:400])
    slow = f"still running after {timeout_s:.0f}s under emulation; " if stopped == "timeout" else ""
    reasons = "; ".join(f"{test.label}: {v.why}" for test, v in verdicts[:3])
    more = f"; and {len(verdicts) - 3} more" if len(verdicts) > 3 else ""
    return Triage("environment", f"{slow}{len(verdicts)} {counted} failed, each for the test environment: "
                                 f"{reasons}{more}"[:600])


def _triage_test(lines: list[str]) -> Triage:
    """One failed TAP test, from the lines its runner printed after its result. Such runners run each test in a
    child that abort()s when a check fails, so an abort after a line that names the environment is that check
    failing, not a crash; any other signal still is."""
    lines = [line.removeprefix("# ") for line in lines]  # the runner's diagnostics prefix
    qemu = _first(_QEMU_ITSELF, lines)
    if qemu:
        return Triage("environment", f"qemu-user itself failed: {qemu[:160]}")
    crashes = [line for line in lines if _CRASH.search(line)]
    runner_limit = (("the runner's time limit struck under emulation", _TEST_TIMEOUT),)
    check = _failed_check(lines, runner_limit)
    if check:  # a check of its own failed: whatever else it printed, that is the failure
        return Triage("crashed", _crash_evidence(lines, crashes[0])) if crashes else Triage("failed", check[:200])
    environment = _environment(lines, runner_limit)
    if crashes and not (environment and all(_ABORT.search(line) for line in crashes)):
        return Triage("crashed", _crash_evidence(lines, crashes[0]))
    if environment:
        what, line = environment
        return Triage("environment", f"{what}: {line[:160]}" + (" (then aborted)" if crashes else ""))
    return Triage("failed", (_first(_TELLING, lines) or _last(lines) or "no output")[:200])


def telling_line(lines: list[str]) -> str | None:
    """The first line that says why a program failed (an assertion, an error, what was expected)."""
    return _first(_TELLING, lines)


def _crash_evidence(lines: list[str], crash: str) -> str:
    """The crash line with what the program said before it died: the failed assert() or check, when a line
    before the crash names one, else its last words ("Assertion failed: mul(2, 3) == 6 (check.c: main: 3)
    (qemu: uncaught target signal 6 (Aborted) - core dumped)")."""
    before = lines[:lines.index(crash)]
    last_words = _first(_TELLING, before) or _last(before)
    return f"{last_words.strip()[:160]} ({crash.strip()[:80]})" if last_words else crash.strip()


def _failed_check(lines: list[str], first: tuple[tuple[str, re.Pattern[str]], ...] = ()) -> str | None:
    """The first line that reports one of the program's own checks failing and is not itself a line naming the
    environment ("FAIL: cannot open data.txt: No such file or directory" is the environment's evidence; an
    "Assertion failed" beside an incidental "Permission denied" is not)."""
    for line in lines:
        if _CHECK_FAILED.search(line) and not any(p.search(line) for _, p in (*first, *_ENVIRONMENT)):
            return line.strip()
    return None


def _environment(lines: list[str], first: tuple[tuple[str, re.Pattern[str]], ...] = ()) -> tuple[str, str] | None:
    """(what the environment lacked, the line that shows it), or None."""
    for what, pattern in [*first, *_ENVIRONMENT]:
        line = _first(pattern, lines)
        if line:
            return what, line
    return None


def _first(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    return next((line.strip() for line in lines if pattern.search(line)), None)


def _last(lines: list[str]) -> str:
    return next((line.strip() for line in reversed(lines) if line.strip()), "")
