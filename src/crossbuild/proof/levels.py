"""What a verdict proved on the target, as one level (README, "Verifying"): `tested` when the project's own test
programs ran there and passed, `built` when only the static checks stand (every binary's architecture, the clean
rebuild). `exercised` (executables started, libraries loaded by crossbuild's probes) sits between them and is not
reached yet: a build without a usable test suite is `built`, and says why it is no higher.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crossbuild.proof.smoke import SmokeRun

LEVELS = ("tested", "exercised", "built")


@dataclass
class Proof:
    level: str | None  # tested | exercised | built; None when the verdict is NOT VERIFIED
    counts: dict[str, int] = field(default_factory=dict)  # test programs: found, ran, passed, not_counted, failed
    why_not_higher: str | None = None  # what keeps it from the next level up (None at tested)

    def phrase(self) -> str:
        """One phrase for every face: `tested (3 of 3 test programs passed on the target)`."""
        c = self.counts
        if self.level == "tested":
            extra = f", {c['not_counted']} not counted" if c.get("not_counted") else ""
            return f"tested ({c['passed']} of {c['ran']} test programs passed on the target{extra})"
        return f"{self.level}: {self.why_not_higher}" if self.level else f"not verified ({self.why_not_higher})"


def proof_of(ok: bool, run_tests: bool, runs: list[SmokeRun]) -> Proof:
    """The level a verdict (OK, whether test programs were to run, the runs) reached. `tested` needs at least one
    test program passed, none failed, and fewer not counted (excused, or only printing their usage) than passed."""
    ran = [r for r in runs if not r.skipped]
    passed = sum(r.passed for r in ran)
    failed = sum(r.failed for r in ran)
    excused = sum(1 for r in ran if not r.passed and not r.failed)
    counts = {"found": len(runs), "ran": len(ran), "passed": passed, "not_counted": excused, "failed": failed}
    if not ok:
        return Proof(None, counts, f"{failed} test programs failed" if failed else "the static checks failed")
    if passed and not failed and excused < passed:
        return Proof("tested", counts)
    if not run_tests:
        why = "test programs were not run (run_tests off)"
    elif not runs:
        why = "no test program was built (no test-like executable), and nothing else ran on the target"
    elif not ran:
        why = f"none of the {len(runs)} test programs could run here ({runs[0].skipped})"
    elif not passed:
        why = f"no test program passed on the target ({excused} of {len(ran)} not counted)"
    else:
        why = f"as many test programs not counted ({excused}) as passed ({passed})"
    return Proof("built", counts, why)
