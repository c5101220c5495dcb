"""Triage of failed test programs, on output lines real projects printed under qemu-user here (dev corpus)."""

from __future__ import annotations

import pytest

from crossbuild.proof import tap
from crossbuild.proof.triage import triage

LIBARCHIVE = ["Unable to locate known reference file test_compat_gtar_1.tar.uu", "  Checked following directories:",
              "/ws/build/bin", "/ws/build/bin/test", "Use -r option to specify full path to reference directory"]


@pytest.mark.parametrize("lines, why", [
    (LIBARCHIVE, "its test data is not where it looks: Unable to locate known reference file"),
    (["connect: Network is unreachable"], "the sandbox has no network"),
    # mbedtls' udp_proxy
    (["  . Connect to server on UDP/localhost/4433 ... failed", "  ! mbedtls_net_connect returned -82",
      "Last error was: -0x0052 - NET - Failed to get an IP address for the given hostname"],
     "the sandbox has no network"),
    (["qemu: Unsupported syscall: 434"], "qemu-user does not emulate it"),
    (["tcgetattr: Inappropriate ioctl for device"], "it needs a terminal"),
    # musl's wordings (strerror and gai_strerror printed by a musl program here)
    (["connect: Network unreachable"], "the sandbox has no network"),
    (["connect: Address not available"], "the sandbox has no network"),
    (["getaddrinfo example.org: Name does not resolve"], "the sandbox has no network"),
    (["tcgetattr: Not a tty"], "it needs a terminal"),
])
def test_output_that_blames_the_environment_does_not_block(lines, why):
    t = triage(1, None, lines, 60)
    assert t.kind == "environment" and not t.blocks and t.why.startswith(why)


@pytest.mark.parametrize("exit_code, lines", [
    (1, ["Function didn't die (unexpected new): { new int; }"]),  # google-glog: a real behaviour difference
    (1, ["Check failed: stack_consumed < kStackConsumptionUpperLimit"]),
    # glog's logging test prints strerror(ENOEXEC) as its data: not a program that failed to start
    (1, ["-EYEARDATE TIME__ THREADID logging_unittest.cc:LINE] Plog every 2, iteration 9: Exec format error [8]"]),
    (3, []),
])
def test_a_failure_without_evidence_blocks(exit_code, lines):
    t = triage(exit_code, None, lines, 60)
    assert t.kind == "failed" and t.blocks


@pytest.mark.parametrize("exit_code, lines", [
    (1, ["Error loading shared library libz.so.1: No such file or directory (needed by ./test_zip)"]),
    (127, ["./t: error while loading shared libraries: libfoo.so: cannot open shared object file: No such file"]),
    (1, ["reading data.bin: No such file or directory", "qemu: uncaught target signal 11 (Segmentation fault)"]),
    (-6, ["Network is unreachable"]),
    # glibc's loader: a missing symbol or a too-new glibc is a load failure, not a missing data file
    (127, ["./t: symbol lookup error: ./t: undefined symbol: foo_init"]),
    (1, ["./t: /lib/aarch64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by ./t)"]),
    # a program it started could not start (libuv's runner without an exec handler; a shell running a target file)
    (1, ["not ok 1 - spawn_exit_code", "# execve(): Exec format error"]),
    (1, ["/bin/sh: 1: ./helper: Exec format error"]),
    (126, ["sh: ./helper: cannot execute binary file: Exec format error"]),
    # the sandbox could not start the program at all (its emulator not visible inside): not "test data missing"
    (1, ["bwrap: execvp /home/u/bin/qemu-x86_64: No such file or directory"]),
])
def test_load_failures_and_crashes_block_whatever_else_is_printed(exit_code, lines):
    t = triage(exit_code, None, lines, 60)
    assert t.kind == "crashed" and t.blocks


def test_a_crash_is_told_with_the_failed_assert_before_it():
    """musl's and glibc's assert() wordings, then qemu's report of the abort: the assert is the evidence."""
    for said in ("Assertion failed: mul(2, 3) == 6 (check_mul.c: main: 3)",
                 "check_mul: check_mul.c:3: main: Assertion `mul(2, 3) == 6' failed."):
        t = triage(134, None, ["starting", said, "qemu: uncaught target signal 6 (Aborted) - core dumped"], 60)
        assert t.kind == "crashed" and t.why.startswith(said) and "signal 6" in t.why, t
    t = triage(-11, None, ["loaded 3 rows", "qemu: uncaught target signal 11 (Segmentation fault) - core dumped"], 60)
    assert t.why == "loaded 3 rows (qemu: uncaught target signal 11 (Segmentation fault) - core dumped)"


