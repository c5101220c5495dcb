"""No-progress detection: identical calls repeated, the same error fingerprint recurring across configure/build
cycles, A-B oscillation. The first time, a nudge goes into the next tool result; the next time, the run is stuck."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from crossbuild.trace.store import canonical_arguments

REPEAT_LIMIT = 3  # the same call with the same outcome this many times is a loop
FINGERPRINT_LIMIT = 3  # the same build error this many times


def call_signature(name: str, raw_arguments: str) -> str:
    return f"{name}:{canonical_arguments(raw_arguments)}"


@dataclass(frozen=True)
class Verdict:
    """What the monitor makes of the calls so far: a nudge the first time a kind of loop shows, stuck the next."""

    stuck: bool
    why: str


@dataclass
class ProgressMonitor:
    nudged: set[str] = field(default_factory=set)
    repeats: Counter = field(default_factory=Counter)
    fingerprints: Counter = field(default_factory=Counter)
    recent: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def observe(self, signature: str, ok: bool, fingerprint: str | None, *, changed_files: bool) -> Verdict | None:
        """Record one call; a verdict when the calls look like a loop."""
        if changed_files and ok:  # a successful edit changes what repeating a build means
            self.repeats.clear()
            self.fingerprints.clear()
        if signature not in self.seen:  # a call never made before is a new attempt: earlier repeats are history
            self.seen.add(signature)
            self.repeats.clear()
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
                return Verdict(stuck=True, why=why)
        if verdicts:
            kind, why = verdicts[0]
            self.nudged.add(kind)
            # let the model earn a fresh start after the nudge
            if kind == "repeat":
                self.repeats[key] = REPEAT_LIMIT - 1
            return Verdict(stuck=False, why=why)
        return None
