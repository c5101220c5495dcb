"""verify called twice in a session, as a model does after a fix: what the first verdict's own test runs wrote in the
build folder (libtool's wrapper writes `.libs/lt-NAME` when a test starts it; here a test that writes a changed
copy of its own program) is no product of the build, so the next clean rebuild is not asked to make it."""

from __future__ import annotations

import shutil

import pytest

PROJECT = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(relink C)\nenable_testing()\n"
                      "add_executable(relink relink.c)\nadd_test(NAME relink COMMAND relink)\n",
    # like libtool's wrapper: running it writes another program for the target beside the built one
    "relink.c": """#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    char out[4096]; unsigned char buf[65536]; size_t n;
    FILE *in = fopen(argv[0], "rb"), *to;
    if (!in) return 1;
    snprintf(out, sizeof out, "%s.relinked", argv[0]);
    if (!(to = fopen(out, "wb"))) return 1;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, to);
    fputc(0, to);
    fclose(to); fclose(in);
    return 0;
}
""",
}


@pytest.mark.slow
def test_what_a_verdicts_test_runs_wrote_does_not_fail_the_next_clean_rebuild(ctx, call):
    shutil.rmtree(ctx.root / "src")
    for rel, text in PROJECT.items():
        (ctx.root / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx.root / "src" / rel).write_text(text)
    assert call("run_command", {"command": "cmake -S src -B build"}).ok
    assert call("run_command", {"command": "cmake --build build"}).ok
    first = call("verify", {"rebuild": True})
    assert first.ok, first.message
    assert (ctx.root / "build" / "relink.relinked").read_bytes()[:4] == b"\x7fELF"  # the test run wrote it
    again = call("verify", {"rebuild": True})
    assert again.ok, again.message
    assert "rebuild lacks" not in again.render()