def test_usage_printed_in_the_words_real_programs_use():
    zeroize = ["This program takes exactly 1 argument", "Zeroize is a simple program to assist with testing",
               "prints the first 1024 characters. Usage:", "", "       zeroize <FILE>"]  # mbedtls
    assert triage(1, None, zeroize, 60).kind == "usage"


def test_a_timeout_counts_only_as_slow_emulation_when_the_program_was_working():
    assert triage(None, "timeout", ["round 1 of 100"], 60).kind == "environment"
    assert triage(None, "timeout", ["", "  "], 60).blocks
    assert triage(None, "timeout", ["[crossbuild: stopped (timeout) after 60.0s; process tree killed]"], 60).blocks
    assert triage(None, "output_limit", ["x"] * 10, 60).blocks


# libuv's uv_run_tests on arm-linux-musleabihf (1.44.2, before its fixtures were found): each test runs in a child,
# whose output the runner prints after the result, prefixed "# "
UV_PASSING = ["1..410", "ok 1 - platform_output", "# Output from process `platform_output`:", "# uv_cwd: /ws/build",
              "ok 2 - active"]
UV_QEMU_FORK = ["not ok 40 - fork_threadpool_queue_work_simple", "# exit code 6",
                "# Output from process `fork_threadpool_queue_work_simple`:", "# Queue in 203", "# **",
                "# ERROR:../../accel/tcg/cpu-exec.c:954:cpu_exec: assertion failed: (cpu == current_cpu)",
                "# Bail out! ERROR:../../accel/tcg/cpu-exec.c:954:cpu_exec: assertion failed: (cpu == current_cpu)",
                "# Waited pid is 203 with status 32512",
                "# Assertion failed in /ws/src/test/test-fork.c on line 88: 0 == WEXITSTATUS(child_stat)",
                "# qemu: uncaught target signal 6 (Aborted) - core dumped"]
UV_DNS = ["not ok 121 - getaddrinfo_basic", "# timeout", "# Output from process `getaddrinfo_basic`: (no output)"]
UV_CHOWN = ["not ok 47 - fs_chown", "# exit code 6", "# Output from process `fs_chown`:",
            "# Assertion failed in /ws/src/test/test-fs.c on line 316: req->result == UV_EPERM",
            "# qemu: uncaught target signal 6 (Aborted) - core dumped"]
# a test whose check aborts after saying the sandbox has no network
NO_NETWORK = ["not ok 3 - tcp_connect", "# connect: Network unreachable",
              "# qemu: uncaught target signal 6 (Aborted) - core dumped"]
SEGFAULT_AFTER_NETWORK = ["not ok 4 - tcp_read", "# connect: Network is unreachable",
                          "# qemu: uncaught target signal 11 (Segmentation fault) - core dumped"]


def test_a_tap_runner_whose_failed_tests_each_name_the_environment_does_not_block():
    t = triage(1, None, UV_PASSING + UV_QEMU_FORK + ["ok 41 - fork_timer"] + UV_DNS + NO_NETWORK, 60)
    assert t.kind == "environment" and not t.blocks, t
    assert t.why.startswith("3 of 6 tests failed, each for the test environment: 40 - "
                            "fork_threadpool_queue_work_simple: qemu-user itself failed: "
                            "ERROR:../../accel/tcg/cpu-exec.c:954"), t.why
    assert "121 - getaddrinfo_basic: the runner's time limit struck under emulation" in t.why
    assert "3 - tcp_connect: the sandbox has no network: connect: Network unreachable (then aborted)" in t.why
    # stopped by crossbuild's own limit while still passing tests: slow emulation, with the same evidence
    slow = triage(None, "timeout", UV_PASSING + UV_DNS, 60)
    assert slow.kind == "environment" and slow.why.startswith("still running after 60s under emulation; 1 of 3 "
                                                              "tests run (410 planned) failed"), slow.why
    unplanned = triage(None, "timeout", UV_PASSING[1:] + UV_DNS, 60)  # TAP's plan may come last, or never
    assert unplanned.why.startswith("still running after 60s under emulation; 1 of 3 tests run failed"), unplanned


def test_one_real_failure_among_a_tap_runners_passing_tests_blocks_and_is_named():
    t = triage(1, None, UV_PASSING + UV_QEMU_FORK + UV_CHOWN + UV_DNS, 60)
    assert t.blocks and t.kind == "crashed"
    assert t.why.startswith("1 of 5 tests failed without a reason in the test environment (2 more with one); first: "
                            "not ok 47 - fs_chown: Assertion failed in /ws/src/test/test-fs.c on line 316: "
                            "req->result == UV_EPERM"), t.why
    # any signal but an abort after the environment's evidence is a crash; a silent failure is a failure
    assert triage(1, None, UV_PASSING + SEGFAULT_AFTER_NETWORK, 60).kind == "crashed"
    silent = triage(1, None, UV_PASSING + ["not ok 3 - answer", "# got 41, expected 42"], 60)
    assert silent.kind == "failed" and silent.why.endswith("3 - answer: got 41, expected 42")


