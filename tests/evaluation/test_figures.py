"""The report's headline: every rate with its 95 % Wilson interval, proof levels per target, what the rates estimate
(a sample's population, or none for a hand-picked corpus), the commits that ran the cells, and flakiness across
repeats."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from crossbuild.evaluation.figures import flaky_cells, rate
from crossbuild.evaluation.report import build_report

TARGET = "aarch64-linux-musl"


def _row(project: str, proof: str | None = "tested", *, target: str = TARGET, repeat: int = 1,
         commit: str | None = "abc1234", version: str = "1.0-1") -> dict:
    verified = proof is not None
    row = {"cell": f"{project}|{target}|{repeat}", "project": project, "version": version, "tier": "easy",
           "target": target, "repeat": repeat, "status": "verified" if verified else "failed",
           "stop_reason": "verified" if verified else "gave_up", "strict_success": verified, "proof": proof,
           "levels": {"configured": True, "built": verified}, "steps": 5, "wall_s": 10.0}
    return {**row, "commit": commit} if commit else row


def _results(folder: Path, rows: list[dict], **meta) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "run.json").write_text(json.dumps({"targets": sorted({r["target"] for r in rows}), "repeats": 1,
                                                 "config": {"model": "planner"}, **meta}))
    return folder


@pytest.fixture(autouse=True)
def _no_plots(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # the headline is what these tests read


def _headline(folder: Path) -> str:
    text = build_report(folder).markdown
    return text.split("## Success by tier")[0]


def test_every_headline_rate_has_its_wilson_interval(tmp_path):
    rows = [_row("alpha"), _row("beta"), _row("gamma"), _row("delta", None)]
    head = _headline(_results(tmp_path / "r", rows, commits=["abc1234"]))
    assert rate(3, 4) == "3/4 (75.0 %, 95 % CI 30.1–95.4 %)"
    assert f"**{TARGET}** (4 cells): tested 3/4 (75.0 %, 95 % CI 30.1–95.4 %); exercised or above 3/4" in head
    assert "verified (any level) 3/4 (75.0 %, 95 % CI 30.1–95.4 %)" in head
    assert "strict success (right target, every expected artifact, functional check, clean rebuild) 3/4 (75.0 %" in head
    assert head.index("**Proof levels on the target**") < head.index("**All cells")  # the headline leads with them
    assert f"| {TARGET} | 4 | 3/4 75% [30%–95%] | 0/4 0% [0%–49%] |" in head  # the proof-level table: intervals
    assert "**Commit:** `abc1234`." in head and "Warning" not in head
    assert "Flakiness: no repeats: flakiness not measured." in head


def test_two_targets_each_lead_and_rows_without_levels_say_so(tmp_path):
    rows = [_row("alpha", "exercised"), _row("alpha", "built", target="riscv64-linux-musl"),
            {**_row("beta"), "proof": None}]
    head = _headline(_results(tmp_path / "r", rows))
    assert f"**{TARGET}** (2 cells): tested 0/2 (0.0 %, 95 % CI 0.0–65.8 %); exercised or above 1/2" in head
    assert "(1 verified cells record no level)" in head
    assert "**riscv64-linux-musl** (1 cells): tested 0/1" in head and "**all targets** (3 cells)" in head
    old = [{k: v for k, v in r.items() if k != "proof"} for r in rows]
    head = _headline(_results(tmp_path / "old", old))
    assert "proof levels not recorded (rows from before proof levels); verified 1/1 (100.0 %" in head


def _corpus(root: Path, name: str, projects: list[str], *, size: int, sample: dict | None) -> Path:
    folder = root / "corpus" / name
    folder.mkdir(parents=True)
    for p in projects:
        (folder / f"{p}.toml").write_text(f'name = "{p}"\nsource = "debian:{p}=1.0-1"\nversion = "1.0-1"\n')
    (folder / "index.json").write_text(json.dumps({
        "population": {"size": size}, "sample": sample, "written": [f"{p}=1.0-1 cmake easy C" for p in projects]}))
    return folder


def test_a_sample_estimates_its_population_and_a_hand_picked_corpus_none(tmp_path):
    names = ["zq-alpha", "zq-beta", "zq-gamma"]
    sample = _corpus(tmp_path, "sample", names, size=739, sample={"n": 3, "seed": 20261204})
    _corpus(tmp_path, "population", [*names, "zq-delta"], size=4, sample=None)
    rows = [_row(p) for p in names]
    population = ("estimates the population of 739 projects (rule: README 'The population and the development "
                  "sample'), sample of 3, seed 20261204")
    named = _headline(_results(tmp_path / "named", rows, corpus=str(sample)))
    assert f"**What these figures estimate:** {population}" in named and "inferred" not in named
    # run.json of older runs names no corpus: the smallest folder around the results holding every project is it
    inferred = _headline(_results(tmp_path / "results" / "inferred", rows))
    assert population in inferred and "The corpus folder is inferred" in inferred
    partial = _headline(_results(tmp_path / "results" / "partial", rows[:2]))
    assert population in partial and "covers 2 of the sample's projects" in partial
    census = _headline(_results(tmp_path / "results" / "census", [*rows, _row("zq-delta")]))
    assert "the whole population of 4 projects" in census
    hand = tmp_path / "corpus" / "picked"
    hand.mkdir()
    for p in ("zq-one", "zq-two"):
        (hand / f"{p}.toml").write_text(f'name = "{p}"\nsource = "debian:{p}=1.0-1"\nversion = "1.0-1"\n')
    picked = _headline(_results(tmp_path / "results" / "picked", [_row("zq-one"), _row("zq-two")]))
    assert "the 2 hand-picked projects of" in picked and "(not a random sample: no population estimate)" in picked
    lost = _headline(_results(tmp_path / "results" / "lost", [_row("zq-nowhere")]))
    assert "**What these figures estimate:** unknown" in lost


def test_rows_from_more_than_one_commit_or_a_dirty_one_are_warned_about(tmp_path):
    rows = [_row("alpha", commit="abc1234"), _row("beta", commit="abc1234"), _row("gamma", commit="def5678+dirty")]
    head = _headline(_results(tmp_path / "mixed", rows, commit="def5678+dirty", commits=["abc1234", "def5678+dirty"]))
    assert "**Commits:** `abc1234`, `def5678+dirty`." in head
    assert "**Warning:** the rows come from 2 commits (`abc1234` 2 rows, `def5678+dirty` 1 rows)" in head
    assert "**Warning:** `def5678+dirty`: cells ran from a checkout with uncommitted changes" in head
    head = _headline(_results(tmp_path / "old", [_row("alpha", commit=None)]))
    assert "**Commit:** not recorded" in head and "Warning" not in head


def test_flakiness_lists_the_cells_whose_repeats_disagree(tmp_path):
    rows = [_row("alpha", "tested", repeat=1), _row("alpha", None, repeat=2),  # verified, then not
            _row("beta", "exercised", repeat=1), _row("beta", "exercised", repeat=2),  # agree
            _row("gamma", "tested", repeat=1), _row("gamma", "built", repeat=2),  # verified at different levels
            _row("delta", None, repeat=1), _row("delta", None, repeat=2)]  # agree: never verified
    flaky, measured = flaky_cells(rows)
    assert measured == 4 and [rs[0]["project"] for rs in flaky] == ["alpha", "gamma"]
    head = _headline(_results(tmp_path / "r", rows, repeats=2))
    assert f"Flakiness: {rate(2, 4)} of the cells (project, target) with more than one repeat disagree" in head
    assert rate(2, 4) == "2/4 (50.0 %, 95 % CI 15.0–85.0 %)"
    assert "## Flaky cells (repeats disagree)" in head
    assert f"| alpha | {TARGET} | r1 verified (tested); r2 failed (gave_up) |" in head
    assert f"| gamma | {TARGET} | r1 verified (tested); r2 verified (built) |" in head and "| beta |" not in head
    assert "not independent draws" in head
