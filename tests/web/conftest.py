"""A real `crossbuild serve` on a free loopback port, and Debian's chromium driven headless by Playwright."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import CLI

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# as root, without a GPU, offline: no sandbox of chromium's own, no calls home
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    root: Path
    db: Path
    proc: subprocess.Popen
    log: Path

    def client(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kw)

    def post(self, path: str, body: dict, **kw) -> httpx.Response:
        with self.client() as c:
            return c.post(path, json=body, headers={"Origin": self.url, **kw.pop("headers", {})}, **kw)


def start_server(tmp: Path, *extra: str, env: dict[str, str] | None = None) -> Server:
    root = tmp / "root"
    root.mkdir(exist_ok=True)
    port = free_port()
    log = tmp / f"serve-{port}.log"
    proc = subprocess.Popen([*CLI, "serve", "--port", str(port), "--db", str(tmp / "runs.db"), "--root", str(root),
                             "--runs-dir", str(tmp / "runs"), "--no-config", *extra],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=tmp,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), **(env or {})})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"crossbuild serve exited {proc.returncode}: {log.read_text()}")
        try:
            httpx.get(url + "/static/style.css", timeout=2)
            return Server(url, root, tmp / "runs.db", proc, log)
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"crossbuild serve did not answer: {log.read_text()}")


def stop_server(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(30)
    except subprocess.TimeoutExpired:
        server.proc.kill()


@pytest.fixture
def server(tmp_path):
    s = start_server(tmp_path)
    yield s
    stop_server(s)


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright  # a dev dependency: the browser tests always run

    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is needed for the browser tests: scripts/setup.sh installs it")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
