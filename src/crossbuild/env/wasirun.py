"""`target-run` for WebAssembly: one WASI preview 1 command run by wasmtime (its Python package), as `wasmtime run
--dir .` would: its arguments, the caller's environment and standard streams, and two folders preopened, the
current one (for relative paths) and the workspace (for the absolute paths a build writes into its tests), nothing
else of the file system and no network (preview 1 has none). The exit status is the program's own; a trap (the
module's abort, an out-of-bounds access) prints wasmtime's message and exits 134, as an abort would. With
CROSSBUILD_WASIRUN_RECORD set (a path with %d), each run leaves an empty file there named by its process id, as
qemu's QEMU_LOG_FILENAME does: the verifier's evidence that a test started a target program.

A standalone script, run as `python -I -S wasirun.py WASMTIME_SITE WORKSPACE PROGRAM ARGS...`: copied into the
workspace's .xbuild/ like zigwrap, importing nothing of crossbuild's."""

import os
import sys

TRAP_STATUS = 134
RECORD = "CROSSBUILD_WASIRUN_RECORD"


def _leave_record() -> None:
    """An empty file named by this process at RECORD's path, made new (never one already there, never through a
    link); a run without the folder still runs."""
    pattern = os.environ.get(RECORD)
    if not pattern or "%d" not in pattern:
        return
    try:
        os.close(os.open(pattern.replace("%d", str(os.getpid()), 1),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except OSError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print("usage: wasirun.py WASMTIME_SITE WORKSPACE PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    site, workspace, program, args = argv[1], argv[2], argv[3], argv[4:]
    sys.path.insert(0, site)
    import wasmtime  # noqa: PLC0415 - found through SITE, which only the caller knows

    engine = wasmtime.Engine()
    try:
        module = wasmtime.Module.from_file(engine, program)
    except (wasmtime.WasmtimeError, OSError) as e:
        print(f"wasirun: {program}: not a WebAssembly module wasmtime can run: {e}", file=sys.stderr)
        return 126
    config = wasmtime.WasiConfig()
    _leave_record()
    config.argv = [program, *args]
    config.env = [(k, v) for k, v in os.environ.items() if k != RECORD]
    config.inherit_stdin()
    config.inherit_stdout()
    config.inherit_stderr()
    config.preopen_dir(".", ".")
    if os.path.isdir(workspace):
        config.preopen_dir(workspace, workspace)
    store = wasmtime.Store(engine)
    store.set_wasi(config)
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    try:
        instance = linker.instantiate(store, module)
        start = instance.exports(store).get("_start")
        if start is None:
            print(f"wasirun: {program} is not a WASI command (no _start)", file=sys.stderr)
            return 126
        start(store)
    except wasmtime.ExitTrap as e:
        return e.code
    except (wasmtime.Trap, wasmtime.WasmtimeError) as e:
        print(f"wasirun: {program}: {e}", file=sys.stderr)
        return TRAP_STATUS
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
