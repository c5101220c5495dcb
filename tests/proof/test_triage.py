"""Triage of failed test programs, on output lines real projects printed under qemu-user here (dev corpus)."""

from __future__ import annotations

import pytest

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
])
def test_load_failures_and_crashes_block_whatever_else_is_printed(exit_code, lines):
    t = triage(exit_code, None, lines, 60)
    assert t.kind == "crashed" and t.blocks


def test_usage_printed_in_the_words_real_programs_use():
    zeroize = ["This program takes exactly 1 argument", "Zeroize is a simple program to assist with testing",
               "prints the first 1024 characters. Usage:", "", "       zeroize <FILE>"]  # mbedtls
    assert triage(1, None, zeroize, 60).kind == "usage"


def test_a_timeout_counts_only_as_slow_emulation_when_the_program_was_working():
    assert triage(None, "timeout", ["round 1 of 100"], 60).kind == "environment"
    assert triage(None, "timeout", ["", "  "], 60).blocks
    assert triage(None, "timeout", ["[crossbuild: stopped (timeout) after 60.0s; process tree killed]"], 60).blocks
    assert triage(None, "output_limit", ["x"] * 10, 60).blocks
