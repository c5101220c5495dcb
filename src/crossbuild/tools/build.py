"""Tools that let an outside agent finish the job itself: build_status (where the build stands, and the toolchain
arguments to use) and verify (the foundation's verifier: right architecture, test programs pass under qemu)."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from pydantic import Field

from crossbuild.env import debian_rules, ninja_targets, recipes
from crossbuild.env.recipes import BuildStep
from crossbuild.foundation.targets import Target
from crossbuild.proof.artifacts import check_artifact
from crossbuild.proof.rebuild_check import scan_outputs
from crossbuild.proof.verify import VerifyReport, verify
from crossbuild.tools import paths
from crossbuild.tools.base import BadArguments, ErrorType, Tool, ToolArgs, ToolResult
from crossbuild.tools.build_dependency import provide_again
from crossbuild.tools.command import INSPECTION_TOOLS
from crossbuild.tools.context import RunContext
from crossbuild.tools.knowledge import attach_knowledge
from crossbuild.tools.project_facts import (
    cache_not_found,
    choice_options,
    cmake_projects,
    config_scripts,
    configure_options,
    declared_options,
    make_conditional_rules,
    make_cross_switches,
    make_goals,
    meson_options,
    project_options,
    test_variables,
)


def replay_steps(ctx: RunContext) -> list[BuildStep]:
    """The successful commands of this run that changed something, in order: what a clean rebuild replays."""
    return [BuildStep(tuple(c.argv), c.cwd, env=tuple(sorted(c.env.items()))) for c in ctx.commands
            if c.exit_code == 0 and not c.stopped and Path(c.argv[0]).name not in INSPECTION_TOOLS]


class BuildStatusArgs(ToolArgs):
    system: str | None = Field(None, description="Show the recipe of this build system instead of the one detected "
                                                 f"({' | '.join(recipes.BUILD_SYSTEMS)}), e.g. when a project ships "
                                                 "both CMake and its own configure.")


def _build_status(ctx: RunContext, args: BuildStatusArgs, _: None) -> ToolResult:
    source = recipes.find_root(ctx.root)  # src/, or the folder below it that holds the project's build
    src = ctx.root / source
    if args.system is not None and args.system not in recipes.BUILD_SYSTEMS:
        raise BadArguments(f"unknown build system {args.system!r}.",
                           hint=f"choose one of {', '.join(recipes.BUILD_SYSTEMS)}")
    if args.system and not recipes.present(args.system, src):
        raise BadArguments(f"{source}/ has no {args.system} build files.",
                           hint=f"the project's build system is {recipes.detect_or_none(src) or 'unknown'}")
    try:
        system = args.system or recipes.detect(src)
    except recipes.NoBuildSystemError:
        system = "none found (no CMakeLists.txt, meson.build, configure.ac, configure or Makefile in src/)"
    tc = ctx.toolchain
    build = ctx.root / "build"
    state = []
    for marker, what in (("CMakeCache.txt", "CMake configured"), ("build.ninja", "Ninja files generated"),
                         ("config.status", "configure has run"), ("Makefile", "Makefile present")):
        for where in (build, src):
            if (where / marker).exists():
                state.append(f"{what} ({paths.display(ctx, where / marker)})")
    others = [s for s in recipes.BUILD_SYSTEMS if s != system and recipes.present(s, src)]
    rules = debian_rules.read(ctx.root)
    lines = [
        f"target: {ctx.target.name} (zig {ctx.target.zig_target}; qemu: {ctx.target.qemu or 'none'})",
        f"build system in {source}/: {system}" + ("" if source == "src" else
                                                   "  (src/ itself has no build system; this is the project's root)"),
        *([f"  also present: {', '.join(others)} (build_status system=NAME shows that recipe)"] if others else []),
        *([f"debian/rules (Debian's own build of this source): {rules.describe()}"] if rules else []),
        f"state: {'; '.join(state) or 'not configured yet'}",
    ]
    recipe = []
    if system in recipes.BUILD_SYSTEMS:
        recipe = [{"argv": list(s.argv), "cwd": s.cwd, "phase": s.phase, "env": dict(s.env)}
                  for s in recipes.steps_for(system, tc, source=source, jobs=ctx.jobs,
                                             install_prefix=ctx.install_prefix, destdir=ctx.destdir)]
    # one command line per step, the one the recipe runs: CC, CXX, PKG_CONFIG and CMAKE_TOOLCHAIN_FILE come from
    # every command's environment, and the arguments shown are all a step needs beside them
    lines.append(f"recipe ({system}; each step one run_command call, the toolchain already in its environment: "
                 "CC, CXX, PKG_CONFIG, CMAKE_TOOLCHAIN_FILE, CONFIG_SITE):")
    lines += [f"  {r['phase']}: {shlex.join(r['argv'])}" + (f"   (cwd {r['cwd']})" if r["cwd"] != "." else "")
              for r in recipe]
    lines.append(f"  dependencies go into the per-target prefix {ctx.prefix}")
    for other, argv in (("meson", ["meson", "setup", "build", source, *tc.meson_args()]),
                        ("autotools", [f"../{source}/configure", *tc.configure_args()]),
                        ("configure", [f"../{source}/configure", *tc.configure_args()])):
        if other in others and not (other == "configure" and "autotools" in others):
            lines.append(f"  for {other} instead: {shlex.join(argv)}" + ("   (cwd build)" if other != "meson" else
                                                                          ""))
    if ctx.commands:
        lines.append(f"commands so far ({len(ctx.commands)}; last 10):")
        for c in ctx.commands[-10:]:
            status = c.stopped or f"exit={c.exit_code}"
            lines.append(f"  [{status}] {shlex.join(c.argv)} (cwd {c.cwd}; log {c.log})")
    artifacts = fitting = 0
    if build.is_dir():
        scan = scan_outputs(build, ctx.toolchain)
        linked = [a for a in scan.artifacts if a.kind in ("executable", "shared_library", "static_library")]
        artifacts = len(linked)
        fitting = sum(1 for a in linked if not check_artifact(a, ctx.target))
        lines.append(f"linked artifacts in build/: {artifacts} ({fitting} for {ctx.target.name})")
    lines += _next(ctx, artifacts)
    options, choices = project_options(ctx.root), choice_options(ctx.root)
    if options:
        lines.append(f"project options (CMake cache): {', '.join(f'{k}={v}' for k, v in options.items())[:1500]}")
    elif system == "cmake" and (declared := declared_options(ctx.root, source)):
        lines.append("project options (declared in its CMake files, defaults shown; the cache holds their values "
                     f"after configure): {', '.join(f'{k}={v}' for k, v in declared.items())[:1500]}")
        options = declared
    if choices:
        lines.append("project choices (CMake cache): " + "; ".join(
            f"{k}={c['value']!r} ({c['help'][:80]})" for k, c in choices.items())[:1500])
    goals = make_goals(ctx.root, source) if system in ("make", "configure") else None
    cross = make_cross_switches(ctx.root, source) if system in ("make", "configure", "autotools") else []
    if cross:
        lines.append(f"the Makefile's own switch for cross-building: make {' '.join(cross)}")
    behind = make_conditional_rules(ctx.root, source) if system in ("make", "configure") else {}
    if behind:
        lines.append("rules the Makefile has only when a variable is set: " + "; ".join(
            f"{target} (make {switch})" for target, switch in behind.items())[:600])
    switches = configure_options(ctx.root, source) if system in ("autotools", "configure") else {}
    if switches:
        lines.append(f"configure can turn off: {' '.join(sorted(switches.values()))[:1000]}")
    meson = meson_options(ctx.root, source) if system == "meson" else {}
    if meson:
        lines.append(f"meson options that turn features off: {' '.join(sorted(meson.values()))[:1000]}")
    if goals:
        lines.append(f"make's default goal `{goals['default']}` builds: {' '.join(goals['prerequisites'])[:600]}")
    not_found = cache_not_found(ctx.root) if system == "cmake" else []
    if not_found:
        lines.append(f"lookups the CMake cache records as failed: {' '.join(not_found)[:600]}")
    targets = ninja_targets.cmake_targets(ctx.root) if system == "cmake" else []
    if targets:
        lines.append("CMake targets (cmake --build build --target NAME...): "
                     + " ".join(t["name"] for t in targets)[:600])
    return ToolResult(ok=True, message="\n".join(lines),
                      data={"options": options, "choice_options": choices, "configure_options": switches,
                            "meson_options": meson, "cmake_targets": targets,
                            "cmake_projects": cmake_projects(ctx.root) if system == "cmake" else [],
                            "test_variables": test_variables(ctx.root, source) if system == "cmake" else [],
                            "not_found": not_found,
                            "make_goals": goals, "make_cross_switches": cross, "make_conditional_rules": behind,
                            "build_system": system, "other_build_systems": others, "state": state,
                            "debian_rules": {**dataclasses.asdict(rules), "system": rules.system} if rules else None,
                            "debian_files": _debian_files(rules, ctx.target),
                            "commands": len(ctx.commands), "config_scripts": config_scripts(ctx.root, source),
                            "artifacts": artifacts, "artifacts_for_target": fitting,
                            "output_dir": recipes.output_dir(system, source=source) if recipe else "build",
                            "recipe": recipe, "source_dir": source,
                            "cmake_args": tc.cmake_args(), "meson_args": tc.meson_args(),
                            "configure_args": tc.configure_args(), "workspace": str(ctx.root)})


def debian_host_variables(target: Target) -> dict[str, str]:
    """Debian's host-architecture variables as debian/rules would see them cross-building for TARGET (musl and
    Windows have no Debian multiarch triple of their own: the toolchain's triple stands in)."""
    triple = target.gnu_triple if target.libc == "glibc" else target.autotools_host
    return {"DEB_HOST_MULTIARCH": triple, "DEB_HOST_GNU_TYPE": triple, "DEB_HOST_ARCH": target.debian_arch}


