"""Programs, Perl modules and data a build runs on the build machine (bison, flex, gperf, nasm, intltool's
XML::Parser, /usr/share/unicode/...) that this machine lacks, provided from Debian's archive as `apt-get install`
would, without touching the host.

A name (a program, a Perl module, or the absolute path of a data file the build read) is looked up in Debian's
Contents index; the package that ships it, and the packages it depends on that the host has not installed, are
downloaded through crossbuild's private apt configuration (the archive's signed indices) and unpacked, once, into
crossbuild's cache. Every sandboxed command then sees them read-only: their programs on PATH after the host's own,
their libraries on LD_LIBRARY_PATH, their Perl modules on PERL5LIB, and their /usr/share/<name> and /usr/src/<name>
folders where the programs look (bison's skeletons, unicode-data's tables, the googletest sources a Debian-patched
build compiles itself). Like the zig and dependency caches, they are shared by every build on the machine; nothing
is run from the packages while unpacking them (no maintainer scripts), and a name selects only a package of the
archive.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from crossbuild.env import debian_index, workspace
from crossbuild.foundation import host

MULTIARCH = "x86_64-linux-gnu"  # the build machine's library folder in the packages unpacked here
_PROGRAM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}$")
PERL_MODULE = re.compile(r"^[A-Za-z_]\w{0,60}(::\w{1,60}){1,6}$")  # XML::Parser, as `perl -MXML::Parser` names it
# where Debian puts a Perl module: pure Perl, and compiled for the build machine's perl (one version per release)
_PERL_DIRS = ("usr/share/perl5", f"usr/lib/{MULTIARCH}/perl5/*")
_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]{0,99}$")
_PROGRAM_DIRS = ("usr/bin", "bin", "usr/sbin", "sbin")  # where a package's programs are, as PATH has them
# where the sandbox can show a data file at its own path (shared_data): /usr/share/<name> (unicode-data's tables),
# /usr/src/<name> (the sources Debian ships for a build to compile itself: googletest)
_DATA_TOPS = ("usr/share/", "usr/src/")
_MAX_PACKAGES = 25  # one tool and what it needs that the host lacks; more means the host is far from Debian's
_COMPLETE = ".crossbuild-complete"  # written last, holding the version: a folder without it is not used


class ToolError(RuntimeError):
    """The name cannot be provided; the message says why in one line."""


@dataclass
class Provided:
    name: str
    package: str
    evidence: list[str]
    added: list[str] = field(default_factory=list)  # packages unpacked by this call ("bison 2:3.8.2+dfsg-1")
    already: bool = False  # every package was in the cache, or the host has the package itself


def root() -> Path:
    return host.cache_root() / "build-tools"


def wanted_paths(name: str) -> list[str]:
    """The archive paths that would satisfy NAME: a program's places on PATH, a Perl module's places on perl's
    @INC (GLOB patterns), or a data file's own path."""
    name = name.strip()
    if PERL_MODULE.match(name):
        return [f"{d}/{name.replace('::', '/')}.pm" for d in _PERL_DIRS]
    if name.startswith("/"):
        path = PurePosixPath(name)
        rel = str(path)[1:]
        if ".." in path.parts or not rel.startswith(_DATA_TOPS) or len(rel) > 400:
            raise ToolError(f"{name!r} is not a data file of a Debian package: give an absolute path below "
                            f"/{', /'.join(_DATA_TOPS)} (as the build printed it), or a program name such as bison")
        return [rel]
    if not _PROGRAM.match(name):
        raise ToolError(f"{name!r} is not a program name (letters, digits, ._+-), a Perl module (XML::Parser) nor "
                        "an absolute data path")
    return [f"{d}/{name}" for d in _PROGRAM_DIRS]


def package_for(name: str, *, progress=lambda _: None) -> tuple[str, list[str]]:
    """The Debian package that ships NAME, and the file that shows it. A program CMake names in capitals
    (Could NOT find BISON) is looked up in lower case too. Among packages shipping one file (bison, bison++), the
    one named like the program wins."""
    names = [name] + ([name.lower()] if name.lower() != name and not name.startswith("/") else [])
    for candidate in names:
        for path in wanted_paths(candidate):
            try:
                packages = debian_index.packages_with(path, progress=progress)
            except debian_index.IndexError_ as e:
                raise ToolError(str(e)) from None
            if packages:
                chosen = candidate if candidate in packages else packages[0]
                return chosen, [f"{path} in {chosen}" + (f" (also in {', '.join(p for p in packages if p != chosen)})"
                                                         if len(packages) > 1 else "")]
    raise ToolError(f"no Debian package ships {' or '.join(wanted_paths(names[-1]))}: it is not a Debian program "
                    "or data file (a script of the project's own, or a tool the project names differently)")


