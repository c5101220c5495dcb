"""The only judge of success: optional clean rebuild, artifact scan against the target, qemu smoke runs, and on
request a build for the build machine that tells a project's own test failures apart (native_check).

`verify(...)` returns a VerifyReport (JSON-serialisable); the model's own claims never count.

Longer than 350 lines: the scan before the tests and the check after them (what the tests wrote) share the scan's
filters and the identities it records; apart, each half would pass all of them back and forth.
"""

from __future__ import annotations

import os
import stat
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from crossbuild.env import cxx_runtime, sandbox
from crossbuild.env.recipes import BuildStep
from crossbuild.env.sandbox import Sandbox
from crossbuild.env.toolchain import Toolchain
from crossbuild.env.workspace import PRISTINE
from crossbuild.foundation import safefs
from crossbuild.foundation.targets import Target
from crossbuild.proof import native_check, tests_off
from crossbuild.proof.artifacts import ScanResult, check_artifact, matches_any, same_as_source, scan_tree
from crossbuild.proof.binary_formats import LINKED_KINDS, Artifact
from crossbuild.proof.exercise import ProbeRun, exercise
from crossbuild.proof.for_build import BuildMachineOutputs
from crossbuild.proof.harness import harness_runs
from crossbuild.proof.levels import Proof, not_tested, proof_of
from crossbuild.proof.rebuild_check import clean_rebuild, remember_run_outputs, scan_outputs
from crossbuild.proof.smoke import SmokeRun, own_folders, smoke_runs
from crossbuild.proof.target_run import qemu_command, test_program_box


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
    # programs for the build machine that the project's install leaves out: generators (sqlite3's lemon), not
    # products; only what the build machine's compiler recorded writing (for_build.py)
    build_tools: list[str] = field(default_factory=list)
    # binaries the build wrote in its workspace outside ROOT (install/, other folders, what it changed in src/),
    # checked like ROOT's (paths relative to ROOT); not counted, not run
    elsewhere: list[dict] = field(default_factory=list)
    smoke_runs: list[SmokeRun] = field(default_factory=list)
    harness: str | None = None  # the project's harness that ran its tests (harness.py), when it had one
    # crossbuild's probes of the products (exercise.py), run when the test programs do not make it `tested`
    probe_runs: list[ProbeRun] = field(default_factory=list)
    rebuild: dict | None = None
    sandbox: str = "none"
    run_tests: bool = True
    # what ran on the target (levels.py): tested | exercised | built, or None when not verified; with the counts of
    # test programs and what keeps the verdict from the next level up
    proof: str | None = None
    proof_counts: dict[str, int] = field(default_factory=dict)
    proof_why: str | None = None
    needs_runtime: str | None = None  # the shared C++ runtime the products link (cxx_runtime.py), to ship with them
    seconds: dict[str, float] = field(default_factory=dict)  # time per phase of the verdict (`runs show`)
    # programs CMake's records link that are not tests or examples and that the build did not make: not judged
    programs_not_built: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def level(self) -> Proof:
        return Proof(self.proof, self.proof_counts, self.proof_why)

    def not_counted(self) -> str:
        said = []
        if self.linker_temporaries:
            said.append(f"{len(self.linker_temporaries)} linker temporaries a failed link left "
                        f"({', '.join(self.linker_temporaries[:3])})")
        if self.build_tools:
            said.append(f"{len(self.build_tools)} programs built for the build machine (by its compiler, as "
                        f"recorded) that the install leaves out ({', '.join(self.build_tools[:3])})")
        return "not counted: " + "; ".join(said)

    def left_out(self) -> str:
        """The programs the build's own records link and it did not make, in one line."""
        names = self.programs_not_built
        return (f"not built: {len(names)} program(s) the build's CMake files define and it did not make (not "
                f"judged): {', '.join(names[:8])}" + (" ..." if len(names) > 8 else ""))

    def proven(self) -> str:
        """What the verdict rests on, in one line: a VERIFIED with no test program run proves the architecture
        only, and says so."""
        runs = self.smoke_runs
        ran = [r for r in runs if not r.skipped]
        probed = any(p.passed for p in self.probe_runs)  # crossbuild's probes ran the products instead
        only = " - crossbuild's probes ran the products (see proof)" if probed else \
            " - proven: the architecture of every binary only"
        if not runs:
            return ("test programs: none run (run_tests was off)" if not self.run_tests else
                    f"test programs: none found (no test-like executable){only}")
        counted = sum(1 for r in ran if r.passed or r.triage == "usage")
        said = (f"tests: {len(ran)} of {len(runs)} ran on the target by the project's {self.harness}, "
                f"{sum(r.passed for r in ran)} passed" if self.harness else
                f"test programs: {len(ran)} of {len(runs)} ran under qemu, {counted} passed or printed their usage")
        if len(ran) < len(runs):
            said += f", {len(runs) - len(ran)} skipped"
        if not ran:
            said += only
        return said

    def only_tests_failed(self) -> bool:
        """Whether test programs that ran and failed without a crash are all that refused this verdict: what a
        build for the build machine can tell apart (native_check)."""
        failing = [r for r in self.smoke_runs if r.failed]
        return bool(failing) and all(r.triage == "failed" for r in failing) and len(self.reasons) == len(failing)

    def failed_output(self) -> list[str]:
        """What each failed test program printed last, with its verdict: the texts the knowledge base is searched
        with when the verdict is NOT VERIFIED for them."""
        return [f"{r.label}: {r.why or 'failed'}\n{r.output_tail}" for r in self.smoke_runs if r.failed]

    def summary(self, shown_root: str, limit: int = 15) -> str:
        """The verdict as a model or a log reads it: the counts, each smoke run's outcome, the clean rebuild, and
        the reasons (the CLI renders the same report as tables)."""
        counts = ", ".join(f"{k}: {v}" for k, v in self.counts.items()) or "no binaries"
        lines = [f"{'VERIFIED' if self.ok else 'NOT VERIFIED'} for {self.target}: {shown_root} ({counts})",
                 f"  {self.proven()}"]
        if self.ok:
            lines.append(f"  proof: {self.level().phrase()}")
        for run in self.smoke_runs[:limit]:
            lines.append(f"  {run.label}: {run.outcome()}")
            if run.failed:  # what it printed last: what a model needs to find the cause
                lines += [f"    | {line[:200]}" for line in run.output_tail.splitlines()[-5:]]
        for probe in self.probe_runs[:limit]:
            lines.append(f"  probe {probe.kind} {probe.path}: {probe.outcome()}")
        if self.linker_temporaries or self.build_tools:
            lines.append(f"  {self.not_counted()}")
        if self.programs_not_built:
            lines.append(f"  {self.left_out()}")
        if self.needs_runtime:
            lines.append(f"  needs crossbuild's shared C++ runtime at run time (not a failure): ship "
                         f"{self.needs_runtime} with it")
        if self.rebuild:
            lines.append(f"  clean rebuild: {'passed' if self.rebuild['ok'] else self.rebuild['error']}"
                         + (" (the last verify's, made from the same steps, edits and prefix: not made again)"
                            if self.rebuild.get("reused") else "")
                         + self.compiles_reused())
        lines += [f"  - {reason}" for reason in self.reasons[:limit]]
        return "\n".join(lines)

    def compiles_reused(self) -> str:
        """What the clean rebuild took from the first build's compile cache, as a clause ("" when unknown)."""
        c = (self.rebuild or {}).get("compiles")
        if not c:
            return ""
        return (f"; {c['reused']} of {c['reused'] + c['compiled']} compiles the same as the first build's, "
                f"taken from its compile cache")


