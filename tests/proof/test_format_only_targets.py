"""macOS and FreeBSD: targets whose programs cannot run here, proven from their bytes at the `built` level. Every
fixture is built by real zig; each new target refuses a file of the wrong format or for the wrong system."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from crossbuild.foundation import host
from crossbuild.foundation.targets import parse_target
from crossbuild.proof.artifacts import describe_file, scan_tree
from crossbuild.proof.binary_formats import sniff
from crossbuild.proof.verify import verify
from tests.proof.test_verify import zcc

pytestmark = pytest.mark.slow  # fixtures are compiled with real zig

MAC_ARM, MAC_X86 = parse_target("aarch64-macos"), parse_target("x86_64-macos")
FREEBSD = parse_target("x86_64-freebsd")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    zig = str(host.zig_executable())
    d = tmp_path_factory.mktemp("formats")
    (d / "lib.c").write_text("int lib(void){return 42;}\n")
    (d / "main.c").write_text("int lib(void);\nint main(void){return lib() == 42 ? 0 : 1;}\n")
    # a library that calls into its C library, whose name says the system (one that calls nothing fits any)
    (d / "env.c").write_text("#include <stdlib.h>\nconst char *env(void){return getenv(\"HOME\");}\n")
    zcc(zig, "aarch64-macos.11.0", ["main.c", "lib.c", "-o", "mac-arm"], d)
    zcc(zig, "x86_64-macos.11.0", ["main.c", "lib.c", "-o", "mac-x86"], d)
    zcc(zig, "aarch64-macos.15.0", ["main.c", "lib.c", "-o", "mac-arm-15"], d)
    zcc(zig, "aarch64-macos.11.0", ["-shared", "lib.c", "-o", "libgood.dylib",
                                    "-Wl,-install_name,@rpath/libgood.dylib"], d)
    zcc(zig, "x86_64-freebsd", ["main.c", "lib.c", "-o", "bsd-prog"], d)
    zcc(zig, "x86_64-freebsd", ["-shared", "-fPIC", "env.c", "-o", "libbsd.so"], d)
    zcc(zig, "x86_64-linux-musl", ["main.c", "lib.c", "-o", "linux-static"], d)
    zcc(zig, "x86_64-linux-musl", ["-shared", "-fPIC", "env.c", "-o", "liblinux.so"], d)
    zcc(zig, "x86_64-linux-gnu", ["main.c", "lib.c", "-o", "linux-glibc"], d)
    zcc(zig, "x86_64-linux-gnu", ["-shared", "-fPIC", "env.c", "-o", "libglibc.so"], d)
    # a release crossbuild's target is not: zig's own cache (FreeBSD's libc stubs take seconds)
    subprocess.run([zig, "cc", "-target", "x86_64-freebsd.15.0", "main.c", "lib.c", "-o", "bsd15-prog"], cwd=d,
                   check=True, capture_output=True, env={"PATH": "/usr/bin:/bin", "HOME": str(d),
                                                         "ZIG_GLOBAL_CACHE_DIR": str(d / "zig-cache")})
    (d / "build").mkdir()
    zcc(zig, "aarch64-macos.11.0", ["-shared", "lib.c", "-o", "build/librel.dylib"], d)  # named by its path
    zcc(zig, "aarch64-macos.11.0", ["main.c", "build/librel.dylib", "-o", "mac-rel"], d)
    return d


def tree(tmp_path: Path, built: Path, names: dict[str, str]) -> Path:
    root = tmp_path / "tree"
    for dest, name in names.items():
        (root / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(built / name, root / dest)
    return root


def problems_of(report, path: str) -> list[str]:
    return next(a for a in report.artifacts if a["path"] == path).get("problems", [])


def test_a_macos_build_is_proven_from_its_bytes_and_says_nothing_ran(tmp_path, built):
    root = tree(tmp_path, built, {"calc": "mac-arm", "test_calc": "mac-arm", "libgood.dylib": "libgood.dylib"})
    report = verify(root, MAC_ARM)
    assert report.ok, report.reasons
    program = next(a for a in report.artifacts if a["path"] == "calc")
    assert (program["format"], program["machine"], program["min_os"], program["interpreter"]) == (
        "macho", "arm64", "11.0", "/usr/lib/dyld")
    assert next(a for a in report.artifacts if a["path"] == "libgood.dylib")["install_name"] == "@rpath/libgood.dylib"
    assert report.proof == "built" and "macOS programs are scanned only" in report.proof_why
    assert report.smoke_runs[0].skipped.startswith("macOS programs are scanned only")


@pytest.mark.parametrize("target, name, expected", [
    (MAC_ARM, "linux-static", "ELF file, expected Mach-O for aarch64-macos"),
    (MAC_ARM, "mac-x86", "CPU x86_64, expected arm64"),
    (MAC_X86, "mac-arm", "CPU arm64, expected x86_64"),
    (MAC_ARM, "mac-arm-15", "needs macOS 15.0, newer than the target's 11.0"),
    (FREEBSD, "liblinux.so", "built for Linux (its loader, libc or ABI note), expected FreeBSD"),
    (FREEBSD, "linux-glibc", "built for Linux (its loader, libc or ABI note), expected FreeBSD"),
    (FREEBSD, "linux-static", "no FreeBSD mark"),
    (FREEBSD, "mac-arm", "MACHO file, expected ELF for x86_64-freebsd"),
    (parse_target("x86_64-linux-musl"), "bsd-prog", "built for FreeBSD (its loader, libc or ABI note), expected Linux"),
    (parse_target("x86_64-linux-musl"), "libbsd.so", "built for FreeBSD"),
])
def test_a_file_of_the_wrong_format_or_system_is_refused(tmp_path, built, target, name, expected):
    root = tree(tmp_path, built, {name: name})
    report = verify(root, target, run_tests=False)
    assert not report.ok
    assert any(expected in p for p in problems_of(report, name)), problems_of(report, name)


def test_a_freebsd_build_fits_freebsd_only(tmp_path, built):
    root = tree(tmp_path, built, {"prog": "bsd-prog", "libbsd.so": "libbsd.so"})
    report = verify(root, FREEBSD)
    assert report.ok, report.reasons
    assert {a["system"] for a in report.artifacts} == {"freebsd"}
    assert report.proof == "built" and "FreeBSD programs are scanned only" in report.proof_why
    assert not verify(root, parse_target("aarch64-freebsd"), run_tests=False).ok  # the machine still counts


def test_a_macos_library_named_by_its_build_folder_path_is_refused(tmp_path, built):
    """An install name, or a library a program loads, by a path in the build folder names nothing on a Mac."""
    root = tmp_path / "ws" / "build"
    root.mkdir(parents=True)
    (root / "lib.c").write_text("int lib(void){return 42;}\n")
    (root / "main.c").write_text("int lib(void);\nint main(void){return lib() == 42 ? 0 : 1;}\n")
    zig = str(host.zig_executable())
    zcc(zig, "aarch64-macos.11.0", ["-shared", "lib.c", "-o", "libbad.dylib",
                                    f"-Wl,-install_name,{root}/libbad.dylib"], root)
    zcc(zig, "aarch64-macos.11.0", ["main.c", "libbad.dylib", "-o", "prog"], root)
    report = verify(root, MAC_ARM, run_tests=False)
    assert not report.ok
    assert any(f"install name {root}/libbad.dylib: a path in the build folder" in p
               for p in problems_of(report, "libbad.dylib"))
    # the same folder spelled another way is the same folder
    (root / "sub").mkdir()
    zcc(zig, "aarch64-macos.11.0", ["-shared", "lib.c", "-o", "libdots.dylib",
                                    f"-Wl,-install_name,{root}/sub/../libdots.dylib"], root)
    assert any("a path in the build folder" in p
               for p in problems_of(verify(root, MAC_ARM, run_tests=False), "libdots.dylib"))
    assert any(f"loads {root}/libbad.dylib" in p for p in problems_of(report, "prog"))


def test_a_universal_file_is_refused(tmp_path, built):
    thin = (built / "mac-arm").read_bytes()
    fat = struct.pack(">II", 0xCAFEBABE, 1) + struct.pack(">iiIII", 0x0100000C, 0, 4096, len(thin), 12)
    root = tmp_path / "tree"
    root.mkdir()
    (root / "prog").write_bytes(fat.ljust(4096, b"\0") + thin)
    report = verify(root, MAC_ARM, run_tests=False)
    assert not report.ok and any("universal (fat)" in p for p in problems_of(report, "prog"))


@pytest.mark.parametrize("name", ["mac-arm", "libgood.dylib"])
def test_a_damaged_macho_file_is_reported_never_a_crash(tmp_path, built, name):
    """A build can write any bytes: 300 damaged copies of a real Mach-O file (bytes of its load commands changed,
    or the file cut short) are each described, with the damage as a problem, or refused as unreadable."""
    good = (built / name).read_bytes()
    rng = random.Random(20261206)
    for i in range(300):
        data = bytearray(good)
        if i % 3 == 0:
            data = data[:rng.randrange(32, 2048)]
        else:
            for _ in range(rng.randrange(1, 8)):
                at = rng.randrange(16, min(len(data), 2048))
                data[at] = rng.randrange(256)
        path = tmp_path / f"d{i}"
        path.write_bytes(bytes(data))
        with open(path, "rb") as f:
            fmt = sniff(f.read(64))
            assert fmt == "macho"
            described = describe_file(f, path.name, fmt, root=tmp_path)
        assert len(described) == 1 and described[0].format == "macho"
    cut = tmp_path / "cut"
    cut.write_bytes(good[:200])
    described = scan_tree(tmp_path).artifacts
    assert any(a.path == "cut" and a.problems for a in described)


def _load_commands(data: bytes):
    ncmds = struct.unpack_from("<I", data, 16)[0]
    pos = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, pos)
        yield pos, cmd
        pos += size


def _patched(built: Path, name: str, tmp_path: Path, change) -> Path:
    data = bytearray((built / name).read_bytes())
    change(data)
    root = tmp_path / "tree"
    root.mkdir(exist_ok=True)
    (root / name).write_bytes(bytes(data))
    return root


def _drop_signature(data: bytearray) -> None:
    for pos, cmd in _load_commands(bytes(data)):
        if cmd == 0x1D:  # LC_CODE_SIGNATURE, renamed a second LC_UUID (0x1B): the file no longer says it is signed
            struct.pack_into("<I", data, pos, 0x1B)


def _set_freebsd_brand(data: bytearray) -> None:
    data[7] = 9  # EI_OSABI: FreeBSD


def _lying_version_needs(data: bytearray) -> None:
    import io

    from elftools.elf.elffile import ELFFile
    elf = ELFFile(io.BytesIO(bytes(data)))
    index = next(i for i, sec in enumerate(elf.iter_sections()) if sec.name == ".gnu.version_r")
    header = elf.header["e_shoff"] + index * elf.header["e_shentsize"]
    struct.pack_into("<I", data, header + 44, 0xFFFFFFFF)  # sh_info: "four billion entries"


@pytest.mark.parametrize("name, target, change, expected", [
    ("mac-arm", MAC_ARM, lambda d: struct.pack_into("<I", d, 8, 2), "CPU arm64e, expected arm64"),
    ("mac-arm", MAC_ARM, _drop_signature, "no code signature (LC_CODE_SIGNATURE)"),
    ("mac-arm", MAC_ARM, lambda d: struct.pack_into("<I", d, 0, 0xFEEDFACE), "32-bit little-endian, expected 64-bit"),
    ("libglibc.so", FREEBSD, _set_freebsd_brand, "both Linux's and FreeBSD's marks"),
    ("linux-glibc", FREEBSD, _lying_version_needs, "its version needs count more entries than its section holds"),
])
def test_a_file_a_hostile_build_doctored_is_refused_in_good_time(tmp_path, built, name, target, change, expected):
    """What a hostile review made of real files (helper, 2026-12-06): arm64e, unsigned arm64 code, a header that
    lies about its width, one system's marks on another's file, and a version-needs table whose count would keep
    the reader on one entry for hours: each refused, within seconds."""
    import time
    root = _patched(built, name, tmp_path, change)
    start = time.monotonic()
    report = verify(root, target, run_tests=False)
    assert time.monotonic() - start < 30
    assert any(expected in p for p in problems_of(report, name)), problems_of(report, name)


def test_a_newer_freebsd_or_a_relative_install_name_is_refused(tmp_path, built):
    report = verify(tree(tmp_path, built, {"prog": "bsd15-prog"}), FREEBSD, run_tests=False)
    assert any("built for FreeBSD 15.0, newer than the target's 14" in p for p in problems_of(report, "prog"))
    report = verify(tree(tmp_path / "m", built, {"prog": "mac-rel", "build/librel.dylib": "build/librel.dylib"}),
                    MAC_ARM, run_tests=False)
    assert any("install name build/librel.dylib: a relative path" in p
               for p in problems_of(report, "build/librel.dylib"))
    assert any("loads build/librel.dylib: a relative path" in p for p in problems_of(report, "prog"))
