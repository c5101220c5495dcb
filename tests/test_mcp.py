"""`crossbuild mcp` through real MCP client sessions: stdio (a subprocess) and streamable HTTP (a uvicorn server)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from crossbuild.trace.phases import command_phase
from tests.conftest import EXAMPLE, GOLDEN_MISMATCH

CROSSBUILD = str(Path(sys.executable).with_name("crossbuild"))
TOOLS = {"open_workspace", "list_files", "read_file", "write_file", "edit_file", "run_command", "search_knowledge",
         "build_dependency", "provide_build_tool", "build_status", "verify"}


def _text(result) -> str:
    return result.content[0].text


async def _exercise_every_tool(c: Client) -> None:
    listed = {t.name: t for t in (await c.list_tools()).tools}
    assert set(listed) == TOOLS
    assert listed["read_file"].annotations.read_only_hint is True
    assert listed["run_command"].annotations.destructive_hint is True
    assert listed["read_file"].input_schema["required"] == ["path"]
    assert listed["read_file"].input_schema["additionalProperties"] is False
    for level in ("`tested`", "`exercised`", "`built`"):  # a model learns what each proof level means
        assert level in listed["verify"].description

    r = await c.call_tool("list_files", {"path": "src", "depth": 1})
    assert not r.is_error and "CMakeLists.txt" in _text(r)
    r = await c.call_tool("read_file", {"path": "src/CMakeLists.txt", "limit": 3})
    assert not r.is_error and "call read_file with offset=4" in _text(r)
    r = await c.call_tool("write_file", {"path": "src/NOTE.txt", "content": "cross\n"})
    assert not r.is_error and "created src/NOTE.txt" in _text(r)
    r = await c.call_tool("edit_file", {"path": "src/NOTE.txt", "edits": [{"old": "cross", "new": "crossbuild"}]})
    assert not r.is_error and "+crossbuild" in _text(r)
    r = await c.call_tool("run_command", {"command": "cmake -E echo hello"})
    assert not r.is_error and _text(r).startswith("[exit=0]") and r.structured_content["data"]["exit_code"] == 0
    r = await c.call_tool("search_knowledge", {"query": "Could NOT find ZLIB (missing: ZLIB_LIBRARY)"})
    assert not r.is_error and "cmake-package-not-found" in _text(r)
    r = await c.call_tool("build_status", {})
    assert not r.is_error and "build system in src/: cmake" in _text(r)
    r = await c.call_tool("build_dependency", {"name": "libnosuchthing"})
    assert r.is_error and "no Debian package ships a file that provides" in _text(r)
    r = await c.call_tool("verify", {"path": "src", "run_tests": False})
    assert r.is_error and "NOT VERIFIED" in _text(r)
    r = await c.call_tool("provide_build_tool", {"name": "/home/user/.ssh/id_rsa"})  # refused before any lookup
    assert r.is_error and "is not a data file of a Debian package" in _text(r)

    # tool failures are isError results the model can act on
    r = await c.call_tool("read_file", {"path": "../../../etc/passwd"})
    assert r.is_error and "permission_denied" in _text(r) and "root:" not in _text(r)
    r = await c.call_tool("run_command", {"command": "make && rm -rf /"})
    assert r.is_error and "without a shell" in _text(r)
    r = await c.call_tool("read_file", {"path": 3, "colour": "red"})
    assert r.is_error and "path: Input should be a valid string" in _text(r) and "colour: unknown field" in _text(r)
    # unknown tools are protocol errors
    with pytest.raises(MCPError, match="unknown tool 'bash'"):
        await c.call_tool("bash", {"command": "id"})


def test_stdio_session_serves_every_tool(tmp_path):
    params = StdioServerParameters(command=CROSSBUILD, args=["mcp", str(EXAMPLE), "--target", "aarch64-linux-musl"],
                                   cwd=str(tmp_path), env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"],
                                                           **_cache_env()})

    async def main():
        async with Client(params) as c:
            await _exercise_every_tool(c)

    anyio.run(main)
    assert (EXAMPLE / "src").exists() and not (EXAMPLE / "NOTE.txt").exists()  # the original is never modified
    assert len(list((tmp_path / "crossbuild-runs").iterdir())) == 1


def test_stdio_session_without_a_workspace_opens_one(tmp_path):
    params = StdioServerParameters(command=CROSSBUILD, args=["mcp", "--root", str(tmp_path),
                                                             "--root", str(EXAMPLE.parent)], cwd=str(tmp_path),
                                   env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **_cache_env()})

    async def main():
        async with Client(params) as c:
            r = await c.call_tool("build_status", {})
            assert r.is_error and "call open_workspace" in _text(r)
            r = await c.call_tool("open_workspace", {"source": str(EXAMPLE), "target": "aarch64-linux-mus"})
            assert r.is_error and "aarch64-linux-musl" in _text(r)  # close match offered
            r = await c.call_tool("open_workspace", {"workspace": str(tmp_path), "target": "riscv64-linux-musl"})
            assert r.is_error and "not a crossbuild workspace" in _text(r)
            r = await c.call_tool("open_workspace", {"source": str(EXAMPLE), "target": "riscv64-linux-musl"})
            assert not r.is_error, _text(r)
            r = await c.call_tool("build_status", {})
            assert "target: riscv64-linux-musl" in _text(r)

    anyio.run(main)


class _Progress:
    """A client's progress callback: what the server said, in order."""

    def __init__(self):
        self.numbers: list[float] = []
        self.messages: list[str] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.numbers.append(progress)
        self.messages.append(message or "")


