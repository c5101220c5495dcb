"""RunContext: everything one run's tools need — workspace, target, toolchain, sandbox, knowledge base, limits.
Passed explicitly; nothing global, so two runs in one process never share state."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from crossbuild.env import sandbox as sandbox_mod
from crossbuild.env.sandbox import Limits, Sandbox
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation.progress import Watch
from crossbuild.foundation.targets import Target

HISTORY = "commands.jsonl"  # in .xbuild/, which builds cannot write
EDITS = "edited.txt"  # files the agent's own file tools changed, one workspace-relative path per line
DEPENDENCIES = "dependencies.jsonl"  # the dependencies build_dependency put into the prefix: {"name", "version"}
MAX_HISTORY_BYTES = 16 << 20


def _read_lines(path: Path) -> list[str]:
    """The lines of a record crossbuild keeps in .xbuild/ (bounded, never through a link; none when absent)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    with os.fdopen(fd) as f:
        return f.read(MAX_HISTORY_BYTES).splitlines()


def _append_line(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "a") as f:
        f.write(line + "\n")


def _load_edits(path: Path) -> list[str]:
    return list(dict.fromkeys(line for line in _read_lines(path) if line))


def _load_dependencies(path: Path) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    for line in _read_lines(path):
        try:
            entry = json.loads(line)
            asked = (str(entry["name"]), None if entry.get("version") is None else str(entry["version"]))
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # a line cut by a crash
        if asked not in out:
            out.append(asked)
    return out


def _load_history(path: Path) -> list[CommandRecord]:
    out = []
    for line in _read_lines(path):
        try:
            out.append(CommandRecord(**json.loads(line)))
        except (ValueError, TypeError):
            continue  # a line cut by a crash
    return out


class KnowledgeSearch(Protocol):
    def search(self, query: str, limit: int = 5) -> list[Any]: ...