def verify(root: str | Path, target: Target, *, toolchain: Toolchain | None = None,
           box: Sandbox | None = None, run_tests: bool = True, allow_host: list[str] | None = None,
           rebuild_steps: list[BuildStep] | None = None, rebuild_source: str = "src",
           rebuild_edits: Sequence[str] = (), smoke_timeout_s: float = 60.0,
           build_machine_check: bool = False, steps_taken: list[BuildStep] | None = None,
           provide_dependencies: native_check.DependencyProvider | None = None,
           suite_budget_s: float | None = None, install_dir: Path | None = None) -> VerifyReport:
    """The verdict on the build folder ROOT. A clean rebuild (REBUILD_STEPS) starts from the source as it was
    prepared, with the files the agent edited (REBUILD_EDITS, workspace-relative) laid over it. With
    BUILD_MACHINE_CHECK, test programs that failed without a crash, when nothing else stands in the verdict's way,
    are run again from a build of the same steps for the build machine (native_check), with the dependencies
    PROVIDE_DEPENDENCIES puts in its prefix. SUITE_BUDGET_S bounds the project's whole test suite (a dependency's:
    past it, the suite is unfinished and the verdict cannot be `tested`). STEPS_TAKEN (default:
    REBUILD_STEPS) are the recorded commands read for tests switched off; without a usable test suite, crossbuild's
    probes run every product on the target (exercise.py), and the proof level says what ran (levels.py).
    INSTALL_DIR: where the build installed (default <workspace>/install; a dependency's staged prefix), which
    tells its build-machine tools from its products (for_build.py)."""
    root = Path(os.path.abspath(root))
    report = VerifyReport(target=target.name, root=str(root), run_tests=run_tests)
    if root.is_symlink() or not root.is_dir():  # a build may replace its output folder by a link to host files
        report.reasons.append(f"{root} is {'a link' if root.is_symlink() else 'not a directory'}, not a build folder")
        return report
    allow_host = allow_host or []
    watch = box.watch.note if box is not None else (lambda *_: None)  # the phases, for whoever watches the call
    clock = _PhaseClock(report.seconds)

    def note(text: str, phase: str | None = None) -> None:
        clock.start(phase)
        watch(text)

    if rebuild_steps:
        if toolchain is None:
            raise ValueError("a clean rebuild needs the toolchain (BuildEnv) it was built with")
        note(f"clean rebuild: {len(rebuild_steps)} recorded steps again from the pristine source", "clean rebuild")
        report.rebuild = clean_rebuild(root, rebuild_steps, toolchain, rebuild_source, box, rebuild_edits)
        if not report.rebuild["ok"]:
            report.reasons.append(f"clean rebuild failed: {report.rebuild['error']}")

    bad: list[tuple[Artifact, list[str]]] = []
    identities: list[tuple[Path, str, str, tuple[int, ...] | None]] = []  # each product as it was before the tests
    root_id = _identity(root.parent, root.name)
    install_dir = install_dir or (toolchain.workspace / "install" if toolchain is not None else None)
    installed = _installed_names(toolchain, install_dir)
    for_build = BuildMachineOutputs(toolchain, installed, install_dir)
    note("reading every artifact's format and architecture", "artifact scan")
    for anchor, scan in _scans(root, toolchain):
        shown = _shown(root, anchor)
        report.probes_excluded += len(scan.probes_excluded)
        report.linker_temporaries += [shown(rel) for rel in scan.linker_temporaries]
        report.probe_mismatches += [f"{shown(a.path)}: {'; '.join(p)}" for a in scan.probe_artifacts
                                    if (p := check_artifact(a, target))]
        report.not_binaries += [shown(rel) for rel in scan.not_binaries]
        if scan.incomplete:
            report.reasons.append(f"the artifact scan is incomplete: {scan.incomplete}")
        for a in scan.artifacts:
            problems = check_artifact(a, target, workspace=toolchain.workspace if toolchain else root)
            if not a.member_of:
                identities.append((anchor, a.path, shown(a.path), _identity(anchor, a.path)))
            excused = _excused(a, anchor, shown, problems, allow_host, for_build)
            if excused:
                (report.allowed_host if excused == "allowed" else report.build_tools).append(shown(a.path))
                continue
            a = replace(a, path=shown(a.path), member_of=a.member_of and shown(a.member_of))
            entry = a.to_dict()
            entry["ok"] = not problems
            if problems:
                entry["problems"] = problems
                bad.append((a, problems))
            (report.artifacts if anchor == root else report.elsewhere).append(entry)
    if cxx_runtime.supported(target) and any(cxx_runtime.SONAME in a.get("needed", ())
                                             for a in [*report.artifacts, *report.elsewhere] if a["ok"]):
        report.needs_runtime = str(cxx_runtime.path(target))  # not a product: a user ships it beside them
    counted = [a for a in report.artifacts if a["kind"] != "unknown"]
    kinds = [a["kind"] for a in counted if not a.get("member_of")]
    report.counts = {k: kinds.count(k) for k in sorted(set(kinds))}
    report.counts["archive_members"] = sum(1 for a in counted if a.get("member_of"))
    report.programs_not_built = tests_off.products_not_built(root)

    if not counted:
        report.reasons.append("no binaries for any architecture were found: nothing was built")
    elif not any(a["ok"] and a["kind"] in LINKED_KINDS
                 for a in counted):
        report.reasons.append("no linked artifact (executable or library) for the target was found")
    for a, problems in bad[:20]:
        report.reasons.append(f"{a.path}: {'; '.join(problems)}")
    if len(bad) > 20:
        report.reasons.append(f"... and {len(bad) - 20} more artifacts that do not fit {target.name}")
    for rel in report.not_binaries:
        report.reasons.append(f"{rel}: named like a binary but is not one")

    # the recorded steps that turned tests off: such a verdict cannot be `tested`
    taken = steps_taken if steps_taken is not None else rebuild_steps or []
    workspace = toolchain.workspace if toolchain else None
    switched_off = tests_off.tests_switched_off(taken, root=workspace)
    # what the verifier cannot undo; make's test goals left out of one folder's default goal it runs itself
    blocking = tests_off.tests_switched_off(taken, root=workspace, goals_left_out=False)
    left = tests_off.make_goals_left_out(taken, workspace) if switched_off and workspace else []
    left_out = (left[0][0], left[0][3]) if len(left) == 1 else None
    if run_tests:
        build_box = box or _default_box(root, toolchain)
        box = test_program_box(build_box, target, workspace)
        report.sandbox = box.backend
        if toolchain is not None:
            if target.is_windows:  # a fresh Wine prefix for the test programs: nothing the build's runs left in it
                _throw_away_wine_prefix(toolchain)
            log_dir = Path(tempfile.mkdtemp(prefix="verify-", dir=toolchain.logs))
            # the dependencies' shared libraries, where the build linked them from (a target system would have
            # them installed too)
            deps = [str(d) for d in (toolchain.prefix / "lib", toolchain.prefix / "lib64") if d.is_dir()]
            # the project's own harness when it has one and found tests; else its test-like executables, bare.
            # Not when the steps turned tests off (it would run tests whose programs were never built), except a
            # Makefile's test goal the build left out of one folder, which builds what it runs.
            runs_harness = not blocking and (not switched_off or left_out is not None)
            note("running the project's tests on the target", "tests")
            report.smoke_runs = harness_runs(root, target, report.artifacts, toolchain, box, smoke_timeout_s,
                                             log_dir, deps, taken, left_out if switched_off else None,
                                             budget=suite_budget_s) if runs_harness else []
            report.harness = report.smoke_runs[0].harness if report.smoke_runs else None
            if switched_off and any(r.passed and r.on_target is not False for r in report.smoke_runs):
                switched_off = blocking  # the test goal the build left out ran on the target
            if not report.smoke_runs:
                report.smoke_runs = smoke_runs(root, target, report.artifacts, box, smoke_timeout_s, log_dir, deps,
                                               source=toolchain.workspace / rebuild_source,
                                               own_folders=own_folders(root, toolchain), within=toolchain.workspace)
            if build_machine_check and rebuild_steps and not report.reasons:
                note("build-machine check: the failed tests, built for this machine", "build-machine check")
                native_check.recheck(report.smoke_runs, root, toolchain, rebuild_steps, rebuild_source,
                                     rebuild_edits, box, smoke_timeout_s, provide_dependencies)
        else:
            with tempfile.TemporaryDirectory(prefix="crossbuild-verify-") as tmp:
                report.smoke_runs = smoke_runs(root, target, report.artifacts, box, smoke_timeout_s, Path(tmp))
        for run in report.smoke_runs:
            if run.failed:
                runner = "Wine" if target.is_windows else "wasmtime" if target.is_wasm else "qemu"
                report.reasons.append(f"{run.label} failed under {runner} "
                                      f"({run.why})")
        if toolchain is not None and not report.reasons and not_tested(True, report.smoke_runs, switched_off):
            # no usable test suite: crossbuild's own probes run every product on the target instead
            note("probes: running every product on the target", "probes")
            report.probe_runs = exercise(root, target, report.artifacts, toolchain, build_box, box,
                                         smoke_timeout_s, log_dir, deps, installed)
            # a crashed probe blocks `exercised` whatever the model does next: the build machine's view is taken
            # now (a test program's failure waits for the model's fixes first, build_machine_check)
            if rebuild_steps and any(p.crash and not p.passed for p in report.probe_runs):
                note("build-machine check: the products that crashed, built for this machine", "build-machine check")
                native_check.recheck_probes(report.probe_runs, root, toolchain, rebuild_steps, rebuild_source,
                                            rebuild_edits, box, smoke_timeout_s, provide_dependencies)
    if run_tests and toolchain is not None:  # what the tests and probes ran could write the build's folders
        clock.start("what the runs wrote")
        written: list[str] = []
        report.reasons += _written_by_runs(report, root, toolchain, target, allow_host, for_build, identities,
                                           root_id, written)
        remember_run_outputs(toolchain, root, written)  # not the build's: no later clean rebuild must make them
    if run_tests and toolchain is not None and target.is_windows:
        _throw_away_wine_prefix(toolchain)  # ~700 MB of Wine's own DLLs: made again by the next run that needs it
    clock.start(None)
    report.ok = not report.reasons
    proof = proof_of(report.ok, run_tests, report.smoke_runs, report.probe_runs if run_tests else None,
                     switched_off, cannot_run=_why_no_probe(target))
    report.proof, report.proof_counts, report.proof_why = proof.level, proof.counts, proof.why_not_higher
    return report


