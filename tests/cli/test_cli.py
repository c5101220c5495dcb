"""The CLI as a user meets it: the real `crossbuild` executable in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, cb, copy_example, outcome_of


def test_targets_json_lists_required_targets():
    r = cb("targets", "--json")
    assert r.returncode == 0
    names = [t["name"] for t in json.loads(r.stdout)]
    for n in ("aarch64-linux-musl", "aarch64-linux-gnu", "x86_64-linux-musl", "riscv64-linux-musl",
              "arm-linux-musleabihf", "x86_64-windows-gnu", "aarch64-macos", "x86_64-macos", "aarch64-freebsd",
              "x86_64-freebsd", "wasm32-wasi"):
        assert n in names


def test_unknown_target_is_a_clear_error(tmp_path):
    r = cb("env", "aarch64-linux-mus", "-w", str(tmp_path))
    assert r.returncode == 2
    assert "Did you mean: aarch64-linux-musl" in r.stderr.replace("\n", " ").replace("│", " ")
    assert not (tmp_path / ".xbuild").exists()


def test_env_shell_exports_work_by_hand(tmp_path):
    r = cb("env", "aarch64-linux-musl", "-w", str(tmp_path), "--shell")
    assert r.returncode == 0, r.stderr
    (tmp_path / "m.c").write_text("int main(void){return 0;}\n")
    script = r.stdout + '\n$CC -O2 m.c -o m && file m\n'
    out = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ARM aarch64" in out.stdout


def test_verify_missing_dir_and_json(tmp_path):
    r = cb("verify", str(tmp_path / "nope"), "--target", "aarch64-linux-musl")
    assert r.returncode == 2 and "is not a directory" in r.stderr
    (tmp_path / "empty").mkdir()
    r = cb("verify", str(tmp_path / "empty"), "--target", "aarch64-linux-musl", "--json")
    assert r.returncode == 1
    assert json.loads(r.stdout)["reasons"][0].startswith("no binaries")


def test_doctor_exits_zero_when_required_tools_present():
    r = cb("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(r.stdout)}
    assert checks["zig"]["status"] == "ok"
    assert r.returncode == (0 if all(c["status"] == "ok" for c in checks.values() if c["required"]) else 1)


def test_quick_refuses_broken_sources(tmp_path):
    r = cb("quick", str(tmp_path / "missing"), "-t", "aarch64-linux-musl", "-w", str(tmp_path / "ws"))
    assert r.returncode == 2 and "does not exist" in r.stderr
    (tmp_path / "empty").mkdir()
    r = cb("quick", str(tmp_path / "empty"), "-t", "aarch64-linux-musl", "-w", str(tmp_path / "ws2"))
    assert r.returncode == 2 and "no build system found" in r.stderr
    r = cb("quick", "debian:../etc", "-t", "aarch64-linux-musl", "-w", str(tmp_path / "ws3"))
    assert r.returncode == 2 and "unsafe name" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("target, system, expect_machine", [
    *((t, system, machine) for t, machine in (("aarch64-linux-musl", "EM_AARCH64"), ("riscv64-linux-musl", "EM_RISCV"),
                                              ("x86_64-windows-gnu", "IMAGE_FILE_MACHINE_AMD64"))
      for system in ("cmake", "meson", "autotools")),
    ("arm-linux-musleabihf", "cmake", "EM_ARM"),
    *(("aarch64-macos", system, "arm64") for system in ("cmake", "meson", "autotools")),
    ("x86_64-freebsd", "cmake", "EM_X86_64"), ("aarch64-freebsd", "autotools", "EM_AARCH64"),
    *(("wasm32-wasi", system, "wasm32") for system in ("cmake", "meson", "autotools")),
])
def test_quick_builds_and_verifies_example(tmp_path, target, system, expect_machine):
    src = tmp_path / "libcalc"
    shutil.copytree(EXAMPLE, src)
    # macOS and FreeBSD programs cannot run here: `built` is accepted by name; Windows ones run under Wine
    windows = target.endswith("windows-gnu")
    scan_only = target.endswith(("macos", "freebsd"))
    r = cb("quick", str(src), "-t", target, "--system", system, "-w", str(tmp_path / "ws"), "--json",
           *(["--require", "built"] if scan_only else []))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads(r.stdout[r.stdout.index("\n{") + 1:] if not r.stdout.startswith("{") else r.stdout)
    assert report["ok"] and report["sandbox"] == "bubblewrap"
    assert report["rebuild"]["ok"]
    programs = [a for a in report["artifacts"] if a["kind"] == "executable"]
    assert programs and all(a["machine"] == expect_machine for a in programs)
    # the project's own harness ran its test (Meson names it `project:test`); under Wine and wasmtime too, automake's
    # `make check` starting the .exe or module bare (the test sandbox's binfmt hands it to target-run)
    assert report["harness"] == (None if scan_only else {
        "cmake": "ctest", "meson": "meson test", "autotools": "make check"}[system])
    runs = {Path(r_["path"].split(":")[-1]).name: r_ for r_ in report["smoke_runs"]}
    test_prog = runs.get("test_calc") or runs.get("test_calc.exe") or runs.get("test_calc.wasm")
    assert test_prog is not None, runs
    if scan_only:
        assert test_prog["skipped"].startswith(("macOS programs are scanned only", "FreeBSD programs are scanned only"))
        # nothing ran on the target: the verdict says so, and why it is no higher
        assert report["proof"] == "built" and "could run here" in report["proof_why"]
    else:
        assert test_prog["passed"] and test_prog["exit_code"] == 0
        assert report["proof"] == "tested" and report["proof_counts"]["passed"] >= 1, report["proof_counts"]
        arch = "x86_64" if windows else expect_machine.removeprefix('EM_').lower().replace('riscv', 'riscv64')
        assert f"test_calc on {arch}" in test_prog["output_tail"] or "7 passed, 0 failed" in test_prog["output_tail"]
    if windows:  # the Wine prefix was the workspace's own, and is gone after the verdict
        assert not (tmp_path / "ws" / ".scratch" / "wine").exists() and not (Path.home() / ".wine").exists()
    assert (src / "CMakeLists.txt").read_text() == (EXAMPLE / "CMakeLists.txt").read_text()
    assert not (src / "build").exists()  # the original source is never modified


@pytest.mark.slow
def test_quick_debian_zlib_with_its_own_configure(tmp_path):
    r = cb("quick", "debian:zlib", "-t", "aarch64-linux-musl", "--system", "configure", "-w", str(tmp_path / "ws"),
           "--json")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads(r.stdout[r.stdout.index("{"):])
    kinds = {a["path"]: a["kind"] for a in report["artifacts"]}
    assert kinds.get("libz.a") == "static_library"
    assert any(k == "shared_library" and p.startswith("libz.so") for p, k in kinds.items())  # not silently dropped
    # zlib's own `make check` (example, minigzip and their shared builds) ran on the target: its Makefile's goal
    [check] = report["smoke_runs"]
    assert report["harness"] == "Makefile" and check["path"] == "make check", report["smoke_runs"]
    assert check["passed"] and check["on_target"], check
    assert report["proof"] == "tested", report["proof_why"]


def test_musl_loader_refuses_non_musl_target():
    r = cb("musl-loader", "aarch64-linux-gnu")
    assert r.returncode == 2 and "not a musl target" in r.stderr


@pytest.mark.slow
def test_musl_loader_runs_dynamic_musl_programs(tmp_path):
    from crossbuild.env.musl_sysroot import loader_path
    from crossbuild.proof.binary_formats import dynamic_symbols

    r = cb("musl-loader", "aarch64-linux-musl")
    assert r.returncode == 0, r.stderr
    with open(loader_path("aarch64"), "rb") as f:
        exported, _ = dynamic_symbols(f)
    assert {"memcpy", "memset", "strlen", "printf", "cos"} <= exported  # not hidden by zig's compiler-rt

    src = tmp_path / "libcalc"
    shutil.copytree(EXAMPLE, src)
    exports = cb("env", "aarch64-linux-musl", "-w", str(tmp_path), "--shell").stdout
    reports = {}
    for build_type in ("Release", "Debug"):
        out = tmp_path / build_type
        script = exports + (f"\ncmake -S {src} -B {out} -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_TYPE={build_type}"
                            f" && cmake --build {out}\n")
        b = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        assert b.returncode == 0, b.stdout[-2000:] + b.stderr[-2000:]
        v = cb("verify", str(out), "--target", "aarch64-linux-musl", "--json")
        reports[build_type] = json.loads(v.stdout)
    release = reports["Release"]
    assert release["ok"], release["reasons"]
    exe = next(a for a in release["artifacts"] if a["path"] == "test_calc")
    assert exe["linkage"] == "dynamic" and exe["interpreter"] == "/lib/ld-musl-aarch64.so.1"
    [run] = release["smoke_runs"]
    assert run["passed"] and "7 passed, 0 failed" in run["output_tail"]
    # zig's debug-mode UBSan runtime needs statx (new in musl 1.2.5): the loader is built from the musl zig links
    # against, so Debug programs run too
    [debug_run] = reports["Debug"]["smoke_runs"]
    assert debug_run["passed"] and "7 passed, 0 failed" in debug_run["output_tail"], debug_run


@pytest.mark.slow
def test_libconfig_cxx_shared_library_links(tmp_path):
    """Debian's libconfig: libtool links libconfig++.so with -nostdlib and gcc's postdeps; through the wrapper it
    links with crossbuild's shared C++ runtime (a C++ shared library), which provides every C++ symbol it needs."""
    from crossbuild.env import cxx_runtime, workspace
    from crossbuild.foundation import host
    from crossbuild.foundation.targets import parse_target
    from crossbuild.proof.binary_formats import describe_elf, dynamic_symbols

    target = parse_target("aarch64-linux-musl")
    cxx_runtime.build(target, host.zig_executable())  # as a build's toolchain makes it for C++ sources
    ws = workspace.prepare("debian:libconfig", tmp_path / "ws")
    exports = cb("env", "aarch64-linux-musl", "-w", str(ws.root), "--shell").stdout
    script = exports + "\n./configure --host=$CROSSBUILD_HOST_TRIPLE --disable-static && make -j2 -C lib\n"
    b = subprocess.run(["bash", "-c", script], cwd=ws.src, capture_output=True, text=True)
    assert b.returncode == 0, b.stdout[-2000:] + b.stderr[-2000:]
    lib = next((ws.src / "lib" / ".libs").glob("libconfig++.so.*.*"))
    with open(lib, "rb") as f:
        _, required = dynamic_symbols(f)
    runtime = cxx_runtime.path(target)
    with open(lib, "rb") as f:
        assert cxx_runtime.SONAME in describe_elf(f, lib.name).needed
    with open(runtime, "rb") as f:
        provided, _ = dynamic_symbols(f)
    assert not [s for s in required if s.startswith("_Z") and s not in provided], "C++ symbols left unresolved"
    assert "dropped -nostdlib" in (ws.root / ".scratch" / "wrappers.log").read_text()
    v = cb("verify", str(ws.src / "lib"), "--target", "aarch64-linux-musl", "--json")
    assert json.loads(v.stdout)["ok"], v.stdout[-2000:]


