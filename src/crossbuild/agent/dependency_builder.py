"""Cross-building a dependency with the planner itself (recursively, to a depth limit): fetch its source, build it
in its own workspace for the prefix, stage the install, cache it, move it into the per-target prefix."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from crossbuild.agent.budgets import Budgets
from crossbuild.agent.events import Event, EventSink, ignore
from crossbuild.agent.outcome import StopReason
from crossbuild.env import build_tools, debian_headers, dependency_names, prefix_use, recipes, workspace
from crossbuild.env import dependency_cache as deps
from crossbuild.foundation import host, safefs
from crossbuild.models.planner import Planner
from crossbuild.proof.artifacts import scan_tree
from crossbuild.proof.partial_suite import tests_alone_failed
from crossbuild.tools.context import RunContext
from crossbuild.trace.store import Trace

MAX_DEPTH = 2
# how a dependency's own build can end that the same inputs would end the same way again (not a time limit, a
# cancellation or a model's error): such a failure is remembered (dependency_cache.remember_failure)
_LASTING = {StopReason.GAVE_UP, StopReason.STUCK, StopReason.BUDGET_STEPS, StopReason.BUDGET_TOOL_CALLS}


@dataclass
class DependencyOutcome:
    ok: bool
    name: str
    source: str
    message: str
    cached: bool = False
    seconds: float = 0.0
    files: int = 0
    consumer: dict[str, str] = field(default_factory=dict)  # what the consumer needs
    own: bool = False  # NAME is the project's own (a target, or the package being built): not a missing dependency
    lasting: bool = False  # a failure the same inputs would repeat (remembered)


class DependencyBuilder:
    """A RunContext's `dependency_builder`; the build_dependency tool calls it with its context."""

    def __init__(self, *, trace: Trace | None = None, on_event: EventSink = ignore,
                 max_depth: int = MAX_DEPTH, user_sources: dict[str, str] | None = None, project: str | None = None):
        self.trace = trace
        self.emit = on_event
        self.max_depth = max_depth
        self.user_sources = dict(user_sources or {})  # name -> local folder or tarball, vouched for by the user
        # the project and the dependencies being built right now: asking for one of them again is a part of the
        # build not finding the project's own files, and waiting for its build lock would wait for ourselves
        self.building: set[str] = {project} if project else set()
        # refusals that depend on more than a dependency's own inputs (the depth it was asked at, a download, a
        # wait cancelled, a failure not remembered); a failure during which one happened, or a command reached its
        # time limit, is not remembered
        self.unsettled = 0
        self.requiring: set[str] = set()  # the dependencies whose own dependencies are being installed first

    def __call__(self, ctx: RunContext, name: str, version: str | None = None) -> DependencyOutcome:
        start = time.monotonic()
        own = _own_target(ctx.root, name)
        if own:
            return DependencyOutcome(False, name, "", (
                f"{name} is the project's own ({own}), not a dependency: the part of the build that needs it "
                "(often a test or example) runs before it exists or looks for it in the wrong place"), own=True)
        try:
            pkg = dependency_names.resolve(name, self.user_sources)
        except dependency_names.UnknownDependencyError as e:
            return DependencyOutcome(False, name, "", str(e))
        if pkg.source in self.building:
            return DependencyOutcome(False, name, pkg.source, (
                f"{name} is provided by {pkg.source}, which is what is being built here: a part of the build (often "
                "its tests or examples) does not find the project's own files; it is not a missing dependency"),
                own=True)
        target = ctx.target.name
        prefix = ctx.prefix
        key = deps.cache_key(target, pkg.source, version)  # once: a local source may change during the build
        entry = deps.lookup(target, pkg.source, version, key=key)
        if entry is None:
            if ctx.depth >= self.max_depth:
                self.unsettled += 1
                return DependencyOutcome(False, name, pkg.source, f"dependency depth limit ({self.max_depth}) "
                                         f"reached: {pkg.source} is needed {ctx.depth} levels down")
            inputs = self._inputs(ctx)
            if before := _failed_before(ctx, name, pkg.source, key, inputs):
                return before
            ctx.watch.note(f"{pkg.source}: waiting for its build lock (another run may be building it)")
            try:
                with deps.build_lock(target, pkg.source, until=ctx.cancel.is_set):
                    entry = deps.lookup(target, pkg.source, version, key=key)  # built by a concurrent run meanwhile
                    if entry is None:
                        if before := _failed_before(ctx, name, pkg.source, key, inputs):  # a concurrent run's
                            return before
                        self.building.add(pkg.source)
                        marks = (self.unsettled, ctx.watch.time_limits_hit)
                        try:
                            built = self._build(ctx, pkg, version, start, key)
                        finally:
                            self.building.discard(pkg.source)
                        if isinstance(built, DependencyOutcome):
                            if built.lasting and (self.unsettled, ctx.watch.time_limits_hit) == marks:
                                deps.remember_failure(target, pkg.source, key, inputs, built.message,
                                                      time.monotonic() - start)
                            else:  # nor is a failure of any build that needed this one
                                self.unsettled += 1
                            return built
                        entry = built
                        cached = False
                    else:
                        cached = True
            except host.GaveUpWaiting:
                self.unsettled += 1
                return DependencyOutcome(False, name, pkg.source, f"cancelled while another run was building "
                                                                   f"{pkg.source} for {target}")
        else:
            cached = True
        needed = self._requirements(ctx, entry)
        if needed is not None:
            return needed
        copy_start = time.monotonic()
        ctx.watch.note(f"{pkg.source}: {'reused from the dependency cache, ' if cached else ''}installing into the "
                       f"prefix")
        done = deps.Installed() if deps.installed(prefix, entry) else deps.install_report(entry, prefix)
        files = done.copied
        consumer = _consumer(pkg, prefix)
        seconds, copy_s = time.monotonic() - start, time.monotonic() - copy_start
        how = "reused from the cache" if cached else f"built in {entry.build_s:.0f}s"
        rejected = [*entry.rejected, *done.rejected]
        left_out = (f"; left out, as its build or the prefix made them unsafe: {'; '.join(rejected[:5])}"
                    + (f" and {len(rejected) - 5} more" if len(rejected) > 5 else "")) if rejected else ""
        own = f"; its own tests on the target: {entry.own_tests}" if entry.own_tests else ""
        return DependencyOutcome(True, name, pkg.source, f"{pkg.source} for {target} is in the prefix {prefix} "
                                 f"({how}; {files} files copied into the prefix in {copy_s:.2f}s; {seconds:.1f}s "
                                 f"in all{left_out}){own}", cached=cached,
                                 seconds=seconds, files=files, consumer=consumer)

    def _requirements(self, ctx: RunContext, entry: deps.CachedDependency) -> DependencyOutcome | None:
        """Install first what ENTRY's own build used from the prefix (its `requires`: a cached libxml2 needs the
        liblzma its shared library was linked with, wherever it is installed), through this builder: from the cache,
        or built. None once they are in the prefix; else why one could not be had."""
        have = {r.source for r in deps.recorded(ctx.prefix)}
        for source, version in entry.requires:  # Debian sources: a prefix records no local one (prefix_use)
            # the project or a dependency being built right now provides it itself, once built
            if source in have or source == entry.source or source in self.requiring or source in self.building:
                continue
            self.requiring.add(entry.source)
            try:
                out = self(ctx, f"debian:{source}", version)
            finally:
                self.requiring.discard(entry.source)
            if not out.ok:
                return DependencyOutcome(False, entry.source, entry.source, (
                    f"{entry.source} was built with {source} from the prefix, which could not be provided here: "
                    f"{out.message[:400]}"))
        return None

    def _inputs(self, ctx: RunContext) -> dict:
        """How a dependency is asked for, besides its own cache key: what else decides how its build ends."""
        return {"depth": ctx.depth + 1, "max_depth": self.max_depth, "keep_features": ctx.keep_features,
                "passthrough": list(ctx.toolchain.passthrough), "sandbox": ctx.sandbox.backend,
                "user_sources": {n: [p, deps.local_source_state(p)] for n, p in sorted(self.user_sources.items())}}

    def _build(self, ctx: RunContext, pkg: dependency_names.Package, version: str | None, start: float, key: str):
        from crossbuild.agent.loop import Agent

        source = pkg.source if ":" in pkg.source or "/" in pkg.source else f"debian:{pkg.source}"
        if version and source.startswith("debian:"):
            source += f"={version}"
        # inside .xbuild/, which the project's own build cannot write
        tmp = Path(tempfile.mkdtemp(prefix=f"dep-{workspace.safe_label(Path(pkg.source).name)}-", dir=ctx.xbuild))
        try:
            ws = workspace.prepare(source, tmp / "ws", note=ctx.watch.note)
        except workspace.SourceError as e:
            self.unsettled += 1  # a mirror's answer: it may differ next time
            headers = self._headers_only(ctx, pkg, source, version, start, key, tmp, f"cannot get {source}: {e}")
            safefs.remove_tree(ctx.xbuild, tmp.name)
            return headers or DependencyOutcome(False, pkg.source, pkg.source, f"cannot get {source}: {e}")
        stage = tmp / "ws" / "stage"
        sub = RunContext.create(ws.root, ctx.target, prefix=ctx.prefix, kb=ctx.kb, jobs=ctx.jobs,
                                sandbox_backend="none" if ctx.sandbox.backend == "none" else "auto",
                                watch=ctx.watch, dependency_builder=self, install_prefix=ctx.prefix,
                                destdir=stage, depth=ctx.depth + 1, keep_features=ctx.keep_features,
                                passthrough=ctx.toolchain.passthrough)  # the user's extra arguments are the project's
        self.emit(Event("dependency_started", {"source": source, "depth": sub.depth}))
        outcome = Agent(Planner(), sub, source=source, trace=self.trace, on_event=self.emit,
                        budgets=Budgets(max_steps=40), config={"dependency_of": str(ctx.root)}).run()
        staged = stage / str(ctx.prefix).lstrip("/")
        failing = tests_alone_failed(outcome.verify) if not outcome.ok else None
        if not outcome.ok and staged.is_dir() and (kept := installed_files_only(outcome.verify, staged)):
            # a header-only library or a package of CMake modules: nothing was built, so nothing is for the wrong
            # machine; what it installed is what a consumer needs
            self.emit(Event("dependency_files_only", {"source": source, "files": kept}))
        elif failing and staged.is_dir():
            # every binary for the target and rebuilt the same; only a few of its own tests failed on the target
            # (OpenSSL's errstr compares musl's messages with the build machine's Perl): the library is what the
            # consumer needs, whose own verdict stands on its own tests; the result says what failed
            self.emit(Event("dependency_tests_failed", {"source": source, "failed": failing}))
        elif not outcome.ok or not staged.is_dir():
            why = outcome.message if not outcome.ok else "it installed nothing into the staging folder"
            failed = (f"cross-building {source} failed ({outcome.stop_reason}): {why[:400]} (run {outcome.run_id}, "
                      f"workspace {ws.root})")
            headers = self._headers_only(ctx, pkg, source, version, start, key, tmp, failed)
            if headers is None:
                timed_out = outcome.verify is not None and any(r.stopped for r in outcome.verify.smoke_runs)
                return DependencyOutcome(False, pkg.source, pkg.source, failed, lasting=not timed_out and (
                    outcome.ok or outcome.stop_reason in _LASTING))
            safefs.remove_tree(ctx.xbuild, tmp.name)
            return headers
        try:
            entry = deps.store(ctx.target.name, pkg.source, version, stage, prefix=ctx.prefix,
                               build_s=time.monotonic() - start, run_id=outcome.run_id, key=key,
                               anchor=tmp,  # made by crossbuild: the build can replace `stage`, not tmp
                               own_tests=_own_tests(outcome.verify, failing),
                               requires=[u for u in prefix_use.used_sources(ctx.prefix, ws.root)
                                         if u[0] != pkg.source])
        except safefs.UnsafePath as e:  # its build made a folder on the staged path a link: nothing is taken
            return DependencyOutcome(False, pkg.source, pkg.source,
                                     f"the staged install of {source} is not a plain folder tree ({e.filename} is "
                                     f"{e.strerror}); nothing was taken (workspace {ws.root})")
        safefs.remove_tree(ctx.xbuild, tmp.name)
        return entry


    def _headers_only(self, ctx: RunContext, pkg: dependency_names.Package, source: str, version: str | None,
                      start: float, key: str, tmp: Path, failed: str):
        """When the Debian source SOURCE could not be cross-built (FAILED says how) and Debian ships its -dev files
        in a package holding headers and no library (Boost's libboost1.74-dev, built with b2): those headers,
        staged in TMP and cached like a build's install; None otherwise."""
        binary = debian_headers.headers_only_binary(pkg.source) if source.startswith("debian:") else None
        if binary is None:
            return None
        ctx.watch.note(f"{pkg.source}: its headers from Debian's {binary} (no library in it to build)")
        stage = tmp / "headers-stage"
        try:
            count = debian_headers.take_headers(binary, stage / str(ctx.prefix).lstrip("/"))
        except (build_tools.ToolError, OSError, subprocess.SubprocessError, ValueError):
            return None
        self.emit(Event("dependency_headers_only", {"source": source, "binary": binary, "files": count}))
        return deps.store(ctx.target.name, pkg.source, version, stage, prefix=ctx.prefix,
                          build_s=time.monotonic() - start, run_id=None, key=key, anchor=tmp,
                          own_tests=f"none: {count} headers taken from Debian's {binary}, which holds no library "
                                    f"({failed[:200]})")


