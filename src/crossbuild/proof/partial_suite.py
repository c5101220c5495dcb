"""When a dependency whose own tests partly failed on the target is still what a consumer should link: every
binary fits the target and rebuilt the same, and only a few of its own tests failed, none by crashing (OpenSSL's
errstr compares musl's messages with the build machine's Perl; libxml2's runtest has one case of 508 that fails
under qemu). The consumer's own verdict then stands on its own tests, and the result says what failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crossbuild.proof.verify import VerifyReport


def tests_alone_failed(report: VerifyReport | None) -> str | None:
    """When a dependency's verdict refused it only for some of its own tests failing on the target — every artifact
    fits the target, the clean rebuild passed, at least two in three of the tests that ran passed and none crashed —
    what failed (to be said with the result), else None. Counted in the harness's tests: one CTest test can be a
    whole suite (libxml2's runtest: 508 cases, one error under qemu, among 5 tests), so nine in ten refused it."""
    if report is None or not report.reasons or not report.rebuild or not report.rebuild.get("ok"):
        return None
    if any(not a.get("ok") for a in report.artifacts):
        return None
    failed = [r for r in report.smoke_runs if r.failed]
    passed = sum(1 for r in report.smoke_runs if r.passed)
    if not failed or len(report.reasons) != len(failed) or passed < 2 * len(failed) or any(
            r.triage == "crashed" for r in failed):
        return None
    named = [f"{r.label[-120:]} ({(r.why or r.status)[:120]})" for r in failed[:3]]
    return (f"{passed} passed, {len(failed)} failed: " + "; ".join(named)
            + (f" and {len(failed) - 3} more" if len(failed) > 3 else ""))
