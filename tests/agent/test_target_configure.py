"""A dependency that configures as OpenSSL does, as a user meets it: `crossbuild build` of a CMake project whose
pkg-config dependency comes from a local source (`--dep-source`) with a Perl `Configure` that takes the machine's
name from its own table and no configure of autoconf's kind. The planner builds it with that recipe for aarch64
(the machine name the table declares, the compiler from the environment, `make install_sw`), the consumer links
it, and its programs run on the target. The Configure refuses anything it does not know, as OpenSSL's does."""

from __future__ import annotations

import json
import shlex
import sqlite3
from pathlib import Path

import pytest

from crossbuild.env import recipes, target_configure
from crossbuild.foundation.targets import parse_target
from tests.conftest import cb, forget_cached_dependencies, outcome_of

CONFIGURE = r"""#!/usr/bin/env perl
# A configure script in OpenSSL's manner: a machine name from Configurations/*.conf, CC and AR from the environment
use strict; use warnings;
use File::Basename; use Cwd qw(abs_path);
my $src = dirname(abs_path($0));
my ($machine, $prefix, $libdir) = (undef, "/usr/local", "lib");
for (@ARGV) {
    if (/^--prefix=(.*)/) { $prefix = $1 } elsif (/^--libdir=(.*)/) { $libdir = $1 }
    elsif (/^-/) { die "Configure: unknown option $_\n" } else { $machine = $_ }
}
die "Usage: Configure [options] machine\n" unless defined $machine;
my %known;
for my $f (glob "$src/Configurations/*.conf") {
    open my $h, '<', $f or die; while (<$h>) { $known{$1} = 1 if /^\s*"([\w.+-]+)"\s*=>\s*\{/ }
}
die "Configure: target $machine is not known\n" unless $known{$machine};
my %v = (SRC => $src, PREFIX => $prefix, LIBDIR => $libdir, CC => $ENV{CC} // "cc", AR => $ENV{AR} // "ar",
         MACHINE => $machine);
open my $in, '<', "$src/Makefile.in" or die; open my $out, '>', 'Makefile' or die;
while (my $line = <$in>) { $line =~ s/\@(\w+)\@/$v{$1}/g; print $out $line }
print "Configured for $machine\n";
"""

TABLE = """my %targets = (
    "linux-generic64" => { cflags => "" },
    "linux-aarch64" => { inherit_from => [ "linux-generic64" ] },
);
"""

MAKEFILE_IN = """CC = @CC@
AR = @AR@
all: libtiny.a tinytest
libtiny.a: @SRC@/tiny.c @SRC@/tiny.h
\t$(CC) -c -I@SRC@ @SRC@/tiny.c -o tiny.o
\t$(AR) rcs $@ tiny.o
tinytest: @SRC@/tinytest.c libtiny.a
\t$(CC) -I@SRC@ @SRC@/tinytest.c libtiny.a -o $@
test: tinytest
\tprove @SRC@/t
install_sw: all
\tmkdir -p $(DESTDIR)@PREFIX@/include $(DESTDIR)@PREFIX@/@LIBDIR@/pkgconfig
\tcp @SRC@/tiny.h $(DESTDIR)@PREFIX@/include/
\tcp libtiny.a $(DESTDIR)@PREFIX@/@LIBDIR@/
\tprintf 'prefix=@PREFIX@\\nName: tiny\\nDescription: t\\nVersion: 1.0\\nCflags: -I$${prefix}/include\\n\
Libs: -L$${prefix}/@LIBDIR@ -ltiny\\n' > $(DESTDIR)@PREFIX@/@LIBDIR@/pkgconfig/tiny.pc
install: install_sw
\tpod2man --section=3 tiny.pod > $(DESTDIR)@PREFIX@/share/man/man3/tiny.3
"""

CONSUMER = """cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(PkgConfig REQUIRED)
pkg_check_modules(TINY REQUIRED IMPORTED_TARGET tiny)
add_executable(consumer main.c)
target_link_libraries(consumer PkgConfig::TINY)
enable_testing()
add_test(NAME consumer COMMAND consumer)
install(TARGETS consumer)
"""


def _tiny(root: Path, failing: int = 0) -> Path:
    d = root / "tiny"
    (d / "Configurations").mkdir(parents=True)
    (d / "Configure").write_text(CONFIGURE)
    (d / "Configure").chmod(0o755)
    (d / "Configurations" / "10-main.conf").write_text(TABLE)
    (d / "Makefile.in").write_text(MAKEFILE_IN)
    (d / "tiny.h").write_text("int tiny_add(int a, int b);\n")
    (d / "tiny.c").write_text('#include "tiny.h"\nint tiny_add(int a, int b) { return a + b; }\n')
    # ten tests under Perl's Test::Harness, as OpenSSL's; FAILING of them compare with a wrong sum
    (d / "tinytest.c").write_text('#include <stdlib.h>\n#include "tiny.h"\n'
                                  'int main(int c, char **v) {\n'
                                  '  return c == 3 && tiny_add(atoi(v[1]), 1) == atoi(v[2]) ? 0 : 1;\n}\n')
    (d / "t").mkdir()
    for n in range(10):
        (d / "t" / f"{n:02d}-add.t").write_text(
            f'print "1..1\\n"; my $ok = system("./tinytest", {n}, {n + 1 + (n < failing)}) == 0;\n'
            'print $ok ? "ok 1\\n" : "not ok 1\\n";\n')
    return d


