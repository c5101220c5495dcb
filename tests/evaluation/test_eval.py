"""The evaluation harness end to end on the bundled example corpus: run (local threads and Ray), report, compare,
and a runner killed mid-way that finishes the remaining cells without redoing finished ones."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from crossbuild.evaluation import corpus
from crossbuild.evaluation.report import _binom_two_sided, compare, wilson
from tests.conftest import CLI, cb

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "corpus" / "examples"
DEV = ROOT / "corpus" / "dev"


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_the_development_corpus_is_pinned_and_complete():
    projects = corpus.load(DEV)
    assert len(projects) == 35
    for p in projects:
        assert p.source.startswith(f"debian:{p.name}=") and p.version and len(p.dsc_sha256 or "") == 64
    assert {p.tier for p in projects} == {"easy", "medium", "hard"}
    assert {"zlib", "libpng1.6", "re2", "abseil", "libgit2", "libxml2"} <= {p.name for p in projects}


def test_a_changed_or_missing_source_is_an_error(tmp_path):
    zlib = corpus.load(DEV / "zlib.toml")[0]
    changed = zlib.model_copy(update={"dsc_sha256": "0" * 64})
    with pytest.raises(corpus.CorpusError, match="changed"):
        corpus.fetch(changed)
    missing = zlib.model_copy(update={"source": "debian:zlib=9.9.9-1", "dsc_sha256": None})
    with pytest.raises(corpus.CorpusError, match="not available"):
        corpus.fetch(missing)
    unpinned = zlib.model_copy(update={"source": "debian:zlib"})
    with pytest.raises(corpus.CorpusError, match="pin the Debian version"):
        corpus.fetch(unpinned)
    with pytest.raises(corpus.CorpusError, match="no such projects"):
        corpus.load(DEV, only=["zlibb"])


def test_statistics():
    lo, hi = wilson(8, 10)
    assert 0.49 < lo < 0.50 and 0.94 < hi < 0.95
    assert wilson(0, 0) == (0.0, 0.0)
    assert _binom_two_sided(0, 6) == pytest.approx(2 / 64)
    assert _binom_two_sided(3, 6) == 1.0


@pytest.mark.slow
def test_run_report_compare_on_the_example_corpus(tmp_path):
    a = tmp_path / "A"
    r = cb("eval", "run", str(EXAMPLES), "--targets", "aarch64-linux-musl,riscv64-linux-musl", "--jobs", "2",
           "--out", str(a), cwd=tmp_path, timeout=1800)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = _rows(a)
    assert len(rows) == 2 and all(row["strict_success"] for row in rows)
    assert all(row["levels"] == {"configured": True, "built": True, "right_target": True, "expected": True,
                                 "functional": True, "rebuild": True} for row in rows)
    assert {row["target"] for row in rows} == {"aarch64-linux-musl", "riscv64-linux-musl"}
    assert all(row["run_id"] and row["crossbuild_version"] and row["config"]["model"] == "planner" for row in rows)

    r = cb("eval", "report", str(a), "--command", "crossbuild eval run corpus/examples ...", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    md = (a / "REPORT.md").read_text()
    assert "verified 2/2 (100.0 %, 95 % CI 34.2–100.0 %)" in md and "## Success by tier" in md \
        and "| run_command |" in md
    assert "tested 1/1 (100.0 %" in md and all(row["proof"] == "tested" for row in rows)  # libcalc's own test ran
    assert f"**Commit:** `{rows[0]['commit']}`" in md
    assert (a / "success_by_target.png").stat().st_size > 1000 and (a / "time_vs_success.png").is_file()

    b = tmp_path / "B"
    b.mkdir()
    flipped = [{**row, "strict_success": row["target"] != "riscv64-linux-musl", "steps": row["steps"] + 2}
               for row in rows]
    (b / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in flipped))
    r = cb("eval", "compare", str(a), str(b), cwd=tmp_path)
    assert r.returncode == 0
    assert "rescued 0, regressed 1, both failed 0, both passed 1" in r.stdout
    assert "libcalc/riscv64-linux-musl" in r.stdout and "within run-to-run noise" in r.stdout
    res = compare(a, b)
    assert res.step_deltas == {"libcalc/aarch64-linux-musl": 2}


@pytest.mark.slow
def test_the_same_cells_on_a_local_ray_cluster(tmp_path):
    out = tmp_path / "ray"
    r = cb("eval", "run", str(EXAMPLES), "--targets", "aarch64-linux-musl", "--executor", "ray", "--out", str(out),
           "--no-source-hints", cwd=tmp_path, timeout=1800)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = _rows(out)
    assert len(rows) == 1 and rows[0]["strict_success"] and rows[0]["status"] == "verified"
    # --no-source-hints reached the cell's build (its recorded settings) and the report's header
    assert rows[0]["config"]["source_hints"] is False
    cb("eval", "report", str(out), cwd=tmp_path)
    assert "without source hints" in (out / "REPORT.md").read_text()
    r = cb("runs", "show", rows[0]["run_id"], "--db", str(out / "runs.db"), "--json")
    assert json.loads(json.loads(r.stdout)["run"]["config_json"])["source_hints"] is False


@pytest.mark.slow
def test_a_killed_runner_resumes_without_redoing_finished_cells(tmp_path):
    manifests = tmp_path / "corpus"
    manifests.mkdir()
    for name in ("one", "two", "three"):
        text = (EXAMPLES / "libcalc.toml").read_text().replace('name = "libcalc"', f'name = "{name}"')
        (manifests / f"{name}.toml").write_text(text.replace("../../examples/libcalc", str(ROOT / "examples" /
                                                                                           "libcalc")))
    out = tmp_path / "out"
    proc = subprocess.Popen([*CLI, "eval", "run", str(manifests), "--targets", "aarch64-linux-musl", "--out",
                             str(out)], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env={**os.environ, "COLUMNS": "200"})
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if (out / "results.jsonl").is_file() and _rows(out):
            break
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = _rows(out)
    assert 1 <= len(first) < 3, "the runner must be killed mid-way"
    r = cb("eval", "run", str(manifests), "--targets", "aarch64-linux-musl", "--out", str(out), cwd=tmp_path,
           timeout=1800)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"resuming: {len(first)} of 3 cells already finished" in r.stdout.replace("\n", " ")
    rows = _rows(out)
    assert sorted(row["project"] for row in rows) == ["one", "three", "two"]
    assert rows[: len(first)] == first  # finished cells were not run again
    shutil.rmtree(out / "work", ignore_errors=True)


def test_without_matplotlib_the_report_says_its_plots_were_skipped(tmp_path, monkeypatch):
    """matplotlib is the `report` extra: a report made without it is whole, and says what it left out."""
    import sys

    from crossbuild.evaluation.report import build_report

    shutil.copytree(ROOT / "docs" / "results" / "dev-planner", tmp_path / "r",
                    ignore=shutil.ignore_patterns("*.png", "REPORT.md"))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    report = build_report(tmp_path / "r")
    assert "Plots skipped: matplotlib is not installed" in report.markdown and not report.plots
    assert "## Plots" not in report.markdown and not list((tmp_path / "r").glob("*.png"))


def test_windows_artifacts_meet_the_corpus_names_and_its_functional_check_is_not_run(tmp_path):
    """x86_64-windows-gnu is scan only: its programs cannot run here, so a functional check is not run (None), not
    failed; and brotli.exe, MinGW's libbrotlienc.dll and its import library are what `brotli` and
    `libbrotlienc.so*` name."""
    from crossbuild.evaluation.artifact_names import macos_aliases, wasm_aliases, windows_aliases
    from crossbuild.evaluation.runner import success_levels
    from crossbuild.foundation.targets import parse_target

    assert windows_aliases("brotli.exe") >= {"brotli"}
    assert windows_aliases("zlib1.dll") >= {"libzlib.so"} and windows_aliases("libz.dll") >= {"libz.so"}
    assert windows_aliases("z.lib") >= {"libz.a"} and windows_aliases("libfoo.a") == {"libfoo.a"}
    brotli = corpus.load(DEV / "brotli.toml")[0]
    arts = [{"path": p, "kind": k, "ok": True} for p, k in (
        ("brotli.exe", "executable"), ("libbrotlienc.dll", "shared_library"), ("libbrotlidec.dll", "shared_library"),
        ("libbrotlicommon.dll", "shared_library"))]
    outcome = {"run_id": "x", "verify": {"ok": True, "target": "x86_64-windows-gnu", "artifacts": arts,
                                         "rebuild": {"ok": True}}}
    windows = success_levels(brotli, outcome, tmp_path / "none.db", tmp_path / "ws", parse_target("x86_64-windows-gnu"))
    assert windows["expected"] is True and windows["functional"] is None
    # the same names on a Linux target are not the corpus's names, and its functional check runs (and fails here)
    linux = success_levels(brotli, outcome, tmp_path / "none.db", tmp_path / "ws", parse_target("aarch64-linux-musl"))
    assert linux["expected"] is False and linux["functional"] is False
    # macOS names its libraries libNAME.VERSION.dylib; the corpus's globs say libNAME.so.VERSION
    assert macos_aliases("libz.1.dylib") == {"libz.1.dylib", "libz.so.1"} and macos_aliases("calc") == {"calc"}
    assert wasm_aliases("brotli.wasm") == {"brotli.wasm", "brotli"} and wasm_aliases("libz.a") == {"libz.a", "libz.so"}
    arts = [{"path": p, "kind": k, "ok": True} for p, k in (
        ("brotli", "executable"), ("libbrotlienc.1.dylib", "shared_library"),
        ("libbrotlidec.1.dylib", "shared_library"), ("libbrotlicommon.1.dylib", "shared_library"))]
    outcome = {"run_id": "x", "verify": {"ok": True, "target": "aarch64-macos", "artifacts": arts,
                                         "rebuild": {"ok": True}}}
    macos = success_levels(brotli, outcome, tmp_path / "none.db", tmp_path / "ws", parse_target("aarch64-macos"))
    assert macos["expected"] is True and macos["functional"] is None


@pytest.mark.slow
def test_a_runner_stopped_with_sigterm_leaves_no_build_running(tmp_path):
    """`pkill -f "crossbuild eval run"` reaches the runner alone: its cells' builds (and their sandboxes) must stop
    with it, not go on taking the CPU from whatever runs next."""
    project = tmp_path / "sleepy"
    project.mkdir()
    (project / "Makefile").write_text("all:\n\tsleep 307\n")
    manifests = tmp_path / "corpus"
    manifests.mkdir()
    (manifests / "sleepy.toml").write_text(f'name = "sleepy"\nsource = "{project}"\ntier = "easy"\n'
                                           'build_system = "make"\nlanguage = "C"\nexpected = ["prog"]\n')
    proc = subprocess.Popen([*CLI, "eval", "run", str(manifests), "--targets", "aarch64-linux-musl", "--out",
                             str(tmp_path / "out")], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env={**os.environ, "COLUMNS": "200"})

    def sleeping() -> bool:
        return subprocess.run(["pgrep", "-f", "sleep 307"], capture_output=True).returncode == 0

    try:
        deadline = time.monotonic() + 600
        while not sleeping():
            assert time.monotonic() < deadline and proc.poll() is None, "the cell's build never reached its make"
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)  # the runner only, as pkill does; not its process group
        proc.wait(timeout=60)
        deadline = time.monotonic() + 60
        while sleeping():
            assert time.monotonic() < deadline, "the cell's build went on after its runner was stopped"
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
        subprocess.run(["pkill", "-9", "-f", "sleep 307"])
