"""Proof levels from a verdict's test-program runs: `tested` only when a test passed, none failed and fewer were
not counted than passed; otherwise `built`, with why it is no higher."""

from __future__ import annotations

from crossbuild.proof.levels import proof_of
from crossbuild.proof.smoke import SmokeRun


def _run(name: str, **kw) -> SmokeRun:
    return SmokeRun(path=f"build/{name}", command=[name], **kw)


PASSED = _run("test_a", passed=True, exit_code=0)
EXCUSED = _run("test_net", exit_code=1, triage="environment", why="the sandbox has no network: Network unreachable")
USAGE = _run("example", exit_code=1, triage="usage", why="printed its usage")
FAILED = _run("test_b", exit_code=1, triage="failed", why="exit 1")
SKIPPED = _run("test_c", skipped="Windows executables are scanned only")


def test_tested_needs_a_pass_no_failure_and_fewer_excused_than_passed():
    proof = proof_of(True, True, [PASSED, _run("test_x", passed=True, exit_code=0), EXCUSED])
    assert proof.level == "tested" and proof.why_not_higher is None
    assert proof.counts == {"found": 3, "ran": 3, "passed": 2, "not_counted": 1, "failed": 0}
    assert proof.phrase() == "tested (2 of 3 test programs passed on the target, 1 not counted)"


def test_what_keeps_a_verified_build_at_built():
    cases = [
        ([], True, "no test program was built"),
        ([SKIPPED], True, "none of the 1 test programs could run here (Windows executables are scanned only)"),
        ([EXCUSED, USAGE], True, "no test program passed on the target (2 of 2 not counted)"),
        ([PASSED, EXCUSED], True, "as many test programs not counted (1) as passed (1)"),
        ([PASSED], False, "test programs were not run"),
    ]
    for runs, run_tests, why in cases:
        proof = proof_of(True, run_tests, runs if run_tests else [])
        assert proof.level == "built" and proof.why_not_higher.startswith(why), (runs, proof)
        assert proof.phrase().startswith("built: ")


def test_a_refused_verdict_has_no_level():
    proof = proof_of(False, True, [PASSED, FAILED])
    assert proof.level is None and proof.counts["failed"] == 1 and "1 test programs failed" in proof.phrase()


def test_exercised_needs_every_probe_passed_and_tests_switched_off_are_never_tested():
    from crossbuild.proof.exercise import ProbeRun

    started = ProbeRun("executable", "build/tool", checked="ran `tool --version`: exit 0", passed=True)
    loaded = ProbeRun("shared_library", "build/libx.so", checked="dlopen ...", passed=True)
    crashed = ProbeRun("executable", "build/crash", checked="ran `crash --version`", why="killed by signal 11")
    cases = [
        ([], [started, loaded], None, "exercised", "no test program was built"),
        ([], [started, crashed], None, "built", "no test program was built"),
        ([], [], None, "built", "no test program was built"),
        ([PASSED], [started], "tests not built: -DBUILD_TESTING=OFF (configure step)", "exercised",
         "tests not built: -DBUILD_TESTING=OFF"),
        ([PASSED], [crashed], "tests not built: TESTS= (build step)", "built", "tests not built: TESTS="),
        ([PASSED], [crashed], None, "tested", None),
    ]
    for runs, probes, off, level, why in cases:
        proof = proof_of(True, True, runs, probes, off)
        assert proof.level == level, (runs, probes, off, proof)
        assert (proof.why_not_higher or None) == why or proof.why_not_higher.startswith(why), proof
    proof = proof_of(True, True, [], [started, crashed])
    assert proof.counts["probes_run"] == 2 and proof.counts["probes_passed"] == 1
    assert "1 of 2 probes did not pass (first: build/crash: killed by signal 11)" in proof.why_not_higher
    assert proof_of(True, True, [], [started]).phrase().startswith("exercised (1 of 1 products ran on the target")


def test_the_bar():
    from crossbuild.proof.levels import meets

    assert meets("tested", "exercised") and meets("exercised", "exercised") and not meets("built", "exercised")
    assert meets("built", "built") and not meets(None, "built") and not meets("exercised", "tested")
