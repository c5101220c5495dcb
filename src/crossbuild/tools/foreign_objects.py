"""Stop a build command that compiles for the build machine instead of the target.

A build system that ignores CC/CXX and the toolchain file (Qt 5's own configure takes the host's g++ mkspec) compiles
everything with the build machine's compiler: the verdict refuses the result, but only after the whole build, an
hour for a large project, and again in every project that needs it. While a command runs, this watch looks at the
object files written since it started (their ELF header alone); once many were written and not one is for the
target, it stops the command and says so. Objects for the build machine are normal (generators a build runs,
CC_FOR_BUILD): only a command with no target object at all among many, after minutes, is stopped.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from crossbuild.foundation import safefs
from crossbuild.foundation.targets import Target
from crossbuild.proof.binary_formats import object_machine

STOPPED = "wrong_machine"  # RunResult.stopped when this watch stopped the command
_SKIPPED_TOP = {".xbuild", ".scratch"}  # crossbuild's own files; the builds' HOME and caches
_OBJECT_SUFFIXES = (".o", ".obj", ".lo")


class ForeignObjectWatch:
    """Sandbox.run's stop condition for one command in the workspace ROOT, building for TARGET."""

    # a generator a build compiles for the build machine first (mruby's own mrbc, ~150 objects) comes before the
    # target's objects: only a command that wrote many objects, for minutes, and none for the target, is stopped
    first_look_s = 600.0
    every_s = 60.0
    enough = 200
    max_files = 200_000  # entries walked per look

    def __init__(self, root: Path, target: Target):
        self.root, self.target = root, target
        self.started = time.time()
        self._next = time.monotonic() + self.first_look_s
        self.finding: str | None = None

    def __call__(self) -> str | None:
        if self.finding or time.monotonic() < self._next:
            return STOPPED if self.finding else None
        self._next = time.monotonic() + self.every_s
        machines: dict[str, list[str]] = {}
        for n, entry in enumerate(safefs.walk_files(self.root, prune=lambda rel: rel in _SKIPPED_TOP)):
            if n >= self.max_files:
                break
            if not entry.name.endswith(_OBJECT_SUFFIXES) or not stat.S_ISREG(entry.st.st_mode) \
                    or entry.st.st_mtime < self.started:
                continue
            try:
                with os.fdopen(safefs.open_regular_at(entry.dir_fd, entry.name), "rb") as f:
                    machine = object_machine(f.read(64))
            except OSError:
                continue
            if machine == self.target.machine:
                return None  # the target's compiler is in use: whatever else is built, not this watch's case
            if machine is not None:
                machines.setdefault(machine, []).append(entry.rel)
        if sum(len(v) for v in machines.values()) < self.enough:
            return None
        machine, paths = max(machines.items(), key=lambda kv: len(kv[1]))
        self.finding = (f"the build compiles for {machine}, not for {self.target.name} ({self.target.machine}): "
                        f"{sum(len(v) for v in machines.values())} object files written since this command "
                        f"started, none for the target (e.g. {paths[0]}); its build system did not take the cross "
                        f"compiler (CC/CXX, the toolchain file, --host): configure it for the target with its own "
                        f"cross-compiling options, or report it")
        return STOPPED
