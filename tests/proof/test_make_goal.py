"""A plain Makefile's own test goal (bzip2's `make check`) runs on the target after the build, with the build's own
make variables (`crossbuild build` with the planner, as a user runs it): the planner leaves the goal out of the
build, the verifier runs it where binfmt hands target programs to qemu, and the goal counts as a test only when
qemu's own record shows that it started a target program. Also: which goal, and the command, from the recorded
step."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from crossbuild.env.recipes import BuildStep
from crossbuild.proof import make_goal
from tests.conftest import cb, outcome_of
from tests.proof.test_harness import LIBRARY, TOOL  # the same library and tool, built by a plain Makefile

TARGET = "aarch64-linux-musl"
# like bzip2's: the default goal runs the tests, the compiler is make's variable, `check` only names `test`
MAKEFILE = """CC = gcc
AR = ar
all: libhsum.a hsumtool test

libhsum.a: hsum.o
\t$(AR) rcs $@ hsum.o

hsumtool: tool.o libhsum.a
\t$(CC) -o $@ tool.o libhsum.a

%.o: %.c
\t$(CC) -c -o $@ $<

check: test
test: hsumtool
\tRECIPE

install: hsumtool
\tmkdir -p $(PREFIX)/bin && cp hsumtool $(PREFIX)/bin/

