"""The bubblewrap sandbox against a real malicious build (CMake execute_process), plus limits and tree-kill."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crossbuild.env import sandbox
from crossbuild.env.sandbox import Limits

pytestmark = pytest.mark.skipif(sandbox.probe().backend != "bubblewrap",
                                reason="bubblewrap unusable here: " + sandbox.probe().reason)

MALICIOUS_CMAKE = r"""
cmake_minimum_required(VERSION 3.16)
project(evil NONE)
execute_process(COMMAND cat "@SECRET@" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "READ_SECRET rc=${rc} out=[${out}]")
execute_process(COMMAND ls -A /root RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "LIST_ROOT rc=${rc} out=[${out}]")
execute_process(COMMAND python3 -c
                "import socket; s=socket.create_connection(('127.0.0.1', @PORT@), 3); print('CONNECTED')"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "NETWORK rc=${rc} out=[${out}]")
execute_process(COMMAND sh -c "echo pwned > '@OUTSIDE@/pwned.txt'; echo pwned > /root/pwned.txt"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
message(STATUS "WRITE_OUTSIDE rc=${rc}")
execute_process(COMMAND bash -c "bomb(){ bomb | bomb & }; bomb; while :; do :; done")
message(STATUS "UNREACHABLE")
"""


@pytest.fixture
def listener():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(5)
    yield s.getsockname()[1]
    s.close()


def snapshot(path: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in path.rglob("*")}


def test_malicious_cmake_project_is_contained(tmp_path, listener):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "CMakeLists.txt").write_text(
        MALICIOUS_CMAKE.replace("@SECRET@", str(secret)).replace("@OUTSIDE@", str(outside))
        .replace("@PORT@", str(listener)))
    before = snapshot(outside)
    box = sandbox.for_tree(ws)
    assert box.backend == "bubblewrap"
    start = time.monotonic()
    res = box.run(["cmake", "-S", "src", "-B", "build"], cwd=ws, env={"PATH": "/usr/bin:/bin", "HOME": str(ws)},
                  log_path=ws / "log.txt", limits=Limits(timeout_s=20, max_processes=256))
    elapsed = time.monotonic() - start
    log = Path(res.log_path).read_text()

    assert "TOP-SECRET-VALUE" not in log
    assert "READ_SECRET rc=1" in log  # cat: No such file or directory
    listing = log.split("LIST_ROOT")[1].split("\n")[0]
    real_root = {p.name for p in Path("/root").iterdir()} - {".cache", ".pyenv"}  # only mounted paths appear
    assert real_root and not any(name in listing for name in real_root), listing
    assert "CONNECTED" not in log and "NETWORK rc=1" in log
    assert "WRITE_OUTSIDE rc=" in log
    assert "UNREACHABLE" not in log
    assert res.stopped == "timeout" and res.returncode is None
    assert elapsed < 40
    assert snapshot(outside) == before
    assert not (outside / "pwned.txt").exists() and not Path("/root/pwned.txt").exists()
    assert secret.read_text() == "TOP-SECRET-VALUE"
    time.sleep(0.5)
    assert bomb_processes() == []


def bomb_processes() -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and d.name != str(os.getpid()):
            try:
                if b"bomb(){" in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def test_home_and_root_are_not_the_real_ones(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    box = sandbox.for_tree(ws)
    res = box.run(["sh", "-c", "ls -A /root /home 2>&1; cat /etc/shadow 2>&1; echo ok > inside.txt"], cwd=ws,
                  env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "log")
    log = Path(res.log_path).read_text()
    assert (ws / "inside.txt").read_text() == "ok\n"  # the workspace is writable
    assert "cat: /etc/shadow: No such file" in log  # /etc is an allow-list
    assert "No such file" in log


def test_output_limit_and_cancel(tmp_path):
    import threading
    ws = tmp_path / "ws"
    ws.mkdir()
    box = sandbox.for_tree(ws)
    res = box.run(["yes"], cwd=ws, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "log",
                  limits=Limits(max_output_bytes=1 << 20, timeout_s=30))
    assert res.stopped == "output_limit" and res.output_bytes == 1 << 20
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    res = box.run(["sleep", "30"], cwd=ws, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "log2",
                  cancel=cancel)
    assert res.stopped == "cancelled" and res.duration_s < 5
    assert box.watch.time_limits_hit == 0  # neither was stopped by time
    res = box.run(["sleep", "30"], cwd=ws, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "log3",
                  limits=Limits(timeout_s=0.5))
    assert res.stopped == "timeout" and box.watch.time_limits_hit == 1  # what a remembered failure must not have


def test_cpu_limit_kills_busy_loop(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    box = sandbox.for_tree(ws)
    res = box.run(["sh", "-c", "while :; do :; done"], cwd=ws, env={"PATH": "/usr/bin:/bin"},
                  log_path=tmp_path / "log", limits=Limits(cpu_s=1, timeout_s=30))
    assert res.stopped is None and res.returncode != 0 and res.duration_s < 10


def test_doctor_reports_sandbox_truthfully():
    from crossbuild.env.doctor import run_checks
    check = next(c for c in run_checks() if c.name == "sandbox")
    assert check.status == "ok" and check.detail.startswith("bubblewrap")


@pytest.mark.skipif(os.geteuid() != 0, reason="an unprivileged crossbuild runs test programs as itself")
def test_test_programs_run_as_an_ordinary_user_on_a_system_they_do_not_own(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    loader_root = tmp_path / "loader"  # stands for qemu -L's folder, which answers a program's stat("/")
    (loader_root / "lib").mkdir(parents=True)
    box = sandbox.for_tree(ws).for_test_programs(loader_roots=[loader_root])
    script = (f"id -u; stat -c %u / {loader_root}; ls {loader_root}; echo made > {ws}/by-test; "
              "touch /planted 2>/dev/null || echo root-read-only; "
              f"chown 0:0 {ws}/by-test 2>&1 | sed 's/.*: //'")
    res = box.run(["sh", "-c", script], cwd=ws, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "run.log")
    assert res.ok, (tmp_path / "run.log").read_text()
    lines = (tmp_path / "run.log").read_text().splitlines()[2:]
    # `/` is root's, as on a machine (root there is the host's nobody); chowning to root is refused as a machine
    # refuses an ordinary user, not "Invalid argument" as for an id the namespace lacks (libuv's fs_chown)
    assert lines == [str(sandbox.ORDINARY_UID), "0", "0", "lib", "root-read-only", "Operation not permitted"]
    written = (ws / "by-test").stat()  # on the host the file is the invoking user's, not uid 1000's
    assert (written.st_uid, written.st_gid) == (0, 0)
    assert not Path("/planted").exists()
    # the build's own sandbox is unchanged: root inside, as before
    res = sandbox.for_tree(ws).run(["id", "-u"], cwd=ws, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "b.log")
    assert res.ok and (tmp_path / "b.log").read_text().splitlines()[2:] == ["0"]


@pytest.mark.skipif(not sandbox.exec_handlers_work(),
                    reason="this kernel has no binfmt_misc per user namespace (Linux 6.7)")
def test_a_handler_for_programs_test_programs_start_is_theirs_alone_and_beyond_their_reach(tmp_path):
    """The registration qemu gets for a target's programs (here: files ending .xbtest, run by /bin/cat) holds in
    the test sandbox, which cannot remove it or mount its own, and never on the host."""
    ws = tmp_path / "ws"
    ws.mkdir()
    prog = ws / "hello.xbtest"
    prog.write_text("run by the handler\n")
    prog.chmod(0o755)
    box = sandbox.for_tree(ws).for_test_programs(exec_handler=":crossbuild-xbtest:E::xbtest::/bin/cat:F")
    script = (f"{prog}; ls /proc/sys/fs/binfmt_misc; echo -1 > /proc/sys/fs/binfmt_misc/crossbuild-xbtest || "
              f"echo cannot-remove; mkdir -p /tmp/m; mount -t binfmt_misc b /tmp/m 2>/dev/null || echo cannot-mount; "
              f"id -u; chown 0:0 {prog} 2>&1 | sed 's/.*: //'; {prog}")
    res = box.run(["sh", "-c", script], cwd=ws, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "run.log")
    lines = (tmp_path / "run.log").read_text().splitlines()[2:]
    assert res.ok and lines[0] == lines[-1] == "run by the handler", lines
    assert "cannot-remove" in lines and "cannot-mount" in lines
    if os.geteuid() == 0:  # as without the handler: an ordinary user, refused a chown to root (two namespaces deep)
        assert lines[-3:-1] == [str(sandbox.ORDINARY_UID), "Operation not permitted"], lines
    # the host: no such handler, the file is not a program there
    host = Path("/proc/sys/fs/binfmt_misc")
    assert not (host / "crossbuild-xbtest").exists()
    with pytest.raises(OSError) as e:
        subprocess.run([str(prog)], capture_output=True)
    assert e.value.errno == errno.ENOEXEC


@pytest.mark.skipif(not sandbox.exec_handlers_work() or not Path("/usr/bin/valgrind").is_file(),
                    reason="needs binfmt_misc per user namespace (Linux 6.7) and the build machine's valgrind")
def test_the_build_machines_valgrind_is_hidden_where_target_programs_run(tmp_path):
    """json-c's harness runs each test under valgrind when `which valgrind` finds one: the build machine's cannot
    run the target's programs, so where they run it is not there; builds still see it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    probe = "command -v valgrind || echo none; test -x /usr/bin/valgrind && echo runnable || echo not-runnable"
    box = sandbox.for_tree(ws).for_test_programs(exec_handler=":crossbuild-xbtest:E::xbtest::/bin/cat:F")
    res = box.run(["sh", "-c", probe], cwd=ws, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "t.log")
    assert res.ok and (tmp_path / "t.log").read_text().splitlines()[2:] == ["none", "not-runnable"]
    res = sandbox.for_tree(ws).run(["sh", "-c", probe], cwd=ws, env={"PATH": "/usr/bin:/bin"},
                                   log_path=tmp_path / "b.log")
    assert res.ok and (tmp_path / "b.log").read_text().splitlines()[2:] == ["/usr/bin/valgrind", "runnable"]
    assert os.access("/usr/bin/valgrind", os.X_OK), "the host's is untouched"


def test_the_namespace_helper_refuses_a_malformed_map_or_a_command_without_its_placeholder():
    """env/userns_exec.py runs before bubblewrap, so its refusals are one line and exit 125, running nothing."""
    from crossbuild.env import userns_exec
    helper = [sys.executable, "-I", "-S", userns_exec.__file__]
    for argv, said in ((["1000:0,root", "--", "touch", "{userns}"], "a map is inside:outside"),
                       (["1000:0", "--", "touch", "nothing"], "usage:"),
                       (["1000:0", "touch", "{userns}"], "usage:")):
        r = subprocess.run([*helper, *argv], capture_output=True, text=True, cwd="/tmp")
        assert r.returncode == 125 and said in r.stderr and len(r.stderr.splitlines()) == 1, (argv, r.stderr)
    assert not Path("/tmp/{userns}").exists() and not Path("/tmp/nothing").exists()


def test_a_watched_command_printing_a_monstrous_count_runs_to_its_end(tmp_path):
    """A build prints `[1/<5000 digits>]` while someone watches its progress: the count is ignored, the output is
    still copied whole into the log and the command ends on its own (a reader's failure once stopped the copying,
    and the command hung on a full pipe until its timeout)."""
    from crossbuild.foundation.progress import Watch

    ws = tmp_path / "ws"
    ws.mkdir()
    box = sandbox.for_tree(ws)
    notes = []
    box.watch = Watch(sink=notes.append)
    script = "printf '[1/%s]\\n' $(printf '9%.0s' $(seq 5000)); seq 1 200000; echo done"
    res = box.run(["sh", "-c", script], cwd=ws, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "m.log",
                  limits=sandbox.Limits(timeout_s=60))
    assert res.ok and res.stopped is None, res
    assert (tmp_path / "m.log").read_text().rstrip().endswith("200000\ndone")
    assert [n.message for n in notes] == [f"m: sh -c {script}"[:126]]  # the phase only; no count from the monster


def test_a_folder_the_host_gains_while_a_sandbox_lives_does_not_break_its_next_command(tmp_path, monkeypatch):
    """Build-machine packages' data folders are laid over a cover of the host's /usr/share, with a mount point for
    each host child. A package installed meanwhile (apt beside an evaluation) added a child the cover lacked, and
    every later command of that sandbox failed to start ("bwrap: Can't mkdir /usr/share/gst-plugins-base")."""
    from crossbuild.env import build_tools

    top = tmp_path / "share"
    (top / "old").mkdir(parents=True)
    unpacked = tmp_path / "pkg" / "provided"
    unpacked.mkdir(parents=True)
    (unpacked / "table.txt").write_text("data\n")
    monkeypatch.setattr(build_tools, "data_tops", lambda: [str(top)])
    monkeypatch.setattr(build_tools, "shared_data", lambda t: {"provided": unpacked} if t == str(top) else {})
    ws = tmp_path / "ws"
    ws.mkdir()
    box = sandbox.for_tree(ws)
    listing = ["sh", "-c", f"ls {top}; cat {top}/provided/table.txt"]
    first = box.run(listing, cwd=ws, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "log1")
    assert first.ok and "data" in Path(first.log_path).read_text()
    (top / "installed-meanwhile").mkdir()
    second = box.run(listing, cwd=ws, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "log2")
    log = Path(second.log_path).read_text()
    assert second.ok, log
    assert "installed-meanwhile" in log and "old" in log and "data" in log
