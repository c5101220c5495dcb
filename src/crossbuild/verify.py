"""The only judge of success: optional clean rebuild, artifact scan against the target, qemu smoke runs.

`verify(...)` returns a VerifyReport (JSON-serialisable); the model's own claims never count.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError

from . import host, musl_loader, sandbox
from .artifacts import Artifact, check_artifact, dynamic_symbols, matches_any, scan_tree
from .recipes import BuildStep
from .sandbox import Limits, Sandbox
from .targets import Target
from .toolchain import Toolchain, qemu_sysroot

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


@dataclass
class VerifyReport:
    target: str
    root: str
    ok: bool = False
    reasons: list[str] = field(default_factory=list)  # why it failed (empty when ok)
    artifacts: list[dict] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    probes_excluded: int = 0
    not_binaries: list[str] = field(default_factory=list)
    allowed_host: list[str] = field(default_factory=list)
    smoke_runs: list[SmokeRun] = field(default_factory=list)
    rebuild: dict | None = None
    sandbox: str = "none"

    def to_dict(self) -> dict:
        return asdict(self)


def is_testlike(rel: str) -> bool:
    p = Path(rel)
    stem = p.name.removesuffix(".exe")
    return bool(_TESTLIKE.search(stem)) or any(part.lower() in _TESTLIKE_DIRS for part in p.parts[:-1])


def verify(root: str | Path, target: Target, *, toolchain: Toolchain | None = None,
           box: Sandbox | None = None, run_tests: bool = True, allow_host: list[str] | None = None,
           rebuild_steps: list[BuildStep] | None = None, rebuild_source: str = "src",
           smoke_timeout_s: float = 60.0) -> VerifyReport:
    root = Path(root).resolve()
    report = VerifyReport(target=target.name, root=str(root))
    if not root.is_dir():
        report.reasons.append(f"{root} is not a directory")
        return report
    allow_host = allow_host or []

    if rebuild_steps:
        if toolchain is None:
            raise ValueError("a clean rebuild needs the toolchain (BuildEnv) it was built with")
        report.rebuild = _clean_rebuild(root, rebuild_steps, toolchain, rebuild_source, box)
        if not report.rebuild["ok"]:
            report.reasons.append(f"clean rebuild failed: {report.rebuild['error']}")

    scan = scan_tree(root)
    report.probes_excluded = len(scan.probes_excluded)
    report.not_binaries = scan.not_binaries
    bad: list[tuple[Artifact, list[str]]] = []
    for a in scan.artifacts:
        problems = check_artifact(a, target)
        if problems and matches_any(a.path.split("(")[0], allow_host):
            report.allowed_host.append(a.path)
            continue
        entry = a.to_dict()
        entry["ok"] = not problems
        if problems:
            entry["problems"] = problems
            bad.append((a, problems))
        report.artifacts.append(entry)
    counted = [a for a in report.artifacts if a["kind"] != "unknown"]
    kinds = [a["kind"] for a in counted if "(" not in a["path"]]
    report.counts = {k: kinds.count(k) for k in sorted(set(kinds))}
    report.counts["archive_members"] = sum(1 for a in counted if "(" in a["path"])

    if not counted:
        report.reasons.append("no binaries for any architecture were found: nothing was built")
    elif not any(a["ok"] and a["kind"] in ("executable", "shared_library", "static_library", "import_library")
                 for a in counted):
        report.reasons.append("no linked artifact (executable or library) for the target was found")
    for a, problems in bad[:20]:
        report.reasons.append(f"{a.path}: {'; '.join(problems)}")
    if len(bad) > 20:
        report.reasons.append(f"... and {len(bad) - 20} more artifacts that do not fit {target.name}")
    for rel in scan.not_binaries:
        report.reasons.append(f"{rel}: named like a binary but is not one")

    if run_tests:
        box = box or _default_box(root, toolchain)
        report.sandbox = box.backend
        report.smoke_runs = _smoke_runs(root, target, report, box, smoke_timeout_s)
        for run in report.smoke_runs:
            if run.skipped is None and not run.passed and not run.needs_arguments:
                why = run.stopped or f"exit {run.exit_code}"
                report.reasons.append(f"smoke run {run.path} failed under qemu ({why})")
    report.ok = not report.reasons
    return report


def _default_box(root: Path, toolchain: Toolchain | None) -> Sandbox:
    if toolchain is not None:
        return sandbox.for_workspace(toolchain.workspace, prefix=toolchain.prefix, zig_cache=toolchain.zig_cache)
    return sandbox.for_workspace(root, prefix=root, zig_cache=root)


def _clean_rebuild(root: Path, steps: list[BuildStep], toolchain: Toolchain, source: str,
                   box: Sandbox | None) -> dict:
    """Replay the recorded steps on a fresh copy of the pristine source, in a second workspace
    (`.xbuild/rebuild/`); absolute paths into the original workspace are remapped to the copy."""
    original_ws = toolchain.workspace
    fresh_ws = toolchain.xbuild / "rebuild"
    shutil.rmtree(fresh_ws, ignore_errors=True)
    shutil.copytree(original_ws / source, fresh_ws / source, symlinks=True)
    fresh = Toolchain.for_target(toolchain.target, fresh_ws, prefix=toolchain.prefix,
                                 zig_cache=toolchain.zig_cache).materialise()
    box = box or sandbox.for_workspace(fresh_ws, prefix=fresh.prefix, zig_cache=fresh.zig_cache)
    env = fresh.env.as_dict()
    for i, step in enumerate(steps):
        argv = [a.replace(str(original_ws), str(fresh_ws)) for a in step.argv]
        step_env = {k: v.replace(str(original_ws), str(fresh_ws)) for k, v in step.env}
        res = box.run(argv, cwd=fresh_ws / step.cwd, env={**env, **step_env},
                      log_path=fresh.logs / f"rebuild-{i + 1}.log")
        if not res.ok:
            return {"ok": False, "steps": [str(s) for s in steps], "workspace": str(fresh_ws),
                    "error": f"`{' '.join(argv)}` {res.stopped or f'exit {res.returncode}'} (log {res.log_path})"}
    try:
        rel_root = root.relative_to(original_ws)
    except ValueError:
        rel_root = Path(".")
    linked = ("executable", "shared_library", "static_library", "import_library")  # objects are intermediate
    rebuilt = {a.path for a in scan_tree(fresh_ws / rel_root).artifacts if a.kind in linked}
    original = {a.path for a in scan_tree(root).artifacts if a.kind in linked}
    missing = sorted(original - rebuilt)
    ok = bool(rebuilt) and not missing
    return {"ok": ok, "steps": [str(s) for s in steps], "workspace": str(fresh_ws), "artifacts": len(rebuilt),
            "error": None if ok else ("rebuild produced no binaries" if not rebuilt
                                      else f"rebuild lacks {', '.join(missing[:5])}")}


def qemu_command(target: Target) -> tuple[list[str] | None, str | None]:
    """The qemu prefix that runs this target's programs, or why they cannot run here."""
    if target.is_windows:
        return None, "Windows executables are scanned only (no wine)"
    qemu = host.find_tool(target.qemu)
    if not qemu:
        return None, f"{target.qemu} is not installed: `apt-get install qemu-user`"
    return [qemu], None