def test_the_machine_name_is_the_most_specific_one_the_projects_table_declares(tmp_path):
    tiny = _tiny(tmp_path)
    assert recipes.detect(tiny) == "target-configure" and recipes.present("target-configure", tiny)
    assert target_configure.machine_name(tiny, parse_target("aarch64-linux-musl")) == "linux-aarch64"
    # riscv64's own name is not in this table: the generic one it declares
    assert target_configure.machine_name(tiny, parse_target("riscv64-linux-musl")) == "linux-generic64"
    # a `Configure` without a table is not this family (a project's own script of another kind)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "Configure").write_text("#!/bin/sh\n")
    assert not recipes.present("target-configure", tmp_path / "other")
    assert recipes.detect_or_none(tmp_path / "other") is None


@pytest.fixture
def sources(tmp_path):
    root = tmp_path / "sources"
    root.mkdir()
    tiny = _tiny(root)
    consumer = root / "consumer"
    consumer.mkdir()
    (consumer / "CMakeLists.txt").write_text(CONSUMER)
    (consumer / "main.c").write_text("#include <tiny.h>\nint main(void) { return tiny_add(40, 2) == 42 ? 0 : 1; }\n")
    yield tiny, consumer
    forget_cached_dependencies(root)


@pytest.mark.slow
def test_a_dependency_with_a_configure_that_takes_the_machine_name_builds_for_the_consumer(tmp_path, sources):
    tiny, consumer = sources
    prefix = tmp_path / "prefix"
    r = cb("build", str(consumer), "-t", "aarch64-linux-musl", "-w", str(tmp_path / "ws"), "--db",
           str(tmp_path / "runs.db"), "--prefix", str(prefix), "--json", "--no-config", "--dep-source",
           f"tiny={tiny}", cwd=tmp_path, timeout=1200)
    out = outcome_of(r.stdout)
    assert out, r.stdout[-2000:] + r.stderr[-2000:]
    # the host: the dependency's library in the prefix, built for the target (AArch64 objects in the archive)
    archive = (prefix / "lib" / "libtiny.a").read_bytes()
    assert b"\x7fELF\x02\x01\x01" in archive and b"\xb7\x00" in archive  # ELF64 LE, e_machine 183 (AArch64)
    assert (prefix / "lib" / "pkgconfig" / "tiny.pc").is_file()
    assert not (prefix / "share").exists()  # install_sw: no manual pages (pod2man is no tool of the build)
    db = sqlite3.connect(tmp_path / "runs.db")
    argvs = [shlex.split(json.loads(a)["command"]) for (a,) in
             db.execute("SELECT parsed_arguments_json FROM tool_calls WHERE name='run_command'")]
    configure = [a for a in argvs if a[0].endswith("/Configure")]
    assert configure and configure[0][1] == "linux-aarch64", configure
    assert out["status"] == "verified", out.get("message")
    assert out["verify"]["proof"] == "tested", out["verify"]["proof_why"]


