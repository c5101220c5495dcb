"""Toolchain files and the BuildEnv: content, isolation from the caller's environment, no cross-talk."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from crossbuild.env.toolchain import BuildEnv, Toolchain

SECRETS = {
    "OPENAI_API_KEY": "sk-test-openai-secret",
    "ANTHROPIC_API_KEY": "sk-ant-test-secret",
    "DEEPSEEK_API_KEY": "ds-test-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-test-secret",
    "GITHUB_TOKEN": "ghp_test_secret",
}


def test_build_env_never_contains_secrets(make_toolchain, monkeypatch):
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("LD_PRELOAD", "/evil.so")
    env = make_toolchain("aarch64-linux-musl").env
    assert isinstance(env, BuildEnv)
    for k, v in SECRETS.items():
        assert k not in env.vars
        assert all(v not in value for value in env.vars.values())
        assert v not in env.shell_exports()
    assert "LD_PRELOAD" not in env.vars
    assert env.vars["HOME"].endswith(".scratch/home")  # never the real HOME
    assert env.vars["HOME"] != os.environ.get("HOME")


def test_build_env_contents(make_toolchain):
    tc = make_toolchain("aarch64-linux-musl")
    v = tc.env.vars
    assert v["PATH"].split(":")[0] == str(tc.bindir)
    assert v["CC"] == str(tc.bindir / "zcc") and v["CXX"] == str(tc.bindir / "zxx")
    assert os.path.isabs(v["CMAKE_TOOLCHAIN_FILE"]) and os.path.exists(v["CMAKE_TOOLCHAIN_FILE"])
    assert v["PKG_CONFIG_LIBDIR"].startswith(str(tc.prefix))
    assert v["PKG_CONFIG_PATH"] == ""
    assert v["CC_FOR_BUILD"].startswith("/") and "zcc" not in v["CC_FOR_BUILD"]
    # builds write their own layer; its outputs are links into the shared cache, which they see read-only
    assert v["ZIG_GLOBAL_CACHE_DIR"] == v["ZIG_LOCAL_CACHE_DIR"] == str(tc.zig_layer)
    outputs = [f for d in (tc.zig_layer / "o").iterdir() for f in d.iterdir()]
    assert outputs and all(f.is_symlink() and f.resolve().parent.parent == tc.zig_cache / "o" for f in outputs)
    assert not any(p.is_symlink() for p in (tc.zig_layer / "h").iterdir())  # manifests are copies zig may lock
    assert os.path.exists(v["CONFIG_SITE"])
    assert "ac_cv_func_malloc_0_nonnull" in open(v["CONFIG_SITE"]).read()


def test_two_targets_in_one_process_do_not_interfere(make_toolchain):
    before = dict(os.environ)
    a = make_toolchain("aarch64-linux-musl", "a")
    r = make_toolchain("riscv64-linux-musl", "r")
    assert dict(os.environ) == before  # nothing written to os.environ
    assert a.env.vars["CROSSBUILD_TARGET"] == "aarch64-linux-musl"
    assert r.env.vars["CROSSBUILD_TARGET"] == "riscv64-linux-musl"
    assert "aarch64-linux-musl" in (a.bindir / "zcc").read_text()
    assert "riscv64-linux-musl" in (r.bindir / "zcc").read_text()
    assert "aarch64" not in (r.xbuild / "toolchain.cmake").read_text()


def test_cmake_toolchain_file(make_toolchain):
    tc = make_toolchain("aarch64-linux-musl")
    text = tc.cmake_toolchain_file.read_text()
    assert "set(CMAKE_SYSTEM_NAME Linux)" in text
    assert "set(CMAKE_SYSTEM_PROCESSOR aarch64)" in text
    assert f'set(CMAKE_FIND_ROOT_PATH "{tc.prefix}")' in text
    for mode in ("PROGRAM NEVER", "LIBRARY ONLY", "INCLUDE ONLY", "PACKAGE ONLY"):
        assert f"set(CMAKE_FIND_ROOT_PATH_MODE_{mode})" in text
    assert f'set(CMAKE_CROSSCOMPILING_EMULATOR "{tc.emulator}")' in text
    assert "qemu-aarch64" in tc.emulator.read_text()


def test_meson_cross_file_and_windows_bits(make_toolchain):
    tc = make_toolchain("riscv64-linux-musl")
    text = tc.meson_cross_file.read_text()
    assert "cpu_family = 'riscv64'" in text and "system = 'linux'" in text
    assert f"exe_wrapper = '{tc.emulator}'" in text
    win = make_toolchain("x86_64-windows-gnu", "win")
    wtext = win.meson_cross_file.read_text()
    assert "system = 'windows'" in wtext and "windres" in wtext
    # Windows programs run under Wine (setup.sh installs it), with the workspace's own prefix
    assert f"exe_wrapper = '{win.emulator}'" in wtext
    assert f'set(CMAKE_CROSSCOMPILING_EMULATOR "{win.emulator}")' in win.cmake_toolchain_file.read_text()
    run = win.emulator.read_text()
    assert f"WINEPREFIX={win.wine_prefix}" in run and "/wine64" in run and "QEMU_LD_PREFIX" not in win.env.vars
    assert win.env.vars["RC"].endswith("zwindres")
    assert win.configure_args()[0] == "--host=x86_64-w64-mingw32"
    mac = make_toolchain("aarch64-macos", "mac")  # nothing runs macOS programs here: no emulator at all
    assert mac.emulator is None and "exe_wrapper" not in mac.meson_cross_file.read_text()
    assert "system = 'darwin'" in mac.meson_cross_file.read_text()


def test_pkg_config_sees_only_the_prefix(make_toolchain, tmp_path):
    import subprocess
    tc = make_toolchain("aarch64-linux-musl")
    pc = tc.prefix / "lib" / "pkgconfig"
    pc.mkdir(parents=True)
    (pc / "foo.pc").write_text(f"prefix={tc.prefix}\nincludedir=${{prefix}}/include\nName: foo\nDescription: f\n"
                               "Version: 1.0\nCflags: -I${includedir}\n")
    env = tc.env.as_dict()
    r = subprocess.run(["pkg-config", "--cflags", "foo"], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"-I{tc.prefix}/include"
    # a package the host has (zlib.pc is in Debian's multiarch dir when zlib1g-dev is installed) is invisible
    r = subprocess.run(["pkg-config", "--exists", "zlib"], env=env)
    assert r.returncode != 0
    r = subprocess.run(["pkg-config", "--list-all"], env=env, capture_output=True, text=True)
    assert [line.split()[0] for line in r.stdout.splitlines()] == ["foo"]


def test_cxx_runtime_is_warmed_only_for_projects_that_link_cxx(tmp_path):
    from crossbuild.env.zigcache import languages_of

    cases = {
        "cmake-default": ("CMakeLists.txt", "cmake_minimum_required(VERSION 3.16)\nproject(x VERSION 1.0)\n"),
        "cmake-c": ("CMakeLists.txt", "project(x LANGUAGES C)\n"),
        "cmake-cxx": ("CMakeLists.txt", 'project("x" C CXX)\n'),
        "autoconf-cxx": ("configure.ac", "AC_INIT([x],[1])\nAC_PROG_CC\nAC_PROG_CXX\n"),
        "autoconf-c": ("configure.ac", "AC_INIT([x],[1])\nAC_PROG_CC\nLT_INIT\n"),
        "meson-cpp": ("meson.build", "project('x', 'c', 'cpp')\n"),
        "sources": ("src/lib.cpp", "int f() { return 1; }\n"),
    }
    found = {}
    for name, (rel, text) in cases.items():
        (tmp_path / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name / rel).write_text(text)
        found[name] = languages_of(tmp_path / name)
    assert {n for n, langs in found.items() if "c++" in langs} == {"cmake-default", "cmake-cxx", "autoconf-cxx",
                                                                   "meson-cpp", "sources"}



@pytest.mark.slow
def test_a_reinstalled_zig_at_the_same_path_still_links_windows_programs_in_the_sandbox(tmp_path, monkeypatch):
    """CI makes a fresh venv at the same path every run: zig's lib files get new inodes and times, zig regenerates
    mingw's DLL import libraries in place — through the layer's links into the read-only shared cache, unless
    crossbuild warms again on the host first."""
    import dataclasses

    from crossbuild.env import sandbox, zigcache
    from crossbuild.foundation import host
    from crossbuild.foundation.targets import parse_target

    monkeypatch.setattr(zigcache, "_VARIANTS", (("exe", ("-O2",)),))  # one cold mingw runtime (~1 min), no zig rc
    shared = tmp_path / "shared-cache"
    install = shared / "ziglang"  # below a folder the sandbox mounts, as the venv is

    notes: list[tuple[str, int | None, int | None]] = []

    def link_in_sandbox(name: str):
        tc = Toolchain.for_target(parse_target("x86_64-windows-gnu"), tmp_path / name, prefix=tmp_path / "prefix",
                                  zig_cache=shared)
        tc = dataclasses.replace(tc, zig=install / "zig").materialise(
            warm=("c",), note=lambda *n: notes.append(n))
        src = tc.workspace / "hello.c"
        src.write_text("#include <stdio.h>\nint main(void){puts(\"hi\");return 0;}\n")
        box = sandbox.for_toolchain(tc)
        # -O2: the variant warmed (another would build more of the runtime in the layer, ~25 s each time)
        return box.run([str(tc.bindir / "zcc"), "-O2", str(src), "-o", str(tc.workspace / "hello.exe")],
                       cwd=tc.workspace, env=tc.env.as_dict(), log_path=tc.logs / "link.log")

    shutil.copytree(host.zig_executable().parent, install, copy_function=shutil.copy)
    assert link_in_sandbox("before").ok
    # the minutes zig spends on the runtime are said first (what `crossbuild build` and `prepare` show)
    assert notes == [("preparing zig's C runtime (libc, compiler-rt) for x86_64-windows-gnu (first use of this "
                      "target only; about 1 to 2.5 minutes on two cores)", 1, 1)]
    shutil.rmtree(install)  # the "reinstall": same path, same content, new inodes and times
    shutil.copytree(host.zig_executable().parent, install, copy_function=shutil.copy)
    after = link_in_sandbox("after")
    assert after.ok, Path(after.log_path).read_text()[-2000:]
    assert (tmp_path / "after" / "hello.exe").read_bytes()[:2] == b"MZ"


def test_meson_with_our_cross_file_never_tries_to_download_a_subproject(make_toolchain, tmp_path):
    """Builds have no network, so a wrap that clones its subproject can only fail on the clone, naming no
    dependency (gjs: `Git command failed ... gitlab.gnome.org`). Real Meson with the cross file: the fallback is
    not downloaded and the error says so; Meson never ran git."""
    meson = shutil.which("meson") or str(Path(os.sys.executable).parent / "meson")
    tc = make_toolchain("aarch64-linux-musl")
    src = tmp_path / "src"
    (src / "subprojects").mkdir(parents=True)
    (src / "meson.build").write_text("project('wraps')\n"
                                     "dep = dependency('crossbuild-absent-1.0', fallback: ['absent', 'absent_dep'])\n")
    (src / "subprojects" / "absent.wrap").write_text("[wrap-git]\nurl = https://git.invalid/absent.git\n"
                                                     "revision = main\n")
    fake_git = tmp_path / "bin" / "git"  # first on PATH: records any call
    fake_git.parent.mkdir()
    fake_git.write_text(f"#!/bin/sh\necho called >> {tmp_path}/git-called\nexit 1\n")
    fake_git.chmod(0o755)
    env = {**tc.env.as_dict(), "PATH": f"{fake_git.parent}:{tc.env.vars['PATH']}"}
    r = subprocess.run([meson, "setup", str(tmp_path / "build"), str(src), *tc.meson_args()], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "wrap-based subproject downloading is disabled" in r.stdout + r.stderr
    assert not (tmp_path / "git-called").exists()


@pytest.mark.slow
def test_cmake_knows_wasi_as_a_unix_system_without_shared_libraries(make_toolchain, tmp_path):
    """CMake before 3.31 has no WASI platform ("System is unknown to cmake"), so `if(UNIX)` branches (json-c's
    check of snprintf) were skipped and a SHARED library collided with its STATIC twin. Real CMake with the
    toolchain file: UNIX and WASI are set, shared libraries are not supported, BUILD_SHARED_LIBS is off."""
    tc = make_toolchain("wasm32-wasi")
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.13)\nproject(p C)\n"
        "get_property(shared GLOBAL PROPERTY TARGET_SUPPORTS_SHARED_LIBS)\n"
        'message(STATUS "crossbuild: UNIX=${UNIX} WASI=${WASI} shared=${shared} "\n'
        '               "BUILD_SHARED_LIBS=${BUILD_SHARED_LIBS}")\n')
    r = subprocess.run(["cmake", "-S", str(src), "-B", str(tmp_path / "build"), *tc.cmake_args()],
                       env=tc.env.as_dict(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "crossbuild: UNIX=1 WASI=1 shared=FALSE BUILD_SHARED_LIBS=OFF" in r.stdout.replace("\n", "")
    assert "unknown to cmake" not in r.stderr