def loader_root(target: Target) -> tuple[Path | None, str | None]:
    """Folder qemu -L uses for dynamically linked programs, or why there is none."""
    root = qemu_sysroot(target)
    if target.libc == "glibc":
        if not (root / target.dynamic_loader.lstrip("/")).exists() and not any(root.glob("lib/ld-linux*")):
            return None, f"dynamic glibc program needs Debian's libc6-{target.debian_arch}-cross"
        return root, None
    if musl_loader.sysroot_for(target.arch) is None:
        return None, f"dynamic musl program needs the musl loader: `crossbuild musl-loader {target.name}`"
    return root, None


def _musl_version(target: Target) -> str:
    stamp = musl_loader.loader_path(target.arch).parent / "MUSL_VERSION"
    return "musl " + (stamp.read_text().strip() if stamp.exists() else "?")


def _unresolved_by_loader(exe: Path, lib_dirs: list[str], target: Target) -> list[str]:
    """Symbols `exe` and the tree's shared libraries require that neither they nor the loader provide."""
    provided, required = dynamic_symbols(musl_loader.loader_path(target.arch))[0], set()
    libs = (p for d in lib_dirs for p in Path(d).iterdir() if ".so" in p.name and p.is_file() and not p.is_symlink())
    for path in [exe, *libs]:
        try:
            exported, needs = dynamic_symbols(path)
        except (OSError, ELFError):
            continue
        provided |= exported
        required |= needs
    return sorted(required - provided)


