"""The dependency cache and prefix: reuse in milliseconds, concurrent installs that never corrupt the prefix, and
the build_dependency tool answering from the cache through dispatch."""

from __future__ import annotations

import json
import threading
import time

import pytest

from crossbuild import kb
from crossbuild.agent.dependency_builder import DependencyBuilder
from crossbuild.env import dependency_cache as deps
from crossbuild.foundation.targets import parse_target
from crossbuild.tools import default_toolset
from crossbuild.tools.context import RunContext


@pytest.fixture
def cache(tmp_path, monkeypatch):
    # the zig caches stay the shared ones: toolchains built here must not rebuild libc
    from crossbuild.foundation import host

    zig_caches = host.zig_caches()
    monkeypatch.setenv("CROSSBUILD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(host, "zig_caches", lambda: zig_caches)
    return tmp_path / "cache"


def _staged(tmp_path, prefix, version="1"):
    root = tmp_path / f"stage-{version}" / str(prefix).lstrip("/")
    (root / "include").mkdir(parents=True)
    (root / "lib" / "pkgconfig").mkdir(parents=True)
    (root / "include" / "zlib.h").write_text(f"/* zlib {version} */\n")
    (root / "lib" / "libz.a").write_bytes(b"!<arch>\n" + version.encode() * 100)
    (root / "lib" / "libz.so").symlink_to("libz.a")
    (root / "lib" / "pkgconfig" / "zlib.pc").write_text(f"prefix={prefix}\nVersion: {version}\n")
    return tmp_path / f"stage-{version}"  # the DESTDIR; the install is below it at the prefix's path


def test_store_then_install_and_reuse(cache, tmp_path):
    prefix = tmp_path / "prefix"
    entry = deps.store("aarch64-linux-musl", "zlib", None, _staged(tmp_path, prefix), prefix=prefix, build_s=20.0,
                       run_id="r1")
    assert deps.lookup("aarch64-linux-musl", "zlib", None).key == entry.key
    assert deps.lookup("riscv64-linux-musl", "zlib", None) is None  # keyed by target
    assert deps.install(entry, prefix) == 4
    assert (prefix / "lib" / "libz.so").is_symlink() and deps.installed(prefix, entry)
    assert [e.source for e in deps.list_cached()] == ["zlib"]
    assert deps.clear("riscv64-linux-musl") == 0 and deps.clear() == 1 and not deps.list_cached()


def test_concurrent_installs_never_corrupt_the_prefix(cache, tmp_path):
    prefix = tmp_path / "prefix"
    entries = [deps.store("aarch64-linux-musl", f"pkg{i}", None, _staged(tmp_path, prefix, str(i)), prefix=prefix,
                          build_s=1.0, run_id=None) for i in range(4)]
    errors = []

    def worker(e):
        try:
            for _ in range(5):
                deps.install(e, prefix)
        except Exception as ex:  # noqa: BLE001 - collected for the assertion
            errors.append(ex)

    threads = [threading.Thread(target=worker, args=(e,)) for e in entries for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    text = (prefix / "include" / "zlib.h").read_text()
    assert text in {f"/* zlib {i} */\n" for i in range(4)}  # one whole file, never a mix
    assert len(list((prefix / ".crossbuild-deps").iterdir())) == 4


def test_build_dependency_tool_reuses_the_cache_in_milliseconds(cache, tmp_path):
    target = parse_target("aarch64-linux-musl")
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    ctx = RunContext.create(root, target, prefix=tmp_path / "prefix", kb=kb.load(), sandbox_backend="none",
                            dependency_builder=DependencyBuilder())
    deps.store(target.name, "zlib", None, _staged(tmp_path, ctx.prefix), prefix=ctx.prefix, build_s=25.0,
               run_id="r0")
    start = time.monotonic()
    r = default_toolset().dispatch(ctx, "build_dependency", json.dumps({"name": "zlib.h"}))
    assert r.ok, r.render()
    assert r.data["cached"] is True and time.monotonic() - start < 1.0
    assert "find_package(ZLIB)" in r.message and "pkg-config zlib" in r.message
    assert (ctx.prefix / "include" / "zlib.h").is_file()
    again = default_toolset().dispatch(ctx, "build_dependency", json.dumps({"name": "ZLIB"}))
    assert again.ok and again.data["files"] == 0  # already installed: nothing copied
    asked = time.monotonic()
    bad = default_toolset().dispatch(ctx, "build_dependency", json.dumps({"name": "libnosuch"}))
    took = time.monotonic() - asked
    assert took - 0.05 <= bad.data["seconds"] <= took + 0.0005  # the whole call, also when it fails (to the ms)
    assert bad.error_type == "command_failed" and "no Debian package ships a file that provides" in bad.message
    assert "finish" not in bad.hint  # the MCP surface has no finish tool: the hint asks for a report


def test_a_failure_is_remembered_only_for_the_same_inputs_and_code(cache, monkeypatch):
    from crossbuild.foundation import host

    inputs = {"depth": 1, "keep_features": False}
    deps.remember_failure("aarch64-linux-musl", "qtbase", "k1", inputs, "cross-building debian:qtbase failed", 1200.0)
    assert deps.failed_before("aarch64-linux-musl", "qtbase", "k1", inputs)["message"].startswith("cross-building")
    assert deps.failed_before("aarch64-linux-musl", "qtbase", "k1", {**inputs, "depth": 2}) is None
    assert deps.failed_before("aarch64-linux-musl", "qtbase", "k2", inputs) is None  # another version or zig
    assert deps.failed_before("riscv64-linux-musl", "qtbase", "k1", inputs) is None
    with monkeypatch.context() as m:  # (undo() would also undo the cache fixture's own patches)
        m.setattr(host, "code_identity", lambda: "another-crossbuild")
        assert deps.failed_before("aarch64-linux-musl", "qtbase", "k1", inputs) is None
    assert deps.failed_before("aarch64-linux-musl", "qtbase", "k1", inputs) is not None
    assert str(deps.deps_root()).startswith(str(cache))  # the test's own cache, never the shared one
    deps.clear("aarch64-linux-musl")
    assert deps.failed_before("aarch64-linux-musl", "qtbase", "k1", inputs) is None
