"""run_command for real, in the sandbox with the BuildEnv: status line first, bounded output, full log on disk."""

from __future__ import annotations

import pytest

from crossbuild.tools.command import HEAD_LINES, OUTPUT_MAX_CHARS, TAIL_LINES, path_candidates, split_command


def _script(ctx, name, body):
    f = ctx.root / "src" / name
    f.write_text("#!/bin/sh\n" + body)
    f.chmod(0o755)
    return f


def test_exit_code_on_line_one_and_log_named(ctx, call):
    _script(ctx, "fail.sh", "echo configuring\necho 'error: no zlib' >&2\nexit 3\n")
    r = call("run_command", {"command": "./fail.sh", "cwd": "src"})
    assert not r.ok and r.error_type == "command_failed" and r.data["exit_code"] == 3
    first = r.render().splitlines()[0]
    assert "[exit=3]" in first
    assert "error: no zlib" in r.message
    assert f"[full log: {r.data['log']}" in r.message and r.data["log"].startswith(".xbuild/logs/")
    assert "read_file" in r.hint
    assert call("read_file", {"path": r.data["log"]}).ok  # the model can page the log


def test_a_10mb_log_costs_at_most_the_budget_and_is_fully_on_disk(ctx, call):
    big = ctx.root / "src" / "big.log"
    with open(big, "w") as f:
        for i in range(200_000):
            f.write(f"compiling unit {i:06d} of the very large project with a long line of output ......\n")
        f.write("error: the real failure is at the end\n")
    assert big.stat().st_size > 10_000_000
    _script(ctx, "loud.sh", "cat big.log\nexit 2\n")
    r = call("run_command", {"command": "./loud.sh", "cwd": "src"})
    assert r.data["exit_code"] == 2 and r.render().startswith("Error (command_failed): [exit=2]")
    assert len(r.message) <= OUTPUT_MAX_CHARS + 1_000
    assert "error: the real failure is at the end" in r.message  # the tail is kept
    assert "compiling unit 000000" in r.message  # and the head
    assert "lines omitted" in r.message
    log = ctx.root / r.data["log"]
    assert log.stat().st_size >= big.stat().st_size
    assert r.data["log_lines"] >= 200_001


def test_a_make_that_ignores_the_errors_of_its_objects_is_a_failed_step_with_its_knowledge(ctx, call):
    """lua5.4's Debian patch compiles through $(LIBTOOL), which only debian/rules sets: every object's recipe fails
    (Error 127) and is ignored, make exits 0 and nothing is built."""
    (ctx.root / "src" / "Makefile").write_text(
        "all: clean-old lib.o\nclean-old:\n\t-rm-that-is-missing old.o\n"
        "lib.o: lib.c\n\t-$(LIBTOOL) --mode=compile --tag=CC $(CC) -c lib.c -o lib.o\n")
    (ctx.root / "src" / "lib.c").write_text("int f(void){return 1;}\n")
    r = call("run_command", {"command": "make", "cwd": "src"})
    assert r.data["exit_code"] == 0 and not r.ok and r.error_type == "command_failed"
    assert r.message.startswith("[exit=0, but make ignored a missing command in the recipes of 1 object file: lib.o]")
    assert r.data["ignored_objects"] == ["lib.o"]
    assert [k["id"] for k in r.data["kb"]] == ["libtool-variable-unset"]
    assert call("build_status", {}).message.count("[ignored_errors] make") == 1
    # with LIBTOOL set the object is built, and only that step is what a clean rebuild replays
    from crossbuild.tools.build import replay_steps
    (ctx.root / "src" / "Makefile").write_text(
        "all: clean-old lib.o\nclean-old:\n\t-rm-that-is-missing old.o\nlib.o: lib.c\n\t$(CC) -c lib.c -o lib.o\n")
    ok = call("run_command", {"command": "make", "cwd": "src"})
    assert ok.ok and (ctx.root / "src" / "lib.o").is_file()  # an ignored failure outside an object's recipe
    assert [s.argv for s in replay_steps(ctx)] == [("make",)]