def _cache_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("CROSSBUILD_") or k == "ZIG_GLOBAL_CACHE_DIR"}


TOKEN = "test-token-0123456789abcdef"


def authed(url: str, token: str = TOKEN):
    """A streamable-HTTP transport that sends the bearer token, as an MCP client configured with headers does."""
    return streamable_http_client(url, http_client=create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}))


@pytest.fixture
def http_server(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = tmp_path / "project"
    shutil.copytree(EXAMPLE, src)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    proc = subprocess.Popen([CROSSBUILD, "mcp", str(src), "-t", "aarch64-linux-musl", "--transport", "http",
                             "--port", str(port), "--token-file", str(token_file), "--root", str(tmp_path),
                             "--root", str(EXAMPLE.parent)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail(f"MCP HTTP server did not start: {proc.stdout.read().decode()}")
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


def test_streamable_http_serves_every_tool(http_server):
    async def main():
        async with Client(authed(http_server)) as c:
            await _exercise_every_tool(c)

    anyio.run(main)


def test_http_without_the_bearer_token_gets_401_and_runs_nothing(http_server, tmp_path):
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "run_command", "arguments": {"command": "touch pwned"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for auth in (None, "Bearer wrong-token-0123456789", f"Basic {TOKEN}", f"Bearer {TOKEN}x"):
        r = httpx.post(http_server, json=call, headers={**headers, **({"Authorization": auth} if auth else {})})
        assert r.status_code == 401, (auth, r.status_code, r.text)
    assert not list(tmp_path.rglob("pwned"))  # the host: nothing ran

    async def wrong_token():
        async with Client(authed(http_server, "not-the-token-0123456789")) as c:
            await c.list_tools()

    with pytest.raises(Exception):  # noqa: B017 - the client surfaces the 401 its own way
        anyio.run(wrong_token)


def test_each_http_session_has_its_own_workspace_and_target(http_server):
    async def main():
        async with Client(authed(http_server), mode="legacy") as a, Client(authed(http_server), mode="legacy") as b:
            ra = await a.call_tool("open_workspace", {"source": str(EXAMPLE), "target": "aarch64-linux-musl"})
            rb = await b.call_tool("open_workspace", {"source": str(EXAMPLE), "target": "x86_64-windows-gnu"})
            assert not ra.is_error and not rb.is_error
            assert ra.structured_content["data"]["workspace"] != rb.structured_content["data"]["workspace"]
            assert "target: aarch64-linux-musl" in _text(await a.call_tool("build_status", {}))
            assert "target: x86_64-windows-gnu" in _text(await b.call_tool("build_status", {}))
        async with Client(authed(http_server)) as stateless:  # 2026-07-28 HTTP: no session to keep a workspace in
            r = await stateless.call_tool("open_workspace", {"source": str(EXAMPLE), "target": "aarch64-linux-musl"})
            assert r.is_error and "no MCP session" in _text(r)

    anyio.run(main)


def _state(root: Path) -> dict[str, tuple]:
    from tests.test_trust_boundary import tree_state
    return tree_state(root)


def test_an_mcp_client_gets_nothing_outside_the_roots(tmp_path):
    """As a hostile client meets the server: host folders outside --root, links out of it, another workspace,
    credentials in a project, absurd paths. Afterwards the host is checked, not the messages."""
    root = tmp_path / "allowed"
    shutil.copytree(EXAMPLE, root / "project")
    (root / "project" / ".env").write_text("OPENAI_API_KEY=sk-PROJECT-SECRET-42\n")
    (root / "project" / "id_ed25519").write_text("PRIVATE-KEY-PROJECT-SECRET-42\n")
    (root / "project" / ".aws").mkdir()
    (root / "project" / ".aws" / "credentials").write_text("aws_secret=PROJECT-SECRET-42\n")
    home = tmp_path / "home"
    (home / "src").mkdir(parents=True)
    (home / ".xbuild").mkdir()
    (home / "src" / "notes.txt").write_text("HOME-SECRET-17\n")
    (root / "escape").symlink_to(home)
    before = _state(home)
    params = StdioServerParameters(command=CROSSBUILD, args=["mcp", "--root", str(root)], cwd=str(tmp_path),
                                   env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **_cache_env()})

    async def main():
        async with Client(params) as c:
            for args in ({"source": str(home)}, {"source": str(root / "escape")}, {"source": "/etc"},
                         {"source": str(root / "project"), "workspace": str(home / "new")},
                         {"workspace": str(home)}, {"workspace": str(root / "escape")},
                         {"source": str(root / "project"), "workspace": str(root / "escape" / "ws")}):
                r = await c.call_tool("open_workspace", {**args, "target": "aarch64-linux-musl"})
                assert r.is_error and r.structured_content["error_type"] == "permission_denied", (args, _text(r))
            r = await c.call_tool("open_workspace", {"source": "x" * 6000, "target": "aarch64-linux-musl"})
            assert r.is_error and r.structured_content["error_type"] == "invalid_arguments", _text(r)

            # a workspace path checked one way and used another: `~` and `..` after a link are read once, as checked
            home_depth = len(Path(os.environ["HOME"]).parts) - 1  # ~/../.. is / as checked, the cwd as used before
            sneaky = "~/" + "../" * home_depth + str(root / "ws-from-home").lstrip("/")
            r = await c.call_tool("open_workspace", {"source": str(root / "project"), "workspace": sneaky,
                                                     "target": "aarch64-linux-musl"})
            assert not r.is_error and r.structured_content["data"]["workspace"] == str(root / "ws-from-home")

            r = await c.call_tool("open_workspace", {"source": str(root / "project"), "target": "aarch64-linux-musl"})
            assert not r.is_error and ".env" in _text(r) and "credential" in _text(r)
            for command in ("grep -rE S.CRET-4. src", "cat src/.env", "find src -name id_ed25519"):
                r = await c.call_tool("run_command", {"command": command})
                output = _text(r).split("\n", 1)[1]  # what the command printed, not its echo
                assert "SECRET-42" not in output and "id_ed25519" not in output, _text(r)
            r = await c.call_tool("read_file", {"path": "src/" + "a/" * 3000 + "x.c"})
            assert r.is_error and r.structured_content["error_type"] == "invalid_arguments", _text(r)
            r = await c.call_tool("build_dependency", {"name": str(home)})
            assert r.is_error and "path or a URL" in _text(r)

    anyio.run(main)
    assert _state(home) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["allowed", "home"]  # nothing made beside the roots
    copies = [p for p in (root / "crossbuild-runs").rglob("*") if p.is_file() and not p.is_symlink()]
    assert copies and not [p for p in copies if b"SECRET-42" in p.read_bytes()]


def _git_repo(folder: Path, secret: str) -> Path:
    """A git repository with one commit holding SECRET, and a bare clone of it beside it (folder.git)."""
    folder.mkdir(parents=True)
    (folder / "CMakeLists.txt").write_text(f"project(p C) # {secret}\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "c"]):
        subprocess.run([*git, *args], cwd=folder, check=True, capture_output=True)
    subprocess.run([*git, "clone", "-q", "--bare", str(folder), str(folder) + ".git"], check=True,
                   capture_output=True)
    return folder


def test_every_form_of_source_obeys_the_roots(tmp_path):
    """A client names host repositories outside --root as git URLs (file://…/.git, a bare repository's path, a
    path that merely ends in .git) and as git's helper transports. Afterwards no workspace holds the outside
    repository's content and no helper ran; the same forms inside a root work."""
    root, outside = tmp_path / "allowed", tmp_path / "private"
    repo = _git_repo(outside / "repo", "OUTSIDE-SECRET-91")
    _git_repo(root / "inside", "inside-content")
    (root / "link.git").symlink_to(Path(str(repo) + ".git"))
    pwned = tmp_path / "pwned"
    params = StdioServerParameters(command=CROSSBUILD, args=["mcp", "--root", str(root)], cwd=str(root),
                                   env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **_cache_env()})
    hostile = [f"file://{repo}/.git", f"file://{repo}.git", f"{repo}.git", f"file://localhost{repo}/.git",
               str(root / "link.git"), f"file://{root}/link.git", f"{root}/../private/repo/.git",
               f"ext::sh -c touch% {pwned}", "fd::7", f"file://otherhost{repo}/.git", f"{outside}/nothing.git",
               f"ssh://localhost{repo}/.git", f"root@localhost:{repo}/.git", str(root / "borrowed.git")]
    # a repository inside the roots whose objects and refs are links to the one outside (a build can make one)
    borrowed = root / "borrowed.git"
    borrowed.mkdir()
    (borrowed / "HEAD").write_text("ref: refs/heads/main\n")
    (borrowed / "objects").symlink_to(repo / ".git" / "objects")
    (borrowed / "refs").symlink_to(repo / ".git" / "refs")

    async def main():
        async with Client(params) as c:
            for source in hostile:
                r = await c.call_tool("open_workspace", {"source": source, "target": "x86_64-linux-musl"})
                assert r.is_error, (source, _text(r))
                assert r.structured_content["error_type"] in ("permission_denied", "not_found"), (source, _text(r))
            for source in (f"file://{root}/inside/.git", f"{root}/inside.git", f"file://{root}/inside"):
                r = await c.call_tool("open_workspace", {"source": source, "target": "x86_64-linux-musl"})
                assert not r.is_error, (source, _text(r))
                ws = Path(r.structured_content["data"]["workspace"])
                assert "inside-content" in (ws / "src" / "CMakeLists.txt").read_text()

    anyio.run(main)
    assert not pwned.exists()
    copied = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert not [p for p in copied if b"OUTSIDE-SECRET-91" in p.read_bytes()]


def test_open_workspace_on_the_root_itself_keeps_its_runs_out_of_the_copy(tmp_path):
    """The server's root is the project (the default: the folder it was started in) and its workspaces are kept in
    root/crossbuild-runs: opening the root twice copies the project, not the earlier workspace inside it."""
    shutil.copytree(EXAMPLE, tmp_path / "proj")
    params = StdioServerParameters(command=CROSSBUILD, args=["mcp"], cwd=str(tmp_path / "proj"),
                                   env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **_cache_env()})

    async def main():
        async with Client(params) as c:
            for _ in range(2):
                r = await c.call_tool("open_workspace", {"source": ".", "target": "aarch64-linux-musl"})
                assert not r.is_error, _text(r)
                ws = Path(r.structured_content["data"]["workspace"])
                assert (ws / "src" / "CMakeLists.txt").is_file() and not (ws / "src" / "crossbuild-runs").exists()

    anyio.run(main)
    assert len(list((tmp_path / "proj" / "crossbuild-runs").iterdir())) == 2


def test_knowledge_and_history_reach_an_mcp_client_and_survive_a_reconnect(tmp_path):
    """The path a model took over MCP: configure fails on a missing package -> the knowledge base entry and the
    build_dependency call to make arrive with the result; after a reconnect the workspace still knows its commands
    and numbers its logs after the ones it has."""
    project = tmp_path / "needs-zlib"
    project.mkdir()
    (project / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(needz C)\n"
                                            "find_package(ZLIB REQUIRED)\n")
    env = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **_cache_env()}
    params = StdioServerParameters(command=CROSSBUILD, args=["mcp", "--root", str(tmp_path), "--prefix-root",
                                                             str(tmp_path / "prefixes")], cwd=str(tmp_path), env=env)
    seen = {}

    async def first_session():
        async with Client(params) as c:
            notes = _Progress()
            r = await c.call_tool("open_workspace", {"source": str(project), "target": "aarch64-linux-musl"},
                                  progress_callback=notes)
            seen["workspace"] = r.structured_content["data"]["workspace"]
            # the long calls say what they are doing while they run: numbered so they only grow
            assert notes.messages[:2] == [f"copying {project}", "leaving credential files out"], notes.messages
            assert notes.numbers == list(range(1, len(notes.numbers) + 1))
            r = await c.call_tool("run_command", {"command": "cmake -E make_directory build"})
            assert not r.is_error
            r = await c.call_tool("run_command", {"command": "cmake -S src -B build"})
            assert r.is_error and "Could NOT find ZLIB" in _text(r)
            assert "Knowledge base" in _text(r) and "[cmake-package-not-found]" in _text(r)
            assert 'build_dependency(name="ZLIB")' in _text(r)  # the hint names the call to make
            kb = r.structured_content["data"]["kb"]
            assert kb[0]["id"] == "cmake-package-not-found"
            assert any(a["kind"] == "dependency" and a["name"] == "ZLIB" for a in kb[0]["actions"])
            r = await c.call_tool("run_command", {"command": "cmake -S src -B build"})
            assert "Knowledge base" not in _text(r)  # attached once per session, not on every repeat

    async def after_reconnect():
        async with Client(params) as c:
            r = await c.call_tool("open_workspace", {"workspace": seen["workspace"], "target": "aarch64-linux-musl"})
            assert not r.is_error, _text(r)
            r = await c.call_tool("build_status", {})
            assert "commands so far (3" in _text(r) and "make_directory" in _text(r), _text(r)
            had = max(int(p.name[:4]) for p in (Path(seen["workspace"]) / ".xbuild" / "logs").glob("*.log"))
            r = await c.call_tool("run_command", {"command": "cmake -E echo again"})
            # after the logs it has (the configure's diagnosis reran it with its trace on: a log of its own)
            assert had >= 4 and r.structured_content["data"]["log"].startswith(f".xbuild/logs/{had + 1:04d}-")

    anyio.run(first_session)
    anyio.run(after_reconnect)


WALK_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(walk C)
find_package(ZLIB REQUIRED)
add_library(walk SHARED walk.c)
target_link_libraries(walk PRIVATE ZLIB::ZLIB)
add_executable(walk_test walk_test.c)
target_link_libraries(walk_test walk walkextra)
install(TARGETS walk walk_test)
"""


@pytest.mark.slow
def test_the_path_a_model_took_over_mcp(tmp_path):
    """One scripted session along the path a real model walked: build_status, a cwd that does not exist yet, a
    configure failing on a missing package, build_dependency with the name CMake printed, a link failing with a
    known error, verify on an install folder, a linker temporary left in build/, a reconnect and verify again with
    a clean rebuild. Each result's text and structured data are checked."""
    project = tmp_path / "walk"
    (project / "debian").mkdir(parents=True)
    (project / "CMakeLists.txt").write_text(WALK_CMAKE)
    (project / "walk.c").write_text("#include <zlib.h>\nconst char *walk_zlib(void) { return zlibVersion(); }\n")
    (project / "walk_test.c").write_text("#include <stdio.h>\nconst char *walk_zlib(void);\n"
                                         "int main(void) { printf(\"zlib %s\\n\", walk_zlib()); "
                                         "return walk_zlib()[0] == '1' ? 0 : 1; }\n")
    (project / "configure.ac").write_text("AC_INIT([walk], [1])\nAC_PROG_CC\nAC_OUTPUT\n")
    (project / "debian" / "rules").write_text("#!/usr/bin/make -f\n%:\n\tdh $@ --buildsystem=cmake\n"
                                              "override_dh_auto_configure:\n\tdh_auto_configure -- -DWALK_DOCS=OFF "
                                              "-DLIBDIR=lib/$(DEB_HOST_MULTIARCH)\n")
    params = StdioServerParameters(command=CROSSBUILD, args=["mcp", "--root", str(tmp_path), "--prefix-root",
                                                             str(tmp_path / "prefixes")], cwd=str(tmp_path),
                                   env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **_cache_env()})
    seen = {}

    async def first_session():
        async with Client(params) as c:
            r = await c.call_tool("open_workspace", {"source": str(project), "target": "aarch64-linux-musl"})
            seen["workspace"] = r.structured_content["data"]["workspace"]
            r = await c.call_tool("build_status", {})
            data = r.structured_content["data"]
            assert "build system in src/: cmake" in _text(r) and "also present: autotools" in _text(r)
            assert "debian/rules (Debian's own build of this source): dh --buildsystem=cmake" in _text(r)
            assert data["other_build_systems"] == ["autotools"]
            assert data["debian_rules"]["system"] == "cmake"
            assert data["debian_rules"]["configure_args"] == ["-DWALK_DOCS=OFF"]
            assert data["debian_rules"]["dropped_args"] == ["-DLIBDIR=lib/$(DEB_HOST_MULTIARCH)"]

            # a cwd that does not exist yet is made (and recorded, for the clean rebuild) before the command runs
            r = await c.call_tool("run_command", {"command": "cmake -S ../src -B .", "cwd": "out"})
            assert r.is_error and r.structured_content["error_type"] == "command_failed"
            assert "(cwd out/ did not exist: made first, as `mkdir -p out`)" in _text(r)
            assert "Could NOT find ZLIB" in _text(r) and 'build_dependency(name="ZLIB")' in _text(r)

            r = await c.call_tool("run_command", {"command": "cmake -S src -B build"})
            assert r.is_error and "Could NOT find ZLIB" in _text(r)
            # the knowledge was shown once; the diagnosis read from CMake's own records is shown every time
            assert "find_package(ZLIB REQUIRED) failed at src/CMakeLists.txt" in _text(r)
            assert 'build_dependency(name="ZLIB")' in _text(r)
            notes = _Progress()
            r = await c.call_tool("build_dependency", {"name": "ZLIB"}, progress_callback=notes)
            assert not r.is_error, _text(r)
            # built now: its source, its own build's commands and its verdict; reused: from the cache
            assert notes.messages[-1] == ("zlib: reused from the dependency cache, installing into the prefix"
                                          if r.structured_content["data"]["cached"] else
                                          "zlib: installing into the prefix"), notes.messages
            if not r.structured_content["data"]["cached"]:
                assert any(m.startswith("downloading Debian source zlib") for m in notes.messages), notes.messages
                # its own build's commands (CMake's, or zlib's own configure and make when the planner took it)
                assert any(command_phase(part) == "build" for m in notes.messages for part in m.split(": ")), \
                    notes.messages
                assert "reading every artifact's format and architecture" in notes.messages
            r = await c.call_tool("run_command", {"command": "cmake -S src -B build"})
            assert not r.is_error, _text(r)

            r = await c.call_tool("run_command", {"command": "cmake --build build"})
            assert r.is_error and 'unable to find dynamic system library "walkextra"' in _text(r)  # zig's words
            assert "library-not-found-at-link" in [k["id"] for k in r.structured_content["data"]["kb"]]
            r = await c.call_tool("edit_file", {"path": "src/CMakeLists.txt",
                                                "edits": [{"old": "walk walkextra)", "new": "walk)"}]})
            assert not r.is_error
            r = await c.call_tool("run_command", {"command": "cmake --build build"})
            assert not r.is_error, _text(r)
            r = await c.call_tool("run_command", {"command": "cmake --install build --prefix install"})
            assert not r.is_error, _text(r)

            r = await c.call_tool("verify", {"path": "install"})
            data = r.structured_content["data"]
            assert not r.is_error, _text(r)
            assert "test programs: 1 of 1 ran under qemu, 1 passed" in _text(r) and data["proven"] in _text(r)
            assert [(s["path"], s["passed"], s["outcome"]) for s in data["smoke_runs"]] == \
                [("bin/walk_test", True, "passed (exit 0)")]
            assert "smoke run bin/walk_test: passed (exit 0)" in _text(r)  # the same words in text and data
            assert data["proof"] == "tested" and "proof: tested (1 of 1 test programs passed" in _text(r)
            # the library folder alone has no test program: crossbuild's probe loads the library on the target
            r = await c.call_tool("verify", {"path": "install/lib"})
            data = r.structured_content["data"]
            assert not r.is_error and data["proof"] == "exercised", _text(r)
            assert [(p["kind"], p["passed"]) for p in data["probe_runs"]] == [("shared_library", True)]
            assert "probe shared_library libwalk.so: passed: dlopen (RTLD_NOW) and dlsym of its" in _text(r)

            r = await c.call_tool("run_command", {"command": "cp build/walk_test build/walk_test.tmp1a2b3c4"})
            assert not r.is_error
            r = await c.call_tool("verify", {"path": "build", "run_tests": False})
            assert not r.is_error, _text(r)
            assert r.structured_content["data"]["linker_temporaries"] == ["walk_test.tmp1a2b3c4"]
            assert "not counted: 1 linker temporaries" in _text(r)
            assert "test programs: none run (run_tests was off)" in _text(r)
            assert r.structured_content["data"]["proof"] == "built" and "proof: built: test programs were not run" \
                in _text(r)

    async def after_reconnect():
        async with Client(params) as c:
            r = await c.call_tool("open_workspace", {"workspace": seen["workspace"], "target": "aarch64-linux-musl"})
            assert not r.is_error, _text(r)
            notes = _Progress()
            r = await c.call_tool("verify", {"path": "build", "rebuild": True}, progress_callback=notes)
            data = r.structured_content["data"]
            assert not r.is_error and "VERIFIED" in _text(r), _text(r)
            assert notes.messages[:2] == ["clean rebuild: 5 recorded steps again from the pristine source",
                                          "rebuild-1: mkdir -p out"], notes.messages
            # counts read from a command's output (on its own thread) reach the client too: ninja's `[k/N]`
            assert any(re.fullmatch(r"rebuild-3: cmake --build build: (\d+) of \1", m) for m in notes.messages), \
                notes.messages
            assert data["rebuild"]["ok"] and "clean rebuild: passed" in _text(r)
            assert [s["path"] for s in data["smoke_runs"]] == ["walk_test"]  # never the temporary
            # the whole verdict, as a resource of this session's workspace
            uri = f"crossbuild://workspace/{Path(seen['workspace']).name}/verdict"
            verdict = json.loads((await c.read_resource(uri)).contents[0].text)
            assert verdict["proof"] == data["proof"] and verdict["report"]["rebuild"]["ok"]
            assert [s["path"] for s in verdict["report"]["smoke_runs"]] == ["walk_test"]

    anyio.run(first_session)
    anyio.run(after_reconnect)


