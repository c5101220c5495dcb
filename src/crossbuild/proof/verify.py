"""The only judge of success: optional clean rebuild, artifact scan against the target, qemu smoke runs.

`verify(...)` returns a VerifyReport (JSON-serialisable); the model's own claims never count. Longer than the house
limit by a few lines: the clean rebuild, the scan and the smoke runs decide one verdict together.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import stat
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from crossbuild.env import sandbox
from crossbuild.env.recipes import BuildStep
from crossbuild.env.sandbox import Limits, Sandbox
from crossbuild.env.toolchain import Toolchain
from crossbuild.env.workspace import PRISTINE
from crossbuild.foundation import safefs
from crossbuild.foundation.targets import Target
from crossbuild.proof import ctest
from crossbuild.proof.artifacts import ScanResult, check_artifact, matches_any, scan_tree
from crossbuild.proof.binary_formats import LINKED_KINDS, Artifact
from crossbuild.proof.target_run import loader_lacks, runner_argv, test_program_box
from crossbuild.proof.triage import triage

_BUILD_MACHINE = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64", "riscv64": "EM_RISCV"}  # platform -> ELF machine
_TESTLIKE = re.compile(r"(^|[_\-.])(test|check|example|demo|selftest|unittest)s?([_\-.]|$)|^(test|example)",
                       re.IGNORECASE)
_TESTLIKE_DIRS = {"test", "tests", "testing", "example", "examples", "demo", "demos"}
MAX_SMOKE_RUNS = 25


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
    triage: str | None = None  # a run that did not pass: crashed | usage | environment | failed (proof/triage.py)
    why: str | None = None  # the evidence for the triage: a line of its output, or what stopped it

    @property
    def failed(self) -> bool:
        """Whether this run blocks verification."""
        return not (self.skipped or self.passed) and self.triage in (None, "crashed", "failed")

    def outcome(self) -> str:
        """One phrase for every face (CLI table, tool result): what this run proved."""
        if self.skipped:
            return f"skipped: {self.skipped}"
        if self.passed:
            return "passed (exit 0)"
        if self.triage == "usage":
            return f"ran, {self.why}"
        if self.triage == "environment":
            return f"ran, not counted ({self.stopped or f'exit {self.exit_code}'}): {self.why}"
        return f"FAILED ({self.why or self.stopped or f'exit {self.exit_code}'})"


@dataclass
class VerifyReport:
    target: str
    root: str
    ok: bool = False
    reasons: list[str] = field(default_factory=list)  # why it failed (empty when ok)
    artifacts: list[dict] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    probes_excluded: int = 0
    linker_temporaries: list[str] = field(default_factory=list)  # half-written outputs of failed links, not counted
    probe_mismatches: list[str] = field(default_factory=list)  # probe-folder binaries not for the target
    not_binaries: list[str] = field(default_factory=list)
    allowed_host: list[str] = field(default_factory=list)
    # programs for the build machine that the project's install leaves out: generators (sqlite3's lemon), not products
    build_tools: list[str] = field(default_factory=list)
    smoke_runs: list[SmokeRun] = field(default_factory=list)
    rebuild: dict | None = None
    sandbox: str = "none"
    run_tests: bool = True

    def to_dict(self) -> dict:
        return asdict(self)

    def not_counted(self) -> str:
        said = []
        if self.linker_temporaries:
            said.append(f"{len(self.linker_temporaries)} linker temporaries a failed link left "
                        f"({', '.join(self.linker_temporaries[:3])})")
        if self.build_tools:
            said.append(f"{len(self.build_tools)} programs built for the build machine that the install leaves out "
                        f"({', '.join(self.build_tools[:3])})")
        return "not counted: " + "; ".join(said)

    def proven(self) -> str:
        """What the verdict rests on, in one line: a VERIFIED with no test program run proves the architecture
        only, and says so."""
        runs = self.smoke_runs
        ran = [r for r in runs if not r.skipped]
        if not runs:
            return ("test programs: none run (run_tests was off)" if not self.run_tests else
                    "test programs: none found (no test-like executable) - "
                    "proven: the architecture of every binary only")
        counted = sum(1 for r in ran if r.passed or r.triage == "usage")
        said = f"test programs: {len(ran)} of {len(runs)} ran under qemu, {counted} passed or printed their usage"
        if len(ran) < len(runs):
            said += f", {len(runs) - len(ran)} skipped"
        if not ran:
            said += " - proven: the architecture of every binary only"
        return said

    def failed_output(self) -> str:
        """What the failed test programs printed last, each with its verdict: the text the knowledge base is
        searched with when the verdict is NOT VERIFIED for them."""
        return "\n".join(f"smoke run {r.path}: {r.why or 'failed'}\n{r.output_tail}"
                         for r in self.smoke_runs if r.failed)

    def summary(self, shown_root: str, limit: int = 15) -> str:
        """The verdict as a model or a log reads it: the counts, each smoke run's outcome, the clean rebuild, and
        the reasons (the CLI renders the same report as tables)."""
        counts = ", ".join(f"{k}: {v}" for k, v in self.counts.items()) or "no binaries"
        lines = [f"{'VERIFIED' if self.ok else 'NOT VERIFIED'} for {self.target}: {shown_root} ({counts})",
                 f"  {self.proven()}"]
        lines += [f"  smoke run {run.path}: {run.outcome()}" for run in self.smoke_runs[:limit]]
        if self.linker_temporaries or self.build_tools:
            lines.append(f"  {self.not_counted()}")
        if self.rebuild:
            lines.append(f"  clean rebuild: {'passed' if self.rebuild['ok'] else self.rebuild['error']}")
        lines += [f"  - {reason}" for reason in self.reasons[:limit]]
        return "\n".join(lines)


def is_testlike(rel: str) -> bool:
    p = Path(rel)
    stem = p.name.removesuffix(".exe")
    return bool(_TESTLIKE.search(stem)) or any(part.lower() in _TESTLIKE_DIRS for part in p.parts[:-1])


def verify(root: str | Path, target: Target, *, toolchain: Toolchain | None = None,
           box: Sandbox | None = None, run_tests: bool = True, allow_host: list[str] | None = None,
           rebuild_steps: list[BuildStep] | None = None, rebuild_source: str = "src",
           rebuild_edits: Sequence[str] = (), smoke_timeout_s: float = 60.0) -> VerifyReport:
    """The verdict on the build folder ROOT. A clean rebuild (REBUILD_STEPS) starts from the source as it was
    prepared, with the files the agent edited (REBUILD_EDITS, workspace-relative) laid over it."""
    root = Path(os.path.abspath(root))
    report = VerifyReport(target=target.name, root=str(root), run_tests=run_tests)
    if root.is_symlink() or not root.is_dir():  # a build may replace its output folder by a link to host files
        report.reasons.append(f"{root} is {'a link' if root.is_symlink() else 'not a directory'}, not a build folder")
        return report
    allow_host = allow_host or []

    if rebuild_steps:
        if toolchain is None:
            raise ValueError("a clean rebuild needs the toolchain (BuildEnv) it was built with")
        report.rebuild = _clean_rebuild(root, rebuild_steps, toolchain, rebuild_source, box, rebuild_edits)
        if not report.rebuild["ok"]:
            report.reasons.append(f"clean rebuild failed: {report.rebuild['error']}")

    scan = scan_outputs(root, toolchain)
    report.probes_excluded = len(scan.probes_excluded)
    report.linker_temporaries = scan.linker_temporaries
    report.probe_mismatches = [f"{a.path}: {'; '.join(p)}" for a in scan.probe_artifacts
                               if (p := check_artifact(a, target))]
    report.not_binaries = scan.not_binaries
    if scan.incomplete:
        report.reasons.append(f"the artifact scan is incomplete: {scan.incomplete}")
    bad: list[tuple[Artifact, list[str]]] = []
    installed = _installed_names(toolchain)
    for a in scan.artifacts:
        problems = check_artifact(a, target)
        if problems and matches_any(a.path.split("(")[0], allow_host):
            report.allowed_host.append(a.path)
            continue
        if problems and _is_build_tool(a, installed):
            report.build_tools.append(a.path)
            continue
        entry = a.to_dict()
        entry["ok"] = not problems
        if problems:
            entry["problems"] = problems
            bad.append((a, problems))
        report.artifacts.append(entry)
    counted = [a for a in report.artifacts if a["kind"] != "unknown"]
    kinds = [a["kind"] for a in counted if not a.get("member_of")]
    report.counts = {k: kinds.count(k) for k in sorted(set(kinds))}
    report.counts["archive_members"] = sum(1 for a in counted if a.get("member_of"))

    if not counted:
        report.reasons.append("no binaries for any architecture were found: nothing was built")
    elif not any(a["ok"] and a["kind"] in LINKED_KINDS
                 for a in counted):
        report.reasons.append("no linked artifact (executable or library) for the target was found")
    for a, problems in bad[:20]:
        report.reasons.append(f"{a.path}: {'; '.join(problems)}")
    if len(bad) > 20:
        report.reasons.append(f"... and {len(bad) - 20} more artifacts that do not fit {target.name}")
    for rel in scan.not_binaries:
        report.reasons.append(f"{rel}: named like a binary but is not one")

    if run_tests:
        box = test_program_box(box or _default_box(root, toolchain), target)
        report.sandbox = box.backend
        if toolchain is not None:
            log_dir = Path(tempfile.mkdtemp(prefix="verify-", dir=toolchain.logs))
            # the dependencies' shared libraries, where the build linked them from (a target system would have
            # them installed too)
            deps = [str(d) for d in (toolchain.prefix / "lib", toolchain.prefix / "lib64") if d.is_dir()]
            report.smoke_runs = _smoke_runs(root, target, report, box, smoke_timeout_s, log_dir, deps,
                                            source=toolchain.workspace / rebuild_source,
                                            own_folders=_own_folders(root, toolchain), within=toolchain.workspace)
        else:
            with tempfile.TemporaryDirectory(prefix="crossbuild-verify-") as tmp:
                report.smoke_runs = _smoke_runs(root, target, report, box, smoke_timeout_s, Path(tmp))
        for run in report.smoke_runs:
            if run.failed:
                report.reasons.append(f"smoke run {run.path} failed under qemu ({run.why})")
    report.ok = not report.reasons
    return report


def scan_outputs(root: Path, toolchain: Toolchain | None) -> ScanResult:
    """scan_tree, leaving out crossbuild's own folders."""
    return scan_tree(root, prune=_own_folders(root, toolchain))