def test_a_header_debian_rules_writes_is_offered_as_a_file_to_write_not_a_dependency(ctx, call):
    """lua5.4: luaconf.h (patched) includes lua5.4-deb-multiarch.h, which debian/rules echoes into src/. A model
    is told to write it, with its text for the target in build_status, not to cross-build it as a library."""
    (ctx.root / "src" / "debian").mkdir()
    (ctx.root / "src" / "debian" / "rules").write_text(
        "H = lua5.4-deb-multiarch.h\nbuild:\n\techo '#define M \"$(DEB_HOST_MULTIARCH)\"' > src/$(H)\n")
    (ctx.root / "src" / "Makefile").write_text("all:\n\t$(CC) -c lua.c\n")
    (ctx.root / "src" / "lua.c").write_text('#include "lua5.4-deb-multiarch.h"\nint x;\n')
    r = call("run_command", {"command": "make", "cwd": "src"})
    assert [k["id"] for k in r.data["kb"]] == ["header-not-found"]
    assert r.hint.startswith("src/src/lua5.4-deb-multiarch.h is a file debian/rules writes, not a library")
    status = call("build_status", {})
    assert status.data["debian_files"] == {"src/src/lua5.4-deb-multiarch.h": '#define M "aarch64-linux-musl"\n'}
    assert "writes src/lua5.4-deb-multiarch.h" in status.message


def test_timeout_is_reported_and_the_tree_killed(ctx, call):
    _script(ctx, "slow.sh", "echo started\nsleep 30\n")
    r = call("run_command", {"command": "./slow.sh", "cwd": "src", "timeout": 1})
    assert r.error_type == "timeout" and r.data["exit_code"] is None
    assert r.render().splitlines()[0].startswith("Error (timeout): [timed out after 1s]")
    assert r.duration_s < 10


def test_runs_in_the_sandbox_with_the_build_env(ctx, call):
    r = call("run_command", {"command": "cmake -E environment"})
    log = (ctx.root / r.data["log"]).read_text()
    assert f"CC={ctx.toolchain.bindir}/zcc" in log
    assert r.data["sandbox"] == ctx.sandbox.backend
    assert ctx.commands[-1].exit_code == 0 and ctx.commands[-1].argv == ["cmake", "-E", "environment"]


def test_the_zig_cache_layer_is_made_by_the_first_command_not_by_opening_the_context(ctx, call):
    layer = ctx.toolchain.zig_layer
    assert call("read_file", {"path": "src/CMakeLists.txt"}).ok
    assert not layer.exists()  # reading costs no layer
    (ctx.root / "src" / "hello.c").write_text("int main(void){return 0;}\n")
    r = call("run_command", {"command": "make CFLAGS=-O2 hello", "cwd": "src"})  # make's built-in rule: $(CC)
    assert r.ok, r.message
    assert (ctx.root / "src" / "hello").read_bytes()[:4] == b"\x7fELF"
    linked = [f for d in (layer / "o").iterdir() for f in d.iterdir() if f.is_symlink()]
    assert linked and all(ctx.toolchain.zig_cache in f.readlink().parents for f in linked)  # the shared libc, laid out
    first = (layer / "h").stat().st_ino
    (ctx.root / "src" / "hello").unlink()
    assert call("run_command", {"command": "make CFLAGS=-O2 hello", "cwd": "src"}).ok
    assert (layer / "h").stat().st_ino == first  # not made again by the context's later commands


def test_cwd_must_be_a_folder_in_the_workspace(ctx, call):
    assert call("run_command", {"command": "ls", "cwd": "src/CMakeLists.txt"}).error_type == "invalid_arguments"
    assert call("run_command", {"command": "ls", "cwd": "../.."}).error_type == "permission_denied"
    # a missing folder in the workspace is made, and recorded as a step a clean rebuild replays
    made = call("run_command", {"command": "ls", "cwd": "out/deeper"})
    assert made.ok and "(cwd out/deeper/ did not exist: made first, as `mkdir -p out/deeper`)" in made.message
    assert (ctx.root / "out" / "deeper").is_dir()
    from crossbuild.tools.build import replay_steps
    assert [s.argv for s in replay_steps(ctx)][:1] == [("mkdir", "-p", "out/deeper")]
    # never outside the workspace, nor in crossbuild's own folder, nor through a link
    assert call("run_command", {"command": "ls", "cwd": "../elsewhere"}).error_type == "permission_denied"
    assert call("run_command", {"command": "ls", "cwd": ".xbuild/new"}).error_type == "permission_denied"
    (ctx.root / "link").symlink_to(ctx.root.parent)
    assert call("run_command", {"command": "ls", "cwd": "link/made-outside"}).error_type == "permission_denied"
    assert not (ctx.root.parent / "made-outside").exists() and not (ctx.root.parent.parent / "elsewhere").exists()


