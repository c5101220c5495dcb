"""`crossbuild eval run`: every (project, target, repeat) cell is an isolated `crossbuild build` (its own workspace
and prefix; the zig cache and the dependency cache are shared safely), run concurrently up to --jobs, locally or on
Ray. Results are JSON Lines, one row per cell, appended as cells finish: re-running skips finished cells and retries
crashed ones."""

from __future__ import annotations

import ctypes
import fnmatch
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from crossbuild import __version__
from crossbuild.agent.events import outcome_from
from crossbuild.evaluation import run_record
from crossbuild.evaluation.artifact_names import linux_style_names
from crossbuild.evaluation.corpus import Project, fetch
from crossbuild.foundation.targets import Target, parse_target
from crossbuild.proof.binary_formats import LINKED_KINDS
from crossbuild.trace import runs
from crossbuild.trace import store as trace_store

FINISHED = ("verified", "failed", "cancelled", "error")  # a cell with one of these is not run again
LEVELS = ("configured", "built", "right_target", "expected", "functional", "rebuild")
_CONFIGURE = re.compile(r"^(cmake -S|cmake \S+ -B|meson setup|\S*configure\b|autoreconf)")
_BUILD = re.compile(r"^(cmake --build|make\b(?!.* install\b)|ninja\b(?!.* install\b)|meson compile|gmake\b)")


@dataclass
class Cell:
    project: Project
    target: str
    repeat: int

    @property
    def id(self) -> str:
        return f"{self.project.name}|{self.target}|{self.repeat}"

    @property
    def slug(self) -> str:
        return f"{self.project.name}-{self.target}-r{self.repeat}"


@dataclass
class RunConfig:
    model: str = "planner"
    max_steps: int = 60
    jobs_per_build: int = 1
    timeout_s: float = 3600.0
    sandbox: str = "auto"
    source_hints: bool = True  # False: each workspace without the source's packaging (build --no-source-hints)
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. CROSSBUILD_CACHE_DIR for tests

    def snapshot(self) -> dict[str, Any]:
        return {"model": self.model, "max_steps": self.max_steps, "jobs_per_build": self.jobs_per_build,
                "timeout_s": self.timeout_s, "sandbox": self.sandbox, "source_hints": self.source_hints}


def plan(projects: list[Project], targets: list[str], repeats: int) -> list[Cell]:
    return [Cell(p, t, r) for p in projects for t in targets for r in range(1, repeats + 1)]


def finished_cells(results: Path) -> set[str]:
    done = set()
    if results.is_file():
        for line in results.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a row cut by a kill: that cell runs again
            if row.get("status") in FINISHED:
                done.add(row["cell"])
    return done


def _dies_with_runner() -> None:
    """In the cell's process before exec: killed when the thread that started it ends, i.e. when the runner is
    killed in any way (`kill`, `pkill -f`, a CI job stopped); its sandboxes die with it. A build left running after
    its runner is CPU taken from every later cell."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def cell_environment(config: RunConfig) -> dict[str, str]:
    """A cell's build process's environment: the runner's without API keys or tokens, and its own crossbuild first
    on PYTHONPATH. The cell runs in its own folder, so a relative PYTHONPATH (`PYTHONPATH=src` in a worktree) would
    name nothing there and the build would import whichever crossbuild is installed: another commit than the one
    every row names."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))} | config.extra_env
    env.setdefault("COLUMNS", "200")
    own = str(Path(__file__).resolve().parents[2])  # the folder `import crossbuild` found this package in
    env["PYTHONPATH"] = os.pathsep.join([own, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)])
    return env