class _PhaseClock:
    """Seconds per phase of a verdict: each phase lasts from its start to the next one's (None: the end)."""

    def __init__(self, into: dict[str, float]):
        self.into, self.phase, self.since = into, None, time.monotonic()

    def start(self, phase: str | None) -> None:
        now = time.monotonic()
        if self.phase is not None:
            self.into[self.phase] = round(self.into.get(self.phase, 0.0) + now - self.since, 2)
        self.phase, self.since = phase, now


def _throw_away_wine_prefix(toolchain: Toolchain) -> None:
    for path in (toolchain.wine_prefix, toolchain.wine_prefix.with_name("wine.lock")):
        safefs.remove_tree(toolchain.workspace, path.relative_to(toolchain.workspace))


def _scans(root: Path, toolchain: Toolchain | None) -> list[tuple[Path, ScanResult]]:
    """The build folder ROOT's scan, and that of what the build wrote elsewhere in its workspace, each with the
    folder its paths are relative to."""
    scans = [(root, scan_outputs(root, toolchain))]
    if (rest := scan_elsewhere(root, toolchain)) is not None:
        scans.append((toolchain.workspace, rest))
    return scans


def _shown(root: Path, anchor: Path) -> Callable[[str], str]:
    """How a path below ANCHOR is shown: relative to ROOT (`../install/bin/x`)."""
    up = None if anchor == root else os.path.relpath(anchor, os.path.realpath(root))
    return lambda rel: rel if up is None else os.path.join(up, rel)