def test_tap_expected_failures_and_runners_that_crash_outside_a_test():
    todo = UV_PASSING + ["not ok 3 - flaky # TODO known to fail"]
    assert triage(1, None, todo, 60).kind == "failed"  # no test failed: read as a whole program that exited 1
    assert triage(-11, None, UV_PASSING + UV_CHOWN, 60).kind == "crashed"  # the runner itself died
    header_crash = ["Error relocating ./uv_run_tests: uv_foo: symbol not found", *UV_PASSING, *UV_DNS]
    assert triage(1, None, header_crash, 60).kind == "crashed"


def test_tap_result_lines_in_the_forms_the_protocol_allows():
    run = tap.parse(["TAP version 13", "ok", "not ok 2 bar", "  ---", "  message: x", "ok 3 - baz # SKIP no network",
                     "not ok 4 - qux # todo later", "1..4"])
    assert run is not None and run.planned == 4 and run.header == ["TAP version 13"]
    assert [(t.label, t.passed) for t in run.tests] == [("1", True), ("2 - bar", False), ("3 - baz", True),
                                                        ("4 - qux", True)]
    assert run.failed[0].lines == ["  ---", "  message: x"]
    assert tap.parse(["not ok 1 - a", "not ok 2 - b"]) is None  # nothing passed: read as a whole program
    assert tap.parse(["hello", "okay then"]) is None


# A failed check of the program's own beside an environment line that is incidental to it (issue 33): the check is the
# evidence, and it blocks; only a line that is both (the check failing for the environment's reason) still excuses.
@pytest.mark.parametrize("lines, check", [
    (["probing /etc/shadow: Permission denied", "Assertion failed: sum == 42 (test_perm.c: main: 7)"], 1),
    (["t: t.c:9: main: Assertion `sum == 42' failed.", "cleanup: No such file or directory"], 0),
    (["optional config ~/.testrc: No such file or directory", "FAIL: checksum"], 1),
    (["[  FAILED  ] Codec.RoundTrip (3 ms)", "open /dev/tty: No such device or address", "not a tty"], 0),
    (["connect: Network is unreachable", "checksum: expected 42, got 41"], 1),
    (["codec_test.cc:12: Failure", "Value of: decode(encode(x))", "getaddrinfo: Name does not resolve"], 0),
    (["Check failed: n == 3", "Read-only file system"], 0),
])
def test_a_failed_check_beside_an_incidental_environment_line_blocks(lines, check):
    t = triage(1, None, lines, 60)
    assert t.kind == "failed" and t.blocks and t.why == lines[check], t


@pytest.mark.parametrize("line, why", [
    ("FAIL: cannot open data/input.txt: No such file or directory", "its test data is not where it looks"),
    ("Assertion failed: connect: Network unreachable", "the sandbox has no network"),
    ("expected 0, got -1: Operation not permitted", "the sandbox forbids it"),
])
def test_a_failed_check_that_is_itself_the_environments_line_still_does_not_block(line, why):
    t = triage(1, None, ["running", line], 60)
    assert t.kind == "environment" and t.why.startswith(why), t


def test_a_check_failing_before_the_time_limit_or_beside_a_usage_line_blocks():
    t = triage(None, "timeout", ["round 1", "FAIL: round 1 checksum", "round 2"], 60)
    assert t.blocks and t.why.startswith("FAIL: round 1 checksum (then still running after 60s)"), t
    t = triage(1, None, ["usage: prog [FILE]", "Assertion failed: parse(\"\") == 0 (prog.c: main: 4)"], 60)
    assert t.blocks and t.why.startswith("Assertion failed"), t


def test_a_tap_test_whose_check_fails_beside_an_environment_line_blocks():
    test = ["not ok 3 - fs_open", "# open fixture: Permission denied",
            "# Assertion failed in test/test-fs.c on line 40: r == 0", "# qemu: uncaught target signal 6 (Aborted)"]
    t = triage(1, None, UV_PASSING + test, 60)
    assert t.blocks and "not ok 3 - fs_open: Assertion failed in test/test-fs.c on line 40: r == 0" in t.why, t
    silent = ["not ok 3 - fs_read", "# read fixture: No such file or directory", "# FAIL: 0 bytes, expected 12"]
    t = triage(1, None, UV_PASSING + silent, 60)
    assert t.blocks and t.kind == "failed" and t.why.endswith("FAIL: 0 bytes, expected 12"), t
