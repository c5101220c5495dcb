"""The trace database's one opener: processes that create the same new database at once all get it, migrated once."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3

from crossbuild.trace import store as trace


def _open_and_record_each(paths: list[str], n: int, start_together, results) -> None:
    outcomes = []
    for path in paths:
        start_together.wait()  # all six open each new database at the same moment
        try:
            t = trace.Trace(path)
            t.start_run(run_id=f"run-{n}", source="s", target="t", model="m", config={}, version="v",
                        prompt_hash="h", workspace="w")
            t.close()
            outcomes.append("ok")
        except Exception as e:  # noqa: BLE001 - the test reports what each process met
            outcomes.append(f"{type(e).__name__}: {e}")
    results.put(outcomes)


def test_six_processes_creating_one_new_database_all_succeed(tmp_path):
    """Before the WAL switch was retried, about one open in thirty failed with "database is locked" here."""
    ctx = mp.get_context("spawn")
    paths = [str(tmp_path / f"new-{rep}.db") for rep in range(40)]
    start_together, results = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_open_and_record_each, args=(paths, n, start_together, results)) for n in range(6)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(10)
    failures = [o for per_process in outcomes for o in per_process if o != "ok"]
    assert failures == [], f"{len(failures)} of {6 * len(paths)} opens failed: {failures[:3]}"
    for path in paths:
        db = sqlite3.connect(path)
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 6
        assert [r[0] for r in db.execute("SELECT name FROM _migrations")] == [m.__name__ for m in trace.MIGRATIONS]
        db.close()
