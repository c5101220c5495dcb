import pytest

from crossbuild.foundation.targets import TARGETS, UnknownTargetError, parse_target


def test_required_targets_exist_with_facts():
    for name in ("aarch64-linux-musl", "aarch64-linux-gnu", "x86_64-linux-musl", "riscv64-linux-musl",
                 "arm-linux-musleabihf", "x86_64-windows-gnu"):
        t = TARGETS[name]
        assert t.zig_target == name
        assert t.cmake_system_name in ("Linux", "Windows")
        assert t.meson_cpu_family and t.meson_cpu and t.meson_system
        assert t.autotools_host
    assert TARGETS["arm-linux-musleabihf"].float_abi == "hard"
    assert TARGETS["arm-linux-musleabihf"].bits == 32
    assert TARGETS["riscv64-linux-musl"].machine == "EM_RISCV"
    assert TARGETS["x86_64-windows-gnu"].binary_format == "pe"
    assert TARGETS["x86_64-windows-gnu"].autotools_host == "x86_64-w64-mingw32"
    assert TARGETS["x86_64-windows-gnu"].qemu is None
    assert TARGETS["aarch64-linux-musl"].qemu == "qemu-aarch64"
    assert TARGETS["aarch64-linux-musl"].dynamic_loader == "/lib/ld-musl-aarch64.so.1"


def test_glibc_version_suffix():
    t = parse_target("aarch64-linux-gnu.2.28")
    assert t.glibc_version == (2, 28)
    assert t.zig_target == "aarch64-linux-gnu.2.28"
    assert t.machine == "EM_AARCH64"
    assert t.name == "aarch64-linux-gnu.2.28"


def test_aliases_resolve():
    assert parse_target("arm64-linux-musl").name == "aarch64-linux-musl"
    assert parse_target("x86_64-w64-mingw32").name == "x86_64-windows-gnu"


@pytest.mark.parametrize("typo, suggestion", [
    ("aarch64-linux-mus", "aarch64-linux-musl"),
    ("riscv64-linux-msul", "riscv64-linux-musl"),
    ("x86_64-windows", "x86_64-windows-gnu"),
])
def test_misspelled_target_lists_close_matches(typo, suggestion):
    with pytest.raises(UnknownTargetError) as e:
        parse_target(typo)
    assert "Did you mean" in str(e.value)
    assert suggestion in str(e.value).split("Known targets")[0]


def test_bad_versions_and_nonsense():
    with pytest.raises(UnknownTargetError, match="outside what zig can target"):
        parse_target("aarch64-linux-gnu.1.9")
    with pytest.raises(UnknownTargetError, match="only applies to glibc"):
        parse_target("aarch64-linux-musl.2.28")
    with pytest.raises(UnknownTargetError, match="Known targets"):
        parse_target("sparc-solaris")


@pytest.mark.parametrize("typed, canonical", [
    ("aarch64-unknown-linux-gnu", "aarch64-linux-gnu"),  # Rust triples, as cargo, cross-rs, cargo-zigbuild
    ("aarch64-unknown-linux-musl", "aarch64-linux-musl"),
    ("riscv64gc-unknown-linux-gnu", "riscv64-linux-gnu"),
    ("armv7-unknown-linux-gnueabihf", "arm-linux-gnueabihf"),
    ("x86_64-pc-windows-gnu", "x86_64-windows-gnu"),
    ("aarch64-unknown-linux-gnu.2.17", "aarch64-linux-gnu.2.17"),  # cargo-zigbuild's glibc suffix
    ("arm64", "aarch64-linux-gnu"),  # Debian's architectures: Debian fixes the libc
    ("armhf", "arm-linux-gnueabihf"),
    ("riscv64", "riscv64-linux-gnu"),
    ("amd64", "x86_64-linux-gnu"),
    ("musl-linux-arm64", "aarch64-linux-musl"),
])
def test_names_from_other_tools_resolve_to_crossbuilds_targets(typed, canonical):
    t = parse_target(typed)
    assert t.name == canonical
    assert t.zig_target == canonical


@pytest.mark.parametrize("typed, choices", [
    ("linux/arm64", ("aarch64-linux-musl (musl)", "aarch64-linux-gnu (glibc)")),  # Docker platforms
    ("linux/riscv64", ("riscv64-linux-musl", "riscv64-linux-gnu")),
    ("linux/arm/v7", ("arm-linux-musleabihf", "arm-linux-gnueabihf")),
    ("aarch64", ("aarch64-linux-musl", "aarch64-linux-gnu")),
])
def test_a_name_without_its_c_library_lists_the_choices(typed, choices):
    with pytest.raises(UnknownTargetError, match="names a machine, not its C library") as e:
        parse_target(typed)
    assert all(c in str(e.value) for c in choices)


def test_macos_and_freebsd_targets_and_their_foreign_names():
    for name, alias, fmt, machine in (("aarch64-macos", "aarch64-apple-darwin", "macho", "arm64"),
                                      ("x86_64-macos", "x86_64-apple-darwin", "macho", "x86_64"),
                                      ("aarch64-freebsd", "aarch64-unknown-freebsd", "elf", "EM_AARCH64"),
                                      ("x86_64-freebsd", "x86_64-unknown-freebsd", "elf", "EM_X86_64")):
        t = parse_target(alias)
        assert (t.name, t.binary_format, t.machine, t.qemu) == (name, fmt, machine, None)
    mac = parse_target("arm64-apple-darwin")
    assert (mac.zig_target, mac.cmake_system_name, mac.meson_system, mac.dynamic_loader) == (
        "aarch64-macos.11.0", "Darwin", "darwin", "/usr/lib/dyld")
    bsd = parse_target("x86_64-freebsd")
    assert (bsd.zig_target, bsd.autotools_host, bsd.dynamic_loader, bsd.libc) == (
        "x86_64-freebsd.14.0", "x86_64-unknown-freebsd14.0", "/libexec/ld-elf.so.1", "freebsd")


def test_a_macos_target_takes_its_oldest_release():
    t = parse_target("aarch64-apple-darwin.13.0")
    assert (t.name, t.zig_target, t.min_os) == ("aarch64-macos.13.0", "aarch64-macos.13.0", (13, 0))
    for bad, says in (("aarch64-macos.10.15", "outside what crossbuild targets"),
                      ("x86_64-freebsd.13.0", "unknown target"), ("aarch64-linux-musl.13.0", "only applies to glibc")):
        with pytest.raises(UnknownTargetError, match=says):
            parse_target(bad)