def run_cell(cell: Cell, out: Path, config: RunConfig) -> dict[str, Any]:
    """One isolated `crossbuild build` in a subprocess; returns the result row (status "crashed" when the build
    process died without an outcome)."""
    out = out.resolve()
    work = out / "work" / cell.slug
    shutil.rmtree(work, ignore_errors=True)  # a cell that crashed before starts clean
    work.mkdir(parents=True)
    argv = [sys.executable, "-m", "crossbuild", "build", cell.project.source_spec(), "-t", cell.target,
            "-m", config.model, "--max-steps", str(config.max_steps), "-j", str(config.jobs_per_build),
            "-w", str(work / "ws"), "--prefix", str(work / "prefix"), "--db", str(out / "runs.db"),
            "--sandbox", config.sandbox, "--no-config", "--json"]  # a cell never depends on who runs it
    if not config.source_hints:
        argv.append("--no-source-hints")
    env = cell_environment(config)
    start = time.monotonic()
    row: dict[str, Any] = {"cell": cell.id, "project": cell.project.name, "version": cell.project.version,
                           "tier": cell.project.tier, "target": cell.target, "repeat": cell.repeat,
                           "model": config.model, "config": config.snapshot(), "crossbuild_version": __version__}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=config.timeout_s, env=env, cwd=work,
                              preexec_fn=_dies_with_runner)
    except subprocess.TimeoutExpired:
        return {**row, "status": "crashed", "error": f"cell timed out after {config.timeout_s:.0f}s",
                "wall_s": time.monotonic() - start}
    outcome = outcome_from(proc.stdout)
    (work / "build.log").write_text(proc.stdout[-200_000:] + "\n--- stderr ---\n" + proc.stderr[-200_000:])
    if outcome is None:
        return {**row, "status": "crashed", "error": f"exit {proc.returncode}: {proc.stderr.strip()[-600:]}",
                "wall_s": time.monotonic() - start}
    levels = success_levels(cell.project, outcome, out / "runs.db", work / "ws", parse_target(cell.target))
    usage = outcome.get("usage") or {}
    return {**row, "run_id": outcome["run_id"], "status": outcome["status"], "stop_reason": outcome["stop_reason"],
            "message": (outcome.get("message") or "")[:1500], "levels": levels,
            # what ran on the target (proof/levels.py): tested | exercised | built, None when not verified
            "proof": (outcome.get("verify") or {}).get("proof"),
            "proof_counts": (outcome.get("verify") or {}).get("proof_counts"),
            # a glibc build after the musl one ended on what musl lacks is no success on the musl target asked for
            "strict_success": all(levels[k] for k in ("right_target", "expected", "rebuild"))
            and (levels["functional"] is not False) and not outcome.get("libc_switch"),
            **({"libc_switch": outcome["libc_switch"]} if outcome.get("libc_switch") else {}),
            "steps": outcome["steps"], "tool_calls": outcome["tool_calls"],
            "tokens": usage.get("input_tokens", 0) + usage.get("output_tokens", 0), "cost_usd": outcome["cost_usd"],
            "wall_s": round(time.monotonic() - start, 2), "workspace": outcome.get("workspace"),
            "kb_attached": outcome.get("kb_attached", [])}


def success_levels(project: Project, outcome: dict[str, Any], db: Path, ws: Path,
                   target: Target) -> dict[str, bool | None]:
    """configured, built, artifacts for the right target, every expected artifact, functional check under qemu
    (None when the project has none), clean rebuild."""
    cmds: list[str] = []
    if db.is_file():
        conn = trace_store.connect(db)
        try:
            cmds = runs.succeeded_commands(conn, outcome["run_id"])
        finally:
            conn.close()
    report = outcome.get("verify") or {}
    arts = [a for a in report.get("artifacts", []) if a.get("ok") and a["kind"] in LINKED_KINDS
            and not a.get("member_of")]
    names = {Path(a["path"]).name for a in arts}
    install = ws / "install"
    if install.is_dir() and report.get("ok"):
        from crossbuild.proof.artifacts import check_artifact, scan_tree

        names |= {Path(a.path).name for a in scan_tree(install).artifacts if not check_artifact(a, target)
                  and a.kind in ("executable", "shared_library", "static_library")}
    names = {alias for n in names for alias in linux_style_names(n, target)}
    expected = all(any(fnmatch.fnmatchcase(n, alt) for n in names for alt in pattern.split("|"))
                   for pattern in project.expected)
    functional = None  # no check, or a target whose programs cannot run here (Windows: scan only)
    if project.functional is not None and target.qemu is not None:
        functional = bool(report.get("ok")) and _functional(project, ws, outcome)
    return {
        "configured": any(_CONFIGURE.match(c) for c in cmds) or any(_BUILD.match(c) for c in cmds),
        "built": any(_BUILD.match(c) for c in cmds) or bool(arts),
        "right_target": bool(report.get("ok")) or (bool(arts) and not report.get("reasons")),
        "expected": bool(report.get("ok")) and expected,
        "functional": functional,
        "rebuild": bool((report.get("rebuild") or {}).get("ok")),
    }


