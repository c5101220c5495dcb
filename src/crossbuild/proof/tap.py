"""The tests a TAP runner reports (libuv's uv_run_tests, glib's and automake's TAP tests): each result line with
the lines after it up to the next result, so one failing test's output is read apart from the others'.

Hand-written: TAP's result lines are one regular expression, and no parser on PyPI groups the diagnostics that
follow a result with it (tappy yields them as separate lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# `ok 12 - name`, `not ok 13 name # TODO why`; the number and the description are optional in TAP
_RESULT = re.compile(r"^(?P<not>not )?ok\b(?:\s+(?P<number>\d+))?\s*(?:-\s*)?(?P<name>[^#]*?)\s*"
                     r"(?:#\s*(?P<directive>\w+)\b.*)?$")
_PLAN = re.compile(r"^1\.\.(\d+)\b")


@dataclass
class TestBlock:
    number: str
    name: str
    passed: bool
    lines: list[str] = field(default_factory=list)  # what followed its result line

    @property
    def label(self) -> str:
        return f"{self.number} - {self.name}".strip(" -") or "(unnamed)"


@dataclass
class TapRun:
    planned: int | None
    tests: list[TestBlock]
    header: list[str]  # the runner's own lines before its first result

    @property
    def failed(self) -> list[TestBlock]:
        return [t for t in self.tests if not t.passed]


def parse(lines: list[str]) -> TapRun | None:
    """The TAP run in LINES, or None when they hold no passing result (not a TAP runner, or one that never got a
    test done: such output is read as a whole program's)."""
    planned, tests, header = None, [], []
    for line in lines:
        m = _RESULT.match(line)
        if m:
            directive = (m["directive"] or "").upper()
            # `not ok ... # TODO` is an expected failure and `# SKIP` a test not run: neither fails the run
            tests.append(TestBlock(m["number"] or str(len(tests) + 1), m["name"].strip(),
                                   passed=not m["not"] or directive in ("TODO", "SKIP")))
            continue
        plan = _PLAN.match(line)
        if plan and planned is None:
            planned = int(plan.group(1))
        elif tests:
            tests[-1].lines.append(line)
        else:
            header.append(line)
    if not any(t.passed for t in tests):
        return None
    return TapRun(planned, tests, header)