@dataclass
class CommandRecord:
    """One run_command call, for build_status and the agent's no-progress checks."""

    argv: list[str]
    cwd: str
    exit_code: int | None
    stopped: str | None
    log: str
    duration_s: float
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class RunContext:
    root: Path  # the workspace: src/ (the project), build/, .xbuild/ (generated toolchain files, logs)
    target: Target
    toolchain: Toolchain
    sandbox: Sandbox
    kb: KnowledgeSearch | None = None
    command_limits: Limits = field(default_factory=Limits)
    jobs: int = field(default_factory=lambda: os.cpu_count() or 2)  # parallel build jobs for recipes
    cancel: threading.Event = field(default_factory=threading.Event)
    commands: list[CommandRecord] = field(default_factory=list)
    install_prefix: Path | None = None  # where the project installs (a dependency: the per-target prefix)
    destdir: Path | None = None  # staged install (DESTDIR) of a dependency, moved into the prefix afterwards
    # (ctx, name, version) -> outcome: the agent layer's planner-driven dependency builds
    dependency_builder: Callable[[RunContext, str, str | None], Any] | None = None
    depth: int = 0  # 0 for the project, 1 for its dependencies, ...
    keep_features: bool = False  # a dependency that cannot be had ends the build instead of its feature being dropped
    kb_attached: list[str] = field(default_factory=list)  # entry|actions already shown in this session
    last_verdict: dict | None = None  # the verify tool's last verdict: build_status shows it
    # the last failed configure's diagnosis (Diagnosis.to_dict()): a dependency that cannot be built is answered with
    # the project's own switch that builds without it
    last_diagnosis: dict | None = None
    edited: list[str] = field(default_factory=list)  # what write_file/edit_file changed (the clean rebuild keeps it)
    # (name, version) of each dependency build_dependency provided: the build-machine check provides them again
    dependencies: list[tuple[str, str | None]] = field(default_factory=list)
    _log_seq: itertools.count = field(default_factory=lambda: itertools.count(1), repr=False)
    _path_locks: defaultdict[str, threading.Lock] = field(default_factory=lambda: defaultdict(threading.Lock),
                                                           repr=False)
    _locks_guard: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _layer_made: bool = field(default=False, repr=False)
    _layer_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def create(cls, root: str | Path, target: Target, *, prefix: str | Path | None = None,
               sandbox_backend: str = "auto", kb: KnowledgeSearch | None = None,
               command_limits: Limits | None = None, jobs: int | None = None,
               cancel: threading.Event | None = None, watch: Watch | None = None,
               dependency_builder: Callable[[RunContext, str, str | None], Any] | None = None,
               install_prefix: Path | None = None, destdir: Path | None = None, depth: int = 0,
               keep_features: bool = False, extra_args: Mapping[str, tuple[str, ...]] | None = None,
               passthrough: Mapping[str, str] | None = None) -> RunContext:
        """Materialise the toolchain under ROOT/.xbuild and pick the sandbox for it: the context is complete here,
        nothing is set on it afterwards (but the zig cache layer, made by the first command: `ready_to_build`)."""
        root = Path(root).resolve()
        root.mkdir(parents=True, exist_ok=True)
        tc = Toolchain.for_target(target, root, prefix=prefix, extra_args=extra_args,
                                  passthrough=passthrough).materialise(layer=False)
        Path(tc.prefix).mkdir(parents=True, exist_ok=True)
        box = sandbox_mod.for_toolchain(tc, backend=sandbox_backend)
        box.watch = watch or Watch(cancel=cancel)  # a dependency's build is watched by the call that asked for it
        return cls(root=root, target=target, toolchain=tc, sandbox=box, kb=kb,
                   command_limits=command_limits or Limits(), jobs=jobs or os.cpu_count() or 2,
                   cancel=box.watch.cancel, dependency_builder=dependency_builder,
                   install_prefix=install_prefix, destdir=destdir, depth=depth, keep_features=keep_features,
                   commands=_load_history(tc.xbuild / HISTORY), edited=_load_edits(tc.xbuild / EDITS),
                   dependencies=_load_dependencies(tc.xbuild / DEPENDENCIES))

    def ready_to_build(self) -> None:
        """Make the toolchain's zig cache layer once, before this context's first sandboxed command: a context
        that only reads (most MCP sessions' first calls, most tool tests) never pays for it."""
        with self._layer_lock:
            if not self._layer_made:
                self.toolchain.make_layer()
                self._layer_made = True

    @property
    def install_dir(self) -> Path:
        """Where this build's install puts its files: the staged prefix of a dependency (DESTDIR + prefix), else
        the workspace's install/."""
        if self.destdir is not None and self.install_prefix is not None:
            return self.destdir / str(self.install_prefix).lstrip("/")
        return self.root / "install"

    @property
    def watch(self) -> Watch:
        """Who watches this context's work (its commands, verify's phases) and can cancel it."""
        return self.sandbox.watch

    @property
    def prefix(self) -> Path:
        return Path(self.toolchain.prefix).resolve()

    @property
    def xbuild(self) -> Path:
        return self.root / ".xbuild"

    def next_log(self, stem: str) -> Path:
        """A fresh log file under .xbuild/logs/ (numbered, so every command's full output stays on disk; a reopened
        workspace continues after the logs it already has)."""
        used = {name[:5] for name in os.listdir(self.toolchain.logs)}  # a number is used once, whatever the stem
        while True:
            number = f"{next(self._log_seq):04d}-"
            if number not in used:
                return self.toolchain.logs / f"{number}{stem}.log"

    def record(self, command: CommandRecord) -> None:
        """Keep a command in this run's history and in the workspace's (so a reopened workspace, e.g. after an MCP
        reconnect, still knows every step a clean rebuild must replay)."""
        self.commands.append(command)
        _append_line(self.xbuild / HISTORY, json.dumps(dataclasses.asdict(command)))

    def record_edit(self, real_path: Path) -> None:
        """A file the agent wrote: the clean rebuild lays it over the pristine source (kept in the workspace too,
        so a reopened workspace still knows it)."""
        rel = str(real_path.relative_to(self.root))
        if rel in self.edited:
            return
        self.edited.append(rel)
        _append_line(self.xbuild / EDITS, rel)

    def record_dependency(self, name: str, version: str | None) -> None:
        """A dependency build_dependency put into the prefix (kept in the workspace too, for a reopened one)."""
        if (name, version) in self.dependencies:
            return
        self.dependencies.append((name, version))
        _append_line(self.xbuild / DEPENDENCIES, json.dumps({"name": name, "version": version}))

    def path_lock(self, real_path: Path) -> threading.Lock:
        """Calls that touch the same file are serialised by a lock per real path."""
        with self._locks_guard:
            return self._path_locks[str(real_path)]