def _excused(a: Artifact, anchor: Path, shown: Callable[[str], str], problems: list[str], allow_host: list[str],
             for_build: BuildMachineOutputs) -> str | None:
    """Why an artifact that does not fit the target is not the verdict's concern: "allowed" (the user's
    --allow-host), "tool" (made by the build machine's compilers for the build), else None."""
    if problems and matches_any(shown(a.path).split("(")[0], allow_host):
        return "allowed"
    if problems and for_build.made(a, anchor):
        return "tool"
    return None


def _identity(anchor: Path, rel: str) -> tuple[int, ...] | None:
    """ANCHOR/REL's file type, inode, size and time, read without following a link on the way; None when absent
    or behind a link."""
    try:
        st = safefs.lstat(anchor, rel)
    except OSError:
        return None
    return stat.S_IFMT(st.st_mode), st.st_ino, st.st_size, st.st_mtime_ns


def _written_by_runs(report: VerifyReport, root: Path, toolchain: Toolchain, target: Target,
                     allow_host: list[str], for_build: BuildMachineOutputs,
                     identities: list[tuple[Path, str, str, tuple[int, ...] | None]],
                     root_id: tuple[int, ...] | None, written: list[str]) -> list[str]:
    """The folders checked again after the tests and probes ran (they run with write access to the build folder):
    the build folder replaced, a product found before that is gone or no longer a plain file (a link to a host
    program), a rescan that does not finish, or a binary that does not fit the target and was not there, or
    fitted, before (a test that copied a host program over the built one) is a reason, named; the verdict's
    artifact list is the one read before. WRITTEN receives the linked artifacts below ROOT the runs made that were not
    there before (libtool's wrapper writes `.libs/lt-NAME` when a test starts it)."""
    now_root = _identity(root.parent, root.name)
    if root_id is None or now_root is None or now_root[:2] != root_id[:2]:
        return [f"{root.name}: the build folder was replaced while the tests ran"]
    reasons = [f"{shown}: {'gone' if now is None else 'no longer a plain file'} after the tests ran"
               for anchor, rel, shown, was in identities
               if was is not None and ((now := _identity(anchor, rel)) is None or now[0] != stat.S_IFREG)]
    before = {e["path"] for e in [*report.artifacts, *report.elsewhere] if not e.get("ok")}
    before |= {*report.allowed_host, *report.build_tools}
    known = {rel for anchor, rel, _, _ in identities if anchor == root}
    for anchor, scan in _scans(root, toolchain):
        shown = _shown(root, anchor)
        if scan.incomplete:
            reasons.append(f"the artifact scan after the tests ran is incomplete: {scan.incomplete}")
        for a in scan.artifacts:
            if anchor == root and a.kind in LINKED_KINDS and not a.member_of and a.path not in known:
                written.append(a.path)
            problems = check_artifact(a, target, workspace=toolchain.workspace if toolchain else root)
            if problems and shown(a.path) not in before and not _excused(a, anchor, shown, problems, allow_host,
                                                                          for_build):
                reasons.append(f"{shown(a.path)}: written while the tests ran, and {'; '.join(problems)}")
    return reasons[:20]


