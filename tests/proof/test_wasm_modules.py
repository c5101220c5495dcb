"""WebAssembly (wasm32-wasi): modules read from their bytes, the wrong formats refused, and test programs run by
wasmtime with only the workspace and the current folder preopened. Modules are built by real zig, or written
byte by byte where zig cannot make the bad case (a component, imports left undefined, a truncated section)."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest

from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation import host
from crossbuild.foundation.targets import parse_target
from crossbuild.proof.artifacts import check_artifact, describe_file, scan_tree
from crossbuild.proof.binary_formats import sniff
from tests.proof.test_verify import zcc

WASM = parse_target("wasm32-wasi")


def _uleb(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _name(text: str) -> bytes:
    return _uleb(len(text)) + text.encode()


def _section(ident: int, body: bytes) -> bytes:
    return bytes([ident]) + _uleb(len(body)) + body


def module(imports: list[tuple[str, str]] = (), exports: tuple[str, ...] = ("_start",),
           version: bytes = b"\x01\x00\x00\x00") -> bytes:
    """A module whose functions are all `() -> ()`: IMPORTS (module, name), then one defined function per export."""
    types = _section(1, _uleb(1) + b"\x60\x00\x00")
    imported = _section(2, _uleb(len(imports)) + b"".join(_name(m) + _name(f) + b"\x00\x00" for m, f in imports))
    functions = _section(3, _uleb(len(exports)) + b"\x00" * len(exports))
    exported = _section(7, _uleb(len(exports)) + b"".join(
        _name(e) + b"\x00" + _uleb(len(imports) + i) for i, e in enumerate(exports)))
    code = _section(10, _uleb(len(exports)) + b"".join(b"\x02\x00\x0b" for _ in exports))
    return b"\x00asm" + version + types + (imported if imports else b"") + functions + exported + code


def describe(data: bytes, name: str = "m.wasm"):
    assert sniff(data[:64]) == "wasm"
    return describe_file(io.BytesIO(data), name, "wasm", root=Path("/nonexistent"))[0]


def test_a_wasi_command_fits_and_says_what_it_imports():
    a = describe(module([("wasi_snapshot_preview1", "proc_exit")]))
    assert (a.kind, a.machine, a.needed) == ("executable", "wasm32", ["wasi_snapshot_preview1"])
    assert check_artifact(a, WASM) == []


def test_a_command_with_more_exports_than_are_kept_is_still_a_command():
    a = describe(module(exports=(*(f"f{i}" for i in range(300)), "_start")))
    assert a.kind == "executable" and check_artifact(a, WASM) == []


@pytest.mark.parametrize("data, problem", [
    (module([("env", "png_read_info"), ("wasi_snapshot_preview1", "fd_write")]),
     "imports png_read_info from 'env', which no WASI runtime provides: symbols left undefined at link time"),
    (module(version=b"\x0d\x00\x01\x00"), "a component or an unknown version"),
    (module(exports=("helper",)), "neither _start (a command) nor _initialize (a reactor)"),
    (module()[:-4], "not a sound WebAssembly module"),
    (b"\x00asm\x01\x00\x00\x00\x02\xff\xff\xff\xff\x0f", "not a sound WebAssembly module"),  # a 4 GiB section
])
def test_a_module_no_wasi_runtime_runs_is_refused(data, problem):
    a = describe(data)
    assert any(problem in p for p in check_artifact(a, WASM)), check_artifact(a, WASM)


@pytest.mark.slow
def test_real_modules_fit_and_a_native_program_in_a_wasm_build_is_refused(tmp_path):
    zig = str(host.zig_executable())
    (tmp_path / "lib.c").write_text("int lib(void){return 42;}\n")
    (tmp_path / "main.c").write_text("int lib(void);\nint main(void){return lib() == 42 ? 0 : 1;}\n")
    zcc(zig, "wasm32-wasi", ["main.c", "lib.c", "-o", "prog.wasm"], tmp_path)
    zcc(zig, "wasm32-wasi", ["-c", "lib.c", "-o", "lib.o"], tmp_path)
    subprocess.run([zig, "ar", "rcs", "liblib.a", "lib.o"], cwd=tmp_path, check=True)
    zcc(zig, "x86_64-linux-musl", ["main.c", "lib.c", "-o", "native"], tmp_path)
    found = {a.path: a for a in scan_tree(tmp_path).artifacts}
    assert found["prog.wasm"].kind == "executable" and check_artifact(found["prog.wasm"], WASM) == []
    assert found["lib.o"].kind == "object" and check_artifact(found["lib.o"], WASM) == []
    assert found["liblib.a"].members == 1 and found["liblib.a(lib.o)"].format == "wasm"
    assert check_artifact(found["native"], WASM) == ["ELF file, expected a WebAssembly module for wasm32-wasi"]
    # and the other way: a module in a Linux build
    assert check_artifact(found["prog.wasm"], parse_target("aarch64-linux-musl"))[0].startswith("WASM file")


@pytest.mark.slow
def test_a_test_program_under_wasmtime_sees_the_workspace_and_nothing_else_of_the_host(tmp_path):
    """wasirun (the workspace's target-run): arguments and exit status pass through, relative and workspace paths
    open, a host file outside the workspace neither reads nor is written, a trap exits like an abort."""
    ws = tmp_path / "ws"
    tc = Toolchain.for_target(WASM, ws, prefix=tmp_path / "prefix").materialise()
    outside = tmp_path / "host-secret"
    outside.write_text("secret\n")
    (ws / "build").mkdir(parents=True)
    (ws / "build" / "data.txt").write_text("in the workspace\n")
    (ws / "prog.c").write_text(
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
        "int main(int argc, char **argv){\n"
        "  if (argc > 1 && strcmp(argv[1], \"trap\") == 0) __builtin_trap();\n"
        "  char line[64] = \"\"; FILE *f = fopen(\"data.txt\", \"r\"); if (f) { fgets(line, sizeof line, f); }\n"
        f"  FILE *s = fopen(\"{outside}\", \"r\"); FILE *w = fopen(\"{tmp_path}/planted\", \"w\");\n"
        f"  FILE *a = fopen(\"{ws}/build/written\", \"w\"); if (a) {{ fputs(\"ok\", a); fclose(a); }}\n"
        "  printf(\"read=%s secret=%s plant=%s\\n\", line, s ? \"yes\" : \"no\", w ? \"yes\" : \"no\");\n"
        "  return argc > 1 ? atoi(argv[1]) : 0; }\n")
    zcc(str(host.zig_executable()), "wasm32-wasi", ["prog.c", "-o", "build/prog"], ws)
    run = [str(tc.emulator), str(ws / "build" / "prog")]
    r = subprocess.run([*run, "7"], cwd=ws / "build", capture_output=True, text=True, timeout=120)
    assert r.returncode == 7, r.stderr
    assert r.stdout == "read=in the workspace\n secret=no plant=no\n"
    assert (ws / "build" / "written").read_text() == "ok" and not (tmp_path / "planted").exists()
    r = subprocess.run([*run, "trap"], cwd=ws / "build", capture_output=True, text=True, timeout=120)
    assert r.returncode == 134 and "unreachable" in r.stderr, r.stderr
