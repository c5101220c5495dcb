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
    (lib / "MUSL_VERSION").write_text(musl_sysroot.MUSL_VERSION + "\n")
    assert musl_sysroot.sysroot_for("aarch64") == musl_sysroot.sysroot_dir("aarch64")
