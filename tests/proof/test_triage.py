"""Triage of failed test programs, on output lines real projects printed under qemu-user here (dev corpus)."""

from __future__ import annotations

import pytest

from crossbuild.proof import tap
from crossbuild.proof.triage import triage

WS = "/ws"  # the workspace the programs ran in: paths below it are the project's own
LIBARCHIVE = ["Unable to locate known reference file test_compat_gtar_1.tar.uu", "  Checked following directories:",
              "/ws/build/bin", "/ws/build/bin/test", "Use -r option to specify full path to reference directory"]


def verdict(exit_code, lines, stopped=None, timeout_s=60, scale=1.0):
    return triage(exit_code, stopped, lines, timeout_s, scale=scale, workspace=WS)


@pytest.mark.parametrize("lines, why", [
    (["connect: Network is unreachable"], "the sandbox has no network"),
    (["connect to 127.0.0.1:4433: Connection refused"], "the sandbox has no network"),
    # mbedtls' udp_proxy
    (["  . Connect to server on UDP/localhost/4433 ... failed", "  ! mbedtls_net_connect returned -82",
      "Last error was: -0x0052 - NET - Failed to get an IP address for the given hostname"],
     "the sandbox has no network"),
    (["qemu: Unsupported syscall: 434"], "qemu-user does not emulate it"),
    (["pidfd_open: Function not implemented"], "qemu-user does not emulate it"),
    (["clone3 returned ENOSYS"], "qemu-user does not emulate it"),
    (["PTRACE_TRACEME: Operation not permitted"], "qemu-user does not emulate it"),
    # musl's wordings (strerror and gai_strerror printed by a musl program here)
    (["connect: Network unreachable"], "the sandbox has no network"),
    (["connect: Address not available"], "the sandbox has no network"),
    (["getaddrinfo example.org: Name does not resolve"], "the sandbox has no network"),
    # a path the program hard-codes outside the workspace, which the sandbox does not provide
    (["loading", "cannot open /usr/share/foo/data.txt: No such file or directory"],
     "it needs /usr/share/foo/data.txt, outside the workspace, which the sandbox does not provide: cannot open "
     "/usr/share/foo/data.txt: No such file or directory"),
    (["open /dev/tty: No such device or address"], "it needs /dev/tty, outside the workspace"),
    (["writing '/var/lib/foo/state': Read-only file system"], "it needs /var/lib/foo/state, outside"),
    (["fopen(/etc/foo.conf) failed: Permission denied"], "it needs /etc/foo.conf, outside"),
])
def test_evidence_of_the_emulator_or_the_sandbox_does_not_block(lines, why):
    t = verdict(1, lines)
    assert t.kind == "environment" and not t.blocks and t.why.startswith(why), t


@pytest.mark.parametrize("exit_code, lines", [
    (1, ["Function didn't die (unexpected new): { new int; }"]),  # google-glog: a real behaviour difference
    (1, ["Check failed: stack_consumed < kStackConsumptionUpperLimit"]),
    # glog's logging test prints strerror(ENOEXEC) as its data: not a program that failed to start
    (1, ["-EYEARDATE TIME__ THREADID logging_unittest.cc:LINE] Plog every 2, iteration 9: Exec format error [8]"]),
    (3, []),
    # the project's own test data: no path outside the workspace is named (issue 34: libarchive was excused so)
    (1, LIBARCHIVE),
    (1, ["No such file or directory"]),
    (1, ["cannot open data/input.txt: No such file or directory"]),
    (1, ["cannot open /ws/src/tests/data.txt: No such file or directory"]),
    (1, ["cannot open /ws/../ws/build/x.dat: No such file or directory"]),
    (1, ["error at /build/src/t.c:12: open input: Permission denied"]),  # a source location names no file it wanted
    (1, ["open /tmp/fixture/a: No such file or directory"]),  # the sandbox's own /tmp is there
    (1, ["fetching http://example.org/x: not found"]),
    # what the old rules excused without a path: a terminal, the sandbox's permissions
    (1, ["tcgetattr: Inappropriate ioctl for device"]),
    (1, ["tcgetattr: Not a tty"]),
    (1, ["chown: Operation not permitted"]),
    (1, ["expected 0, got -1: Operation not permitted"]),
])
def test_a_failure_without_evidence_blocks(exit_code, lines):
    t = verdict(exit_code, lines)
    assert t.kind == "failed" and t.blocks, t


