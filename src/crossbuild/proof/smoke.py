"""Test programs run on the target: which executables are tests, where the project's harness would run each, and
what each run proved, triaged when it did not pass (triage.py) - the verifier's smoke runs. Each runs under the base
time limit multiplied by the emulator's measured slowdown (slowdown.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from crossbuild.env.sandbox import Limits, Sandbox
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation import safefs
from crossbuild.foundation.progress import Note
from crossbuild.foundation.targets import Target
from crossbuild.proof import ctest, slowdown
from crossbuild.proof.target_run import loader_lacks, runner_argv
from crossbuild.proof.triage import triage

_TESTLIKE = re.compile(r"(^|[_\-.])(test|check|example|demo|selftest|unittest)s?([_\-.]|$)|^(test|example)",
                       re.IGNORECASE)
_TESTLIKE_DIRS = {"test", "tests", "testing", "example", "examples", "demo", "demos"}
MAX_SMOKE_RUNS = 25
UNFINISHED = "not finished"  # how a harness's run stopped by crossbuild's overall limit is skipped (harness.py)
NOT_BUILT = "ctest: Not Run (its program was not built)"  # a harness's test whose program the build never made


@dataclass
class SmokeRun:
    path: str
    command: list[str]
    exit_code: int | None = None
    passed: bool = False
    stopped: str | None = None
    duration_s: float = 0.0
    output_tail: str = ""
    skipped: str | None = None  # why it did not run
    needs_arguments: bool = False  # it ran and printed its usage: proof it runs on the target, not a test failure
    # a run that did not pass: crashed | usage | environment | failed (proof/triage.py), or project: it fails the
    # same way built for the build machine (native_check)
    triage: str | None = None
    why: str | None = None  # the evidence for the triage: a line of its output, or what stopped it
    harness: str | None = None  # the project's harness that ran it (harness.py): PATH is then the test's name
    on_target: bool | None = None  # a harness's test tied to a target program by its command (harness_tie.tie)

    @property
    def failed(self) -> bool:
        """Whether this run blocks verification."""
        return not (self.skipped or self.passed) and self.triage in (None, "crashed", "failed")

    @property
    def label(self) -> str:
        """How verdicts name it: `smoke run PATH`, or a harness's test by its name."""
        return f"{self.harness} test {self.path}" if self.harness else f"smoke run {self.path}"

    @property
    def status(self) -> str:
        """How it ended: what stopped it, its exit status, or (a harness that reports no status) `failed`."""
        return self.stopped or (f"exit {self.exit_code}" if self.exit_code is not None else "failed")

    def outcome(self) -> str:
        """One phrase for every face (CLI table, tool result): what this run proved."""
        if self.skipped:
            return f"skipped: {self.skipped}"
        if self.passed:
            return "passed (exit 0)"
        if self.triage == "usage":
            return f"ran, {self.why}"
        if self.triage in ("environment", "project"):
            return f"ran, not counted ({self.status}): {self.why}"
        return f"FAILED ({self.why or self.status})"


def own_folders(root: Path, toolchain: Toolchain | None) -> frozenset[str]:
    """crossbuild's own folders (.xbuild/, .scratch/) when ROOT holds the workspace's: never scanned or run."""
    if toolchain is None:
        return frozenset()
    return frozenset(own.name for own in (toolchain.xbuild, toolchain.scratch) if own.parent == root)


def is_testlike(rel: str) -> bool:
    p = Path(rel)
    stem = p.name.removesuffix(".exe")
    return bool(_TESTLIKE.search(stem)) or any(part.lower() in _TESTLIKE_DIRS for part in p.parts[:-1])


def _where_tests_run(root: Path, exe: Path, source: Path | None, ctest_dirs: dict[Path, Path]) -> tuple[Path, Path]:
    """Where the project's harness would run a test program and its `srcdir` (automake's convention, which test
    programs use to find their data files, e.g. xz's `files/`): CTest's WORKING_DIRECTORY for it, else where `make
    check` runs it, the folder of a libtool program's wrapper (not `.libs/`); srcdir is the matching folder of the
    source tree when the build is out of tree."""
    cwd = exe.parent.parent if exe.parent.name == ".libs" else exe.parent
    srcdir = cwd
    if source is not None and not root.is_relative_to(source):
        mirrored = source / cwd.relative_to(root)
        if mirrored.is_dir() and not mirrored.is_symlink():
            srcdir = mirrored
    return ctest_dirs.get(exe.resolve(), cwd), srcdir


def smoke_runs(root: Path, target: Target, artifacts: list[dict], box: Sandbox, timeout: float,
               log_dir: Path, dependency_lib_dirs: list[str] = (), source: Path | None = None,
               own_folders: frozenset[str] = frozenset(), within: Path | None = None) -> list[SmokeRun]:
    """Run the test-like executables among ARTIFACTS (the verifier's entries below ROOT, "ok" when they fit
    TARGET) where the project's harness would, each triaged when it does not pass. TIMEOUT: the base time limit of
    one program, multiplied by TARGET's emulator slowdown (measured on the first run that needs it). WITHIN: the
    workspace (default ROOT), whose paths a failed program's output may name without that being evidence of the
    sandbox (triage)."""
    candidates = [a for a in artifacts
                  if a["ok"] and a["kind"] == "executable" and not a.get("member_of") and is_testlike(a["path"])]
    ctest_dirs = ctest.working_dirs(root, prune=own_folders, within=within) if candidates else {}
    runs: list[SmokeRun] = []
    lib_rels = sorted(a["path"] for a in artifacts
                      if a["ok"] and a["kind"] == "shared_library" and not a.get("member_of"))
    lib_dirs = sorted({str((root / rel).parent) for rel in lib_rels}) + list(dependency_lib_dirs)
    scale = slowdown.factor(target) if candidates else 1.0
    limit = timeout * scale
    for i, a in enumerate(candidates[:MAX_SMOKE_RUNS], 1):
        exe = root / a["path"]
        run = SmokeRun(path=a["path"], command=[str(exe)])
        dynamic = a.get("linkage") == "dynamic"
        argv, why_not = runner_argv(target, exe, dynamic=dynamic, lib_dirs=lib_dirs, workspace=within)
        if argv is not None and dynamic and target.libc == "musl":
            why_not = loader_lacks(target, root, a["path"], lib_rels, list(dependency_lib_dirs))
        if argv is None or why_not:
            run.skipped = why_not
            runs.append(run)
            continue
        run.command = argv
        cwd, srcdir = _where_tests_run(root, exe, source, ctest_dirs)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LC_ALL": "C", "srcdir": str(srcdir)}
        log_name = f"{i:02d}-{Path(a['path']).name[:80]}.log"
        res = box.run(argv, cwd=cwd, env=env, log_path=log_dir / log_name,
                      limits=Limits(timeout_s=limit, max_output_bytes=4 << 20),
                      phase=Note(f"test programs ({a['path']})", i, min(len(candidates), MAX_SMOKE_RUNS)))
        run.exit_code, run.stopped, run.duration_s = res.returncode, res.stopped, round(res.duration_s, 3)
        run.passed = res.ok
        text = safefs.read_text(log_dir, log_name, max_bytes=5 << 20).splitlines()[2:]  # after crossbuild's header
        run.output_tail = "\n".join(text[-8:])
        if not run.passed:
            verdict = triage(res.returncode, res.stopped, text, limit, scale=scale, workspace=within or root)
            run.triage, run.why = verdict.kind, verdict.why
            run.needs_arguments = verdict.kind == "usage"
        runs.append(run)
    return runs