def _failed_before(ctx: RunContext, name: str, source: str, key: str, inputs: dict) -> DependencyOutcome | None:
    """The remembered failure of this very build (dependency_cache.remember_failure), said as such."""
    before = deps.failed_before(ctx.target.name, source, key, inputs)
    if before is None:
        return None
    ago = max(0.0, time.time() - before["at"])
    when = f"{ago / 3600:.1f} h" if ago >= 3600 else f"{ago / 60:.0f} min"
    return DependencyOutcome(False, name, source, (
        f"{before['message']} [remembered: this build failed {when} ago with the same inputs (crossbuild, zig, "
        f"version, options) and is not tried again; `crossbuild deps clear -t {ctx.target.name}` forgets it]"))


_CONSUMED = re.compile(r"\.(h|hh|hpp|hxx|inl|ipp|tcc|pc|cmake)$", re.IGNORECASE)


def _own_tests(report, failing: str | None) -> str | None:
    """What a consumer is told of a dependency's own tests when they did not make it `tested`."""
    if failing:
        return f"{failing} (the library is provided: your project's own tests prove what it uses)"
    if report is not None and report.proof and report.proof != "tested":
        return f"verified `{report.proof}` ({(report.proof_why or '')[:200]})"
    return None


def installed_files_only(report, staged: Path) -> int:
    """When a dependency's verdict refused it only because nothing was built, and its staged install holds files a
    consumer reads (headers, pkg-config and CMake files) and no binary at all (the verifier's own scan, by
    content): how many such files, else 0."""
    if report is None or (report.counts and any(report.counts.values())):
        return 0
    scan = scan_tree(staged)
    if scan.incomplete or scan.artifacts or scan.probe_artifacts or scan.not_binaries or scan.linker_temporaries:
        return 0  # a binary was installed (or something named like one): the verdict's refusal stands
    return sum(1 for e in safefs.walk_files(staged) if stat.S_ISREG(e.st.st_mode) and _CONSUMED.search(e.name))