def test_no_printed_path_is_evidence_when_the_workspace_is_unknown():
    t = triage(1, None, ["cannot open /usr/share/foo/data.txt: No such file or directory"], 60)
    assert t.kind == "failed", t


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
    # the sandbox could not start the program at all (its emulator not visible inside): not a path it hard-codes
    (1, ["bwrap: execvp /home/u/bin/qemu-x86_64: No such file or directory"]),
])
def test_load_failures_and_crashes_block_whatever_else_is_printed(exit_code, lines):
    t = verdict(exit_code, lines)
    assert t.kind == "crashed" and t.blocks


def test_an_abort_after_a_failed_assert_is_that_check_failing_not_a_crash():
    """musl's and glibc's assert() wordings, then the abort as qemu, a shell or CTest reports it: the program's
    own check failed (it blocks, and the build machine's run can tell whether it is the project's own); an abort
    no failed check comes before, or any other signal, is a crash, told with the program's last words."""
    aborts = [(134, "qemu: uncaught target signal 6 (Aborted) - core dumped"), (134, "Aborted (core dumped)"),
              (134, "sh: line 1:  4242 Aborted                 ./check_mul"),
              (-6, "ctest: Exception: SubprocessAborted")]
    for said in ("Assertion failed: mul(2, 3) == 6 (check_mul.c: main: 3)",
                 "check_mul: check_mul.c:3: main: Assertion `mul(2, 3) == 6' failed."):
        for exit_code, abort in aborts:
            t = verdict(exit_code, ["starting", said, abort])
            assert t.kind == "failed" and t.blocks and t.why == f"{said} (then aborted)", (abort, t)
        natively = verdict(-6, ["starting", said])  # the build machine's run: no emulator to report the signal
        assert natively.kind == "failed" and natively.why == f"{said} (then aborted)", natively
        segv = verdict(-11, ["starting", said, "qemu: uncaught target signal 11 (Segmentation fault) - core dumped"])
        assert segv.kind == "crashed" and segv.why.startswith(said) and "signal 11" in segv.why, segv
        assert verdict(-11, ["starting", said]).kind == "crashed"
    silent = verdict(134, ["loaded 3 rows", "qemu: uncaught target signal 6 (Aborted) - core dumped"])
    assert silent.kind == "crashed" and silent.why.startswith("loaded 3 rows (qemu: uncaught target signal 6"), silent
    assert verdict(-6, ["loaded 3 rows"]).kind == "crashed"
    t = verdict(-11, ["loaded 3 rows", "qemu: uncaught target signal 11 (Segmentation fault) - core dumped"])
    assert t.why == "loaded 3 rows (qemu: uncaught target signal 11 (Segmentation fault) - core dumped)"


def test_usage_printed_in_the_words_real_programs_use():
    zeroize = ["This program takes exactly 1 argument", "Zeroize is a simple program to assist with testing",
               "prints the first 1024 characters. Usage:", "", "       zeroize <FILE>"]  # mbedtls
    assert verdict(1, zeroize).kind == "usage"


@pytest.mark.parametrize("lines, detail", [
    (["round 1 of 100"], "; last output: round 1 of 100"),
    (["", "  "], " without printing anything"),
    (["[crossbuild: stopped (timeout) after 60.0s; process tree killed]"], " without printing anything"),
    # whatever was printed before: evidence, qemu's own failure, a usage line
    (["connect: Network is unreachable", "retrying"], "; last output: retrying"),
    (["ERROR:../../accel/tcg/cpu-exec.c:954:cpu_exec: assertion failed: (cpu == current_cpu)"],
     "; ERROR:../../accel/tcg/cpu-exec.c:954:cpu_exec: assertion failed"),
    (["cannot open /usr/share/foo/data.txt: No such file or directory"], "; last output: cannot open /usr/share"),
])
def test_a_timeout_is_a_failure_named_with_its_scaled_limit(lines, detail):
    t = verdict(None, lines, stopped="timeout", timeout_s=240, scale=4)
    assert t.kind == "failed" and t.blocks, t
    assert t.why.startswith("timed out after 240s (limit scaled x4 for emulation)" + detail), t.why
    unscaled = verdict(None, lines, stopped="timeout", timeout_s=60)
    assert unscaled.why.startswith("timed out after 60s (limit not scaled)"), unscaled.why
    assert verdict(None, ["x"] * 10, stopped="output_limit").blocks


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


