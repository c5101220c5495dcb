"""Dependency names resolved from Debian's own package indices (Contents + Sources), not a hand-written table: a
labelled set of names as real build failures print them (CMake find_package names, pkg-config modules, headers,
-l libraries), each with the Debian 12 source package a packager would build."""

from __future__ import annotations

import json

import pytest

from crossbuild.env import debian_index
from tests.conftest import cb

pytestmark = pytest.mark.slow  # the first query reads Debian's Contents index from the archive (~15 s, once)

LABELLED = {
    # find_package(NAME): CMake's own Find modules and the config files packages ship
    "ZLIB": "zlib", "PNG": "libpng1.6", "JPEG": "libjpeg-turbo", "LibLZMA": "xz-utils", "BZip2": "bzip2",
    "OpenSSL": "openssl", "CURL": "curl", "LibXml2": "libxml2", "EXPAT": "expat", "Freetype": "freetype",
    "GIF": "giflib", "TIFF": "tiff", "SQLite3": "sqlite3", "LibArchive": "libarchive", "GTest": "googletest",
    "fmt": "fmtlib", "spdlog": "spdlog", "absl": "abseil", "yaml-cpp": "yaml-cpp", "pugixml": "pugixml",
    "double-conversion": "double-conversion", "glog": "google-glog", "gflags": "gflags", "re2": "re2",
    "Snappy": "snappy", "nlohmann_json": "nlohmann-json3", "benchmark": "benchmark",
    # CMake modules in an Architecture: all package (no -dev), under share/<name>/cmake/ (KDE's projects need it)
    "ECM": "extra-cmake-modules",
    # pkg-config modules
    "zlib": "zlib", "libpng": "libpng1.6", "libzstd": "libzstd", "liblzma": "xz-utils", "libcurl": "curl",
    "libxml-2.0": "libxml2", "libffi": "libffi", "glib-2.0": "glib2.0", "libpcre2-8": "pcre2", "libssl": "openssl",
    "sqlite3": "sqlite3", "expat": "expat", "libarchive": "libarchive", "libuv": "libuv1", "yaml-0.1": "libyaml",
    "json-c": "json-c", "jansson": "jansson", "libsodium": "libsodium", "libgit2": "libgit2", "libssh2": "libssh2",
    "libevent": "libevent", "liblz4": "lz4", "libbrotlidec": "brotli", "freetype2": "freetype",
    "libwebp": "libwebp", "libtiff-4": "tiff", "libjpeg": "libjpeg-turbo", "nettle": "nettle", "libidn2": "libidn2",
    "samplerate": "libsamplerate", "sndfile": "libsndfile", "ogg": "libogg", "libnghttp2": "nghttp2",
    # headers a compiler could not find
    "zlib.h": "zlib", "lzma.h": "xz-utils", "bzlib.h": "bzip2", "png.h": "libpng1.6", "jpeglib.h": "libjpeg-turbo",
    "openssl/ssl.h": "openssl", "curl/curl.h": "curl", "expat.h": "expat", "ffi.h": "libffi", "zstd.h": "libzstd",
    "lz4.h": "lz4", "uv.h": "libuv1", "yaml.h": "libyaml", "sqlite3.h": "sqlite3", "archive.h": "libarchive",
    "gmock/gmock.h": "googletest", "gtest/gtest.h": "googletest", "sodium.h": "libsodium", "pcre2.h": "pcre2",
    "event2/event.h": "libevent", "libxml/parser.h": "libxml2", "json-c/json.h": "json-c", "jansson.h": "jansson",
    "gif_lib.h": "giflib", "tiffio.h": "tiff", "ogg/ogg.h": "libogg", "pugixml.hpp": "pugixml",
    "fmt/format.h": "fmtlib", "spdlog/spdlog.h": "spdlog", "re2/re2.h": "re2", "utf8proc.h": "utf8proc",
    "tommath.h": "libtommath", "mbedtls/ssl.h": "mbedtls", "miniupnpc/miniupnpc.h": "miniupnpc",
    "snappy.h": "snappy", "libconfig.h": "libconfig",
    # -l libraries
    "-lz": "zlib", "-lbz2": "bzip2", "-llzma": "xz-utils", "-lzstd": "libzstd", "-lcrypto": "openssl",
    "-lssl": "openssl", "-lffi": "libffi", "-luv": "libuv1", "-lyaml": "libyaml", "-lsqlite3": "sqlite3",
    "-lsodium": "libsodium",
    # bundled folders a Debian repack removed (add_subdirectory(deps/NAME) fails)
    "http-parser": "http-parser", "pcre": "pcre3",
}


def test_a_labelled_set_of_real_dependency_names_resolves_from_debians_indices():
    assert len(LABELLED) >= 60
    wrong = {}
    for name, expected in LABELLED.items():
        got = debian_index.resolve(name).source
        if got != expected:
            wrong[name] = got
    accuracy = 1 - len(wrong) / len(LABELLED)
    print(f"resolved {len(LABELLED) - len(wrong)}/{len(LABELLED)} ({accuracy:.1%}); wrong: {wrong}")
    assert accuracy >= 0.95, wrong


def test_deps_resolve_prints_the_answer_and_the_files_that_show_it():
    r = cb("deps", "resolve", "lzma.h", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["source"] == "xz-utils" and any("usr/include/lzma.h in liblzma-dev" in e for e in out["evidence"])
    assert debian_index.resolve("Python").source != "dlib"  # a vendored dlib/python.h is no evidence
    r = cb("deps", "resolve", "NoSuchThingAnywhere")
    assert r.returncode == 1 and "unknown" in r.stdout


def test_a_cmake_module_by_file_name_resolves_to_the_package_that_ships_it():
    assert debian_index.resolve("ECMSetupVersion.cmake").source == "extra-cmake-modules"
    assert debian_index.resolve("NoSuchModuleAnywhere.cmake").source is None


def test_a_dev_package_with_headers_and_no_library_is_told_from_the_index(tmp_path):
    """Boost 1.74's libboost1.74-dev holds 14,000 headers and no .so or .a (its libraries are other packages):
    the headers a dependency needs can be taken from it; zlib's -dev package ships libz.so and libz.a."""
    from crossbuild.env import debian_headers

    assert debian_headers.headers_only_binary("boost1.74") == "libboost1.74-dev"
    assert debian_headers.headers_only_binary("zlib") is None
    assert debian_headers.headers_only_binary("no-such-source") is None
    count = debian_headers.take_headers("libboost1.74-dev", tmp_path / "stage")
    assert count > 10_000 and (tmp_path / "stage" / "include" / "boost" / "version.hpp").is_file()
    assert not any(p.is_symlink() for p in (tmp_path / "stage").rglob("*"))