def _own_folders(root: Path, toolchain: Toolchain | None) -> frozenset[str]:
    """crossbuild's own folders (.xbuild/, .scratch/) when ROOT holds the workspace's."""
    if toolchain is None:
        return frozenset()
    return frozenset(own.name for own in (toolchain.xbuild, toolchain.scratch) if own.parent == root)


def _default_box(root: Path, toolchain: Toolchain | None) -> Sandbox:
    return sandbox.for_toolchain(toolchain) if toolchain is not None else sandbox.for_tree(root)


def _clean_rebuild(root: Path, steps: list[BuildStep], toolchain: Toolchain, source: str,
                   box: Sandbox | None, edits: Sequence[str] = ()) -> dict:
    """Replay the recorded steps on a fresh copy of the pristine source (what the workspace was prepared with, so
    nothing an in-tree build left behind is reused) with the agent's edits laid over it, in a second workspace
    (`.xbuild/rebuild/`, which builds cannot write); absolute paths into the original workspace are remapped to
    the copy. The copy takes folders, files and links as they are, never following one. A workspace prepared
    before pristine copies existed is copied as it is now."""
    original_ws = toolchain.workspace
    fresh_ws = toolchain.xbuild / "rebuild"
    safefs.remove_tree(original_ws, Path(".xbuild", "rebuild"))
    pristine = original_ws / PRISTINE
    base = pristine if (pristine / source).is_dir() and not (pristine / source).is_symlink() else original_ws
    copied = safefs.copy_tree(base, source, original_ws, Path(".xbuild", "rebuild", source))
    if base == pristine:
        _lay_over(original_ws, fresh_ws, [e for e in edits if Path(e).is_relative_to(source)])
    fresh = replace(toolchain, workspace=fresh_ws).materialise()  # same settings, new place
    box = sandbox.for_toolchain(fresh, backend=box.backend if box is not None else "auto")
    env = fresh.env.as_dict()
    moved = [([a.replace(str(original_ws), str(fresh_ws)) for a in step.argv], fresh_ws / step.cwd,
              {**env, **{k: v.replace(str(original_ws), str(fresh_ws)) for k, v in step.env}}) for step in steps]
    failed = box.run_steps(moved, log_dir=fresh.logs, stem="rebuild")
    if failed:
        argv, res = failed
        return {"ok": False, "steps": [str(s) for s in steps], "workspace": str(fresh_ws),
                "not_copied": copied.skipped[:20],
                "error": f"`{' '.join(argv)}` {res.stopped or f'exit {res.returncode}'} (log {res.log_path})"}
    try:
        rel_root = root.relative_to(original_ws)
    except ValueError:
        rel_root = Path(".")
    linked = LINKED_KINDS
    rebuilt = {a.path for a in scan_outputs(fresh_ws / rel_root, fresh).artifacts if a.kind in linked}
    original = {a.path for a in scan_outputs(root, toolchain).artifacts if a.kind in linked}
    missing = missing_from_rebuild(original, rebuilt)
    missing = [p for p in missing if p not in copies_of(root, missing, original & rebuilt)]
    ok = bool(rebuilt) and not missing
    return {"ok": ok, "steps": [str(s) for s in steps], "workspace": str(fresh_ws), "artifacts": len(rebuilt),
            "not_copied": copied.skipped[:20],
            "error": None if ok else ("rebuild produced no binaries" if not rebuilt
                                      else f"rebuild lacks {', '.join(missing[:5])}")}