.PHONY: all check test install
"""
def _project(tmp_path: Path, recipe: str) -> Path:
    src = tmp_path / "plainsum"
    src.mkdir()
    (src / "Makefile").write_text(MAKEFILE.replace("RECIPE", recipe))
    (src / "hsum.c").write_text(LIBRARY)
    (src / "tool.c").write_text(TOOL)
    return src


def _build(tmp_path: Path, src: Path) -> dict:
    r = cb("build", str(src), "-t", TARGET, "-w", str(tmp_path / "ws"), "--db", str(tmp_path / "runs.db"), "--json",
           "--require", "built", cwd=tmp_path, timeout=1800)
    return outcome_of(r.stdout)


@pytest.mark.slow
def test_the_test_goal_the_build_left_out_runs_on_the_target_and_makes_it_tested(tmp_path):
    out = _build(tmp_path, _project(tmp_path, '[ "$$(./hsumtool 20 22)" = 42 ]'))
    report = out["verify"]
    assert out["status"] == "verified", out["message"]
    assert report["harness"] == "Makefile", report["smoke_runs"]
    [run] = report["smoke_runs"]
    assert run["path"] == "make check" and run["passed"], run
    assert report["proof"] == "tested", report["proof_why"]
    # the build's own compiler, not the Makefile's gcc: the program the goal ran is the aarch64 one
    assert (tmp_path / "ws" / "src" / "hsumtool").read_bytes()[18] == 183  # e_machine EM_AARCH64


@pytest.mark.slow
def test_a_test_goal_that_fails_on_the_target_fails_the_verdict_with_its_message(tmp_path):
    out = _build(tmp_path, _project(tmp_path, 'out=$$(./hsumtool 20 22); [ "$$out" = 43 ] || '
                                              '{ echo "hsum: expected 43, got $$out"; exit 1; }'))
    assert out["status"] != "verified"
    [run] = out["verify"]["smoke_runs"]
    assert not run["passed"] and "hsum: expected 43, got 42" in run["why"], run
    assert "Makefile test make check failed" in out["message"]


@pytest.mark.slow
def test_a_test_goal_that_starts_no_target_program_proves_nothing(tmp_path):
    """The goal passes, but only the build machine's shell ran: qemu recorded no process, so the goal is not a
    test on the target and the verdict is not `tested`."""
    out = _build(tmp_path, _project(tmp_path, "echo all good"))
    report = out["verify"]
    assert out["status"] == "verified", out["message"]
    assert report["harness"] != "Makefile" and report["proof"] != "tested", report


@pytest.mark.slow
def test_a_test_goal_that_only_builds_its_test_program_has_that_program_run(tmp_path):
    """libtommath's `make test` builds `./test` and runs nothing: the goal itself proves nothing, the test program
    it built for the target is run on the target as a test-like executable."""
    src = _only_builds_its_test_program(
        tmp_path, "check: hsum_test\nhsum_test: hsum_test.c libhsum.a\n\t$(CC) -o $@ hsum_test.c libhsum.a\n")
    out = _build(tmp_path, src)
    report = out["verify"]
    assert out["status"] == "verified", out["message"]
    [run] = report["smoke_runs"]
    assert run["path"] == "hsum_test" and run["passed"] and run["harness"] is None, run
    assert report["proof"] == "tested", report["proof_why"]


# libtommath's way: the test goal is a rule $(eval) makes from a template, for each name in a variable
EVAL_RULES = """HSUM_TESTS = check
define TEST_template
$(1): hsum_test
endef
$(foreach t,$(HSUM_TESTS),$(eval $(call TEST_template,$(t))))
hsum_test: hsum_test.c libhsum.a
\t$(CC) -o $@ hsum_test.c libhsum.a
"""


def _only_builds_its_test_program(tmp_path: Path, test_rules: str) -> Path:
    src = _project(tmp_path, "")
    text = (src / "Makefile").read_text().replace("all: libhsum.a hsumtool test", "all: libhsum.a hsumtool")
    (src / "Makefile").write_text(text.replace("check: test\ntest: hsumtool\n\t\n", test_rules))
    (src / "hsum_test.c").write_text("int hsum(int, int);\nint main(void) { return hsum(20, 22) == 42 ? 0 : 1; }\n")
    return src


@pytest.mark.slow
def test_a_test_goal_a_template_makes_is_found_in_makes_own_database(tmp_path):
    """No line of the Makefile's text defines `check`: make's database (read in the sandbox) does, and the test
    program the goal builds runs on the target."""
    out = _build(tmp_path, _only_builds_its_test_program(tmp_path, EVAL_RULES))
    report = out["verify"]
    assert out["status"] == "verified", out["message"]
    [run] = report["smoke_runs"]
    assert run["path"] == "hsum_test" and run["passed"], run
    assert report["proof"] == "tested", report["proof_why"]


def test_makes_database_gives_the_rules_it_made_and_not_the_files_it_only_mentions(tmp_path):
    (tmp_path / "Makefile").write_text(EVAL_RULES.replace("hsum_test.c libhsum.a", "hsum_test.c")
                                       + "test_old: test\n\t@echo deprecated\n")
    printed = subprocess.run(["make", *make_goal.DATABASE_ARGS], cwd=tmp_path, capture_output=True, text=True)
    assert not (tmp_path / "hsum_test").exists()  # nothing was built
    found = make_goal.rules(make_goal.database_rules_text(printed.stdout))
    assert found["check"] == ["hsum_test"] and found["hsum_test"] == ["hsum_test.c"]
    # `test` is only a prerequisite: make lists it as "Not a target"
    assert "test" not in found and found["test_old"] == ["test"]
    assert "hsum_test.c" not in found
    assert make_goal.rules(make_goal.database_rules_text("check: all\n")) == {}  # outside `# Files`: nothing


def test_the_goal_and_its_command_come_from_the_recorded_make_step(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "Makefile").write_text(MAKEFILE.replace("RECIPE", "./hsumtool 1 2"))
    build = BuildStep(("make", "-j1", "CC=/ws/.xbuild/bin/zcc", "AR=zar", "libhsum.a", "hsumtool"), "src",
                      env=(("CROSSBUILD_NO_WERROR", "1"),))
    steps = [build, BuildStep(("make", "install", "PREFIX=/ws/install"), "src")]
    goal = make_goal.find(steps, tmp_path)
    # the build's variables and options kept (its jobs not: test rules share files), its goals replaced; `all`
    # (which names the test) not remade
    assert goal.argv == ["make", "CC=/ws/.xbuild/bin/zcc", "AR=zar", "-o", "all", "-s", "check"]
    assert goal.cwd == "src" and goal.env == (("CROSSBUILD_NO_WERROR", "1"),)
    # a step that built the default goal: nothing to mark old
    whole = make_goal.find([BuildStep(("make", "-j", "4", "CC=zcc"), "src")], tmp_path)
    assert whole.argv == ["make", "CC=zcc", "-s", "check"]
    # the folder -C names, attached or not; a step with its own Makefile (-f, --makefile) or none at all: no goal
    assert make_goal.find([BuildStep(("make", "-Csrc", "--jobs=2"), ".")], tmp_path).argv == \
        ["make", "-Csrc", "-s", "check"]
    for named in (("-f", "Makefile-libbz2_so"), ("-fMakefile-libbz2_so",), ("--makefile=x",)):
        assert make_goal.find([BuildStep(("make", *named), "src")], tmp_path) is None
    assert make_goal.find([BuildStep(("cmake", "--build", "build"), ".")], tmp_path) is None


def test_a_left_out_goal_is_run_only_in_its_folder_and_only_when_the_goal_reaches_it(tmp_path):
    """What the build left out (tests_off.make_goals_left_out) is undone only by running that folder's goal, and only
    a goal that is, or names, what was left out: `test: ./prog --selftest` does not build `unittests`."""
    for folder, text in (("src/lib", "all: libx.a unittests\ncheck: unittests\n\t./unittests\n"),
                         ("src/app", "all: prog\ntest: prog\n\t./prog --selftest\n")):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "Makefile").write_text(text)
    steps = [BuildStep(("make", "-C", "lib", "libx.a"), "src"), BuildStep(("make", "-C", "app"), "src")]
    goal = make_goal.find(steps, tmp_path, ("src/lib", ["unittests"]))
    assert goal.argv == ["make", "-C", "lib", "-o", "all", "-s", "check"]
    assert make_goal.find(steps, tmp_path, ("src/app", ["unittests"])) is None


def test_rules_are_read_line_by_line_and_never_from_recipes_variables_or_define_blocks():
    found = make_goal.rules("$(PLATS) help test clean:\n\t@cd src && $(MAKE) $@\ncheck :: all\n"
                            "test: MOREFLAGS += -g\ndefine RUN\n./runner tests 1: x\nendef\n"
                            "TESTS = check\ntests := 1\n# checks: commented\nendif\n\t./run tests\nclean:\n")
    assert set(found) == {"$(PLATS)", "help", "test", "clean", "check"} and found["check"] == ["all"]
    # a hostile Makefile cannot stall the reader: it is read once, line by line
    started = time.monotonic()
    make_goal.rules("check x y z\n" * 200_000 + "a" * (1 << 20))
    assert time.monotonic() - started < 5


@pytest.mark.slow
def test_a_test_goal_finds_the_shared_library_by_the_link_its_own_library_path_names(tmp_path):
    """nettle's way: the library is built in the top folder, its soname only a link in a folder of its own
    (`.lib/libnettle.so.8` -> `../libnettle.so`), which the test goal puts on LD_LIBRARY_PATH. The target's library
    path crossbuild sets for target programs replaces the goal's, so it holds that folder too: the test runs
    (it failed with `Error loading shared library`)."""
    src = tmp_path / "linked"
    src.mkdir()
    (src / "Makefile").write_text(
        "all: libfoo.so footest\n"
        "libfoo.so: foo.c\n\t$(CC) -shared -fPIC -Wl,-soname,libfoo.so.1 -o $@ foo.c\n"
        "\tmkdir -p .lib && ln -sf ../libfoo.so .lib/libfoo.so.1\n"
        "footest: footest.c libfoo.so\n\t$(CC) -o $@ footest.c -L. -lfoo\n"
        "check: footest\n\tLD_LIBRARY_PATH=.lib ./footest\n"
        "install: all\n\tmkdir -p $(PREFIX)/lib && cp libfoo.so $(PREFIX)/lib/\n")
    (src / "foo.c").write_text("int foo(void) { return 5; }\n")
    (src / "footest.c").write_text("int foo(void);\nint main(void) { return foo() == 5 ? 0 : 1; }\n")
    out = _build(tmp_path, src)
    report = out["verify"]
    assert out["status"] == "verified", out["message"]
    [run] = report["smoke_runs"]
    assert run["path"] == "make check" and run["passed"], run
    assert report["proof"] == "tested", report["proof_why"]
