"""The verifier on hand-made fixtures: each format, and each way to fool it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from crossbuild.env import zigcache
from crossbuild.foundation import host
from crossbuild.foundation.targets import parse_target
from crossbuild.proof import slowdown
from crossbuild.proof.artifacts import scan_tree
from crossbuild.proof.smoke import is_testlike
from crossbuild.proof.verify import verify

pytestmark = pytest.mark.slow  # fixtures are compiled with real zig

AARCH64 = parse_target("aarch64-linux-musl")


def zcc(zig: str, target: str, args: list[str], cwd: Path) -> None:
    """zig cc with crossbuild's shared cache of TARGET, which other tests warm too (zig's own default cache would
    build each libc again: ~5 min on a fresh machine), holding the lock warm holds while it writes there."""
    shared = host.zig_cache_dir(target)
    if "-c" not in args:  # a program or library links the target's libc
        zigcache.warm(parse_target(target), shared=shared)
    with zigcache.writing(shared):
        r = subprocess.run([zig, "cc", "-target", target, *args], cwd=cwd, capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "ZIG_GLOBAL_CACHE_DIR": str(shared)})
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    zig = str(host.zig_executable())
    d = tmp_path_factory.mktemp("fixtures")
    (d / "lib.c").write_text("int lib(void){return 42;}\n")
    (d / "main.c").write_text("int lib(void);\nint main(void){return lib() == 42 ? 0 : 1;}\n")
    (d / "fail.c").write_text("int main(void){return 3;}\n")
    # what a program prints when it hard-codes a path outside the workspace, which the sandbox does not provide ...
    (d / "fixed.c").write_text('#include <stdio.h>\nint main(void){fprintf(stderr, "cannot open '
                               '/usr/share/xtest/ref.dat: No such file or directory\\n");return 1;}\n')
    # ... and when it cannot find its own data (libarchive's harness): that is no evidence of the sandbox
    (d / "data.c").write_text('#include <stdio.h>\nint main(void){fprintf(stderr, "Unable to locate known reference '
                              'file test_expand.Z.uu\\n");return 1;}\n')
    # ... and a crash that prints a missing file first: a crash always counts
    (d / "crash.c").write_text('#include <stdio.h>\nint main(void){fprintf(stderr, "cannot open data.txt: No such '
                               'file or directory\\n");fflush(stderr);*(volatile int*)0 = 1;return 0;}\n')
    (d / "slow.c").write_text('#include <stdio.h>\nint main(void){puts("round 1 of 1000000");fflush(stdout);'
                              'for(volatile unsigned long i=0;;i++);}\n')
    (d / "hang.c").write_text("int main(void){for(volatile unsigned long i=0;;i++);}\n")
    zcc(zig, "aarch64-linux-musl", ["-c", "lib.c", "-o", "lib-aarch64.o"], d)
    zcc(zig, "aarch64-linux-musl", ["main.c", "lib.c", "-o", "test_ok"], d)
    zcc(zig, "aarch64-linux-musl", ["fail.c", "-o", "test_fails"], d)
    for name in ("fixed", "data", "crash", "slow", "hang"):
        zcc(zig, "aarch64-linux-musl", ["-O1", f"{name}.c", "-o", f"test_{name}"], d)
    zcc(zig, "aarch64-linux-musl", ["-fPIC", "-shared", "lib.c", "-o", "libx.so"], d)
    zcc(zig, "riscv64-linux-musl", ["-c", "lib.c", "-o", "lib-riscv.o"], d)
    zcc(zig, "arm-linux-musleabihf", ["-c", "lib.c", "-o", "lib-armhf.o"], d)
    zcc(zig, "arm-linux-musleabihf", ["main.c", "lib.c", "-o", "armprog"], d)
    # assembly with no code for this machine, as zstd's huf_decompress_amd64.S is on ARM; and a real soft-float object
    (d / "amd64only.S").write_text("#if defined(__x86_64__)\n.text\nf: ret\n#endif\n")
    zcc(zig, "arm-linux-musleabihf", ["-c", "amd64only.S", "-o", "asm-armhf.o"], d)
    zcc(zig, "arm-linux-musleabi", ["-c", "lib.c", "-o", "lib-armsoft.o"], d)
    subprocess.run([zig, "ar", "rcs", "libarmhf.a", "lib-armhf.o", "asm-armhf.o"], cwd=d, check=True)
    zcc(zig, "x86_64-windows-gnu", ["main.c", "lib.c", "-o", "prog.exe"], d)
    zcc(zig, "x86_64-windows-gnu", ["-c", "lib.c", "-o", "lib-win.o"], d)
    zcc(zig, "aarch64-macos", ["-c", "lib.c", "-o", "lib-macos.o"], d)
    subprocess.run(["gcc", "-c", "lib.c", "-o", "lib-host.o"], cwd=d, check=True)
    subprocess.run(["gcc", "main.c", "lib.c", "-o", "hostprog"], cwd=d, check=True)
    subprocess.run([zig, "ar", "rcs", "libx.a", "lib-aarch64.o"], cwd=d, check=True)
    subprocess.run([zig, "ar", "rcsT", "libthin.a", "lib-aarch64.o"], cwd=d, check=True)
    subprocess.run([zig, "ar", "rcs", "libmixed.a", "lib-aarch64.o", "lib-host.o"], cwd=d, check=True)
    return d


def tree(tmp_path: Path, fixtures: Path, names: dict[str, str]) -> Path:
    root = tmp_path / "tree"
    for dest, name in names.items():
        (root / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(fixtures / name, root / dest)
    return root


def by_path(report):
    return {a["path"]: a for a in report.artifacts}


def test_good_aarch64_tree_passes_and_runs_tests(tmp_path, fixtures):
    root = tree(tmp_path, fixtures, {"lib.o": "lib-aarch64.o", "libx.a": "libx.a", "libx.so": "libx.so",
                                     "tests/test_ok": "test_ok"})
    report = verify(root, AARCH64)
    assert report.ok, report.reasons
    arts = by_path(report)
    assert arts["libx.so"]["kind"] == "shared_library"
    assert arts["libx.a"]["members"] == 1 and arts["libx.a(lib-aarch64.o)"]["machine"] == "EM_AARCH64"
    assert arts["tests/test_ok"]["linkage"] == "static"
    [run] = report.smoke_runs
    assert run.path == "tests/test_ok" and run.passed and run.exit_code == 0 and "qemu-aarch64" in run.command[0]


def test_failing_test_program_fails_verification(tmp_path, fixtures):
    root = tree(tmp_path, fixtures, {"test_fails": "test_fails"})
    report = verify(root, AARCH64)
    assert not report.ok
    assert report.smoke_runs[0].exit_code == 3
    assert any("smoke run test_fails failed" in r for r in report.reasons)


def test_only_evidence_of_the_sandbox_excuses_a_failure_and_timeouts_fail(tmp_path, fixtures, monkeypatch):
    monkeypatch.setattr(slowdown, "factor", lambda target: 1.5)  # test_slowdown.py measures the real one
    root = tree(tmp_path, fixtures, {"t/test_fixed": "test_fixed", "t/test_ok": "test_ok"})
    report = verify(root, AARCH64, smoke_timeout_s=3)
    assert report.ok, report.reasons
    runs = {Path(r.path).name: r for r in report.smoke_runs}
    assert runs["test_fixed"].triage == "environment" and not runs["test_fixed"].failed
    assert runs["test_fixed"].outcome() == (
        "ran, not counted (exit 1): it needs /usr/share/xtest/ref.dat, outside the workspace, which the sandbox does "
        "not provide: cannot open /usr/share/xtest/ref.dat: No such file or directory")

    bad = tree(tmp_path / "bad", fixtures, {"t/test_data": "test_data", "t/test_slow": "test_slow",
                                            "t/test_crash": "test_crash", "t/test_hang": "test_hang",
                                            "t/test_ok": "test_ok"})
    report = verify(bad, AARCH64, smoke_timeout_s=3)
    assert not report.ok
    runs = {Path(r.path).name: r for r in report.smoke_runs}
    assert runs["test_data"].triage == "failed" and runs["test_data"].why == "exit 1"
    assert runs["test_crash"].triage == "crashed" and runs["test_crash"].failed
    assert runs["test_slow"].triage == "failed" and runs["test_slow"].why == (
        "timed out after 4.5s (limit scaled x1.5 for emulation); last output: round 1 of 1000000")
    assert runs["test_hang"].triage == "failed" and runs["test_hang"].why == (
        "timed out after 4.5s (limit scaled x1.5 for emulation) without printing anything")
    assert 4.5 <= runs["test_hang"].duration_s < 10
    assert {r.split(" failed under qemu")[0] for r in report.reasons} == {
        "smoke run t/test_data", "smoke run t/test_slow", "smoke run t/test_crash", "smoke run t/test_hang"}


def test_host_object_left_in_tree_is_named(tmp_path, fixtures):
    root = tree(tmp_path, fixtures, {"good/lib.o": "lib-aarch64.o", "stale/lib.o": "lib-host.o",
                                     "tools/hostprog": "hostprog"})
    report = verify(root, AARCH64, run_tests=False)
    assert not report.ok
    assert any(r.startswith("stale/lib.o: machine EM_X86_64, expected EM_AARCH64") for r in report.reasons)
    assert any(r.startswith("tools/hostprog:") for r in report.reasons)
    allowed = verify(root, AARCH64, run_tests=False, allow_host=["tools/*", "stale/*"])
    assert allowed.allowed_host == ["stale/lib.o", "tools/hostprog"] or sorted(allowed.allowed_host) == \
        ["stale/lib.o", "tools/hostprog"]


def test_archive_members_checked_each(tmp_path, fixtures):
    root = tree(tmp_path, fixtures, {"libmixed.a": "libmixed.a", "libthin.a": "libthin.a",
                                     "lib-aarch64.o": "lib-aarch64.o"})
    report = verify(root, AARCH64, run_tests=False)
    arts = by_path(report)
    assert arts["libmixed.a"]["machine"].startswith("mixed:")
    assert not arts["libmixed.a(lib-host.o)"]["ok"]
    assert arts["libthin.a"]["format"] == "thin-ar" and arts["libthin.a(lib-aarch64.o)"]["ok"]


def test_header_only_project_that_compiled_nothing_fails(tmp_path):
    root = tmp_path / "tree"
    (root / "include").mkdir(parents=True)
    (root / "include" / "lib.hpp").write_text("#pragma once\ninline int f(){return 1;}\n")
    (root / "CMakeFiles" / "3.25.1" / "CompilerIdC").mkdir(parents=True)
    report = verify(root, AARCH64)
    assert not report.ok
    assert report.reasons[0].startswith("no binaries")


def test_binaries_merely_placed_in_probe_folders_are_counted(tmp_path, fixtures):
    """Folders named like CMake's and Meson's compiler checks, without the build system's records that made them:
    what is in them is an artifact (real configures' probes: test_hostile_builds.py)."""
    root = tree(tmp_path, fixtures, {"CMakeFiles/3.25.1/CompilerIdC/a.out": "hostprog",
                                     "CMakeFiles/CMakeScratch/TryCompile-x/cmTC": "hostprog",
                                     "meson-private/sanity_check_for_c.exe": "hostprog", "libx.a": "libx.a"})
    (root / "meson-logs").mkdir()
    (root / "meson-logs" / "meson-log.txt").write_text("The Meson build system\n")  # names no compile
    (root / "CMakeCache.txt").write_text("# a cache, but no log names the scratch folder\n")
    report = verify(root, AARCH64, run_tests=False)
    assert not report.ok and report.probes_excluded == 0 and not report.probe_mismatches
    for rel in ("CMakeFiles/3.25.1/CompilerIdC/a.out", "CMakeFiles/CMakeScratch/TryCompile-x/cmTC",
                "meson-private/sanity_check_for_c.exe"):
        assert any(r.startswith(f"{rel}: machine EM_X86_64") for r in report.reasons), (rel, report.reasons)


@pytest.mark.parametrize("hidden_as", ["conftest", "a.out", "sub/CompilerIdC/a.out", "CMakeFiles/a.out",
                                       "x/CMakeFiles/3.25.1/CMakeDetermineCompilerABI_C.bin/prog"])
def test_a_program_named_like_a_probe_outside_probe_folders_is_checked(tmp_path, fixtures, hidden_as):
    root = tree(tmp_path, fixtures, {"libx.a": "libx.a", hidden_as: "hostprog"})
    report = verify(root, AARCH64, run_tests=False)
    assert not report.ok
    assert any(r.startswith(hidden_as) and "EM_X86_64" in r for r in report.reasons), report.reasons


def _elf_header_only(machine: int = 183) -> bytes:
    """A 64-byte ELF64 header for an aarch64 executable (ET_DYN, PIE) with no segments and no code at all."""
    import struct
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0x1000, 0, 0, 0, 64, 56, 0, 64, 0, 0)


