"""What a verdict proved on the target, as one level (README, "Verifying"):

- `tested`: the project's own test programs ran there and passed: at least one passed, none failed, fewer not
  counted (excused with evidence, or only printing their usage) than passed, and no test was switched off; run by
  the project's harness, at least one passing test starts a target program and the harness finished;
- `exercised`: no usable test suite, but every product ran there: each executable started cleanly, each shared
  library was loaded with every exported symbol resolved, each static library was linked whole into a probe that
  ran (crossbuild's own probes, exercise.py);
- `built`: only the static checks stand (every binary's architecture, the expected artifacts, the clean rebuild).

Each verdict carries the counts it rests on and why it is no higher.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from crossbuild.proof.smoke import NOT_BUILT, UNFINISHED

if TYPE_CHECKING:
    from crossbuild.proof.exercise import ProbeRun
    from crossbuild.proof.smoke import SmokeRun

LEVELS = ("tested", "exercised", "built")


def meets(level: str | None, required: str) -> bool:
    """Whether LEVEL (None: not verified) is REQUIRED or above."""
    return level is not None and LEVELS.index(level) <= LEVELS.index(required)


@dataclass
class Proof:
    level: str | None  # tested | exercised | built; None when the verdict is NOT VERIFIED
    # test programs: found, ran, passed, not_counted, failed; probes: probes_run, probes_passed
    counts: dict[str, int] = field(default_factory=dict)
    why_not_higher: str | None = None  # what keeps it from the next level up (None at tested)

    def phrase(self) -> str:
        """One phrase for every face: `tested (3 of 3 test programs passed on the target)`."""
        c = self.counts
        if self.level == "tested":
            extra = f", {c['not_counted']} not counted" if c.get("not_counted") else ""
            if c.get("found", 0) > c["ran"]:  # skipped, not built, or not finished: listed with their reasons
                extra += f", {c['found'] - c['ran']} not run"
            return f"tested ({c['passed']} of {c['ran']} test programs passed on the target{extra})"
        if self.level == "exercised":
            aside = f", {c['probes_not_counted']} not counted" if c.get("probes_not_counted") else ""
            return (f"exercised ({c.get('probes_passed', 0)} of {c.get('probes_run', 0)} products ran on the "
                    f"target{aside}: executables started, libraries loaded or linked whole; not tested: "
                    f"{self.why_not_higher})")
        return f"{self.level}: {self.why_not_higher}" if self.level else f"not verified ({self.why_not_higher})"


def proof_of(ok: bool, run_tests: bool, runs: list[SmokeRun], probes: list[ProbeRun] | None = None,
             tests_off: str | None = None, *, cannot_run: str | None = None) -> Proof:
    """The level a verdict (OK, whether programs were to run, the test runs, the probes when they ran, and what
    switched tests off in the recorded steps) reached. CANNOT_RUN: why no program of the target runs here."""
    ran = [r for r in runs if not r.skipped]
    passed = sum(r.passed for r in ran)
    failed = sum(r.failed for r in ran)
    excused = sum(1 for r in ran if not r.passed and not r.failed)
    counts = {"found": len(runs), "ran": len(ran), "passed": passed, "not_counted": excused, "failed": failed}
    if probes is not None:
        counts["probes_run"] = sum(1 for p in probes if not p.skipped and p.kind != "more")  # "more": over the cap
        counts["probes_passed"] = sum(1 for p in probes if p.passed)
        counts["probes_not_counted"] = sum(1 for p in probes if p.not_counted)
    if not ok:
        return Proof(None, counts, f"{failed} test programs failed" if failed else "the static checks failed")
    untested = not_tested(run_tests, runs, tests_off)
    if untested is None:
        return Proof("tested", counts)
    if not run_tests:
        return Proof("built", counts, untested)
    probes = [p for p in probes or [] if p.kind != "more"]  # "more": the products over the cap, counted, not run
    if not probes:
        why = f" ({cannot_run})" if cannot_run and cannot_run not in untested else ""
        return Proof("built", counts, f"{untested}; and no product could be probed on the target{why}")
    blocking = [p for p in probes if not p.passed and not p.not_counted]
    if not blocking and any(p.passed for p in probes):
        return Proof("exercised", counts, untested)
    if not blocking:
        return Proof("built", counts, f"{untested}; and no probe passed on the target ({len(probes)} not counted: "
                                      f"{probes[0].not_counted})")
    first = blocking[0]
    return Proof("built", counts, f"{untested}; and {len(blocking)} of {len(probes)} probes did not pass "
                                  f"(first: {first.path}: {first.skipped or first.why})")


def not_tested(run_tests: bool, runs: list[SmokeRun], tests_off: str | None) -> str | None:
    """Why the test programs' RUNS do not make a verdict `tested`, or None when they do."""
    ran = [r for r in runs if not r.skipped]
    passed = sum(r.passed for r in ran)
    excused = sum(1 for r in ran if not r.passed and not r.failed)
    if tests_off:
        return tests_off
    harnessed = [r for r in runs if r.harness]
    if any(r.skipped and r.skipped.startswith(UNFINISHED) for r in harnessed):
        return f"the project's {harnessed[0].harness} did not finish within its overall limit"
    if harnessed and passed and not any(r.passed and r.on_target for r in harnessed):
        return (f"no test of the project's {harnessed[0].harness} that passed starts a target program (their "
                "commands name neither the emulator nor a program built for the target)")
    # tests the build never made (left out because they did not compile) weigh like those not counted
    not_built = sum(1 for r in runs if r.skipped == NOT_BUILT)
    if passed and not any(r.failed for r in ran) and excused + not_built < passed:
        return None
    if not run_tests:
        return "test programs were not run (run_tests off)"
    if not runs:
        return "no test program was built (no test-like executable)"
    if not ran:
        return f"none of the {len(runs)} test programs could run here ({runs[0].skipped})"
    if not passed:
        return f"no test program passed on the target ({excused} of {len(ran)} not counted)"
    if not_built:
        return f"as many test programs not counted ({excused}) or not built ({not_built}) as passed ({passed})"
    return f"as many test programs not counted ({excused}) as passed ({passed})"