def test_a_tap_runner_whose_failed_tests_each_show_evidence_does_not_block():
    t = verdict(1, UV_PASSING + UV_QEMU_FORK + ["ok 41 - fork_timer"] + NO_NETWORK)
    assert t.kind == "environment" and not t.blocks, t
    assert t.why.startswith("2 of 5 tests failed, each for the emulator or the sandbox: 40 - "
                            "fork_threadpool_queue_work_simple: qemu-user itself failed: "
                            "ERROR:../../accel/tcg/cpu-exec.c:954"), t.why
    assert "3 - tcp_connect: the sandbox has no network: connect: Network unreachable (then aborted)" in t.why


def test_a_tap_test_its_runner_timed_out_or_a_runner_stopped_by_the_limit_blocks():
    t = verdict(1, UV_PASSING + UV_QEMU_FORK + UV_DNS)
    assert t.kind == "failed" and "not ok 121 - getaddrinfo_basic: timed out by its runner's own limit: timeout" \
        in t.why, t.why
    slow = verdict(None, UV_PASSING + NO_NETWORK, stopped="timeout", timeout_s=150, scale=2.5)
    assert slow.kind == "failed" and slow.why == ("timed out after 150s (limit scaled x2.5 for emulation); 3 tests "
                                                  "run of 410 planned, 1 failed; first: not ok 3 - tcp_connect"), slow
    unplanned = verdict(None, UV_PASSING[1:] + UV_DNS, stopped="timeout")  # TAP's plan may come last, or never
    assert unplanned.why.startswith("timed out after 60s (limit not scaled); 3 tests run, 1 failed"), unplanned


def test_one_real_failure_among_a_tap_runners_passing_tests_blocks_and_is_named():
    t = verdict(1, UV_PASSING + UV_QEMU_FORK + UV_CHOWN + NO_NETWORK)
    assert t.blocks and t.kind == "failed"  # its check failed, then the runner's child aborted: not a crash
    assert t.why.startswith("1 of 5 tests failed without evidence of the emulator or the sandbox (2 more with it); "
                            "first: not ok 47 - fs_chown: Assertion failed in /ws/src/test/test-fs.c on line 316: "
                            "req->result == UV_EPERM (then aborted)"), t.why
    segv = [line.replace("signal 6 (Aborted)", "signal 11 (Segmentation fault)") for line in UV_CHOWN]
    assert verdict(1, UV_PASSING + segv).kind == "crashed"
    # any signal but an abort after the evidence is a crash; a silent failure is a failure
    assert verdict(1, UV_PASSING + SEGFAULT_AFTER_NETWORK).kind == "crashed"
    silent = verdict(1, UV_PASSING + ["not ok 3 - answer", "# got 41, expected 42"])
    assert silent.kind == "failed" and silent.why.endswith("3 - answer: got 41, expected 42")
    # a test aborting after a line about its own data: no evidence, so the abort is a crash
    data = ["not ok 3 - fs_read", "# open fixture.txt: No such file or directory",
            "# qemu: uncaught target signal 6 (Aborted) - core dumped"]
    assert verdict(1, UV_PASSING + data).kind == "crashed"
    fixed = ["not ok 3 - fs_read", "# open /usr/share/zoneinfo/UTC: No such file or directory",
             "# qemu: uncaught target signal 6 (Aborted) - core dumped"]
    t = verdict(1, UV_PASSING + fixed)
    assert t.kind == "environment" and "(then aborted)" in t.why and "/usr/share/zoneinfo/UTC" in t.why, t


def test_tap_expected_failures_and_runners_that_crash_outside_a_test():
    todo = UV_PASSING + ["not ok 3 - flaky # TODO known to fail"]
    assert verdict(1, todo).kind == "failed"  # no test failed: read as a whole program that exited 1
    assert verdict(-11, UV_PASSING + UV_CHOWN).kind == "crashed"  # the runner itself died
    header_crash = ["Error relocating ./uv_run_tests: uv_foo: symbol not found", *UV_PASSING, *UV_DNS]
    assert verdict(1, header_crash).kind == "crashed"