def test_an_elf_header_with_no_code_is_not_a_product(tmp_path, fixtures):
    root = tmp_path / "tree"
    root.mkdir()
    (root / "libevil.so").write_bytes(_elf_header_only())
    (root / "evil_test").write_bytes(_elf_header_only())
    shutil.copy(fixtures / "hostprog", root / "conftest")  # the real program, hidden under a probe's name
    report = verify(root, AARCH64, run_tests=True)
    assert not report.ok
    text = "\n".join(report.reasons)
    assert "libevil.so" in text and "no code" in text
    assert "conftest" in text and "EM_X86_64" in text
    assert not report.smoke_runs  # nothing unsound is run


def test_a_truncated_program_is_not_sound(tmp_path, fixtures):
    root = tmp_path / "tree"
    root.mkdir()
    data = (fixtures / "test_ok").read_bytes()
    (root / "test_cut").write_bytes(data[: len(data) // 3])
    report = verify(root, AARCH64, run_tests=False)
    assert not report.ok and any(r.startswith("test_cut:") for r in report.reasons), report.reasons


def _thin_archive(member: str) -> bytes:
    """A GNU thin archive naming one member by path (what `ar rcsT` writes, with a chosen name)."""
    def header(name: str, size: int) -> bytes:
        return f"{name:<16}{0:<12}{0:<6}{0:<6}{644:<8}{size:<10}`\n".encode()
    names = member.encode() + b"/\n"
    pad = b"\n" if len(names) % 2 else b""
    return b"!<thin>\n" + header("//", len(names)) + names + pad + header("/0", 1024)


@pytest.mark.parametrize("member", ["fifo.o", "/dev/zero", "../../../../../../dev/zero", "zero.o"])
def test_thin_archive_members_cannot_hang_or_flood_the_verifier(tmp_path, fixtures, member):
    import os
    import time
    root = tmp_path / "tree"
    root.mkdir()
    shutil.copy(fixtures / "libx.a", root / "libx.a")
    os.mkfifo(root / "fifo.o")
    (root / "zero.o").symlink_to("/dev/zero")
    (root / "libevil.a").write_bytes(_thin_archive(member))
    start = time.monotonic()
    report = verify(root, AARCH64, run_tests=False)
    assert time.monotonic() - start < 30
    assert not report.ok
    assert any("libevil.a" in r and "cannot be checked" in r for r in report.reasons), report.reasons


def test_renamed_text_file_is_not_a_library(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    (root / "libfake.so").write_text("this is not a library\n")
    (root / "libfake.a").write_text("neither is this\n")
    report = verify(root, AARCH64, run_tests=False)
    assert not report.ok
    assert "libfake.so: named like a binary but is not one" in report.reasons
    assert scan_tree(root).artifacts == []


def test_windows_pe_and_coff(tmp_path, fixtures):
    win = parse_target("x86_64-windows-gnu")
    root = tree(tmp_path, fixtures, {"prog.exe": "prog.exe", "lib.o": "lib-win.o", "test_x.exe": "prog.exe"})
    report = verify(root, win)
    assert report.ok, report.reasons
    arts = by_path(report)
    assert arts["prog.exe"]["format"] == "pe" and arts["prog.exe"]["subsystem"] == "windows_cui"
    assert arts["lib.o"]["format"] == "coff" and arts["lib.o"]["machine"] == "IMAGE_FILE_MACHINE_AMD64"
    # with no workspace (crossbuild verify DIR), no Wine prefix of its own: nothing runs, and it says why
    assert report.smoke_runs[0].skipped.startswith("Windows programs run under Wine with their workspace's prefix")
    linux_report = verify(root, AARCH64, run_tests=False)
    assert any("PE file, expected ELF" in r for r in linux_report.reasons)


def test_macho_recognised_and_rejected_for_linux(tmp_path, fixtures):
    root = tree(tmp_path, fixtures, {"lib.o": "lib-macos.o"})
    report = verify(root, AARCH64, run_tests=False)
    a = by_path(report)["lib.o"]
    assert a["format"] == "macho" and a["machine"] == "arm64" and a["kind"] == "object"
    assert not report.ok


def test_wrong_arch_and_float_abi(tmp_path, fixtures):
    root = tree(tmp_path, fixtures, {"lib.o": "lib-riscv.o"})
    assert any("EM_RISCV" in r for r in verify(root, AARCH64, run_tests=False).reasons)
    arm = parse_target("arm-linux-musleabihf")
    root2 = tree(tmp_path / "b", fixtures, {"lib.o": "lib-armhf.o", "armprog": "armprog"})
    report = verify(root2, arm, run_tests=False)
    assert report.ok, report.reasons
    assert by_path(report)["armprog"]["float_abi"] == "hard"
    from crossbuild.proof.artifacts import check_artifact
    from crossbuild.proof.binary_formats import Artifact
    soft = Artifact(path="x", format="elf", kind="executable", machine="EM_ARM", bits=32, endian="little",
                    os_abi="ELFOSABI_SYSV", float_abi="soft")
    assert check_artifact(soft, arm) == ["soft-float ABI, expected hard-float"]


def test_an_assembled_object_that_declares_no_floating_point_is_not_a_soft_float_one(tmp_path, fixtures):
    """LLVM's assembler marks what it assembles soft-float even for a hard-float target; such an object declares no
    floating-point number model, and GNU ld links it with either convention. libzstd on arm was refused for it."""
    arm = parse_target("arm-linux-musleabihf")
    root = tree(tmp_path, fixtures, {"lib.o": "lib-armhf.o", "huf_decompress_amd64.o": "asm-armhf.o",
                                     "libzstd.a": "libarmhf.a"})
    report = verify(root, arm, run_tests=False)
    assert report.ok, report.reasons
    assert by_path(report)["huf_decompress_amd64.o"].get("float_abi") is None
    soft = tree(tmp_path / "soft", fixtures, {"lib.o": "lib-armsoft.o"})
    assert any("soft-float ABI, expected hard-float" in r for r in verify(soft, arm, run_tests=False).reasons)


def test_glibc_version_ceiling():
    from crossbuild.proof.artifacts import check_artifact
    from crossbuild.proof.binary_formats import Artifact
    a = Artifact(path="x", format="elf", kind="executable", machine="EM_AARCH64", bits=64, endian="little",
                 os_abi="ELFOSABI_SYSV", linkage="dynamic", interpreter="/lib/ld-linux-aarch64.so.1",
                 libc="glibc", max_glibc="2.34")
    assert check_artifact(a, parse_target("aarch64-linux-gnu.2.28")) == \
        ["needs GLIBC_2.34, newer than the target's glibc 2.28"]
    assert check_artifact(a, parse_target("aarch64-linux-gnu.2.36")) == []
    assert "links glibc" in check_artifact(a, AARCH64)[0]


def test_testlike_names():
    assert all(is_testlike(p) for p in ["test_calc", "tests/foo", "zlib_test", "example", "minigzip_test.exe"])
    assert not any(is_testlike(p) for p in ["calc", "libz.so", "contest_runner"])


def test_object_header_fast_path_agrees_with_pyelftools(fixtures):
    from elftools.elf.elffile import ELFFile

    from crossbuild.proof.binary_formats import _arm_float_abi, describe_elf
    for name in ("lib-aarch64.o", "lib-riscv.o", "lib-armhf.o", "lib-host.o"):
        with open(fixtures / name, "rb") as f:
            fast = describe_elf(f, name)
            f.seek(0)
            h = ELFFile(f).header
            expect_float = _arm_float_abi(h["e_flags"], True) if h["e_machine"] == "EM_ARM" else None
            assert (fast.kind, fast.machine, fast.bits, fast.os_abi, fast.float_abi) == \
                ("object", h["e_machine"], 32 if h["e_ident"]["EI_CLASS"] == "ELFCLASS32" else 64,
                 h["e_ident"]["EI_OSABI"], expect_float), name
    assert describe_elf(open(fixtures / "lib-armhf.o", "rb"), "x").float_abi == "hard"


def test_a_test_program_that_prints_its_usage_ran_but_a_crash_did_not():
    from crossbuild.proof.triage import triage

    assert triage(1, None, ["Usage: ./test_util_file <testdir>", "  <testdir> is the location of input files"],
                  60).kind == "usage"
    assert triage(1, None, ["test_util_file: FAILED 3 of 10"], 60).kind == "failed"
    assert triage(0, None, ["Usage: x"], 60).kind != "usage"
    assert triage(139, None, ["Usage: x", "Segmentation fault"], 60).kind == "crashed"
    assert triage(1, None, ["usage: x", "qemu: uncaught target signal 11 (Segmentation fault)"], 60).kind == "crashed"


@pytest.mark.slow
def test_the_clean_rebuild_starts_from_the_source_as_prepared_with_the_agents_edits(tmp_path):
    """An in-tree build leaves its products in src/: a rebuild from a copy of src/ as it is now would find them
    there and prove nothing. It starts from the source as prepared, plus what the agent's file tools changed."""
    import json

    from crossbuild import kb
    from crossbuild.env import workspace
    from crossbuild.tools import default_toolset
    from crossbuild.tools.context import RunContext

    project = tmp_path / "project"
    project.mkdir()
    (project / "main.c").write_text("int main(void){return 0;}\n")
    (project / "Makefile").write_text("prog: main.c\n\t$(CC) -o prog main.c missing.c\n")  # broken as shipped
    ws = workspace.prepare(str(project), tmp_path / "ws")
    ctx = RunContext.create(ws.root, parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix", kb=kb.load())
    tools = default_toolset()

    def call(name, args):
        return tools.dispatch(ctx, name, json.dumps(args))

    # the program comes from a command that failed (never replayed); the one that succeeded builds nothing
    assert not call("run_command", {"command": "sh -c '$CC -o prog main.c; exit 1'", "cwd": "src"}).ok
    assert call("run_command", {"command": "touch stamp", "cwd": "src"}).ok
    r = call("verify", {"path": "src", "rebuild": True, "run_tests": False})
    assert not r.ok and r.data["rebuild"]["error"] == "rebuild produced no binaries"
    # the agent fixes the Makefile and builds: the rebuild replays make on the prepared source with that edit
    assert call("edit_file", {"path": "src/Makefile", "edits": [{"old": " missing.c", "new": ""}]}).ok
    assert call("run_command", {"command": "rm -f prog", "cwd": "src"}).ok
    assert call("run_command", {"command": "make prog", "cwd": "src"}).ok
    r = call("verify", {"path": "src", "rebuild": True, "run_tests": False})
    assert r.ok, r.render()
    assert r.data["rebuild"]["ok"] and r.data["rebuild"]["artifacts"] == 1
    rebuilt_src = ws.root / ".xbuild" / "rebuild" / "src"
    assert "missing.c" not in (rebuilt_src / "Makefile").read_text()
    assert (ws.root / ".xbuild" / "pristine" / "src" / "Makefile").read_text().endswith("main.c missing.c\n")


def test_a_rebuild_whose_object_folders_hash_the_workspace_path_still_matches(tmp_path):
    """libzstd puts its outputs in obj/conf_<md5 of the flags>/, and the flags name the workspace: the rebuild's
    copy hashes to another folder, and its products are the same ones."""
    import json

    from crossbuild import kb
    from crossbuild.env import workspace
    from crossbuild.tools import default_toolset
    from crossbuild.tools.context import RunContext

    project = tmp_path / "project"
    project.mkdir()
    (project / "main.c").write_text("int main(void){return 0;}\n")
    (project / "Makefile").write_text(
        "HASH := $(shell echo $(CURDIR) $(CC) | md5sum | cut -c1-32)\nOUT := obj/conf_$(HASH)\n"
        "all: $(OUT)/prog\n$(OUT)/prog: main.c\n\tmkdir -p $(OUT)\n\t$(CC) -o $@ main.c\n")
    ws = workspace.prepare(str(project), tmp_path / "ws")
    ctx = RunContext.create(ws.root, parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix", kb=kb.load())
    tools = default_toolset()
    assert tools.dispatch(ctx, "run_command", json.dumps({"command": "make", "cwd": "src"})).ok
    r = tools.dispatch(ctx, "verify", json.dumps({"path": "src", "rebuild": True, "run_tests": False}))
    assert r.ok, r.render()
    assert r.data["rebuild"]["ok"] and r.data["rebuild"]["artifacts"] == 1
    first = list((ws.root / "src" / "obj").glob("conf_*/prog"))
    rebuilt = list((ws.root / ".xbuild" / "rebuild" / "src" / "obj").glob("conf_*/prog"))
    assert len(first) == 1 and len(rebuilt) == 1 and rebuilt[0].parent.name != first[0].parent.name


def test_a_test_program_runs_where_make_check_would_run_it_and_finds_its_data_through_srcdir(tmp_path):
    """Automake runs tests/.libs/prog's wrapper in tests/ with srcdir set to the source's tests/; xz's test
    programs open `files/...` from there. Run anywhere else, they fail for a reason that is not the build's."""
    from crossbuild.env.toolchain import Toolchain

    ws = tmp_path / "ws"
    (ws / "build" / "tests" / ".libs").mkdir(parents=True)
    (ws / "src" / "tests" / "files").mkdir(parents=True)
    (ws / "src" / "tests" / "files" / "input.txt").write_text("from the source tree\n")
    (ws / "build" / "tests" / "made.txt").write_text("from the build folder\n")
    (tmp_path / "t.c").write_text(
        '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n'
        'int main(void){char p[4096]; const char *s = getenv("srcdir"); if(!s) return 2;\n'
        'snprintf(p, sizeof p, "%s/files/input.txt", s); FILE *a = fopen(p, "r"), *b = fopen("made.txt", "r");\n'
        'if(!a || !b){fprintf(stderr, "%s: Failed to open the file\\n", a ? "made.txt" : p); return 99;}\n'
        'puts("found both"); return 0;}\n')
    zcc(str(host.zig_executable()), "aarch64-linux-musl", ["t.c", "-o", str(ws / "build/tests/.libs/test_data")],
        tmp_path)
    tc = Toolchain.for_target(AARCH64, ws, prefix=tmp_path / "prefix").materialise()
    report = verify(ws / "build", AARCH64, toolchain=tc)
    (run,) = report.smoke_runs
    assert run.passed and "found both" in run.output_tail, run.output_tail
    assert report.ok, report.reasons


def test_a_generator_built_for_the_build_machine_is_not_a_product_unless_the_install_ships_it(tmp_path, fixtures):
    """sqlite3 builds lemon with CC_FOR_BUILD to generate its parser; make install leaves it out. The same host
    program in the install is a product built for the wrong machine, and so is one the build machine's compiler
    did not record writing (a copy under the generator's name)."""
    from crossbuild.env.toolchain import Toolchain
    from tests.conftest import run_in

    ws = tmp_path / "ws"
    for dest, name in {"build/test_ok": "test_ok", "install/bin/test_ok": "test_ok", "main.c": "main.c",
                       "lib.c": "lib.c"}.items():
        (ws / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(fixtures / name, ws / dest)
    tc = Toolchain.for_target(AARCH64, ws, prefix=tmp_path / "prefix").materialise()
    r = run_in(tc, ["sh", "-c", "$CC_FOR_BUILD -o build/lemon-for-build main.c lib.c"], ws)
    assert r.returncode == 0, r.stderr
    report = verify(ws / "build", AARCH64, toolchain=tc)
    assert report.ok, report.reasons
    assert report.build_tools == ["lemon-for-build"] and "lemon-for-build" not in by_path(report)
    assert "not counted: 1 programs built for the build machine" in report.summary("build")
    shutil.copy(fixtures / "hostprog", ws / "build" / "lemon-copied")  # the same program, not made by the compiler
    report = verify(ws / "build", AARCH64, toolchain=tc)
    assert not report.ok and any(r.startswith("lemon-copied: machine EM_X86_64") for r in report.reasons)
    (ws / "build" / "lemon-copied").unlink()
    shutil.copy(fixtures / "hostprog", ws / "install" / "bin" / "lemon-for-build")
    report = verify(ws / "build", AARCH64, toolchain=tc)
    assert not report.ok and any(r.startswith("lemon-for-build: machine EM_X86_64") for r in report.reasons)
    # without an install there is nothing to tell a generator from a mistake by
    shutil.rmtree(ws / "install")
    assert not verify(ws / "build", AARCH64, toolchain=tc).ok
