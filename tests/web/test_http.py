"""crossbuild serve over HTTP as a script or a hostile page meets it: the guard (Host, token, origin, JSON), bad
build requests, a reconnecting event stream, and log links. A real server on loopback; runs recorded through the
real trace writer."""

from __future__ import annotations

import json
import os
import sqlite3

import httpx

from crossbuild.web.bench import record_run
from tests.web.conftest import start_server, stop_server


def sse(text: str) -> list[dict]:
    """Server-sent events as {id, event, data}."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if fields:
            events.append(fields)
    return events


def stream(server, run_id: str, **headers) -> list[dict]:
    with server.client() as c:
        return sse(c.get(f"/runs/{run_id}/events", headers=headers, timeout=30).text)


def test_a_page_from_another_site_can_neither_read_nor_start_anything(server):
    with server.client() as c:
        assert c.get("/").status_code == 200
        # DNS rebinding: a page of evil.example resolves its name to 127.0.0.1 and reads the runs
        assert c.get("/api/runs", headers={"Host": "evil.example:80"}).status_code == 421
        # a cross-site fetch or form post names its own origin, or sends a form
        body = {"source": "debian:zlib", "target": "aarch64-linux-musl"}
        assert c.post("/api/builds", json=body, headers={"Origin": "http://evil.example"}).status_code == 403
        assert c.post("/api/builds", json=body).status_code == 403  # no Origin at all
        form = c.post("/api/builds", data=body, headers={"Origin": server.url})
        assert form.status_code == 415 and "JSON" in form.json()["error"]
    assert not (server.root.parent / "runs").exists()  # nothing was started


def test_bad_build_requests_get_one_actionable_line_and_start_nothing(server, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (server.root / "link-out").symlink_to(outside)
    cases = [
        ({"source": "", "target": "aarch64-linux-musl"}, "give a source"),
        ({"source": str(outside), "target": "aarch64-linux-musl"}, "outside the folders this server may use"),
        ({"source": str(server.root / "link-out"), "target": "aarch64-linux-musl"}, "outside the folders"),
        ({"source": "../outside", "target": "aarch64-linux-musl"}, "outside the folders"),
        ({"source": str(server.root / "nope"), "target": "aarch64-linux-musl"}, "does not exist"),
        ({"source": "debian:zlib", "target": "aarch64-linux-muslx"}, "aarch64-linux-musl"),
        ({"source": "debian:zlib", "target": "aarch64"}, "names a machine"),
        ({"source": "debian:zlib", "target": "aarch64-linux-musl", "model": "replay:/etc/passwd#1"}, "model"),
        ({"source": "debian:zlib", "target": "aarch64-linux-musl", "model": "openai:gpt-x"}, "no API key"),
        ({"source": ["x"], "target": "aarch64-linux-musl"}, "strings"),
        # every form of a host path obeys the roots: git URLs to local repositories, paths ending in .git
        ({"source": f"file://{outside}/.git", "target": "aarch64-linux-musl"}, "outside the folders"),
        ({"source": f"file://{server.root}/link-out", "target": "aarch64-linux-musl"}, "outside the folders"),
        ({"source": f"{outside}.git", "target": "aarch64-linux-musl"}, "outside the folders"),
        ({"source": f"{server.root}/nope.git", "target": "aarch64-linux-musl"}, "does not exist"),
        ({"source": f"ext::sh -c touch% {outside}/pwned", "target": "aarch64-linux-musl"}, "crossbuild takes"),
    ]
    for body, said in cases:
        r = server.post("/api/builds", body)
        assert r.status_code == 400 and said in r.json()["error"], (body, r.text)
        assert "\n" not in r.json()["error"]
    with server.client() as c:
        r = c.post("/api/builds", content=b"{not json", headers={"Origin": server.url,
                                                                 "Content-Type": "application/json"})
        assert r.status_code == 400 and "not JSON" in r.json()["error"]
    r = server.post("/api/builds/20261201000000-deadbeef/cancel", {})
    assert r.status_code == 404 and "not started by this server" in r.json()["error"]
    assert not (server.root.parent / "runs").exists() and not (outside / "pwned").exists()


def test_a_reconnecting_stream_goes_on_after_its_last_event_id(server):
    run_id = record_run(server.db, 30, server.root / "ws")
    whole = stream(server, run_id)
    kinds = [e["event"] for e in whole]
    assert kinds.count("tool_call") == 30 and kinds.count("tool_result") == 30 and kinds.count("kb_attached") == 3
    assert kinds[-2:] == ["finished", "end"] and json.loads(whole[-2]["data"])["status"] == "verified"
    # a page opened after the workspace was prepared still says where the source came from, once, first
    assert kinds.count("preparing") == 1 and kinds[0] == "preparing" and json.loads(whole[0]["data"])["source"]
    with_ids = [e for e in whole if "id" in e]
    assert len({e["id"] for e in with_ids}) == len(with_ids)  # every event can be resumed after
    for k in (0, 7, 8, len(with_ids) - 2):  # after a model turn, inside one tool call's events, at the end
        rest = stream(server, run_id, **{"Last-Event-ID": with_ids[k]["id"]})
        assert [(e.get("id"), e["event"]) for e in rest] == \
            [(e.get("id"), e["event"]) for e in whole[whole.index(with_ids[k]) + 1:]], k
    assert [e["event"] for e in stream(server, run_id, **{"Last-Event-ID": with_ids[-1]["id"]})] == ["end"]
    for junk in ("nonsense", "-1.2.3", "1.2.3.4.5", "9" * 400):  # a stale or forged id starts over
        assert len(stream(server, run_id, **{"Last-Event-ID": junk})) == len(whole), junk
    missing = stream(server, "20261201000000-deadbeef")
    assert [e["event"] for e in missing] == ["missing"]
    with server.client() as c:
        assert c.get("/runs/20261201000000-deadbeef").status_code == 404


def test_a_log_link_reads_only_crossbuilds_own_logs_in_the_runs_workspace(server, tmp_path):
    ws = server.root / "ws"
    logs = ws / ".xbuild" / "logs"
    logs.mkdir(parents=True)
    run_id = record_run(server.db, 3, ws)
    (logs / "0000-make.log").write_text("x" * 100_000 + "END")
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    (logs / "0001-make.log").symlink_to(secret)
    with server.client() as c:
        first = c.get(f"/runs/{run_id}/log/1").json()
        assert first["offset"] == 0 and first["size"] == 100_003 and len(first["text"]) == 64 << 10
        second = c.get(f"/runs/{run_id}/log/1", params={"offset": first["next_offset"]}).json()
        assert second["text"].endswith("END") and second["next_offset"] is None
        linked = c.get(f"/runs/{run_id}/log/2")
        assert linked.status_code == 410 and "host secret" not in linked.text
        assert c.get(f"/runs/{run_id}/log/3").status_code == 410  # recorded, not there
        assert c.get(f"/runs/{run_id}/log/99").status_code == 404
        assert c.get(f"/runs/{run_id}/log/1", params={"offset": "x"}).status_code == 400
    # a record whose log path leads out of .xbuild/logs/ is no link at all
    db = sqlite3.connect(server.db)
    db.execute("UPDATE tool_calls SET log_path = '.xbuild/logs/../../../secret.txt' WHERE id = 3")
    db.execute("UPDATE tool_calls SET log_path = '/etc/passwd' WHERE id = 2")
    db.commit()
    db.close()
    with server.client() as c:
        for row in (2, 3):
            r = c.get(f"/runs/{run_id}/log/{row}")
            assert r.status_code == 404 and "root:" not in r.text and "host secret" not in r.text


def test_beyond_loopback_or_with_a_token_file_every_request_needs_the_token(tmp_path):
    token = "t" * 20 + "-serve"
    (tmp_path / "token").write_text(token + "\n")
    server = start_server(tmp_path, "--token-file", str(tmp_path / "token"))
    try:
        with server.client() as c:
            for path in ("/", "/api/runs", "/stats", "/runs/x/events"):
                r = c.get(path)
                assert r.status_code == 401 and "token" in r.text, path
            assert c.get("/api/runs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
            assert c.get("/api/runs", headers={"Authorization": "Bearer wrong-token-wrong"}).status_code == 401
            assert c.get("/login", params={"token": "wrong"}).status_code == 401
        with httpx.Client(base_url=server.url, follow_redirects=True) as browser_like:
            r = browser_like.get("/login", params={"token": token})
            assert r.status_code == 200 and "Start a build" in r.text  # the cookie signs the page in
            cookie = r.history[0].headers["set-cookie"].lower()
            assert "httponly" in cookie and "samesite=strict" in cookie
            assert browser_like.get("/api/runs").status_code == 200
    finally:
        stop_server(server)
    # bound beyond loopback without a token file: one is made and shown once, and demanded
    other = tmp_path / "wide"
    other.mkdir()
    server = start_server(other, "--host", "0.0.0.0", env={k: v for k, v in os.environ.items()
                                                            if k == "CROSSBUILD_SERVE_TOKEN"})
    try:
        printed = server.log.read_text()
        assert "/login?token=" in printed and "shown only now" in printed
        assert httpx.get(server.url + "/api/runs").status_code == 401
    finally:
        stop_server(server)


def test_statistics_and_evaluation_reports_with_their_plots(tmp_path):
    reports = tmp_path / "results"
    (reports / "dev-x").mkdir(parents=True)
    (reports / "dev-x" / "REPORT.md").write_text("# Evaluation: x\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
                                                 "<script>alert(1)</script>\n\n![plot](plot.png)\n")
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
    (reports / "dev-x" / "plot.png").write_bytes(png)
    (tmp_path / "secret.png").write_bytes(b"host secret")
    (reports / "dev-x" / "leak.png").symlink_to(tmp_path / "secret.png")
    (reports / "no-report").mkdir()
    server = start_server(tmp_path, "--reports", str(reports))
    try:
        record_run(server.db, 20, server.root / "ws")
        with server.client() as c:
            stats = c.get("/stats").text
            assert "<strong>1 runs</strong>" in stats and "<td>run_command</td><td>20</td><td>2</td>" in stats
            assert "<td>werror</td><td>2</td><td>2</td>" in stats  # attached twice, in a verified run
            assert 'href="/reports/dev-x/"' in stats and "no-report" not in stats
            assert "<td>run_command</td>" not in c.get("/stats", params={"model": "openai:none"}).text
            page = c.get("/reports/dev-x/").text
            assert "<td>1</td>" in page and '<img src="plot.png"' in page
            assert "<script>alert" not in page  # the report's HTML is shown as text
            assert c.get("/reports/dev-x/plot.png").content == png
            assert c.get("/reports/dev-x/leak.png").status_code == 404
            assert c.get("/reports/dev-x/REPORT.md").status_code == 404  # plots only
            assert c.get("/reports/nope/").status_code == 404
            assert c.get("/reports/no-report/").status_code == 404
    finally:
        stop_server(server)