_HASH = re.compile(r"[0-9a-f]{16,}", re.IGNORECASE)


def _unhashed(path: str) -> str:
    """PATH with the hashes in its folder names blanked (libzstd's `obj/conf_<md5 of the flags>/`): the flags
    name the workspace, so the rebuild's copy hashes to another folder."""
    folders, _, name = path.rpartition("/")
    return _HASH.sub("#", folders) + "/" + name


def missing_from_rebuild(original: set[str], rebuilt: set[str]) -> list[str]:
    """The first build's artifacts the rebuild lacks: each needs its own path, or one rebuilt artifact no other
    claims whose path differs only in hashed folder names."""
    spare = Counter(_unhashed(p) for p in rebuilt - original)
    missing = []
    for path in sorted(original - rebuilt):
        if spare[_unhashed(path)]:
            spare[_unhashed(path)] -= 1
        else:
            missing.append(path)
    return missing


def copies_of(root: Path, paths: Sequence[str], kept: set[str]) -> set[str]:
    """Of PATHS (below ROOT), the files whose bytes equal an artifact of KEPT: copies an install step made of a
    product both builds have (a plain Makefile's install into the source folder that failed partway, lua5.4's
    debian/tmp, is not replayed), which are no products of their own."""
    def fingerprint(rel: str, sizes: set[int] | None = None) -> tuple[int, str] | None:
        try:
            with os.fdopen(safefs.open_regular(root, rel, max_bytes=256 << 20), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if sizes is not None and size not in sizes:
                    return None  # no copy of anything missing: not worth hashing
                return size, hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:  # safefs.UnsafePath included: a link or something else is no copy
            return None

    found = {p: fp for p in paths if (fp := fingerprint(p))}
    sizes = {size for size, _ in found.values()}
    known = {fp for rel in kept if (fp := fingerprint(rel, sizes))} if found else set()
    return {p for p, fp in found.items() if fp in known}


def _lay_over(original_ws: Path, fresh_ws: Path, edits: list[str]) -> None:
    """The agent's edited files, read without following links, written into the rebuild's source."""
    for rel in edits:
        try:
            with os.fdopen(safefs.open_regular(original_ws, rel, max_bytes=64 << 20), "rb") as f:
                data, mode = f.read(), stat.S_IMODE(os.fstat(f.fileno()).st_mode)
        except OSError:  # safefs.UnsafePath included
            continue  # removed or replaced since: the rebuild shows what that means
        safefs.write_atomic(fresh_ws, rel, data, mode=mode)


def _installed_names(toolchain: Toolchain | None) -> set[str] | None:
    """The file names the project's install put into <workspace>/install, or None when nothing target-built was
    installed there (then no program can be told apart as a build-machine tool)."""
    if toolchain is None:
        return None
    install = toolchain.workspace / "install"
    if not install.is_dir() or install.is_symlink():
        return None
    scan = scan_tree(install)
    if not any(not check_artifact(a, toolchain.target) for a in scan.artifacts):
        return None
    return {Path(a.path).name for a in scan.artifacts} | {e.name for e in safefs.walk_files(install)}


def _is_build_tool(a: Artifact, installed: set[str] | None) -> bool:
    """A program for this build machine (a generator built with CC_FOR_BUILD) that the install leaves out. One the
    install does ship is a product built for the wrong machine."""
    return (installed is not None and a.kind == "executable" and a.machine == _BUILD_MACHINE.get(platform.machine())
            and not a.member_of and Path(a.path).name not in installed)


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


def _smoke_runs(root: Path, target: Target, report: VerifyReport, box: Sandbox, timeout: float,
                log_dir: Path, dependency_lib_dirs: list[str] = (), source: Path | None = None,
                own_folders: frozenset[str] = frozenset(), within: Path | None = None) -> list[SmokeRun]:
    candidates = [a for a in report.artifacts
                  if a["ok"] and a["kind"] == "executable" and not a.get("member_of") and is_testlike(a["path"])]
    ctest_dirs = ctest.working_dirs(root, prune=own_folders, within=within) if candidates else {}
    runs: list[SmokeRun] = []
    lib_rels = sorted(a["path"] for a in report.artifacts
                      if a["ok"] and a["kind"] == "shared_library" and not a.get("member_of"))
    lib_dirs = sorted({str((root / rel).parent) for rel in lib_rels}) + list(dependency_lib_dirs)
    for i, a in enumerate(candidates[:MAX_SMOKE_RUNS], 1):
        exe = root / a["path"]
        run = SmokeRun(path=a["path"], command=[str(exe)])
        dynamic = a.get("linkage") == "dynamic"
        argv, why_not = runner_argv(target, exe, dynamic=dynamic, lib_dirs=lib_dirs)
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
                      limits=Limits(timeout_s=timeout, max_output_bytes=4 << 20))
        run.exit_code, run.stopped, run.duration_s = res.returncode, res.stopped, round(res.duration_s, 3)
        run.passed = res.ok
        text = safefs.read_text(log_dir, log_name, max_bytes=5 << 20).splitlines()[2:]  # after crossbuild's header
        run.output_tail = "\n".join(text[-8:])
        if not run.passed:
            verdict = triage(res.returncode, res.stopped, text, timeout)
            run.triage, run.why = verdict.kind, verdict.why
            run.needs_arguments = verdict.kind == "usage"
        runs.append(run)
    return runs
