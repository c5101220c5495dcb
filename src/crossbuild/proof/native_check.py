"""Whether a test program that failed on the target fails the same way built for the build machine.

A test program that ran under qemu and exited non-zero, with no crash and no reason in the test environment,
blocks verification: it may be the cross-build's fault. When the project is built a second time by the same
recorded steps from the same source, for the build machine's own architecture (x86_64 here, same C library), and
the same program fails there the same way - the same exit status, and the first line that tells why on the target
printed there too (numbers and paths aside) - the
failure is the project's own on every machine (glog's logging_unittest compares its output with a golden file a
Debian patch rewrote; Debian's own build ignores its result). Such a run is reported with that evidence and does
not block. One that passes there, or fails otherwise, still blocks, and now says what the build machine showed.
A test program's crash is never rechecked: failing to load or dying of a signal on the target blocks whatever
happens elsewhere (an abort right after a failed check of the program's own is that check failing, triage.py).
A product that crashed on one of the verifier's harmless invocations (`--version`: not the project's own test, but
crossbuild's guess at a harmless start) is run the same way there (recheck_probes).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crossbuild.env import ninja_targets
from crossbuild.env.recipes import BuildStep
from crossbuild.env.sandbox import Limits, Sandbox
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation import safefs
from crossbuild.foundation.targets import TARGETS, Target
from crossbuild.proof import make_goal, slowdown
from crossbuild.proof.artifacts import check_artifact, scan_tree
from crossbuild.proof.exercise import ProbeRun
from crossbuild.proof.harness import ctest_tests, harness_runs
from crossbuild.proof.second_build import build_again
from crossbuild.proof.smoke import SmokeRun, own_folders, smoke_runs
from crossbuild.proof.target_run import runner_argv, test_program_box
from crossbuild.proof.triage import telling_line

_VARYING = re.compile(r"0x[0-9a-f]+|\d+(\.\d+)?|/\S+", re.IGNORECASE)  # addresses, counts, times, paths
# the same program's two runs: only the folders of paths and addresses vary (a check's file:line must not)
_FOLDERS = re.compile(r"0x[0-9a-f]+|/(?:[^\s/]+/)+", re.IGNORECASE)


def build_machine_target(target: Target) -> Target | None:
    """The build machine's own architecture with TARGET's C library, or None when TARGET is that already or is
    not a Linux target."""
    if not target.is_linux or target.arch == platform.machine():
        return None
    return TARGETS.get(f"{platform.machine()}-linux-{'musl' if target.libc == 'musl' else 'gnu'}")


# (the build machine's target, a prefix) -> None, once the build's own dependencies, built for that target, are in
# the prefix; else why they are not
DependencyProvider = Callable[[Target, Path], "str | None"]


def recheck(runs: Sequence[SmokeRun], root: Path, toolchain: Toolchain, steps: Sequence[BuildStep], source: str,
            edits: Sequence[str], like: Sandbox, timeout_s: float,
            provide_dependencies: DependencyProvider | None = None) -> None:
    """Build for the build machine and run there each of RUNS that failed without a crash; each such run gets
    what that showed, and triage "project" when it failed the same way. PROVIDE_DEPENDENCIES puts the build's
    dependencies, built for the build machine, into the prefix that build uses (without it, an empty one)."""
    failing = [r for r in runs if r.failed]
    native = build_machine_target(toolchain.target)
    if (not failing or native is None or any(r.triage != "failed" for r in failing)
            or not root.is_relative_to(toolchain.workspace)):
        return
    if any(r.harness == make_goal.HARNESS for r in failing):  # its tie is qemu's record: the target's only
        for r in failing:
            r.why = f"{r.why}; not rechecked for {native.name}: a Makefile's test goal runs for the target only"
        return
    targets = _failing_targets(failing, root, toolchain, steps, like)
    if targets:  # first only what the failing tests need (clhep: 15 minutes for the whole project, for one test)
        before = [(r.triage, r.why) for r in failing]
        if _recheck_built(failing, _built_natively(root, toolchain, only_targets(steps, targets), source, edits,
                                                   like, native, provide_dependencies, "native-"),
                          native, source, timeout_s):
            return
        for r, (triage, why) in zip(failing, before, strict=True):  # a part the targets left out may be why:
            r.triage, r.why = triage, why  # the whole build decides
    _recheck_built(failing, _built_natively(root, toolchain, steps, source, edits, like, native,
                                            provide_dependencies, "native-"), native, source, timeout_s)


def _failing_targets(failing: list[SmokeRun], root: Path, toolchain: Toolchain, steps: Sequence[BuildStep],
                     like: Sandbox) -> list[str]:
    """The CMake targets of the programs FAILING's CTest tests run, when each test's command names at least one
    program the build made (build.ninja's link statements name it) and the steps build with `cmake --build`;
    else []. A test that also needs another part of the project fails otherwise there, and the whole build is
    made then."""
    if any(r.harness != "ctest" for r in failing) or not any(s.argv[:2] == ("cmake", "--build") for s in steps):
        return []
    tests = ctest_tests(root, like, Path(tempfile.mkdtemp(prefix="native-targets-", dir=toolchain.logs)))
    by_output = {t["output"]: t["name"] for t in ninja_targets.cmake_targets(
        toolchain.workspace, str(root.relative_to(toolchain.workspace))) if t.get("type") == "EXECUTABLE"
        and "output" in t}
    names = []
    for r in failing:  # every program its command names: after the emulator's wrapper, or a script's argument
        command = (tests.get(r.path) or ([], None))[0]
        made = [by_output[rel] for arg in command if os.path.isabs(arg)
                and (rel := os.path.relpath(os.path.normpath(arg), root)) in by_output]
        if not made:
            return []
        names += made
    return list(dict.fromkeys(names))


def only_targets(steps: Sequence[BuildStep], targets: list[str]) -> list[BuildStep]:
    """STEPS building only TARGETS (and what they need): `cmake --build` names them in place of any targets it
    named, and nothing is installed (an install needs every target; the programs run from the build folder)."""
    out = []
    for step in steps:
        argv = list(step.argv)
        # a recorded command's phase is what it ran (`cmake --install build` is recorded as a command like any)
        if step.phase == "install" or argv[:2] == ["cmake", "--install"] or (
                argv[:2] == ["cmake", "--build"] and "--target" in argv and "install" in argv):
            continue
        if argv[:2] == ["cmake", "--build"]:
            tool = argv.index("--") if "--" in argv else len(argv)
            own, rest = argv[:tool], argv[tool:]
            if "--target" in own:
                own = own[:own.index("--target")]
            argv = [*own, "--target", *targets, *rest]
        out.append(dataclasses.replace(step, argv=tuple(argv)))
    return out


def _recheck_built(failing: list[SmokeRun], built: _NativeBuild | str, native: Target, source: str,
                   timeout_s: float) -> bool:
    """Run FAILING again in the build for the build machine BUILT (or say why there is none): True when that
    settled each one (it failed the same way there, or passed), False when one was not there or failed
    otherwise."""
    if isinstance(built, str):
        for r in failing:
            r.why = f"{r.why}; not reproduced: {built}"
        return False
    fresh, native_root, box, log_dir, deps = built.toolchain, built.root, built.box, built.log_dir, built.deps
    wanted = {r.path for r in failing}
    by_harness = failing[0].harness is not None  # the same harness runs there (its tests are named, not paths)
    artifacts = []
    own = own_folders(native_root, fresh)
    for a in scan_tree(native_root, prune=own).artifacts:
        if a.kind == "shared_library" or a.path in wanted or (by_harness and a.kind == "executable"):
            artifacts.append({**a.to_dict(), "ok": not check_artifact(a, native)})
    runs = (harness_runs(native_root, native, artifacts, fresh, box, timeout_s, log_dir, deps) if by_harness else
            smoke_runs(native_root, native, artifacts, box, timeout_s, log_dir, deps, source=fresh.workspace / source,
                       own_folders=own, within=fresh.workspace))
    there = {r.path: r for r in runs}
    tests = ctest_tests(native_root, box, log_dir) if by_harness and any(
        (n := there.get(r.path)) is not None and n.passed for r in failing) else {}
    for r in failing:
        _compare(r, there.get(r.path), native)
        if r.triage != "project" and (n := there.get(r.path)) is not None and n.passed and r.path in tests:
            _emulated_again(r, tests[r.path], native_root, artifacts, fresh.workspace, box, native, deps,
                            timeout_s, log_dir)
    return all(r.triage == "project" or ((n := there.get(r.path)) is not None and n.passed) for r in failing)


@dataclass
class _NativeBuild:
    """The build replayed for the build machine, ready to run its programs."""
    toolchain: Toolchain
    root: Path  # its folder matching the target build's ROOT
    box: Sandbox  # runs the build machine's programs
    log_dir: Path  # a fresh folder for those runs' logs
    deps: list[str]  # its dependencies' library folders


def _built_natively(root: Path, toolchain: Toolchain, steps: Sequence[BuildStep], source: str, edits: Sequence[str],
                    like: Sandbox, native: Target, provide_dependencies: DependencyProvider | None, logs: str
                    ) -> _NativeBuild | str:
    """The build replayed for the build machine NATIVE (its dependencies built for it first), with a log folder
    named LOGS...; else why it could not be had."""
    prefix = None
    if provide_dependencies is not None:
        prefix = toolchain.workspace / ".xbuild" / "native-prefix"  # out of the builds' reach, like .xbuild/native
        safefs.remove_tree(toolchain.workspace, ".xbuild/native-prefix")  # this session's dependencies only
        missing = provide_dependencies(native, prefix)
        if missing:
            return f"its dependencies for {native.name} could not be had ({missing})"
    second = build_again(toolchain, steps, source, edits, like, into="native", target=native, prefix=prefix)
    if second.error:
        return f"the build for {native.name} failed ({second.error})"
    native_root = second.toolchain.workspace / root.relative_to(toolchain.workspace)
    if native_root.is_symlink() or not native_root.is_dir():  # the second build may have left a link to host files
        return f"the build for {native.name} left no build folder"
    fresh = second.toolchain
    return _NativeBuild(fresh, native_root, test_program_box(second.box, native),
                        Path(tempfile.mkdtemp(prefix=logs, dir=fresh.logs)),
                        [str(d) for d in (fresh.prefix / "lib", fresh.prefix / "lib64") if d.is_dir()])


def recheck_probes(probes: Sequence[ProbeRun], root: Path, toolchain: Toolchain, steps: Sequence[BuildStep],
                   source: str, edits: Sequence[str], like: Sandbox, timeout_s: float,
                   provide_dependencies: DependencyProvider | None = None) -> None:
    """An executable that crashed on the target on a harmless invocation (`--version`) and crashes the same way
    built for the build machine, run the same way there - the same exit status, and what it said before dying -
    does so on every machine: that invocation is not harmless for it (kissfft's psdpng takes `--version` for an
    image and aborts in libpng). Such a probe is not counted, with that evidence; any other crash still blocks."""
    crashed = [p for p in probes if p.kind == "executable" and p.crash and p.crash.get("said") and not p.passed]
    native = build_machine_target(toolchain.target)
    if not crashed or native is None or not root.is_relative_to(toolchain.workspace):
        return
    built = _built_natively(root, toolchain, steps, source, edits, like, native, provide_dependencies,
                            "native-probes-")
    if isinstance(built, str):
        for p in crashed:
            p.why = f"{p.why}; not reproduced: {built}"
        return
    native_root, box, log_dir, deps = built.root, built.box, built.log_dir, built.deps
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", **({"LD_LIBRARY_PATH": ":".join(deps)} if deps else {})}
    for p in crashed:
        try:  # the plain file the build made there, for this machine, not a link a run left in its place
            os.close(safefs.open_regular(native_root, p.path))
        except OSError:
            p.why = f"{p.why}; not reproduced: the build for {native.name} made no {p.path}"
            continue
        exe = native_root / p.path
        res, lines = _run_once(box, [str(exe), *p.crash["args"]], exe.parent, {**env, "HOME": str(exe.parent)},
                               log_dir, timeout_s)
        shown = " ".join([exe.name, *p.crash["args"]])
        said = _VARYING.sub("#", p.crash["said"])
        if res.returncode == p.crash["exit"] and any(_VARYING.sub("#", line.strip()) == said for line in lines):
            p.not_counted = (f"`{shown}` crashes the same way built for the build machine ({native.name}: exit "
                             f"{res.returncode}, \"{p.crash['said'][:120]}\"): not a harmless invocation of it")
        else:
            p.why = f"{p.why}; built for {native.name}, `{shown}` exits {res.returncode} otherwise"


def _emulated_again(run: SmokeRun, test: tuple[list[str], str | None], native_root: Path, artifacts: list[dict],
                    workspace: Path, box: Sandbox, native: Target, deps: list[str], timeout_s: float,
                    log_dir: Path) -> None:
    """A CTest test that failed on the target and passed run natively for the build machine: its program, built for
    the build machine, runs once more under the build machine's own qemu-user. Failing there the same way is the
    emulator's failure (qemu-user's /proc/self/stat has no thread count), not the cross-build's: not counted,
    with that evidence. Only a program the native build made, below its build folder, is run."""
    command, folder = test
    if not command or not os.path.isabs(command[0]):
        return
    exe = os.path.relpath(os.path.normpath(command[0]), native_root)
    made = next((a for a in artifacts if a["path"] == exe and a["kind"] == "executable" and a["ok"]), None)
    if made is None or exe.startswith(".."):
        return  # a script, the emulator's wrapper (already emulated there), or not the build's
    cwd = Path(os.path.normpath(folder)) if folder and os.path.isabs(folder) else (native_root / exe).parent
    if not cwd.is_relative_to(workspace) or not safefs.is_dir(workspace, cwd.relative_to(workspace)):
        return
    try:  # still the plain file the scan found, not a link a native test left in its place
        os.close(safefs.open_regular(native_root, exe))
    except OSError:
        return
    argv, _ = runner_argv(native, native_root / exe, dynamic=made.get("linkage") == "dynamic", lib_dirs=deps,
                          args=command[1:])
    if argv is None:
        return
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LC_ALL": "C"}
    if deps:
        env["LD_LIBRARY_PATH"] = ":".join(deps)
    limit = timeout_s * slowdown.factor(native)
    # the control: run so, natively, it must pass (else the folder or environment differ from its harness's)
    native_res, _ = _run_once(box, [str(native_root / exe), *command[1:]], cwd, env, log_dir, timeout_s)
    if not native_res.ok:
        run.why = f"{run.why}; run alone natively for {native.name} it does not pass either: not compared"
        return
    res, lines = _run_once(box, argv, cwd, env, log_dir, limit)
    # CTest's console says `Failed` for a non-zero exit without its number: then any non-zero exit is the same
    code = run.exit_code if run.exit_code is None and (res.returncode or 0) > 0 else res.returncode
    emulated = SmokeRun(path=run.path, command=argv, exit_code=code, passed=res.ok, stopped=res.stopped,
                        output_tail="\n".join(lines[-max(8, len(run.output_tail.splitlines())):]))
    emulated.triage = None if res.ok else "failed" if (res.returncode or -1) > 0 else "crashed"
    line = telling_line(run.output_tail.splitlines())
    if not res.ok and line and _same_failure(run, emulated, varying=_FOLDERS):
        run.triage = "environment"
        run.why = (f"the emulator's: it passes run natively for the build machine and fails the same way under "
                   f"its qemu-user ({native.name}: exit {res.returncode}, \"{line[:160]}\")")
    else:
        run.why = f"{run.why}; under qemu-user for {native.name}: {emulated.outcome()}"


def _run_once(box: Sandbox, argv: list[str], cwd: Path, env: dict[str, str], log_dir: Path,
              limit: float) -> tuple[Any, list[str]]:
    """ARGV run once in BOX; its result and what it printed."""
    log_name = f"emulated-{len(os.listdir(log_dir)):03d}.log"
    res = box.run(argv, cwd=cwd, env=env, log_path=log_dir / log_name,
                  limits=Limits(timeout_s=limit, max_output_bytes=4 << 20))
    return res, safefs.read_text(log_dir, log_name, max_bytes=5 << 20).splitlines()[2:]  # after the header


def _compare(run: SmokeRun, native_run: SmokeRun | None, native: Target) -> None:
    if native_run is None or native_run.skipped:
        why = native_run.skipped if native_run else "the program was not built"
        run.why = f"{run.why}; not reproduced for {native.name}: {why}"
        return
    if native_run.passed:
        run.why = f"{run.why}; it passes built for {native.name}"
        return
    ours = telling_line(run.output_tail.splitlines())
    if _same_failure(run, native_run):
        run.triage = "project"
        run.why = (f"fails the same way built for the build machine ({native.name}: {native_run.status}"
                   + (f", \"{ours[:160]}\"" if ours else "") + ")")
    else:
        run.why = f"{run.why}; built for {native.name} it fails otherwise: {native_run.outcome()}"


def _same_failure(run: SmokeRun, other: SmokeRun, varying: re.Pattern[str] | None = None) -> bool:
    """Whether OTHER failed as RUN did: the same exit status, and each run's first telling line anywhere in what
    the other printed (a program's stdout and stderr interleave differently from run to run, CMake's
    "-- Configuring incomplete" and its "CMake Error", but a failure whose reason one run never printed is
    another failure). VARYING: what is set aside before comparing (default: numbers, addresses and paths)."""
    varying = varying or _VARYING
    ours, theirs = telling_line(run.output_tail.splitlines()), telling_line(other.output_tail.splitlines())
    here, there = (_normalised(r.output_tail, varying) for r in (run, other))
    return (other.triage == "failed" and other.exit_code == run.exit_code
            and (bool(ours and theirs) and varying.sub("#", ours.strip()) in there
                 and varying.sub("#", theirs.strip()) in here or ours is None and theirs is None))


def _normalised(output: str, varying: re.Pattern[str]) -> set[str]:
    return {varying.sub("#", line.strip()) for line in output.splitlines()}