@pytest.mark.slow
def test_a_model_asks_whether_a_failing_test_fails_on_the_build_machine_too(tmp_path):
    """A test that fails on every machine: verify refuses it and names build_machine_check; with it, the session's
    commands are replayed for x86_64, with the dependency the session built (zlib) built for x86_64 too, the
    program fails there the same way, and the verdict is VERIFIED with it listed, not counted."""
    project = tmp_path / "golden"
    project.mkdir()
    (project / "main.c").write_text(GOLDEN_MISMATCH)
    (project / "lib.c").write_text("#include <zlib.h>\nint lib(void){return zlibVersion()[0] == '1';}\n")
    (project / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(golden C)\n"
                                            "find_package(ZLIB REQUIRED)\n"
                                            "add_executable(logging_unittest main.c lib.c)\n"
                                            "target_link_libraries(logging_unittest ZLIB::ZLIB)\n")
    params = StdioServerParameters(command=CROSSBUILD, args=["mcp", "--root", str(tmp_path)], cwd=str(tmp_path),
                                   env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **_cache_env()})

    async def session():
        async with Client(params) as c:
            r = await c.call_tool("open_workspace", {"source": str(project), "target": "aarch64-linux-musl"})
            assert not r.is_error, _text(r)
            r = await c.call_tool("build_dependency", {"name": "ZLIB"})
            assert not r.is_error, _text(r)
            for command in ("cmake -S src -B build", "cmake --build build"):
                r = await c.call_tool("run_command", {"command": command})
                assert not r.is_error, _text(r)
            r = await c.call_tool("verify", {"path": "build"})
            assert r.is_error and "    | golden mismatch: expected [__EINTR_NUM__], got [4]" in _text(r), _text(r)
            assert "verify with build_machine_check=true" in _text(r)
            r = await c.call_tool("verify", {"path": "build", "build_machine_check": True})
            data = r.structured_content["data"]
            assert not r.is_error and "VERIFIED" in _text(r), _text(r)
            [run] = data["smoke_runs"]
            assert run["triage"] == "project" and run["outcome"].startswith(
                "ran, not counted (exit 1): fails the same way built for the build machine (x86_64-linux-musl")
            assert data["rebuild"]["ok"]
            native = Path(data["rebuild"]["workspace"]).parent / "native" / "build" / "logging_unittest"
            assert native.read_bytes()[18] == 62  # EM_X86_64, on the host
            zlib = Path(data["rebuild"]["workspace"]).parent / "native-prefix" / "lib" / "libz.a"
            member = zlib.read_bytes().index(b"\x7fELF")  # the archive's first object
            assert zlib.read_bytes()[member + 18] == 62  # zlib built for the build machine, in its own prefix

    anyio.run(session)