def _debian_files(rules: debian_rules.DebianRules | None, target: Target) -> dict[str, str]:
    """The files debian/rules writes, keyed by their workspace path (as write_file takes it): debian/rules runs in
    src/, so its paths are below it."""
    if rules is None:
        return {}
    return {f"src/{path}": text for path, text in rules.files_written(debian_host_variables(target)).items()}


def _next(ctx: RunContext, artifacts: int) -> list[str]:
    """The last verdict this session gave, and what is left to do."""
    last = ctx.last_verdict
    if last is None:
        return ["next: call verify when the build has finished" if artifacts else
                "next: configure and build into build/"]
    if last["ok"]:
        return [f"last verdict ({last['path']}): VERIFIED, proof level {last['proof']}",
                "next: nothing is left; verify again after any change"]
    return [f"last verdict ({last['path']}): NOT VERIFIED, proof level {last['proof']}: "
            + "; ".join(last["reasons"][:3])[:600],
            "next: fix those reasons, build again, and call verify"]


class VerifyArgs(ToolArgs):
    path: str = Field("build", description="Folder to judge, relative to the workspace (the build folder, or an "
                                           "install folder).")
    run_tests: bool = Field(True, description="Run test-like programs under qemu (smoke runs).")
    timeout: int = Field(60, ge=1, le=600, description="Seconds each test program may run natively (a test of "
                                                       "the project's harness, often a whole suite: at least 150); "
                                                       "under qemu the limit is multiplied by the emulator's "
                                                       "measured slowdown.")
    rebuild: bool = Field(False, description="Also replay this session's successful commands on a fresh copy of src/ "
                                             "and require the same artifacts (slow: a second full build).")
    build_machine_check: bool = Field(
        False, description="When test programs ran and failed without crashing and nothing else fails: replay this "
                           "session's commands for the build machine too (x86_64, same compiler) and run them there. "
                           "One that fails the same way there is the project's own failure: shown, not counted. "
                           "Implies rebuild; slow (two more full builds). Try your fixes first.")


