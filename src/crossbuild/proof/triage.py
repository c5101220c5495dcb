"""Why a test program failed under qemu-user, read from its own output.

The policy (README, "Verifying"): a program that fails to load, crashes with a signal, or fails without a reason
its output attributes to the test environment blocks verification. A program that ran and says it could not find
its test data, reach the network, get a terminal, make a syscall qemu-user does not emulate, or do something the
sandbox forbids, or that was still running when the emulated time limit struck, is reported with the line that
shows it and does not block: it proved the binary loads and runs on the target, and its own verdict is about the
machine it ran on. Nothing is excused without such a line in the log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Failing to load or crashing is always the build's fault, whatever else the output says.
# "Exec format error" only as a failed start (`./prog: `, `execve(): `, `cannot execute binary file`): glog's
# logging test prints strerror(ENOEXEC) as data ("Plog every 2, iteration 9: Exec format error [8]").
_CRASH = re.compile(r"qemu: uncaught target signal|Segmentation fault|Illegal instruction|Bus error|"
                    r"Error relocating|Error loading shared library|error while loading shared libraries|"
                    r"cannot open shared object file|symbol not found|Could not open '|cannot execute binary file|"
                    r"(\bexec\w*(\(\))?|[\w.+-]*/[\w./+-]+): Exec format error|"
                    r"core dumped|Aborted|stack smashing detected|symbol lookup error|version `GLIBC_[\d.]+' not found")
_USAGE = re.compile(r"^\s*(usage|Usage|USAGE)\b|\b(usage|Usage|USAGE):|takes (exactly )?(\d+|one|two) arguments?")
_ENVIRONMENT = [
    ("its test data is not where it looks", re.compile(
        r"Unable to locate (known )?reference file|[Cc]an(no|')t (open|find|locate|read) (the )?(test|data|reference|"
        r"input|sample)|(test|data|reference|input) (file|files|directory|folder)\b.*\b(not found|missing|does not "
        r"exist)|No such file or directory")),
    ("the sandbox has no network", re.compile(
        r"Network is unreachable|Connection refused|Temporary failure in name resolution|Name or service not known|"
        r"Address family not supported|Cannot assign requested address|No address associated with hostname|"
        r"Failed to get an IP address|[Cc]ould not resolve|getaddrinfo|[Cc]onnect(ing)? to \S+ .*failed")),
    ("qemu-user does not emulate it", re.compile(
        r"[Uu]nsupported syscall|Function not implemented|\bENOSYS\b|\bptrace\b|PTRACE_")),
    ("it needs a terminal", re.compile(r"Inappropriate ioctl for device|not a tty|\bisatty\b|/dev/tty")),
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
    crash = _first(_CRASH, lines)
    if crash or (exit_code is not None and exit_code < 0):
        return Triage("crashed", crash or f"killed by signal {-exit_code}")
    if stopped == "timeout":
        if any(line.strip() for line in lines):  # it loaded and was working; emulation is slow
            return Triage("environment", f"still running after {timeout_s:.0f}s under emulation "
                                         f"(last output: {_last(lines)[:160]})")
        return Triage("failed", f"timed out after {timeout_s:.0f}s without printing anything")
    if stopped:
        return Triage("failed", stopped)
    if exit_code in (1, 2, 64, 255) and _first(_USAGE, lines[:20]):
        return Triage("usage", f"printed its usage (exit {exit_code}; needs arguments)")
    for what, pattern in _ENVIRONMENT:
        line = _first(pattern, lines)
        if line:
            return Triage("environment", f"{what}: {line[:200]}")
    return Triage("failed", f"exit {exit_code}")


def _first(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    return next((line.strip() for line in lines if pattern.search(line)), None)


def _last(lines: list[str]) -> str:
    return next((line.strip() for line in reversed(lines) if line.strip()), "")