def scan_elsewhere(root: Path, toolchain: Toolchain | None) -> ScanResult | None:
    """What the build wrote in its workspace outside ROOT: every folder but crossbuild's own (.xbuild/, .scratch/),
    the install folder included, and of src/ what differs from the source as prepared (its pristine copy; all of
    it without one). None when ROOT is the workspace itself or lies outside every workspace folder."""
    if toolchain is None:
        return None
    ws = toolchain.workspace
    try:
        rel = Path(os.path.realpath(root)).relative_to(ws)
    except ValueError:
        return None
    own = {toolchain.xbuild.name, toolchain.scratch.name}
    if rel == Path(".") or rel.parts[0] in own:
        return None
    pristine = ws / PRISTINE / "src"
    shipped = (same_as_source(ws, "src", f"{PRISTINE}/src") if pristine.is_dir() and not pristine.is_symlink()
               else None)
    return scan_tree(ws, prune=frozenset({*own, rel.as_posix()}), shipped=shipped)


def _why_no_probe(target: Target) -> str | None:
    """Why crossbuild's probes cannot run TARGET's products here, or None when they can (exercise.py)."""
    why = qemu_command(target)[1]
    if why is None and target.is_windows:  # Wine runs the tests; the probes' dlopen is ELF's
        return "crossbuild's probes are ELF and WebAssembly programs: none for Windows products yet"
    return why


def _default_box(root: Path, toolchain: Toolchain | None) -> Sandbox:
    return sandbox.for_toolchain(toolchain) if toolchain is not None else sandbox.for_tree(root)


def _installed_names(toolchain: Toolchain | None, install: Path | None) -> set[str] | None:
    """The file names the project's install put into INSTALL (in its workspace), or None when nothing target-built
    was installed there (then no program can be told apart as a build-machine tool)."""
    if toolchain is None or install is None:
        return None
    try:  # reached without following a link: the build could have made a folder on the way one
        if not safefs.is_dir(toolchain.workspace, install.relative_to(toolchain.workspace)):
            return None
    except ValueError:
        return None
    scan = scan_tree(install)
    if not any(not check_artifact(a, toolchain.target) for a in scan.artifacts):
        return None
    return {Path(a.path).name for a in scan.artifacts} | {e.name for e in safefs.walk_files(install)}