def test_the_cut_is_the_one_the_description_promises(ctx, call, tools):
    """What run_command's description says a model will see is what it sees."""
    description = tools["run_command"].description
    assert f"first {HEAD_LINES} and last {TAIL_LINES} lines" in description
    assert "[... N lines omitted ...]" in description
    _script(ctx, "count.sh", "i=1\nwhile [ $i -le 1000 ]; do echo line $i; i=$((i+1)); done\n")
    r = call("run_command", {"command": "./count.sh", "cwd": "src"})
    shown = r.message.splitlines()[1:-1]  # between the status line and the log line
    assert shown[:HEAD_LINES] == [f"line {i}" for i in range(1, HEAD_LINES + 1)]
    assert shown[HEAD_LINES] == f"[... {1000 - HEAD_LINES - TAIL_LINES} lines omitted ...]"
    assert shown[HEAD_LINES + 1:] == [f"line {i}" for i in range(1000 - TAIL_LINES + 1, 1001)]


def test_unbalanced_quotes(call):
    r = call("run_command", {"command": "cmake -DX='a"})
    assert r.error_type == "invalid_arguments" and "quote" in r.hint


@pytest.mark.parametrize(("arg", "found"), [
    ("-I/usr/include", ["/usr/include"]), ("--prefix=/usr", ["/usr"]), ("-DZLIB_ROOT=/opt/z", ["/opt/z"]),
    ("-DCMAKE_INSTALL_PREFIX:PATH=/usr", ["/usr"]), ("-Wl,-rpath,/usr/lib", ["/usr/lib"]),
    ("CFLAGS=-O2 -I/x", ["/x"]), ("PATH=/a:/b", ["/a", "/b"]), ("-I../..", ["../.."]), ("-DBUILD_TESTING=OFF", []),
    ("--enable-shared", []), ("build/x.o", []), ("-j2", []), ("src/../../x", ["src/../../x"]),
])
def test_path_candidates(arg, found):
    assert path_candidates(arg) == found


def test_split_command_separates_operators():
    assert split_command("make&&ls") == ["make", "&&", "ls"]
    assert split_command("cmake '-DLIST=a;b'") == ["cmake", "-DLIST=a;b"]


def test_a_failed_build_whose_log_names_no_error_says_how_to_get_one(ctx, call):
    (ctx.root / "src" / "Makefile").write_text("all:\n\t@test -f generated.h\n")
    r = call("run_command", {"command": "make -j2", "cwd": "src"})
    assert not r.ok and "names no error line" in r.hint and "make -j1 V=1" in r.hint
    (ctx.root / "src" / "Makefile").write_text("all:\n\t@echo 'x.c:1:2: error: boom'; false\n")
    r = call("run_command", {"command": "make -j2", "cwd": "src"})
    assert r.hint.startswith("the first error line: 'x.c:1:2: error: boom'; read_file .xbuild/logs/"), r.hint
    # a failing tool's own words and make's own reason to stop are error lines too (a model was told there were none)
    (ctx.root / "src" / "Makefile").write_text("all:\n\t@echo \"install: cannot create regular file '/p/x.h': "
                                               "Read-only file system\"; false\n")
    r = call("run_command", {"command": "make -j2", "cwd": "src"})
    assert "install: cannot create regular file" in r.hint and "names no error line" not in r.hint, r.hint
    r = call("run_command", {"command": "make nosuchgoal", "cwd": "src"})
    assert "No rule to make target 'nosuchgoal'" in r.hint, r.hint


def test_a_build_step_using_crossbuilds_records_in_xbuild_is_refused_before_it_poisons_the_clean_rebuild(ctx, call):
    """A model copied a dependency's install out of .xbuild/dep-*/: the step succeeded, and every clean rebuild then
    failed on it (a fresh workspace has no such folder), with no way to take the step back."""
    (ctx.xbuild / "dep-zeromq3-x" / "ws" / "install").mkdir(parents=True)
    before = len(ctx.commands)
    for command, cwd in (("cp -r .xbuild/dep-zeromq3-x/ws/install deps", "."), ("make", ".xbuild/logs"),
                         ("cmake -DZMQ_DIR=.xbuild/dep-zeromq3-x/ws/install -S src -B build", ".")):
        r = call("run_command", {"command": command, "cwd": cwd})
        assert not r.ok and r.error_type == "invalid_arguments", r.render()
        assert "the clean rebuild's fresh workspace does not have" in r.message and "read_file" in r.hint
    assert len(ctx.commands) == before and not (ctx.root / "deps").exists()
    # looking is no build step, and the toolchain's own files are in every fresh workspace
    assert call("run_command", {"command": "ls .xbuild/dep-zeromq3-x/ws"}).ok
    r = call("run_command", {"command": "cmake -DCMAKE_TOOLCHAIN_FILE=.xbuild/toolchain.cmake -S src -B build"})
    assert r.error_type != "invalid_arguments" and "fresh workspace" not in r.message, r.render()