def _authorize_verify(ctx: RunContext, args: VerifyArgs) -> Path:
    return paths.resolve(ctx, args.path)


def _verify(ctx: RunContext, args: VerifyArgs, real: Path) -> ToolResult:
    rebuild = args.rebuild or args.build_machine_check
    steps = replay_steps(ctx)  # also what the verdict reads for tests switched off
    report = verify(real, ctx.target, toolchain=ctx.toolchain, box=ctx.sandbox, run_tests=args.run_tests,
                    rebuild_steps=(steps or None) if rebuild else None, steps_taken=steps,
                    rebuild_edits=ctx.edited, smoke_timeout_s=args.timeout,
                    build_machine_check=args.build_machine_check,
                    provide_dependencies=lambda target, prefix: provide_again(ctx, target, prefix),
                    install_dir=ctx.install_dir)
    text = report.summary(paths.display(ctx, real))
    ctx.last_verdict = {"path": paths.display(ctx, real), "ok": report.ok, "proof": report.proof,
                        "reasons": report.reasons[:5], "report": report.to_dict()}  # whole, for MCP's resource
    if rebuild and not steps:
        text += "\n  clean rebuild: not run (no successful build commands in this session to replay)"
    data = {"ok": report.ok, "counts": report.counts, "reasons": report.reasons, "proven": report.proven(),
            "proof": report.proof, "proof_counts": report.proof_counts, "proof_why": report.proof_why,
            "linker_temporaries": report.linker_temporaries, "build_tools": report.build_tools,
            "harness": report.harness,
            "smoke_runs": [{"path": r.path, "passed": r.passed, "skipped": r.skipped, "triage": r.triage, "why": r.why,
                            "outcome": r.outcome()}
                           for r in report.smoke_runs],
            "probe_runs": [{"kind": p.kind, "path": p.path, "passed": p.passed, "outcome": p.outcome()}
                           for p in report.probe_runs],
            "rebuild": report.rebuild}
    if report.ok:
        return ToolResult(ok=True, message=text, data=data)
    text, hint = attach_knowledge(ctx, report.failed_output(), text, _verify_hint(report, args), data)
    return ToolResult(ok=False, error_type=ErrorType.NOT_VERIFIED, message=text, data=data, hint=hint)


