"""list_files, read_file, write_file and edit_file on a real workspace."""

from __future__ import annotations

from crossbuild.tools.files import LINE_MAX_CHARS, READ_MAX_LINES


def test_list_files_shows_types_and_sizes_and_hides_credentials(ctx, call):
    (ctx.root / "src" / ".env").write_text("OPENAI_API_KEY=sk-test\n")
    (ctx.root / "src" / "server.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    r = call("list_files", {"path": "src", "depth": 2})
    assert r.ok
    assert "CMakeLists.txt" in r.message and "tests/" in r.message
    assert ".env" not in r.message and "server.pem" not in r.message
    assert "[2 credential files hidden]" in r.message


def test_list_files_is_bounded_with_a_hint(ctx, call):
    many = ctx.root / "src" / "many"
    many.mkdir()
    for i in range(400):
        (many / f"f{i:03d}.c").write_text("")
    r = call("list_files", {"path": "src/many", "depth": 1})
    assert r.data["truncated"] == 100 and "list a subfolder" in r.message


def test_read_file_pages_with_a_continuation_line(ctx, call):
    (ctx.root / "src" / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    r = call("read_file", {"path": "src/big.txt"})
    assert r.ok and r.data["last"] == READ_MAX_LINES
    assert r.message.endswith(f"[lines 1–{READ_MAX_LINES} of 1000 — call read_file with offset="
                              f"{READ_MAX_LINES + 1} to continue]")
    r = call("read_file", {"path": "src/big.txt", "offset": 990})
    assert "  1000\tline 1000" in r.message and r.message.endswith("[lines 990–1000 of 1000]")


def test_read_file_offset_past_the_end_states_the_length(ctx, call):
    (ctx.root / "src" / "short.txt").write_text("a\nb\n")
    r = call("read_file", {"path": "src/short.txt", "offset": 5})
    assert r.error_type == "invalid_arguments" and "has 2 lines" in r.message


def test_read_file_refuses_binaries_and_says_what_they_are(ctx, call):
    (ctx.root / "build" / "prog").write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 100)
    r = call("read_file", {"path": "build/prog"})
    assert not r.ok and "ELF binary" in r.message and "readelf" in r.hint


def test_read_file_cuts_very_long_lines(ctx, call):
    (ctx.root / "src" / "min.js").write_text("x" * 50_000 + "\nend\n")
    r = call("read_file", {"path": "src/min.js"})
    assert r.ok and f"line cut: {50_000 - LINE_MAX_CHARS} more characters" in r.message
    assert "end" in r.message and len(r.message) < 5_000


def test_read_file_character_cap_pages(ctx, call):
    (ctx.root / "src" / "wide.txt").write_text("".join("y" * 1000 + "\n" for _ in range(200)))
    r = call("read_file", {"path": "src/wide.txt"})
    assert r.ok and r.data["last"] < 200 and f"offset={r.data['last'] + 1}" in r.message
    assert len(r.message) < 26_000


def test_write_file_creates_parents_and_reports(ctx, call):
    r = call("write_file", {"path": "src/new/dir/x.h", "content": "#pragma once\nint x;\n"})
    assert r.ok and r.data["created"] and "created src/new/dir/x.h: 2 lines" in r.message
    r = call("write_file", {"path": "src/new/dir/x.h", "content": "int y;"})
    assert r.ok and "overwrote" in r.message and "2 → 1 lines" in r.message
    assert (ctx.root / "src/new/dir/x.h").read_text() == "int y;"
    assert not [p for p in (ctx.root / "src/new/dir").iterdir() if p.name.endswith(".tmp")]


def test_write_file_keeps_the_mode_of_a_script(ctx, call):
    script = ctx.root / "src" / "gen.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert call("write_file", {"path": "src/gen.sh", "content": "#!/bin/sh\necho hi\n"}).ok
    assert script.stat().st_mode & 0o777 == 0o755


def test_toolchain_files_are_not_writable(call):
    r = call("write_file", {"path": ".xbuild/bin/zcc", "content": "#!/bin/sh\ngcc \"$@\"\n"})
    assert r.error_type == "permission_denied" and "toolchain" in r.message


def test_edit_file_replaces_unique_text_and_returns_a_diff(ctx, call):
    f = ctx.root / "src" / "flags.cmake"
    f.write_text("set(FLAGS -Wall -Werror)\nset(OTHER 1)\n")
    r = call("edit_file", {"path": "src/flags.cmake", "edits": [{"old": " -Werror", "new": ""},
                                                                  {"old": "OTHER 1", "new": "OTHER 2"}]})
    assert r.ok, r.render()
    assert f.read_text() == "set(FLAGS -Wall)\nset(OTHER 2)\n"
    assert "-set(FLAGS -Wall -Werror)" in r.message and "+set(FLAGS -Wall)" in r.message


def test_edit_file_errors_teach_the_fix(ctx, call):
    f = ctx.root / "src" / "twice.c"
    f.write_text("int a;\nint a;\nint b;\n")
    r = call("edit_file", {"path": "src/twice.c", "edits": [{"old": "int a;", "new": "int c;"}]})
    assert r.error_type == "invalid_arguments" and "found 2 times" in r.message and "surrounding lines" in r.hint
    r = call("edit_file", {"path": "src/twice.c", "edits": [{"old": "int z;", "new": ""}]})
    assert r.error_type == "not_found" and "not found" in r.message
    r = call("edit_file", {"path": "src/twice.c", "edits": [{"old": "a;\nint b", "new": "x"},
                                                              {"old": "int b;", "new": "y"}]})
    assert r.error_type == "invalid_arguments" and "overlap" in r.message
    assert f.read_text() == "int a;\nint a;\nint b;\n"  # nothing changed by failed edits


def test_edit_file_keeps_crlf_and_bom(ctx, call):
    f = ctx.root / "src" / "win.rc"
    f.write_bytes(b"\xef\xbb\xbfFILEVERSION 1\r\nPRODUCT old\r\n")
    r = call("edit_file", {"path": "src/win.rc", "edits": [{"old": "PRODUCT old\n", "new": "PRODUCT new\n"}]})
    assert r.ok and r.data["crlf"] and r.data["bom"]
    assert f.read_bytes() == b"\xef\xbb\xbfFILEVERSION 1\r\nPRODUCT new\r\n"