def test_the_projects_tests_started_by_run_command_are_sent_to_verify_not_switched_off(ctx, call):
    """A model ran `make check` itself: the target's programs did not start, and the attached knowledge said to
    turn the post-build run off. Running the tests is verify's job; a build's own run of them is still the entry's."""
    (ctx.root / "src" / "Makefile").write_text(
        "all:\n\t@true\ncheck:\n\t@echo '/bin/sh: 1: ./t_add: cannot execute binary file: Exec format error'; false\n")
    r = call("run_command", {"command": "make check", "cwd": "src"})
    assert not r.ok and r.hint.startswith("the project's tests are not run by run_command"), r.hint
    assert "then call verify" in r.hint and "kb" not in r.data
    r = call("run_command", {"command": "make check TESTS=", "cwd": "src"})  # building them only: the entry's
    assert not r.ok and "build-runs-target-binary" in [k["id"] for k in r.data.get("kb", [])], r.render()


HOST_ONLY = """OBJS := $(foreach i,$(shell seq 1 45),o$(i).o)
all: $(OBJS)
\tsleep 120
o%.o: unit.c
\tgcc -c unit.c -o $@
"""


def test_a_build_that_compiles_only_for_the_build_machine_is_stopped_early_and_says_so(ctx, call, monkeypatch):
    """A Makefile that calls the host's gcc itself: 45 objects for x86_64 and none for aarch64, then it would go on
    (here: sleeps). run_command stops it long before its own end and says why."""
    from crossbuild.tools.foreign_objects import ForeignObjectWatch

    monkeypatch.setattr(ForeignObjectWatch, "first_look_s", 1.0)  # (600 s and 200 objects for real builds)
    monkeypatch.setattr(ForeignObjectWatch, "every_s", 0.5)
    monkeypatch.setattr(ForeignObjectWatch, "enough", 40)
    (ctx.root / "src" / "unit.c").write_text("int unit(void) { return 1; }\n")
    (ctx.root / "src" / "Makefile").write_text(HOST_ONLY)
    r = call("run_command", {"command": "make -j2", "cwd": "src", "timeout": 600})
    assert not r.ok and r.data["stopped"] == "wrong_machine", r.message[:500]
    assert r.data["duration_s"] < 100  # the sleep never ended: the process tree was killed
    first = r.message.splitlines()[0]
    assert first.startswith("[stopped: the build compiles for EM_X86_64, not for aarch64-linux-musl (EM_AARCH64):")
    assert "did not take the cross compiler" in first
    assert call("build_status", {}).message.count("[wrong_machine] make") == 1  # never replayed as a success


def test_a_build_that_also_compiles_for_the_target_is_not_stopped(ctx, call, monkeypatch):
    """Objects compiled for the build machine after the target's own are normal (a generator, CC_FOR_BUILD)."""
    from crossbuild.tools.foreign_objects import ForeignObjectWatch

    monkeypatch.setattr(ForeignObjectWatch, "first_look_s", 1.0)  # (600 s and 200 objects for real builds)
    monkeypatch.setattr(ForeignObjectWatch, "every_s", 0.5)
    monkeypatch.setattr(ForeignObjectWatch, "enough", 40)
    (ctx.root / "src" / "unit.c").write_text("int unit(void) { return 1; }\n")
    (ctx.root / "src" / "Makefile").write_text(
        HOST_ONLY.replace("all: $(OBJS)\n\tsleep 120", "all: target.o $(OBJS)\n\tsleep 4")
        + "target.o: unit.c\n\t$(CC) -c unit.c -o $@\n")
    r = call("run_command", {"command": "make -j1", "cwd": "src", "timeout": 600})
    assert r.ok and r.data["stopped"] is None, r.message[:800]