def _functional(project: Project, ws: Path, outcome: dict[str, Any]) -> bool:
    """The project's own check (a program, arguments, expected exit and output), run the one way target programs
    run here (proof.target_run), with the loader a dynamic program needs."""
    check = project.functional
    assert check is not None
    candidates = sorted(p for p in ws.glob(check.program) if p.is_file() and not p.is_symlink()
                        and os.access(p, os.X_OK) and ".xbuild" not in p.parts and "rebuild" not in p.parts)
    if not candidates:
        return False
    from elftools.common.exceptions import ELFError

    from crossbuild.env import sandbox
    from crossbuild.env.toolchain import Toolchain
    from crossbuild.foundation import safefs
    from crossbuild.foundation.targets import parse_target
    from crossbuild.proof.binary_formats import describe_elf
    from crossbuild.proof.target_run import runner_argv, test_program_box

    exe = candidates[0]
    target = parse_target(outcome["verify"]["target"])
    try:
        with os.fdopen(safefs.open_regular(ws, str(exe.relative_to(ws))), "rb") as f:
            dynamic = describe_elf(f, exe.name).linkage == "dynamic"
    except (OSError, ValueError, struct.error, ELFError):  # not a readable ELF program: the check fails
        return False
    report = outcome["verify"]
    libs = sorted({str((Path(report["root"]) / a["path"]).parent) for a in report.get("artifacts", [])
                   if a.get("ok") and a["kind"] == "shared_library" and not a.get("member_of")})
    argv, _ = runner_argv(target, exe, dynamic=dynamic, lib_dirs=libs, args=list(check.args))
    if argv is None:
        return False
    tc = Toolchain.for_target(target, ws)
    box = test_program_box(sandbox.for_toolchain(tc), target, ws)
    log = ws / ".xbuild" / "logs" / "functional.log"
    res = box.run(argv, cwd=exe.parent, env=tc.env.as_dict(), log_path=log, limits=sandbox.Limits(timeout_s=60))
    text = log.read_text(errors="replace")
    if res.returncode != check.expect_exit:
        return False
    return check.expect_output is None or re.search(check.expect_output, text) is not None


# ---- executors ------------------------------------------------------------------------------------------------------

ProgressFn = Callable[[dict[str, Any]], None]


def run_local(cells: list[Cell], out: Path, config: RunConfig, jobs: int, on_row: ProgressFn,
              stop: threading.Event | None = None) -> None:
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        pending = {}
        queue = list(cells)
        while queue or pending:
            while queue and len(pending) < jobs and not (stop and stop.is_set()):
                cell = queue.pop(0)
                pending[pool.submit(run_cell, cell, out, config)] = cell
            if not pending:
                break
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                cell = pending.pop(fut)
                try:
                    row = fut.result()
                except Exception as e:  # the runner itself failed on this cell: recorded, retried next time
                    row = {"cell": cell.id, "project": cell.project.name, "target": cell.target,
                           "repeat": cell.repeat, "status": "crashed", "error": f"{type(e).__name__}: {e}"}
                on_row(row)


def run_ray(cells: list[Cell], out: Path, config: RunConfig, address: str | None, on_row: ProgressFn) -> None:
    """The same cells on a Ray cluster; Ray schedules them (one CPU each)."""
    import ray

    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False,
             runtime_env={"env_vars": {k: v for k, v in config.extra_env.items()}})
    remote = ray.remote(num_cpus=1)(run_cell)
    refs = {remote.remote(c, out, config): c for c in cells}
    while refs:
        done, _ = ray.wait(list(refs), num_returns=1)
        for ref in done:
            cell = refs.pop(ref)
            try:
                row = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - a worker died: crashed, retried next time
                row = {"cell": cell.id, "project": cell.project.name, "target": cell.target, "repeat": cell.repeat,
                       "status": "crashed", "error": f"{type(e).__name__}: {e}"}
            on_row(row)


def run(projects: list[Project], targets: list[str], out: Path, *, config: RunConfig, repeats: int = 1,
        jobs: int = 1, executor: str = "local", address: str | None = None,
        on_row: ProgressFn | None = None, on_plan: Callable[[int, int], None] | None = None,
        corpus: str | None = None) -> Path:
    """Run every unfinished cell; returns the results file. CORPUS: the manifests' folder, as given (run.json
    names it: what the figures estimate)."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    for p in projects:  # a missing or changed source is an error before anything runs
        fetch(p)
    cells = plan(projects, targets, repeats)
    done = finished_cells(results)
    todo = [c for c in cells if c.id not in done]
    commit = run_record.source_commit()
    run_record.write(out / "run.json", targets, repeats, [p.name for p in projects], config.snapshot(), commit,
                     corpus)
    if on_plan:
        on_plan(len(cells), len(cells) - len(todo))
    lock = threading.Lock()

    def record(row: dict[str, Any]) -> None:
        row = {**row, "commit": commit}
        with lock, open(results, "a") as f:
            f.write(json.dumps(row, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if on_row:
            on_row(row)

    if executor == "ray":
        run_ray(todo, out, config, address, record)
    else:
        run_local(todo, out, config, jobs, record)
    return results


def load_rows(results: Path) -> list[dict[str, Any]]:
    """The latest row per cell (a retried crash replaces the crash)."""
    rows: dict[str, dict[str, Any]] = {}
    for line in results.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        rows[row["cell"]] = row
    return list(rows.values())


__all__ = ["Cell", "RunConfig", "LEVELS", "plan", "run", "run_cell", "load_rows", "finished_cells", "asdict"]

