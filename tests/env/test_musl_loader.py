"""The musl loader's source: the release zig links against, fetched from the Debian archive and taken only with the
checksum Debian's .dsc lists for it."""

from __future__ import annotations

import pytest

from crossbuild.env import musl_loader, musl_sysroot


def test_the_source_is_taken_only_with_its_checksum(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSBUILD_CACHE_DIR", str(tmp_path))
    tarball = musl_loader.musl_source()
    assert tarball.name == f"musl_{musl_sysroot.MUSL_VERSION}.orig.tar.gz" and tarball.stat().st_size > 1_000_000
    tarball.write_bytes(b"tampered")  # a cached file that no longer matches is fetched again, not used
    assert musl_loader.musl_source().stat().st_size > 1_000_000

    tarball.unlink()
    monkeypatch.setattr(musl_loader, "MUSL_SHA256", "0" * 64)
    with pytest.raises(musl_loader.LoaderBuildError, match="checksum mismatch"):
        musl_loader.musl_source()
    assert not tarball.exists() and not list(tmp_path.rglob("*.part"))


def test_a_loader_of_another_musl_version_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv("CROSSBUILD_CACHE_DIR", str(tmp_path))
    lib = musl_sysroot.loader_path("aarch64").parent
    lib.mkdir(parents=True)
    musl_sysroot.loader_path("aarch64").write_bytes(b"\x7fELF")
    (lib / "MUSL_VERSION").write_text("1.2.3\n")
    assert musl_sysroot.sysroot_for("aarch64") is None  # built from Debian 12's musl: rebuilt on next use
    (lib / "MUSL_VERSION").write_text(musl_sysroot.MUSL_VERSION + "\n1\n")
    assert musl_sysroot.sysroot_for("aarch64") is None  # built the way that did not export the stack protector
    (lib / "MUSL_VERSION").write_text(musl_sysroot.stamp_text())
    assert musl_sysroot.sysroot_for("aarch64") == musl_sysroot.sysroot_dir("aarch64")
    assert musl_sysroot.built_version("aarch64") == musl_sysroot.MUSL_VERSION


@pytest.mark.slow
def test_the_loader_exports_what_programs_need_from_musl(tmp_path, make_toolchain):
    """Checked on the real loader, by a real program: the stack protector's symbols (every -fstack-protector-all
    program needs them; zig's own compiler-rt defines them hidden) and statx (zig's Debug UBSan runtime)."""
    import subprocess

    from crossbuild.env import sandbox
    from crossbuild.foundation.targets import parse_target
    from crossbuild.proof.binary_formats import dynamic_symbols
    from crossbuild.proof.target_run import runner_argv

    target = parse_target("aarch64-linux-musl")
    loader = musl_loader.build(target)
    with open(loader, "rb") as f:
        exported, _ = dynamic_symbols(f)
    assert {"__stack_chk_fail", "__stack_chk_guard", "statx", "memcpy"} <= exported
    tc = make_toolchain("aarch64-linux-musl", warm=("c",))
    (tc.workspace / "guarded.c").write_text(
        "#include <stdio.h>\n#include <string.h>\nint main(int c, char **v) { char b[64];\n"
        "strncpy(b, v[0], sizeof b - 1); b[63] = 0; printf(\"guarded %zu\\n\", strlen(b) > 0); return 0; }\n")
    built = subprocess.run([str(tc.bindir / "zcc"), "-O0", "-g", "-fstack-protector-all", "guarded.c", "-o",
                            "guarded"], cwd=tc.workspace, env=tc.env.as_dict(), capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    argv, why_not = runner_argv(target, tc.workspace / "guarded", dynamic=True)
    assert argv is not None, why_not
    res = sandbox.for_toolchain(tc).run(argv, cwd=tc.workspace, env={"PATH": "/usr/bin:/bin"},
                                        log_path=tmp_path / "run.log")
    assert res.ok and "guarded 1" in (tmp_path / "run.log").read_text()
