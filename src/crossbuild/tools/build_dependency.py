"""build_dependency: cross-build a library the project needs into the per-target prefix (or reuse the cached one),
and say what the consumer needs to find it."""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import Field

from crossbuild.env import prefix_use
from crossbuild.foundation.targets import Target
from crossbuild.proof.second_build import runs_here
from crossbuild.tools.base import Tool, ToolArgs, ToolFailure, ToolResult
from crossbuild.tools.context import RunContext


class BuildDependencyArgs(ToolArgs):
    name: str = Field(min_length=1, max_length=200,
                      description="What the build asks for: a CMake package (ZLIB, PNG), a pkg-config module "
                                  "(libzstd), a header (zlib.h), or a Debian source package name (debian:zlib).")
    version: str | None = Field(None, max_length=100, description="A Debian version, when a specific one is needed.")


def _build_dependency(ctx: RunContext, args: BuildDependencyArgs, _: None) -> ToolResult:
    if ctx.dependency_builder is None:
        raise ToolFailure("dependencies cannot be built in this session.",
                          hint="build the dependency yourself into the prefix, or disable the feature that needs it")
    start = time.monotonic()
    out = ctx.dependency_builder(ctx, args.name, args.version)
    seconds = time.monotonic() - start  # the whole call, failed or not
    data = {"name": args.name, "source": out.source, "cached": out.cached, "seconds": round(seconds, 3),
            "files": out.files, "consumer": out.consumer, "keep_features": ctx.keep_features,
            "own_files": getattr(out, "own", False)}
    if not out.ok:
        raise ToolFailure(out.message, hint=_after_failure(ctx, args.name), **data)
    ctx.record_dependency(args.name, args.version)
    lines = [out.message, *(f"  {k}: {v}" for k, v in out.consumer.items()),
             "Configure the project again (from a clean build folder for CMake)."]
    return ToolResult(ok=True, message="\n".join(lines), data=data)


def _after_failure(ctx: RunContext, name: str) -> str:
    """What to do when NAME cannot be built: by the last failed configure's diagnosis when it looked for NAME (the
    project's own switch that builds without it, or none: the project requires it), else the general advice."""
    if ctx.keep_features:
        return "the user asked to keep every feature (--keep-features): stop, and report that this dependency cannot " \
               "be built"
    found = ctx.last_diagnosis
    if found and name.lower() in (m.lower() for m in found.get("missing", ())):
        if found.get("switches"):
            return (f"the project builds without it: configure again with "
                    f"{' '.join(s['arg'] for s in found['switches'])} (they govern {found['failed']} at "
                    f"{found['where']}), and report the feature left out with the result")
        return (f"the project requires it: no switch in its files governs {found['failed']} at {found['where']}. "
                f"Fix the dependency's own build (its log is named above), or report that it cannot be built")
    return (f"turn off the optional feature that needs {name} (build_status lists the project's options: look for "
            f"WITH_/ENABLE_/USE_ options named after it), configure again, and report the feature left out with "
            f"the result")


def provide_again(ctx: RunContext, target: Target, prefix: Path) -> str | None:
    """The dependencies this session's build_dependency calls provided, built for TARGET (the build machine, for
    the build-machine check) into PREFIX by the same builder, from the same names: None once all are there (or
    there are none), else why one is not."""
    # what this session asked for, and what the build found without asking in the prefix (shared across runs:
    # it holds earlier runs' dependencies too, which this build's check must not wait for)
    found = prefix_use.used_sources(ctx.prefix, ctx.toolchain.workspace)
    wanted = list(dict.fromkeys([*ctx.dependencies, *((f"debian:{source}", version) for source, version in found)]))
    if not wanted:
        return None
    if ctx.dependency_builder is None:
        return "dependencies cannot be built in this session"
    # their own tests start their programs directly, as the project's do in the check: with crossbuild's musl loader
    sub = RunContext.create(ctx.xbuild / f"deps-{target.name}", target, prefix=prefix, kb=ctx.kb, jobs=ctx.jobs,
                            sandbox_backend="none" if ctx.sandbox.backend == "none" else "auto", watch=ctx.watch,
                            dependency_builder=ctx.dependency_builder, depth=ctx.depth,
                            passthrough={**ctx.toolchain.passthrough, **runs_here(target)})
    for name, version in wanted:
        out = ctx.dependency_builder(sub, name, version)
        if not out.ok:
            return f"{name}: {out.message[:300]}"
    return None


BUILD_DEPENDENCY = Tool(
    name="build_dependency", args=BuildDependencyArgs, run=_build_dependency, idempotent=True,
    description=(
        "Cross-build a dependency (e.g. ZLIB, PNG, absl, OpenSSL, libzstd) for this target and install it into the "
        "per-target prefix, where CMake's find_package and pkg-config find it with no extra flags. Built "
        "dependencies are cached per target and reused in milliseconds. Use it when configure fails because a "
        "library, header or package is missing; never point the build at the host's /usr copies."),
)
