"""The trace database's one opener: processes that create the same new database at once all get it, migrated once."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3

from crossbuild.trace import store as trace


def _open_and_record(path: str, n: int, results) -> None:
    try:
        t = trace.Trace(path)
        t.start_run(run_id=f"run-{n}", source="s", target="t", model="m", config={}, version="v", prompt_hash="h",
                    workspace="w")
        t.close()
        results.put("ok")
    except Exception as e:  # noqa: BLE001 - the test reports what each process met
        results.put(f"{type(e).__name__}: {e}")


def test_six_processes_creating_one_new_database_all_succeed(tmp_path):
    ctx = mp.get_context("spawn")
    for rep in range(4):
        path = str(tmp_path / f"new-{rep}.db")
        results = ctx.Queue()
        procs = [ctx.Process(target=_open_and_record, args=(path, n, results)) for n in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        outcomes = [results.get(timeout=5) for _ in procs]
        assert outcomes == ["ok"] * 6, outcomes
        db = sqlite3.connect(path)
        assert db.execute("SELECT count(*) FROM runs").fetchone()[0] == 6
        assert [r[0] for r in db.execute("SELECT name FROM _migrations")] == [m.__name__ for m in trace.MIGRATIONS]