def test_tap_result_lines_in_the_forms_the_protocol_allows():
    run = tap.parse(["TAP version 13", "ok", "not ok 2 bar", "  ---", "  message: x", "ok 3 - baz # SKIP no network",
                     "not ok 4 - qux # todo later", "1..4"])
    assert run is not None and run.planned == 4 and run.header == ["TAP version 13"]
    assert [(t.label, t.passed) for t in run.tests] == [("1", True), ("2 - bar", False), ("3 - baz", True),
                                                        ("4 - qux", True)]
    assert run.failed[0].lines == ["  ---", "  message: x"]
    assert tap.parse(["not ok 1 - a", "not ok 2 - b"]) is None  # nothing passed: read as a whole program
    assert tap.parse(["hello", "okay then"]) is None


# A failed check of the program's own beside evidence that is incidental to it (issues 33, 34): the check is the
# evidence, and it blocks; only a line that is both (the check failing for the emulator's or the sandbox's reason)
# excuses.
@pytest.mark.parametrize("lines, check", [
    (["probing /etc/shadow: Permission denied", "Assertion failed: sum == 42 (test_perm.c: main: 7)"], 1),
    (["t: t.c:9: main: Assertion `sum == 42' failed.", "cleanup /var/run/t.pid: No such file or directory"], 0),
    (["optional config ~/.testrc: No such file or directory", "FAIL: checksum"], 1),
    (["[  FAILED  ] Codec.RoundTrip (3 ms)", "open /dev/tty: No such device or address", "not a tty"], 0),
    (["connect: Network is unreachable", "checksum: expected 42, got 41"], 1),
    (["codec_test.cc:12: Failure", "Value of: decode(encode(x))", "getaddrinfo: Name does not resolve"], 0),
    (["Check failed: n == 3", "/etc/t.conf: Read-only file system"], 0),
    (["FAIL: cannot open data/input.txt: No such file or directory"], 0),  # its own data: not evidence
    (["Permission denied", "Assertion failed: r == 0 (t.c: main: 3)"], 1),
])
def test_a_failed_check_beside_incidental_evidence_blocks(lines, check):
    t = verdict(1, lines)
    assert t.kind == "failed" and t.blocks and t.why == lines[check], t


@pytest.mark.parametrize("line, why", [
    ("FAIL: cannot open /usr/share/foo/input.txt: No such file or directory", "it needs /usr/share/foo/input.txt"),
    ("Assertion failed: connect: Network unreachable", "the sandbox has no network"),
    ("expected 0, got -1: Function not implemented", "qemu-user does not emulate it"),
])
def test_a_failed_check_that_is_itself_the_evidence_does_not_block(line, why):
    t = verdict(1, ["running", line])
    assert t.kind == "environment" and t.why.startswith(why) and t.why.endswith(line), t


def test_a_check_failing_before_the_time_limit_or_beside_a_usage_line_blocks():
    t = verdict(None, ["round 1", "FAIL: round 1 checksum", "round 2"], stopped="timeout")
    assert t.blocks and t.why == "timed out after 60s (limit not scaled); FAIL: round 1 checksum", t
    t = verdict(1, ["usage: prog [FILE]", "Assertion failed: parse(\"\") == 0 (prog.c: main: 4)"])
    assert t.blocks and t.why.startswith("Assertion failed"), t


def test_a_tap_test_whose_check_fails_beside_evidence_blocks():
    test = ["not ok 3 - fs_open", "# open /etc/fixture: Permission denied",
            "# Assertion failed in test/test-fs.c on line 40: r == 0", "# qemu: uncaught target signal 6 (Aborted)"]
    t = verdict(1, UV_PASSING + test)
    assert t.blocks and "not ok 3 - fs_open: Assertion failed in test/test-fs.c on line 40: r == 0" in t.why, t
    silent = ["not ok 3 - fs_read", "# read /etc/fixture: No such file or directory", "# FAIL: 0 bytes, expected 12"]
    t = verdict(1, UV_PASSING + silent)
    assert t.blocks and t.kind == "failed" and t.why.endswith("FAIL: 0 bytes, expected 12"), t