def provide(name: str, *, progress=lambda _: None) -> Provided:
    """Make NAME available to every sandboxed command: unpack its package and the dependencies the host lacks."""
    package, evidence = package_for(name, progress=progress)
    found = Provided(name, package, evidence)
    with host.exclusive(root() / ".lock"):
        try:
            needed = [p for p in _closure(package) if not (root() / p / _COMPLETE).is_file()]
            needed = [p for p in needed if p not in _installed_on_host(needed)]
            if not needed:
                found.already = True
                return found
            if len(needed) > _MAX_PACKAGES:
                raise ToolError(f"{package} needs {len(needed)} packages this machine lacks "
                                f"({', '.join(needed[:6])}, ...): install {package} on the host instead")
            progress(f"unpacking {', '.join(needed)} from Debian's archive")
            with tempfile.TemporaryDirectory(prefix="download-", dir=root()) as scratch:
                for deb in download(needed, Path(scratch)):
                    found.added.append(_unpack(deb, Path(scratch)))
        except (workspace.SourceError, subprocess.SubprocessError, OSError) as e:
            raise ToolError(f"cannot provide {package}: {str(e)[-300:]}") from None
    return found


def installed() -> list[Path]:
    """The unpacked packages every sandboxed command sees (complete ones only)."""
    base = root()
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if _PACKAGE.match(p.name) and not p.is_symlink()
                  and (p / _COMPLETE).is_file())


def program_dirs() -> list[str]:
    return [str(p / d) for p in installed() for d in _PROGRAM_DIRS if (p / d).is_dir()]


def perl_dirs() -> list[str]:
    """The folders of the packages' Perl modules, for PERL5LIB: the build machine's perl finds them there as in
    its own @INC (the archive's perl is this host's Debian release's)."""
    return [str(f) for p in installed() for d in _PERL_DIRS for f in sorted(p.glob(d)) if f.is_dir()]


def library_dirs() -> list[str]:
    return [str(p / d) for p in installed() for d in (f"usr/lib/{MULTIARCH}", f"lib/{MULTIARCH}", "usr/lib")
            if (p / d).is_dir() and any(f.name.startswith("lib") and ".so" in f.name for f in (p / d).iterdir())]


def data_tops() -> list[str]:
    """The host folders (/usr/share, /usr/src) whose children the packages may bring."""
    return ["/" + top.rstrip("/") for top in _DATA_TOPS]


def shared_data(top: str = "/usr/share") -> dict[str, Path]:
    """TOP/<name> folders (TOP one of data_tops()) the packages bring that the host lacks: name -> the unpacked
    folder."""
    out: dict[str, Path] = {}
    for p in installed():
        share = p / top.lstrip("/")
        if not share.is_dir() or share.is_symlink():
            continue
        for child in sorted(share.iterdir()):
            if child.is_dir() and not child.is_symlink() and not os.path.lexists(Path(top) / child.name):
                out.setdefault(child.name, child)
    return out


def _closure(package: str) -> list[str]:
    """PACKAGE and everything it depends on (Depends and Pre-Depends, recursively), as apt resolves it."""
    workspace.update_source_lists()
    r = subprocess.run(["apt-cache", *workspace.apt_options(), "depends", "--recurse", "--no-recommends",
                        "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", package],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise ToolError(f"apt-cache cannot resolve {package}: {r.stderr.strip()[-300:]}")
    names = [line.strip() for line in r.stdout.splitlines() if line and not line.startswith(" ")]
    return list(dict.fromkeys(n for n in names if _PACKAGE.match(n)))  # <virtual> names are provided by others


def _installed_on_host(packages: list[str]) -> set[str]:
    if not packages or not shutil.which("dpkg-query"):
        return set()
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\n", *packages],
                       capture_output=True, text=True, timeout=60)
    return {line.split()[0] for line in r.stdout.splitlines() if line.split()[1:2] == ["ii"]}


def download(packages: list[str], into: Path) -> list[Path]:
    """PACKAGES' .deb files from Debian's archive (crossbuild's private apt configuration), into INTO."""
    r = subprocess.run(["apt-get", *workspace.apt_options(), "download", *packages], cwd=into,
                       capture_output=True, text=True, timeout=900)
    debs = sorted(into.glob("*.deb"))
    if r.returncode != 0 or len(debs) < len(packages):
        raise ToolError(f"apt-get download {' '.join(packages)} failed: {(r.stderr.strip() or r.stdout)[-300:]}")
    return debs


def _unpack(deb: Path, scratch: Path) -> str:
    """Unpack DEB's files (never its maintainer scripts) into a folder of its own, moved into place whole."""
    fields = subprocess.run(["dpkg-deb", "--show", "--showformat", "${Package} ${Version}", str(deb)],
                            capture_output=True, text=True, timeout=60, check=True).stdout.split()
    package, version = fields[0], fields[1]
    if not _PACKAGE.match(package):
        raise ToolError(f"unexpected package name {package!r} in {deb.name}")
    unpacked = scratch / f"unpacked-{package}"
    subprocess.run(["dpkg-deb", "--extract", str(deb), str(unpacked)], capture_output=True, timeout=600, check=True)
    for folder, _, files in os.walk(unpacked):  # no set-id programs in the cache (sudo's, unpacked by root)
        for name in files:
            path = Path(folder, name)
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
                path.chmod(stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))
    (unpacked / _COMPLETE).write_text(version + "\n")
    dest = root() / package
    if dest.exists():
        shutil.rmtree(dest)  # an earlier attempt's leftover, never marked complete
    unpacked.rename(dest)
    return f"{package} {version}"
