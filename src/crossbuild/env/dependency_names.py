"""What a build asks for (ZLIB, zlib.h, PNG::PNG, libzstd, -lz, debian:NAME) -> the Debian source package that provides
it: a small shipped mapping (packages.toml) that only overrides, then Debian's own indices (debian_index). Names come
from a model or a build's output, so they never select a host path or a URL."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources


class UnknownDependencyError(ValueError):
    """Nothing in the mapping answers this name; the message lists close ones."""


@dataclass(frozen=True)
class Package:
    source: str  # Debian source package name
    pkg_config: str | None = None
    cmake: str | None = None


@cache
def _mapping() -> tuple[dict[str, Package], dict[str, str]]:
    raw = tomllib.loads(resources.files(__package__).joinpath("packages.toml").read_text())
    packages, names = {}, {}
    for source, info in raw.items():
        packages[source] = Package(source, info.get("pkg_config"), info.get("cmake"))
        for n in [source, *info.get("names", [])]:
            names[_key(n)] = source
    return packages, names


def _key(name: str) -> str:
    n = name.strip().lower()
    n = re.sub(r"::.*$", "", n)  # PNG::PNG -> png
    n = re.sub(r"\.h$", "", n)  # zlib.h -> zlib
    n = re.sub(r"^lib(?=.)", "", n)  # libzstd -> zstd (a source named lib..., libuv1, keys as uv1 on both sides)
    return n


_DEBIAN_NAME = re.compile(r"^[a-z0-9][a-z0-9.+-]+$")  # Debian policy 5.6.1 (source package names)
# a header as a project includes it (gmock/gmock, benchmark/benchmark.h): relative, each part a plain name, no `..`
# (its first part no host name such as github.com, its last a header or a bare name, never a tarball)
_INCLUDE_PATH = re.compile(r"[\w+-]+(/[\w+-][\w.+-]*)*/[\w+-]+(\.(h|hh|hpp|hxx))?")


def resolve(name: str, user_sources: dict[str, str] | None = None) -> Package:
    """The source package for what a failing build asked for: ZLIB, zlib.h, PNG::PNG, libzstd, absl,
    debian:NAME... Names come from a model or a build's output, so they never name a host path or a URL: a local
    folder or tarball comes only from USER_SOURCES (name -> path, given by the user on the command line)."""
    user_sources = user_sources or {}
    if name in user_sources:
        return Package(user_sources[name])
    packages, names = _mapping()
    if name in packages:
        return packages[name]
    found = names.get(_key(name))
    if found:
        return packages[found]
    if name.startswith("debian:"):
        source = name.removeprefix("debian:")
        if not _DEBIAN_NAME.match(source):
            raise UnknownDependencyError(f"{name!r} is not a Debian source package name (lowercase letters, digits "
                                         "and . + -, e.g. debian:zlib).")
        return packages.get(source, Package(source))
    if include := _INCLUDE_PATH.fullmatch(name):  # `#include <benchmark/benchmark.h>`: a path in Contents, never opened
        found_in_index = _from_index(name if include.group(2) else f"{name}.h")  # a bare name: its `.h`
        if found_in_index is not None:
            return found_in_index
    elif "/" in name or name.startswith(("~", ".")) or "://" in name or name.endswith((".tar.gz", ".tar.xz", ".tgz")):
        raise UnknownDependencyError(
            f"{name[:200]!r} is a path or a URL; dependencies are named, never fetched from a path a build printed "
            "or a model chose. Give what the build asks for (a CMake package, a pkg-config module, a header or "
            "library name) or debian:NAME; a local source can only be vouched for by the user "
            "(crossbuild build --dep-source NAME=PATH).")
    found_in_index = _from_index(name)
    if found_in_index is not None:
        return found_in_index
    import difflib

    close = difflib.get_close_matches(_key(name), list(names), n=4)
    raise UnknownDependencyError(
        f"no Debian package ships a file that provides {name!r} (its .pc, CMake config, header or library)"
        + (f"; close: {', '.join(close)}" if close else "")
        + ". Give a Debian source package name instead (debian:NAME), or build without the feature that needs it.")


# Sources whose files satisfy a name but that are the toolchain or the C library itself, never a dependency to build.
_NOT_DEPENDENCIES = re.compile(r"^(glibc|musl|gcc-\d+|llvm-toolchain-\d+|linux|binutils|cmake|meson|pkgconf)$")


def buildable_name(name: str) -> str:
    """NAME as resolve() takes it: a project's own Find module is often named in capitals (`find_package(LIBZMQ)`)
    for what Debian's index knows by its pkg-config or library name (`libzmq`). NAME itself when neither resolves
    or the index cannot be read."""
    for candidate in dict.fromkeys((name, name.lower())):
        try:
            resolve(candidate)
            return candidate
        except UnknownDependencyError:
            continue
        except Exception:  # noqa: BLE001 - the index cannot be read here: the name as the project gave it
            return name
    return name


def _from_index(name: str) -> Package | None:
    """The answer of Debian's package indices (debian_index), or None when they do not know the name."""
    from crossbuild.env import debian_index

    try:
        found = debian_index.resolve(name)
    except debian_index.IndexError_:
        return None
    if found.source is None or _NOT_DEPENDENCIES.match(found.source):
        return None
    packages, _ = _mapping()
    return packages.get(found.source, Package(found.source))