def test_mcp_refuses_bad_options_before_serving(tmp_path):
    r = cb("mcp", str(EXAMPLE), "-t", "riscv64-linux-mus", cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "riscv64-linux-musl" in r.stderr
    r = cb("mcp", str(EXAMPLE), cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "needs a target" in r.stderr.replace("\n", " ").replace("│", " ")
    r = cb("mcp", "--transport", "sse", cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "stdio or http" in r.stderr
    assert not (tmp_path / "crossbuild-runs").exists()


def test_bench_tools_prints_dispatch_overhead_and_schema_sizes():
    r = cb("bench-tools", "--calls", "300", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "p50" in r.stdout and "µs" in r.stdout
    for name in ("openai", "openai-strict", "anthropic", "mcp"):
        assert f"schema set {name} " in r.stdout


def test_bench_web_prints_how_fast_a_long_run_is_served():
    r = cb("bench-web", "--calls", "50", "--repeats", "2", timeout=300)
    assert r.returncode == 0, r.stderr
    # 2 per call, 5 kb, where the source came from, end
    assert "a run of 50 tool calls (108 events), 2 reads over loopback" in r.stdout
    assert "run page:" in r.stdout and "page + whole story (event stream to its end): median" in r.stdout


@pytest.mark.slow
def test_bench_versus_hand_prints_each_sides_time_and_phases(tmp_path):
    """examples/libcalc, one round: configure, build, install and ctest by hand beside `crossbuild build` to
    VERIFIED, each side's phases, the ratio, and the Markdown page asked for."""
    manifest = EXAMPLE.parents[1] / "corpus" / "examples" / "libcalc.toml"
    r = cb("bench-versus-hand", str(manifest), "--rounds", "1", "--out", str(tmp_path / "versus-hand.md"),
           cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "round 1: by hand" in r.stdout and "(tests passed)" in r.stdout and "(verified, tested)" in r.stdout
    page = (tmp_path / "versus-hand.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| libcalc | cmake | 1 |"))
    ratio = float(row.split("|")[6])
    assert ratio > 0 and '"configure"' in page and '"test"' in page and '"verdict: clean rebuild"' in page


def test_build_refuses_bad_models_before_doing_anything(tmp_path):
    r = cb("build", str(EXAMPLE), "-t", "aarch64-linux-musl", "-m", "gpt5", "--db", str(tmp_path / "r.db"),
           cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "unknown model" in r.stderr
    r = cb("build", str(EXAMPLE), "-t", "aarch64-linux-musl", "-m", "openai:gpt-4o-mini", "--db",
           str(tmp_path / "r.db"), cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "OPENAI_API_KEY" in r.stderr
    r = cb("build", str(tmp_path / "nope"), "-t", "aarch64-linux-musl", "--db", str(tmp_path / "r.db"),
           cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "error:" in r.stderr
    assert not (tmp_path / "crossbuild-runs").exists() or not any((tmp_path / "crossbuild-runs").iterdir())


def test_runs_without_a_database_is_a_clear_error(tmp_path):
    r = cb("runs", "list", "--db", str(tmp_path / "none.db"), timeout=60)
    assert r.returncode == 2 and "no trace database" in r.stderr


@pytest.mark.slow
def test_build_then_runs_list_show_stats(tmp_path):
    db = str(tmp_path / "runs.db")
    r = cb("build", str(EXAMPLE), "-t", "riscv64-linux-musl", "--db", db, cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "VERIFIED" in r.stdout and "[exit=0] cmake" in r.stdout and "run id:" in r.stdout
    run_id = r.stdout.split("run id: ")[1].split()[0]
    r = cb("runs", "list", "--db", db, "--json")
    assert json.loads(r.stdout)[0]["id"] == run_id
    r = cb("runs", "show", run_id[:14], "--db", db)
    assert r.returncode == 0 and "build_status" in r.stdout and "finish" in r.stdout and "verified" in r.stdout
    # where the time went: the commands by phase, then the verdict's own phases
    seconds = json.loads(cb("runs", "show", run_id, "--db", db, "--json").stdout)["seconds"]
    assert {"configure", "build", "verdict: clean rebuild", "verdict: tests"} <= set(seconds)  # 0.1 s and up
    assert abs(sum(seconds.values()) - json.loads(cb("runs", "list", "--db", db, "--json").stdout)[0]["wall_s"]) < 1
    assert "time per phase: configure " in r.stdout
    r = cb("runs", "stats", "--db", db)
    # piped: one tab-separated row per tool (tool, calls, failed, failure rate, errors, time)
    row = next(line.split("\t") for line in r.stdout.splitlines() if line.startswith("run_command\t"))
    assert r.returncode == 0 and row[1] == "3" and row[3] == "0%"
    assert "knowledge-base attachments" in r.stdout and "median steps" in r.stdout


def test_listings_survive_a_pipe(tmp_path):
    """Piped (as here: stdout is not a terminal), tables are one row per line with whole cells, never cut at 80
    columns: `crossbuild targets | grep riscv` finds the full names, and the names other tools use."""
    rows = [line.split("\t") for line in cb("targets").stdout.splitlines()]
    riscv = [r for r in rows if "riscv" in r[0]]
    assert [r[0] for r in riscv] == ["riscv64-linux-musl", "riscv64-linux-gnu"]
    assert "riscv64gc-unknown-linux-gnu" in riscv[1][-1].split() and "riscv64" in riscv[1][-1].split()
    listed = json.loads(cb("targets", "--json").stdout)
    assert {t["name"] for t in listed} >= {"aarch64-linux-musl", "x86_64-windows-gnu"}
    kb_rows = cb("kb", "list").stdout.splitlines()
    assert len(kb_rows) == len(json.loads(cb("kb", "list", "--json").stdout))
    assert all("\t" in row and "…" not in row for row in kb_rows)


def test_every_bad_command_line_gets_one_line_and_status_2(tmp_path):
    """Wrong paths, unknown targets and commands, missing arguments, files that are not what they claim: one line
    on stderr, exit status 2, nothing written where it should not be, never a traceback."""
    (tmp_path / "bad.db").write_text("not sqlite\n")
    (tmp_path / "bad.toml").write_text("name = [\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("a user's own file\n")
    ex, bad = str(EXAMPLE), str(tmp_path)
    cases = [
        ("nosuchcommand",), ("build",), ("targets", "--bogus"), ("kb", "show"), ("bench", "/nonexistent"),
        ("verify", "/nonexistent", "-t", "aarch64-linux-musl"), ("verify", bad, "-t", "nosuch"),
        ("env", "nosuch"), ("env", "aarch64-linux-musl", "-w", "/proc/1"), ("musl-loader", "x86_64-windows-gnu"),
        ("quick", "/nonexistent", "-t", "aarch64-linux-musl"), ("quick", ex, "-t", "linux/arm64"),
        ("quick", ex, "-t", "aarch64-linux-musl", "-w", f"{bad}/full"),
        ("build", ex, "-t", "aarch64-linux-musl", "-w", f"{bad}/bad.toml"),
        ("build", ex, "-t", "aarch64-linux-musl", "--db", f"{bad}/bad.db"),
        ("build", ex, "-t", "aarch64-linux-musl", "--model", "nosuchmodel", "-w", f"{bad}/ws-model"),
        ("runs", "list", "--db", "/nonexistent.db"), ("runs", "list", "--db", f"{bad}/bad.db"),
        ("runs", "show", "x", "--db", f"{bad}/bad.db"), ("runs", "stats", "--db", f"{bad}/bad.db"),
        ("deps", "resolve", ""), ("kb", "show", "nosuch"), ("mcp", "--root", "/nonexistent"), ("mcp", "-t", "nosuch"),
        ("eval", "run", "/nonexistent", "--targets", "aarch64-linux-musl", "--out", f"{bad}/o"),
        ("eval", "run", f"{bad}/bad.toml", "--targets", "aarch64-linux-musl", "--out", f"{bad}/o"),
        ("eval", "run", ex, "--targets", "aarch64-linux-musl"), ("eval", "report", "/nonexistent"),
        ("eval", "compare", "/nonexistent", "/nonexistent2"),
        ("build", ex, "-t", "aarch64-linux-musl", "--require", "proven"), ("verify", bad, "-t", "aarch64-linux-musl",
                                                                           "--require", "tested-ish"),
        ("quick", ex, "-t", "aarch64-linux-musl", "--require", "", "-w", f"{bad}/ws-require"),
    ]
    for args in cases:
        r = cb(*args, timeout=120)
        lines = [line for line in r.stderr.splitlines() if line.strip()]
        assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (args, r.stderr[-1500:])
        assert "Traceback" not in r.stdout + r.stderr
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == ["notes.txt"]  # nothing landed among them


def test_a_piped_row_stays_one_line_whatever_its_cells_hold(capsys):
    from rich.table import Table

    from crossbuild.cli.common import print_table

    table = Table()
    for col in ("program", "output (tail)"):
        table.add_column(col)
    table.add_row("[green]test_calc[/]", "7 passed\n0 failed\twith a tab")
    print_table(table)
    assert capsys.readouterr().out == "test_calc\t7 passed | 0 failed with a tab\n"


@pytest.mark.slow
def test_no_source_hints_builds_the_project_as_upstream_ships_it(tmp_path):
    """debian/rules' off-switches are taken as hints; --no-source-hints undoes Debian's patches and removes the
    packaging from the workspace (and from the copy the clean rebuild starts from) before anything reads it, and
    the build still verifies."""
    project = copy_example(tmp_path / "libcalc")
    (project / "debian").mkdir()
    (project / "debian" / "rules").write_text(
        "#!/usr/bin/make -f\n%:\n\tdh $@ --buildsystem=cmake\noverride_dh_auto_configure:\n"
        "\tdh_auto_configure -- -DCALC_WITH_DOCS=OFF\n")
    # dpkg-source applied a patch that changed README.md and created src/deb-only.c; quilt's backups are in .pc/
    upstream_readme = (project / "README.md").read_bytes()
    (project / ".pc" / "fix.patch" / "src").mkdir(parents=True)
    (project / ".pc" / "applied-patches").write_text("fix.patch\n")
    (project / ".pc" / "fix.patch" / "README.md").write_bytes(upstream_readme)
    (project / ".pc" / "fix.patch" / "src" / "deb-only.c").write_bytes(b"")
    (project / "README.md").write_bytes(upstream_readme + b"patched by Debian\n")
    (project / "src" / "deb-only.c").write_text("int deb_only;\n")
    db = str(tmp_path / "runs.db")
    for flag, ws in (("--source-hints", "with"), ("--no-source-hints", "without")):
        r = cb("build", str(project), "-t", "aarch64-linux-musl", flag, "-w", str(tmp_path / ws), "--db", db,
               "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        prepared = next(e["data"] for e in events if e["event"] == "workspace_prepared")
        message = outcome_of(r.stdout)["message"]
        if ws == "with":
            assert (tmp_path / ws / "src" / "debian" / "rules").is_file()
            assert (tmp_path / ws / "src" / "README.md").read_bytes().endswith(b"patched by Debian\n")
            assert "from debian/rules: -DCALC_WITH_DOCS=OFF" in message
        else:
            for tree in ("src", ".xbuild/pristine/src"):
                assert not (tmp_path / ws / tree / "debian").exists() and not (tmp_path / ws / tree / ".pc").exists()
                assert (tmp_path / ws / tree / "README.md").read_bytes() == upstream_readme  # the patch undone
                assert not (tmp_path / ws / tree / "src" / "deb-only.c").exists()
            assert "debian/rules" not in message and (tmp_path / ws / "src" / "CMakeLists.txt").is_file()
            assert sorted(prepared["left_out"]) == [".pc/ (packaging: --no-source-hints)",
                                                   "debian/ (packaging: --no-source-hints)",
                                                   "debian/patches/fix.patch (undone: --no-source-hints)"]
    assert (project / "debian" / "rules").is_file()  # the user's source is never changed


def test_building_the_current_folder_keeps_its_runs_out_of_the_copy(tmp_path):
    """`crossbuild build .` from inside the project, without -w: the workspace lands in ./crossbuild-runs/, inside
    the folder being copied; it is left out of the copy (it used to copy itself until RecursionError)."""
    from tests.agent.fake_provider import FakeProvider, Reply

    project = tmp_path / "proj"
    shutil.copytree(EXAMPLE, project)
    with FakeProvider([Reply(status=401)] * 4) as server:  # the run ends at its first model call
        for _ in range(2):
            r = cb("build", ".", "-t", "x86_64-linux-musl", "--model", "openai:gpt-x", "--db",
                   str(tmp_path / "runs.db"), "--no-config", cwd=project,
                   env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.base_url}, timeout=600)
            assert "RecursionError" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    runs = sorted((project / "crossbuild-runs").iterdir())
    assert len(runs) == 2, r.stdout[-2000:] + r.stderr[-2000:]
    for ws in runs:
        assert (ws / "src" / "CMakeLists.txt").is_file() and not (ws / "src" / "crossbuild-runs").exists()


def test_prepare_says_what_is_ready_and_refuses_an_unknown_target_in_one_line():
    r = cb("prepare", "aarch64-linux-musl", "--no-cxx", "vax-vms")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert r.stderr.startswith("error: unknown target 'vax-vms'")