def _verify_hint(report: VerifyReport, args: VerifyArgs) -> str:
    """The next step for the first kind of reason the verdict gives."""
    if not report.counts or not any(report.counts.values()):
        return "nothing was built in that folder: configure and build into it (build_status shows how), then verify"
    if any(a.get("problems") for a in report.artifacts):
        return ("wrong-architecture files usually mean a host compiler was used (a hard-coded gcc or a CC_FOR_BUILD "
                "helper installed as a product): build with the environment's CC/CXX")
    if report.rebuild and not report.rebuild["ok"]:
        return ("the clean rebuild replays this session's successful commands on a fresh copy of src/: make every "
                "needed change a file edit or a command, not a leftover of an earlier attempt")
    if any(r.stopped == "timeout" for r in report.smoke_runs):
        return (f"a test program ran past its limit ({args.timeout} s times the emulator's slowdown) under qemu: a "
                "timeout is a failure; read its log (does it wait for input or the network?), or call verify with a "
                "larger timeout (at most 600) for a long suite")
    if report.only_tests_failed() and not args.build_machine_check:
        return ("a test program failed under qemu: its output is above; fix the cause (or the build), then verify "
                "again. With no fix left, verify with build_machine_check=true: it shows whether they fail the same "
                "way built for the build machine")
    if any(r.failed for r in report.smoke_runs):
        return "a test program failed under qemu: its output is above; fix the cause (or the build), then verify again"
    return "fix the reasons above, then verify again"


BUILD_STATUS = Tool(
    name="build_status", args=BuildStatusArgs, run=_build_status, read_only=True, idempotent=True,
    description=(
        "Where the build stands: the target, the build system found in src/, whether it is configured, the recipe "
        "(each step's exact command line; the toolchain is already in every command's environment), the project's "
        "options, the commands run so far with their exit codes and logs, how many linked artifacts build/ holds, "
        "and the last verdict. Call it first, and whenever you are unsure what next."),
)
VERIFY = Tool(
    name="verify", args=VerifyArgs, run=_verify, authorize=_authorize_verify, read_only=False, idempotent=True,
    description=(
        "Judge the build like crossbuild does at the end: every binary in the folder must be for the target "
        "(architecture, ABI, libc), at least one executable or library must exist, and the project's tests must pass "
        "on the target under qemu: run by its own harness (ctest, meson test, make check) when the folder has one, "
        "else its test-like programs bare (or fail the same way built for the build machine, with "
        "build_machine_check); optionally a clean "
        "rebuild. Returns VERIFIED or the reasons it is not, and the proof level reached: `tested` (the project's own "
        "test programs ran on the target and passed), `exercised` (no usable tests, but every executable started, "
        "every shared library loaded with its exports resolved and every static library linked whole into a probe "
        "that ran, on the target), `built` (only the architecture checks and the rebuild: nothing ran). The user's "
        "bar is usually `exercised`: a fix that turns the project's tests off can never give `tested`. Your own "
        "claim of success never counts; this does."),
)