def _smoke_runs(root: Path, target: Target, report: VerifyReport, box: Sandbox, timeout: float) -> list[SmokeRun]:
    candidates = [a for a in report.artifacts
                  if a["ok"] and a["kind"] == "executable" and "(" not in a["path"] and is_testlike(a["path"])]
    runs: list[SmokeRun] = []
    prefix, why_not = qemu_command(target)
    lib_dirs = sorted({str((root / a["path"]).parent) for a in report.artifacts
                       if a["ok"] and a["kind"] == "shared_library" and "(" not in a["path"]})
    log_dir = root / ".xbuild-verify"
    for a in candidates[:MAX_SMOKE_RUNS]:
        exe = root / a["path"]
        run = SmokeRun(path=a["path"], command=[str(exe)])
        if prefix is None:
            run.skipped = why_not
            runs.append(run)
            continue
        argv = list(prefix)
        if a.get("linkage") == "dynamic":
            sysroot, why = loader_root(target)
            if sysroot is None:
                run.skipped = why
                runs.append(run)
                continue
            if target.libc == "musl":
                missing = _unresolved_by_loader(exe, lib_dirs, target)
                if missing:
                    run.skipped = (f"needs {', '.join(missing[:4])}, which the cached musl loader "
                                   f"({_musl_version(target)}) lacks: zig links against a newer musl")
                    runs.append(run)
                    continue
            argv += ["-L", str(sysroot)]
        argv += ["-E", "LD_LIBRARY_PATH=" + ":".join(lib_dirs)] if lib_dirs else []
        argv.append(str(exe))
        run.command = argv
        env = {"PATH": "/usr/bin:/bin", "HOME": str(exe.parent), "LC_ALL": "C"}
        res = box.run(argv, cwd=exe.parent, env=env, log_path=log_dir / (a["path"].replace(os.sep, "_") + ".log"),
                      limits=Limits(timeout_s=timeout, max_output_bytes=4 << 20))
        run.exit_code, run.stopped, run.duration_s = res.returncode, res.stopped, round(res.duration_s, 3)
        run.passed = res.ok
        text = Path(res.log_path).read_text(errors="replace").splitlines()
        run.output_tail = "\n".join(text[2:][-8:])
        run.needs_arguments = not run.passed and is_usage_message(res.returncode, text[2:])
        runs.append(run)
    return runs


_USAGE = re.compile(r"^\s*(usage|Usage|USAGE)\b|\busage: ")
_CRASH = re.compile(r"qemu: uncaught target signal|Segmentation fault|Illegal instruction|Error relocating|"
                    r"symbol not found|Could not open|Exec format error|core dumped")


def is_usage_message(exit_code: int | None, lines: list[str]) -> bool:
    """A test program run without the arguments its harness passes prints its usage and exits 1, 2 or 64."""
    if exit_code not in (1, 2, 64, 255):
        return False
    text = "\n".join(lines[:20])
    return bool(_USAGE.search(text)) and not _CRASH.search(text)
