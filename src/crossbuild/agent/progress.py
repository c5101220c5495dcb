"""No-progress detection: identical calls repeated, the same error fingerprint recurring across configure/build
cycles, A-B oscillation. The first time, a nudge goes into the next tool result; the next time, the run is stuck."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from ..kb.base import fingerprint

REPEAT_LIMIT = 3  # the same call with the same outcome this many times is a loop
FINGERPRINT_LIMIT = 3  # the same build error this many times


def call_signature(name: str, raw_arguments: str) -> str:
    try:
        canon = json.dumps(json.loads(raw_arguments or "{}"), sort_keys=True)
    except (json.JSONDecodeError, RecursionError):
        canon = raw_arguments.strip()
    return f"{name}:{canon}"


_ERROR_LINE = re.compile(r"\b(error|Error|ERROR|fatal)\b|undefined (reference|symbol)|No such file|not found|"
                         r"cannot find|\*\*\*")


def error_fingerprint(output: str) -> str | None:
    """The first error-looking line of a failed command's output, reduced to its shape (kb.fingerprint)."""
    for line in output.splitlines():
        if _ERROR_LINE.search(line) and not line.startswith("[full log"):
            return fingerprint(line.strip())[:200]
    return None


@dataclass
class ProgressMonitor:
    nudged: set[str] = field(default_factory=set)
    repeats: Counter = field(default_factory=Counter)
    fingerprints: Counter = field(default_factory=Counter)
    recent: list[str] = field(default_factory=list)

    def observe(self, signature: str, ok: bool, fingerprint: str | None, *, changed_files: bool) -> str | None:
        """Record one call; return 'nudge:<why>', 'stuck:<why>' or None."""
        if changed_files and ok:  # a successful edit changes what repeating a build means
            self.repeats.clear()
            self.fingerprints.clear()
        self.recent = (self.recent + [signature])[-6:]
        verdicts = []
        key = f"{signature}|{ok}|{fingerprint}"
        self.repeats[key] += 1
        if self.repeats[key] >= REPEAT_LIMIT:
            verdicts.append(("repeat", f"the same call ({signature[:120]}) gave the same result "
                                       f"{self.repeats[key]} times"))
        if fingerprint:
            self.fingerprints[fingerprint] += 1
            if self.fingerprints[fingerprint] >= FINGERPRINT_LIMIT:
                verdicts.append(("fingerprint", f"the same error came back {self.fingerprints[fingerprint]} "
                                                f"times: {fingerprint[:160]}"))
        r = self.recent
        if len(r) >= 4 and r[-1] == r[-3] and r[-2] == r[-4] and r[-1] != r[-2]:
            verdicts.append(("oscillation", "the last calls alternate between the same two actions"))
        for kind, why in verdicts:
            if kind in self.nudged:
                return f"stuck:{why}"
        if verdicts:
            kind, why = verdicts[0]
            self.nudged.add(kind)
            # let the model earn a fresh start after the nudge
            if kind == "repeat":
                self.repeats[key] = REPEAT_LIMIT - 1
            return f"nudge:{why}"
        return None
