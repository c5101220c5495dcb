"""A regression test for each way out of the workspace: every one is `permission_denied`, and nothing outside is
read or changed."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

OUTSIDE = ("backup secret", "outside secret")


def _assert_denied(r, *words):
    assert not r.ok and r.error_type == "permission_denied", r.render()
    for w in words:
        assert w in r.render(), (w, r.render())
    assert not any(s in r.message for s in OUTSIDE)


@pytest.mark.parametrize("path", ["../demo-backup/secret.txt", "../../outside.txt", "src/../../demo-backup",
                                  "src/../../../outside.txt"])
def test_dotdot(call, path):
    _assert_denied(call("read_file", {"path": path}), "'..'")
    _assert_denied(call("write_file", {"path": path, "content": "x"}))
    _assert_denied(call("list_files", {"path": path}))


def test_absolute_paths(ctx, call, tmp_path):
    _assert_denied(call("read_file", {"path": "/etc/passwd"}), "outside the workspace", "host paths are useless")
    _assert_denied(call("read_file", {"path": str(tmp_path / "outside.txt")}))
    _assert_denied(call("list_files", {"path": "/"}))
    assert call("read_file", {"path": str(ctx.root / "src" / "CMakeLists.txt")}).ok  # absolute but inside


def test_sibling_folder_with_the_workspace_name_as_prefix(ctx, call):
    sibling = str(ctx.root) + "-backup/secret.txt"  # /w/demo-backup is not inside /w/demo
    _assert_denied(call("read_file", {"path": sibling}))
    _assert_denied(call("write_file", {"path": sibling, "content": "pwned"}))
    assert (ctx.root.parent / "demo-backup" / "secret.txt").read_text() == "backup secret\n"


def test_symlink_to_outside_read_and_write(ctx, call, tmp_path):
    os.symlink(tmp_path / "outside.txt", ctx.root / "src" / "link.txt")
    os.symlink(tmp_path / "w" / "demo-backup", ctx.root / "src" / "linkdir")
    _assert_denied(call("read_file", {"path": "src/link.txt"}), "symlink")
    _assert_denied(call("write_file", {"path": "src/link.txt", "content": "pwned"}), "symlink")
    _assert_denied(call("edit_file", {"path": "src/link.txt", "edits": [{"old": "outside", "new": "x"}]}))
    _assert_denied(call("write_file", {"path": "src/linkdir/new.txt", "content": "pwned"}), "symlink")
    _assert_denied(call("run_command", {"command": "cat src/link.txt"}))
    assert (tmp_path / "outside.txt").read_text() == "outside secret\n"
    assert not (tmp_path / "w" / "demo-backup" / "new.txt").exists()


def test_symlink_swapped_in_before_the_write(ctx, tmp_path):
    """The check passes on a real file; then the file is replaced by a symlink to outside before the write: the
    rename replaces the link itself and the outside file is untouched."""
    from crossbuild.tools.files import atomic_write

    target = ctx.root / "src" / "victim.txt"
    target.write_text("inside\n")
    real = target.resolve()  # what authorization saw
    target.unlink()
    os.symlink(tmp_path / "outside.txt", target)  # swapped in between check and write
    atomic_write(ctx, real, b"written\n")
    assert (tmp_path / "outside.txt").read_text() == "outside secret\n"
    assert not target.is_symlink() and target.read_text() == "written\n"


def test_parent_folder_swapped_for_a_symlink_before_the_write(ctx, tmp_path):
    from crossbuild.tools.base import PermissionDenied
    from crossbuild.tools.files import atomic_write

    sub = ctx.root / "src" / "sub"
    sub.mkdir()
    real = (sub / "f.txt").resolve()
    sub.rmdir()
    os.symlink(tmp_path / "w" / "demo-backup", sub)
    with pytest.raises(PermissionDenied):
        atomic_write(ctx, real, b"pwned")
    assert not (tmp_path / "w" / "demo-backup" / "f.txt").exists()


def test_read_racing_a_symlink_swap_never_returns_the_outside_file(ctx, call, tmp_path):
    """A build flips a file between a regular file and a link out, as fast as it can, while the model reads it: the
    check and the open are one step (no link followed below the workspace), so the secret never comes back."""
    import threading

    victim = ctx.root / "src" / "flip.txt"
    victim.write_text("inside\n")
    stop = threading.Event()
    flips = 0

    def flip() -> None:
        nonlocal flips
        while not stop.is_set():
            tmp = victim.with_name(".flip.tmp")
            os.symlink(tmp_path / "outside.txt", tmp)
            os.replace(tmp, victim)
            victim.with_name(".flip.reg").write_text("inside\n")
            os.replace(victim.with_name(".flip.reg"), victim)
            flips += 2

    t = threading.Thread(target=flip)
    t.start()
    results, denied = [], False
    deadline = time.monotonic() + 120  # on a loaded machine the flipping thread can be slow to get its turns
    try:
        while time.monotonic() < deadline and (len(results) < 1500 or flips <= 100 or not denied):
            results.append(call("read_file", {"path": "src/flip.txt"}))
            denied = denied or results[-1].error_type == "permission_denied"
    finally:
        stop.set()
        t.join()
    assert flips > 100 and any(r.error_type == "permission_denied" for r in results)  # the race was on
    assert not any("outside secret" in r.render() for r in results)
    assert any(r.ok and "inside" in r.message for r in results)  # the file is readable when it is a file
    odd = [r.render() for r in results if not r.ok and r.error_type not in ("permission_denied", "not_found")]
    assert not odd, odd[:3]  # never internal


@pytest.mark.parametrize("path", ["x" * 6000, "src/" + "a/" * 3000, "src/" + "b" * 300 + ".c"])
def test_absurd_paths_are_argument_errors_not_internal(call, path):
    for name, args in (("read_file", {"path": path}), ("list_files", {"path": path}),
                       ("write_file", {"path": path, "content": "x"}), ("edit_file", {"path": path, "edits": [
                           {"old": "a", "new": "b"}]}), ("run_command", {"command": "ls", "cwd": path}),
                       ("verify", {"path": path})):
        r = call(name, args)
        assert not r.ok and r.error_type in ("invalid_arguments", "not_found"), (name, r.render()[:300])
    r = call("run_command", {"command": f"ls {path}"})  # a plain argument is the program's to judge
    assert not r.ok and r.error_type == "command_failed" and not r.internal


@pytest.mark.parametrize("name", [".env", ".env.local", "deploy.pem", "tls.key", "id_rsa", "id_ed25519.pub",
                                  ".netrc", ".git-credentials", ".ssh/config"])
def test_credential_files_inside_the_workspace(ctx, call, name):
    f = ctx.root / "src" / name
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("TOKEN=hunter2\n")
    _assert_denied(call("read_file", {"path": f"src/{name}"}), "credential")
    _assert_denied(call("write_file", {"path": f"src/{name}", "content": "x"}), "credential")
    _assert_denied(call("run_command", {"command": f"cat src/{name}"}), "credential")
    assert f.read_text() == "TOKEN=hunter2\n"


@pytest.mark.parametrize("arg", ["-I/usr/include", "-L/usr/lib/x86_64-linux-gnu", "--prefix=/usr",
                                 "-DZLIB_ROOT=/opt/zlib", "-DCMAKE_INSTALL_PREFIX:PATH=/usr/local",
                                 "-Wl,-rpath,/usr/lib", "CFLAGS=-O2 -I/usr/include", "-isystem/usr/include",
                                 "--with-zlib=/usr", "PKG_CONFIG_PATH=/usr/lib/pkgconfig:/usr/share/pkgconfig",
                                 "-I../../outside", "/etc/passwd"])
def test_glued_and_plain_host_paths_in_commands(call, arg):
    r = call("run_command", {"command": f"cmake -S src -B build '{arg}'"})
    _assert_denied(r)
    assert "workspace" in r.render()


def test_paths_into_the_workspace_and_prefix_are_allowed_in_commands(ctx, call):
    from crossbuild.tools.command import RunCommandArgs, _authorize

    for arg in (f"-DZLIB_ROOT={ctx.prefix}", f"--prefix={ctx.prefix}", f"-I{ctx.root}/src/include", "-Iinclude",
                "-DCMAKE_BUILD_TYPE=Release", "--with-zlib", "2>/dev/null"[1:]):
        _authorize(ctx, RunCommandArgs(command=f"cmake -S src -B build '{arg}'"))


@pytest.mark.parametrize("command", ["cmake -S src -B build && make -C build", "make | tee log", "make > out.txt",
                                     "make; rm -rf /", "cat < src/CMakeLists.txt", "make &", "echo $(id)",
                                     "echo `id`", "make CC=$HOME/cc", "(make)"])
def test_shell_syntax_is_refused_with_a_clear_message(call, command):
    r = call("run_command", {"command": command})
    _assert_denied(r)
    assert "shell" in r.message


def test_programs_off_the_allow_list(call):
    _assert_denied(call("run_command", {"command": "bash -c 'cat /etc/shadow'"}), "no shell")
    _assert_denied(call("run_command", {"command": "curl http://example.com"}), "allow-list")
    _assert_denied(call("run_command", {"command": "gcc -c x.c"}), "zig wrapper")
    _assert_denied(call("run_command", {"command": "/usr/bin/python3 -c 1"}), "outside the workspace")
    _assert_denied(call("run_command", {"command": "find . -exec rm {} +"}), "-exec")


def test_a_timeout_above_the_cap_is_refused(call):
    r = call("run_command", {"command": "true", "timeout": 100_000})
    assert r.error_type == "invalid_arguments" and "3600" in r.message


def test_cmake_environment_shows_no_secrets(ctx, call, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-should-never-leak")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-should-never-leak")
    r = call("run_command", {"command": "cmake -E environment"})
    assert r.ok, r.render()
    log = (ctx.root / r.data["log"]).read_text()
    assert "CROSSBUILD_TARGET=aarch64-linux-musl" in log
    assert "should-never-leak" not in log and "API_KEY" not in log


@pytest.mark.parametrize(("env", "why"), [({"LD_PRELOAD": "/tmp/evil.so"}, "loaded"), ({"CC": "gcc"}, "toolchain"),
                                          ({"PATH": "/tmp:/usr/bin"}, "toolchain"),
                                          ({"CFLAGS": "-O2 -I/usr/include"}, "outside the workspace"),
                                          ({"BAD NAME": "x"}, "not a valid")])
def test_command_environment_is_guarded(call, env, why):
    r = call("run_command", {"command": "true", "env": env})
    assert not r.ok and why in r.render()


def test_command_environment_reaches_the_command(ctx, call):
    r = call("run_command", {"command": "cmake -E environment", "env": {"CFLAGS": "-O1", "CROSSBUILD_NO_WERROR": "1"}})
    assert r.ok and r.data["env"] == {"CFLAGS": "-O1", "CROSSBUILD_NO_WERROR": "1"}
    log = (ctx.root / r.data["log"]).read_text()
    assert "CFLAGS=-O1" in log and "CROSSBUILD_NO_WERROR=1" in log


def test_a_test_suites_public_certificate_is_kept_and_its_private_key_left_out(tmp_path):
    """Public test certificates (curl's, libssh's tests/certs) are needed by the tests; private keys never are."""
    from crossbuild import kb
    from crossbuild.env import workspace
    from crossbuild.foundation.targets import parse_target
    from crossbuild.tools import default_toolset
    from crossbuild.tools.context import RunContext

    certs = tmp_path / "proj" / "tests" / "certs"
    certs.mkdir(parents=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
                    "ca.pub.pem", "-subj", "/CN=crossbuild test", "-days", "1"], cwd=certs, check=True,
                   capture_output=True, timeout=120)
    (certs / "both.pem").write_bytes((certs / "ca.pub.pem").read_bytes() + (certs / "server.key").read_bytes())
    (certs / "notes.pem").write_text("TOKEN=hunter2\n")  # a key-like name with no public block: a secret
    ws = workspace.prepare(str(tmp_path / "proj"), tmp_path / "ws")
    kept = {p.name for p in (ws.src / "tests" / "certs").iterdir()}
    assert kept == {"ca.pub.pem"}
    assert {r.split(" ")[0] for r in ws.left_out} >= {"tests/certs/server.key", "tests/certs/both.pem",
                                                        "tests/certs/notes.pem"}
    ctx = RunContext.create(ws.root, parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix", kb=kb.load())
    r = default_toolset().dispatch(ctx, "read_file", json.dumps({"path": "src/tests/certs/ca.pub.pem"}))
    assert r.ok and "BEGIN CERTIFICATE" in r.message
    r = default_toolset().dispatch(ctx, "list_files", json.dumps({"path": "src/tests/certs"}))
    assert "ca.pub.pem" in r.message