@pytest.mark.slow
def test_crossbuild_deps_build_makes_it_for_each_target_and_says_which_could_not_be_had(tmp_path, sources):
    """`crossbuild deps build` ahead of a build: the same builder for aarch64 and riscv64 (whose own machine name this
    table lacks: its generic 64-bit one), then from the cache; a name nothing provides fails on one line."""
    tiny, _ = sources
    r = cb("deps", "build", "tiny", "-t", "aarch64-linux-musl", "-t", "riscv64-linux-musl", "--dep-source",
           f"tiny={tiny}", "--prefix", str(tmp_path / "prefixes"), "--json", cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = json.loads(r.stdout)
    assert [(x["target"], x["ok"], x["cached"]) for x in rows] == [("aarch64-linux-musl", True, False),
                                                                 ("riscv64-linux-musl", True, False)]
    for target, machine in (("aarch64-linux-musl", b"\xb7\x00"), ("riscv64-linux-musl", b"\xf3\x00")):
        archive = (tmp_path / "prefixes" / target / "lib" / "libtiny.a").read_bytes()
        assert b"\x7fELF\x02\x01\x01" in archive and machine in archive, target  # EM_AARCH64 183, EM_RISCV 243
    again = cb("deps", "build", "tiny", "-t", "riscv64-linux-musl", "--dep-source", f"tiny={tiny}", "--prefix",
               str(tmp_path / "other"), "--json", cwd=tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)[0]["cached"] is True, again.stderr[-2000:]
    bad = cb("deps", "build", "no-such-library-anywhere", "-t", "aarch64-linux-musl", cwd=tmp_path)
    assert bad.returncode == 1 and "no-such-library-anywhere for aarch64-linux-musl:" in bad.stderr, bad.stderr


@pytest.mark.slow
def test_a_dependency_whose_own_tests_mostly_pass_is_provided_and_says_which_failed(tmp_path):
    """One of the dependency's ten tests fails on the target (as OpenSSL's errstr test does on musl): every binary
    fits the target and rebuilds, so the library is provided, and build_dependency's result names the failure.
    Half failing is refused: such a build is not what a consumer should link."""
    root = tmp_path / "sources"
    root.mkdir()
    try:
        for failing, provided in ((1, True), (5, False)):
            tiny = _tiny(root / f"f{failing}", failing)
            r = cb("deps", "build", "tiny", "-t", "aarch64-linux-musl", "--dep-source", f"tiny={tiny}", "--prefix",
                   str(tmp_path / f"prefix{failing}"), "--json", cwd=tmp_path, timeout=1200)
            rows = json.loads(r.stdout)
            assert rows[0]["ok"] is provided, r.stderr[-3000:]
            said = rows[0]["message"]
            if provided:
                assert "its own tests on the target: 9 passed, 1 failed: Makefile test " in said, said
                assert "/t/00-add.t (exit 1" in said and said.endswith("own tests prove what it uses)"), said
                assert (tmp_path / "prefix1" / "aarch64-linux-musl" / "lib" / "libtiny.a").is_file()
            else:
                assert "cross-building" in said and "failed" in said and "remembered" not in said, said
                assert not (tmp_path / "prefix5" / "aarch64-linux-musl" / "lib" / "libtiny.a").exists()
                _failure_is_remembered_until_the_source_changes(tmp_path, tiny, rows[0])
    finally:
        forget_cached_dependencies(root)


def _failure_is_remembered_until_the_source_changes(tmp_path, tiny, first):
    """Asked again with the same inputs, the failed build is not run again: the answer is at once and says so; once
    the source changes, it is built again."""
    def again():
        r = cb("deps", "build", "tiny", "-t", "aarch64-linux-musl", "--dep-source", f"tiny={tiny}", "--prefix",
               str(tmp_path / "prefix-again"), "--json", cwd=tmp_path, timeout=1200)
        return json.loads(r.stdout)[0]
    second = again()
    assert not second["ok"] and second["message"].startswith(first["message"]), second["message"]
    assert "[remembered: this build failed" in second["message"] and "crossbuild deps clear -t aarch64-linux-musl" \
        in second["message"], second["message"]
    # nothing built the second time (configure, compile and the tests under qemu took seconds the first)
    assert first["seconds"] > 3 and second["seconds"] < 1, (first["seconds"], second["seconds"])
    listed = cb("deps", "list", cwd=tmp_path)
    # piped, one tab-separated row per remembered failure: target, package, when, after how long, why
    assert listed.returncode == 0 and any(
        line.startswith(f"aarch64-linux-musl\t{tiny}\t") and "\tcross-building" in line
        for line in listed.stdout.splitlines()), listed.stdout[-2000:]
    (tiny / "tiny.c").write_text((tiny / "tiny.c").read_text() + "/* edited */\n")
    third = again()
    assert not third["ok"] and "remembered" not in third["message"] and third["seconds"] > 3, third


@pytest.mark.slow
def test_a_dependencys_own_suite_runs_within_its_budget_and_the_result_says_how_far_it_was_proven(tmp_path,
                                                                                                    monkeypatch):
    """A consumer waits on its dependency: the dependency's own test suite has a budget (OpenSSL's takes over 40
    minutes under qemu). Past it the suite is unfinished, the dependency is still provided, and its result says at
    which level it was verified and why not `tested`."""
    from crossbuild.agent import loop
    from crossbuild.agent.dependency_builder import DependencyBuilder
    from crossbuild.tools.context import RunContext

    monkeypatch.setattr(loop, "DEPENDENCY_SUITE_S", 10.0)
    tiny = _tiny(tmp_path / "sources")
    for t in (tiny / "t").iterdir():  # ten tests of four seconds each
        t.write_text("sleep 4;\n" + t.read_text())
    (tmp_path / "ws" / "src").mkdir(parents=True)
    try:
        ctx = RunContext.create(tmp_path / "ws", parse_target("aarch64-linux-musl"), prefix=tmp_path / "prefix",
                                dependency_builder=DependencyBuilder(user_sources={"tiny": str(tiny)}))
        out = ctx.dependency_builder(ctx, "tiny")
        assert out.ok, out.message
        assert "its own tests on the target: verified `" in out.message, out.message
        assert "did not finish within its overall limit" in out.message, out.message
        assert (tmp_path / "prefix" / "lib" / "libtiny.a").is_file()
    finally:
        forget_cached_dependencies(tmp_path / "sources")
