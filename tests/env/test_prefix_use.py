"""Which dependencies of a shared prefix a build used, read from the records real build systems leave: what the
build-machine check must rebuild for the build machine, and nothing an earlier run left there."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from crossbuild.env import dependency_cache as deps
from crossbuild.env import prefix_use


@pytest.fixture
def prefix(tmp_path, monkeypatch):
    """A prefix holding three installed dependencies, as build_dependency leaves them."""
    monkeypatch.setenv("CROSSBUILD_CACHE_DIR", str(tmp_path / "cache"))
    prefix = tmp_path / "prefix"
    held = {"zlib": {"include/zlib.h": "#define ZLIB_VERSION \"1.2.13\"\n", "lib/libz.a": "!<arch>\n",
                     "lib/pkgconfig/zlib.pc": "Libs: -lz\n"},
            "pcre2": {"include/pcre2.h": "", "lib/libpcre2-8.so.0.11.2": "", "lib/libpcre2-8.a": "!<arch>\n"},
            "glib2.0": {"include/glib-2.0/glib.h": "", "lib/libglib-2.0.so.0": "",
                        "lib/cmake/GLib/GLibConfig.cmake": ""}}
    for source, files in held.items():
        stage = tmp_path / f"stage-{source}"
        for rel, text in files.items():
            path = stage / str(prefix).lstrip("/") / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        deps.install(deps.store("aarch64-linux-musl", source, "1", stage, prefix=prefix, build_s=1.0, run_id=None),
                     prefix)
    return prefix


def _workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / ".xbuild").mkdir()
    return ws


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("cc") is None, reason="needs cmake and a C compiler")
def test_a_dependency_cmake_found_in_the_prefix_is_used_and_the_others_are_not(prefix, tmp_path):
    ws = _workspace(tmp_path)
    (ws / "src" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(p C)\nfind_package(ZLIB REQUIRED)\n")
    subprocess.run(["cmake", "-S", ws / "src", "-B", ws / "build", f"-DCMAKE_PREFIX_PATH={prefix}"], check=True,
                   capture_output=True)
    assert "libz.a" in (ws / "build" / "CMakeCache.txt").read_text()  # found there, without anyone asking
    assert prefix_use.used_sources(prefix, ws) == [("zlib", "1")]


def test_headers_a_depfile_lists_and_libraries_a_makefile_links_are_used(prefix, tmp_path):
    ws = _workspace(tmp_path)
    (ws / "src" / ".deps").mkdir()
    (ws / "src" / ".deps" / "re.Po").write_text(f"re.o: re.c {prefix}/include/pcre2.h \\\n /usr/include/stdio.h\n")
    assert prefix_use.used_sources(prefix, ws) == [("pcre2", "1")]
    (ws / "src" / "Makefile").write_text(f"GLIB_LIBS = -L{prefix}/lib -lglib-2.0\nLIBS = -lm\n")
    assert prefix_use.used_sources(prefix, ws) == [("glib2.0", "1"), ("pcre2", "1")]


def test_a_name_that_only_begins_like_a_dependencys_library_is_not_it(prefix, tmp_path):
    ws = _workspace(tmp_path)
    (ws / "src" / "Makefile").write_text("LIBS = -lzstd -lpcre2-16 libzip.a\nCFLAGS = -Iinclude/glib-2.0x\n")
    assert prefix_use.used_sources(prefix, ws) == []


def test_links_and_crossbuilds_own_folders_are_not_read(prefix, tmp_path):
    """A build can leave a link named like a record pointing at a host file that mentions a library; the
    dependency builds of .xbuild/ are crossbuild's, not the project's."""
    ws = _workspace(tmp_path)
    host_file = tmp_path / "host-Makefile"
    host_file.write_text("LIBS = -lz -lpcre2-8 -lglib-2.0\n")
    (ws / "src" / "Makefile").symlink_to(host_file)
    (ws / "src" / "sub").symlink_to(tmp_path)  # a folder link: not followed
    (ws / ".xbuild" / "deps-x86_64-linux-musl").mkdir()
    (ws / ".xbuild" / "deps-x86_64-linux-musl" / "Makefile").write_text("LIBS = -lz\n")
    assert prefix_use.used_sources(prefix, ws) == []


def test_no_records_no_workspace_files_nothing_used(tmp_path):
    ws = _workspace(tmp_path)
    (ws / "src" / "Makefile").write_text("LIBS = -lz\n")
    assert prefix_use.used_sources(tmp_path / "no-prefix", ws) == []