# qemu-user's /proc/self/stat has 0 where Linux has the thread count (googletest's GetThreadCount test)
THREAD_COUNT_TEST = r"""
#include <stdio.h>
int main(void) {
    FILE *f = fopen("/proc/self/stat", "r");
    long threads = 0;
    if (!f || fscanf(f, "%*d %*s %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %ld",
                     &threads) != 1) {
        printf("cannot read /proc/self/stat\n");
        return 2;
    }
    if (threads != 1) {
        printf("expected 1 thread, got %ld\n", threads);
        return 1;
    }
    return 0;
}
"""
# a test that fails for the target's own reason: on aarch64, whatever runs it
ARCH_TEST = "int main(void) {\n#ifdef __aarch64__\n    return 1;\n#else\n    return 0;\n#endif\n}\n"


@pytest.mark.slow
def test_a_test_that_fails_only_under_the_emulator_is_the_emulators_and_one_that_fails_on_the_target_is_not(
        tmp_path):
    """A CTest test fails under qemu and passes natively for the build machine: its program, built for x86_64, is
    run once more under qemu-x86_64; failing the same way there is the emulator's (not counted, said). A test that
    fails only for the target's own reason passes there too, and still blocks."""
    def project(name: str, failing: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        for ok in ("ok_test", "ok2_test"):
            (folder / f"{ok}.c").write_text("int main(void) { return 0; }\n")
        (folder / "odd_test.c").write_text(failing)
        (folder / "CMakeLists.txt").write_text(
            f"cmake_minimum_required(VERSION 3.16)\nproject({name} C)\nenable_testing()\n"
            "foreach(t ok_test ok2_test odd_test)\n  add_executable(${t} ${t}.c)\n"
            "  add_test(NAME ${t} COMMAND \"$<TARGET_FILE:${t}>\")\nendforeach()\n")
        return folder

    params = StdioServerParameters(command=CROSSBUILD, args=["mcp", "--root", str(tmp_path)], cwd=str(tmp_path),
                                   env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **_cache_env()})

    async def session():
        async with Client(params) as c:
            for name, failing in (("threads", THREAD_COUNT_TEST), ("arch", ARCH_TEST)):
                r = await c.call_tool("open_workspace", {"source": str(project(name, failing)),
                                                         "target": "aarch64-linux-musl"})
                assert not r.is_error, _text(r)
                for command in ("cmake -S src -B build", "cmake --build build"):
                    r = await c.call_tool("run_command", {"command": command})
                    assert not r.is_error, _text(r)
                r = await c.call_tool("verify", {"path": "build", "build_machine_check": True})
                runs = {s["path"]: s for s in r.structured_content["data"]["smoke_runs"]}
                if name == "threads":
                    assert not r.is_error and r.structured_content["data"]["proof"] == "tested", _text(r)
                    assert runs["odd_test"]["triage"] == "environment", runs
                    assert runs["odd_test"]["why"].startswith(
                        "the emulator's: it passes run natively for the build machine and fails the same way under "
                        "its qemu-user (x86_64-linux-musl: exit 1, \"expected 1 thread, got 0\")"), runs
                else:
                    assert r.is_error and "NOT VERIFIED" in _text(r), _text(r)
                    assert runs["odd_test"]["triage"] == "failed", runs
                    assert "under qemu-user for x86_64-linux-musl: passed" in runs["odd_test"]["why"], runs

    anyio.run(session)


