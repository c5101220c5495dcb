"""No-progress detection on call sequences real runs make."""

from __future__ import annotations

from crossbuild.agent.progress import ProgressMonitor


def _run(calls):
    monitor = ProgressMonitor()
    return [monitor.observe(sig, ok, fp, changed_files=False) for sig, ok, fp in calls]


def test_the_same_cleanup_between_rounds_with_new_configure_arguments_is_progress():
    # the planner removes build/ before each round of fixes; each round configures with other arguments
    # (libxml2: LZMA dropped, then ICU): that is three identical `rm -rf build` calls, and progress
    calls = []
    for args in ("-DA=OFF", "-DA=OFF -DB=OFF", "-DA=OFF -DB=OFF -DC=OFF"):
        calls += [("run_command:rm -rf build", True, None), (f"run_command:cmake {args}", False, f"err {args}")]
    assert all(v is None for v in _run(calls))


def test_a_call_repeated_with_nothing_new_in_between_is_nudged_then_stuck():
    same = [("run_command:make", False, "undefined reference to 'foo'")] * 6
    verdicts = [v for v in _run(same) if v]
    assert verdicts[0].stuck is False and verdicts[-1].stuck is True
