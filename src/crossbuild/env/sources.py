"""What a SOURCE names, read once by one function: a Debian source package (`debian:NAME[=VERSION]`), a git
repository over the network (`https://`, `http://`, `git://`, `ssh://`, `user@host:path`), or a host path (a folder,
a tarball, a local git repository, also written as a `file://` URL). Only the first two name no host file; every
other form is a path, resolved with links followed, so a caller that confines clients to roots checks one real path.
"""

from __future__ import annotations

import os
import re
import subprocess
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from crossbuild.foundation import safefs

NETWORK_URL = re.compile(r"^(https?|git|ssh)://[^/\s]", re.IGNORECASE)
SCP_LIKE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:(?!/)")  # git@github.com:owner/repo.git
# git's transports that run programs or read host files by themselves (ext::, fd::, and any other helper)
_HELPER = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::")
CLONE_TIMEOUT_S = 600


class UnusableSource(ValueError):
    """The source cannot be used as written (a form crossbuild does not take, a clone that failed); the message
    says what to do."""


FORMS = "a folder, a tarball, a git URL (https://, git://, ssh://) or debian:NAME[=VERSION]"


@dataclass(frozen=True)
class Source:
    kind: str  # "debian" | "network" | "path"
    value: str  # the debian spec (NAME[=VERSION]), the URL, or the real path (links followed)
    git: bool = False  # a path that is a git repository's own folder (bare, or a working tree's .git)

    @property
    def names_host_path(self) -> bool:
        return self.kind == "path"


def parse(source: str) -> Source:
    """SOURCE as one of the three kinds. Raises UnusableSource for a form that could reach a host file or program
    behind a caller's back (a git transport helper, a file:// URL naming another machine, a NUL byte)."""
    if "\0" in source:
        raise UnusableSource("the source contains a NUL byte")
    if source.startswith("debian:"):
        return Source("debian", source.removeprefix("debian:"))
    if NETWORK_URL.match(source) or SCP_LIKE.match(source):
        return Source("network", source)
    if source.lower().startswith("file:"):
        url = urllib.parse.urlsplit(source)
        if url.netloc not in ("", "localhost"):
            raise UnusableSource(f"{source[:200]!r} names another machine's files: use {FORMS}")
        path = urllib.parse.unquote(url.path)
    elif _HELPER.match(source) or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", source):
        raise UnusableSource(f"{source[:200]!r}: crossbuild takes {FORMS}")
    else:
        path = source
    real = Path(os.path.realpath(Path(path).expanduser()))
    return Source("path", str(real), git=is_git_dir(real))


def uses_ssh(url: str) -> bool:
    """A network source git reaches over ssh, with the keys of whoever runs crossbuild."""
    return bool(SCP_LIKE.match(url)) or url.lower().startswith("ssh://")


def is_git_dir(path: Path) -> bool:
    """Whether PATH is a repository's own folder (what `git clone` reads): HEAD, objects/ and refs/ in it."""
    return path.is_dir() and (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def clone(source: Source, dest: Path) -> None:
    """`git clone` SOURCE (network, or a local repository folder) into DEST, on the host. Only the transport the
    source names is allowed (protocol.allow=never for the rest), so a submodule cannot turn into a local path or a
    helper program; a local repository is read through git's file transport (no hard links into it) and must not
    borrow objects from elsewhere (alternates, a common dir), which would read outside the folder that was
    checked."""
    if source.kind == "network":
        scheme = "ssh" if uses_ssh(source.value) else source.value.split("://", 1)[0].lower()
        _clone(source.value, scheme, dest, ["--recurse-submodules"])
        return
    # A local repository is copied first (no link followed, none kept that leads out: a symlinked objects/ or refs/
    # would have git read another repository), and cloned from the copy, which nothing else can change meanwhile.
    copy = dest.with_name(dest.name + ".git-copy")
    try:
        safefs.copy_tree(Path(source.value), ".", copy.parent, copy.name, links="internal")
        for borrowed in (copy / "objects" / "info" / "alternates", copy / "commondir"):
            if os.path.lexists(borrowed):
                raise UnusableSource(f"{source.value} borrows objects from another repository ({borrowed.name}): "
                                     "clone it yourself and pass the folder")
        _clone(copy.as_uri(), "file", dest, [])  # a local submodule would be another host path: none
    finally:
        safefs.remove_tree(copy.parent, copy.name)


def _clone(url: str, scheme: str, dest: Path, recurse: list[str]) -> None:
    config = ["-c", "protocol.allow=never", "-c", f"protocol.{scheme}.allow=always"]
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        r = subprocess.run(["git", *config, "clone", "--depth", "1", *recurse, "--", url, str(dest)],
                           capture_output=True, text=True, timeout=CLONE_TIMEOUT_S, env=env)
    except FileNotFoundError:
        raise UnusableSource("git is not installed: `apt-get install git`") from None
    except subprocess.TimeoutExpired:
        raise UnusableSource(f"git clone of {url} timed out after {CLONE_TIMEOUT_S} s (is the network "
                             "reachable?)") from None
    if r.returncode != 0:
        detail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise UnusableSource(f"git clone of {url} failed: {detail}. Without network access, download the "
                             "source elsewhere and pass the folder or tarball.")