FOREVER_CMAKE = """\
cmake_minimum_required(VERSION 3.16)
project(forever C)
enable_testing()
add_executable(forever_test forever.c)
add_test(NAME forever COMMAND forever_test)
"""


def _running_in(folder: Path) -> list[str]:
    """The host's processes whose command line names FOLDER (a test program under qemu names its path)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and str(folder) in cmdline:
            found.append(cmdline)
    return found


@pytest.mark.slow
def test_a_cancelled_verify_stops_its_test_programs_and_the_session_goes_on(tmp_path):
    """A client cancels a verify whose test program never ends: the call stops, no process it started is left on
    the host, and the session's next calls run (the cancel was for that call only)."""
    project = tmp_path / "forever"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(FOREVER_CMAKE)
    (project / "forever.c").write_text("#include <unistd.h>\nint main(void) { for (;;) sleep(1); }\n")
    params = StdioServerParameters(command=CROSSBUILD, args=["mcp", "--root", str(tmp_path)], cwd=str(tmp_path),
                                   env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **_cache_env()})

    async def session():
        async with Client(params) as c:
            r = await c.call_tool("open_workspace", {"source": str(project), "target": "aarch64-linux-musl"})
            ws = Path(r.structured_content["data"]["workspace"])
            for command in ("cmake -S src -B build", "cmake --build build"):
                r = await c.call_tool("run_command", {"command": command})
                assert not r.is_error, _text(r)
            notes = _Progress()
            scope = anyio.CancelScope()

            async def verify():
                with scope:
                    await c.call_tool("verify", {"path": "build"}, progress_callback=notes)

            async with anyio.create_task_group() as tg:
                tg.start_soon(verify)
                with anyio.fail_after(300):
                    while not any("forever_test" in p for p in _running_in(ws)):
                        await anyio.sleep(0.5)
                assert any("ctest" in m for m in notes.messages), notes.messages  # it said what it was doing
                scope.cancel()
            with anyio.fail_after(40):  # the server waits for the work to stop before it forgets the call
                while _running_in(ws):
                    await anyio.sleep(0.5)
            r = await c.call_tool("run_command", {"command": "cmake --build build"})
            assert not r.is_error, _text(r)
            r = await c.call_tool("verify", {"path": "build", "run_tests": False})
            assert not r.is_error and r.structured_content["data"]["proof"] == "built", _text(r)

    anyio.run(session)