def _own_target(root: Path, name: str) -> str | None:
    """Where the project defines NAME itself, or None: a library or executable in its CMake files, or a header it
    ships outside the folders that hold copies of other projects (read through safefs: the tree is the build's)."""
    bare = re.sub(r"^-l", "", name)
    if not re.fullmatch(r"[A-Za-z0-9_.+/-]+", bare) or ".." in bare or not safefs.is_dir(root, "src"):
        return None  # no project here (the build-machine check's dependencies have none)
    # a header by its name, or by the name a failed #include gives (`vp` for <vp.h>)
    headers = [bare] if bare.endswith((".h", ".hh", ".hpp", ".hxx")) else [bare + ".h", bare + ".hpp"]
    # not an ALIAS or IMPORTED name for another project's target (benchmark's `add_library(gtest ALIAS GTest::gtest)`)
    target = re.compile(rf"\badd_(library|executable)\s*\(\s*{re.escape(bare)}(?![^)]*\b(ALIAS|IMPORTED)\b)[\s)]",
                        re.IGNORECASE)
    for entry in safefs.walk_files(root / "src", prune=lambda rel: rel.count("/") > 4):
        if not stat.S_ISREG(entry.st.st_mode):
            continue
        if any(_ships(entry.rel, h) for h in headers) and not recipes.VENDORED.search(entry.rel):
            return f"src/{entry.rel}"
        if entry.name != "CMakeLists.txt" or "/" in bare or "." in bare:
            continue
        try:
            with os.fdopen(safefs.open_regular_at(entry.dir_fd, entry.name, max_bytes=1 << 20), "rb") as f:
                text = f.read(1 << 20).decode(errors="replace")
        except OSError:
            continue
        if target.search(text):
            return f"src/{entry.rel}"
    return None


def _ships(rel: str, header: str) -> bool:
    """Whether the file REL is HEADER as an #include names it. A header in a folder named after it (spdlog's
    include/spdlog/fmt/fmt.h, a wrapper that includes the real fmt) belongs to that library, not to the project."""
    if rel != header and not rel.endswith("/" + header):
        return False
    return "/" in header or Path(rel).parent.name.lower() != Path(header).stem.lower()


def _consumer(pkg: dependency_names.Package, prefix: Path) -> dict[str, str]:
    out = {"prefix": str(prefix), "include": str(prefix / "include"), "lib": str(prefix / "lib")}
    if pkg.cmake:
        out["cmake"] = f"find_package({pkg.cmake}) finds it through the toolchain file (or -D{pkg.cmake}_ROOT={prefix})"
    if pkg.pkg_config:
        out["pkg_config"] = f"pkg-config {pkg.pkg_config} (PKG_CONFIG_LIBDIR already points at the prefix)"
    return out