SLOW_SCRIPT = """\
message("configuring, part one")
execute_process(COMMAND ${CMAKE_COMMAND} -E sleep 3)
message("configuring, part two")
"""


def test_logs_verdicts_and_knowledge_are_resources_and_the_prompt_sets_up_the_agents_conversation(tmp_path):
    """Resources and prompts through the official client: the session's logs (a growing one announced while its
    command runs), the knowledge base, nothing of a workspace the session did not open; the `cross-build` prompt
    carries the agent loop's own system prompt and task."""
    from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated

    from crossbuild.agent.prompt import SYSTEM_MCP

    project = tmp_path / "proj"
    project.mkdir()
    (project / "slow.cmake").write_text(SLOW_SCRIPT)
    params = StdioServerParameters(command=CROSSBUILD, args=["mcp", "--root", str(tmp_path)], cwd=str(tmp_path),
                                   env={"PATH": os.environ["PATH"], "HOME": os.environ["HOME"], **_cache_env()})

    async def session():
        async with Client(params) as c:
            templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
            assert templates == {"crossbuild://workspace/{workspace}/log/{name}",
                                 "crossbuild://workspace/{workspace}/verdict", "crossbuild://knowledge/{entry}"}
            entry = "crossbuild://knowledge/cmake-package-not-found"
            assert entry in {str(r.uri) for r in (await c.list_resources()).resources}  # before any workspace
            text = (await c.read_resource(entry)).contents[0].text
            assert text.startswith("[cmake-package-not-found] ") and "written from:" in text

            r = await c.call_tool("open_workspace", {"source": str(project), "target": "aarch64-linux-musl"})
            ws = Path(r.structured_content["data"]["workspace"])
            log = f"crossbuild://workspace/{ws.name}/log/0001-cmake.log"  # the first command's log, by its number
            events: list[tuple[float, object]] = []
            async with c.listen(resources_list_changed=True, resource_subscriptions=[log]) as sub:
                async def collect():
                    async for event in sub:
                        events.append((time.monotonic(), event))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(collect)
                    r = await c.call_tool("run_command", {"command": "cmake -P src/slow.cmake"})
                    ended = time.monotonic()
                    assert not r.is_error, _text(r)
                    await anyio.sleep(1.5)
                    tg.cancel_scope.cancel()
            updates = [at for at, e in events if isinstance(e, ResourceUpdated) and e.uri == log]
            assert updates and updates[0] < ended - 1.5  # announced while the command (3 s of sleep) still ran
            assert any(isinstance(e, ResourcesListChanged) for _, e in events)

            listed = {str(r.uri): r for r in (await c.list_resources()).resources}
            assert listed[log].size == (ws / ".xbuild" / "logs" / "0001-cmake.log").stat().st_size
            text = (await c.read_resource(log)).contents[0].text
            assert "configuring, part one" in text and "configuring, part two" in text
            # another workspace (this one's sibling on disk), a log name with a path, no verdict yet: not found
            other = ws.parent / "other"
            (other / ".xbuild" / "logs").mkdir(parents=True)
            (other / ".xbuild" / "logs" / "0001-cmake.log").write_text("someone else's\n")
            for uri, why in (("crossbuild://workspace/other/log/0001-cmake.log", "only the workspace this session"),
                             (f"crossbuild://workspace/{ws.name}/log/..%2F..%2Fsrc%2Fslow.cmake", "the forms are"),
                             (f"crossbuild://workspace/{ws.name}/verdict", "no verdict yet")):
                with pytest.raises(MCPError) as e:
                    await c.read_resource(uri)
                assert e.value.error.code == -32002 and why in e.value.error.message, e.value.error.message

            [p] = (await c.list_prompts()).prompts
            assert p.name == "cross-build" and {a.name for a in p.arguments} == {"source", "target"}
            got = await c.get_prompt("cross-build", {"source": "debian:zlib", "target": "aarch64-unknown-linux-musl"})
            text = got.messages[0].content.text
            assert text.startswith(SYSTEM_MCP) and 'open_workspace with source="debian:zlib" and target=' \
                '"aarch64-linux-musl"' in text
            # the tools it names are the session's: verify and a report, no finish tool
            assert "verify(path=" in text and "finish(" not in text
            with pytest.raises(MCPError) as e:
                await c.get_prompt("cross-build", {"source": "debian:zlib", "target": "vax-vms"})
            assert "vax-vms" in e.value.error.message and "\n" not in e.value.error.message

    anyio.run(session)
