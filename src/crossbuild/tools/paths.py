"""Where tools may look and write: inside the workspace (and, for commands, the per-target prefix), checked after
`realpath` and by path component, with credential files kept out of reach."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from crossbuild.env import sources
from crossbuild.env.workspace import is_credential, peek
from crossbuild.foundation import safefs
from crossbuild.tools.base import BadArguments, NotFound, PermissionDenied
from crossbuild.tools.context import RunContext

MAX_PATH_CHARS = 4096
NAME_MAX = 255  # bytes in one path component (Linux)

HOST_PATH_WHY = ("host paths are useless for a cross build: /usr/include and /usr/lib hold headers and libraries for "
                 "the build machine, not the target, and the toolchain's own headers, libc and the per-target "
                 "prefix are already wired into CC, CMake, Meson and pkg-config")


def is_within(path: Path, root: Path) -> bool:
    """Component-wise containment: /w/demo-backup is not inside /w/demo."""
    return path == root or root in path.parents


class OutsideRoots(PermissionError):
    """A client named a host path outside the folders the user allowed."""


class HostRoots:
    """The host folders the user allowed a client (an MCP session, the web page) to name: a path a client gives
    must resolve, links followed, inside one of them, by path component."""

    def __init__(self, roots: list[Path]):
        self.roots = [Path(r).resolve() for r in roots]

    def __str__(self) -> str:
        return ", ".join(map(str, self.roots))

    def contain(self, real: Path) -> bool:
        return any(is_within(real, r) for r in self.roots)

    def source(self, raw: str) -> str:
        """The source a client named, as it is to be prepared: `debian:` and network git URLs as written; every
        other form (a folder, a tarball, a local git repository, a `file://` URL, a path ending in .git) as its
        real path, which must lie inside a root. Raises OutsideRoots, or ValueError for a form not taken."""
        spec = sources.parse(raw)
        if spec.kind == "network" and sources.uses_ssh(raw):
            raise OutsideRoots(f"source {raw[:200]!r}: an ssh URL would log in with this machine's own keys (and "
                               "reach its files as localhost); a client may name https://, http:// or git:// URLs")
        if not spec.names_host_path:
            return raw
        real = self.resolve("source", spec.value)
        if not real.exists():
            raise ValueError(f"source {raw[:200]!r} does not exist (give {sources.FORMS})")
        return str(real)

    def resolve(self, what: str, raw: str) -> Path:
        """The real path RAW names; raises OutsideRoots, or ValueError for a path that cannot be used."""
        if "\0" in raw:
            raise OutsideRoots(f"the {what} path contains a NUL byte")
        try:
            real = Path(os.path.realpath(Path(raw).expanduser()))
        except OSError as e:
            raise ValueError(f"{what} {raw[:120]!r} cannot be used as a path: {e.strerror}") from None
        if not self.contain(real):
            raise OutsideRoots(f"{what} {raw[:200]!r} resolves to {real}, outside the folders this server may use "
                               f"({self})")
        return real


def display(ctx: RunContext, real: Path) -> str:
    """How a path is shown to the model: relative to the workspace."""
    try:
        rel = real.relative_to(ctx.root)
    except ValueError:
        return str(real)
    return str(rel) if str(rel) != "." else "."


def resolve(ctx: RunContext, path: str, *, write: bool = False, must_exist: bool = True,
            roots: tuple[Path, ...] | None = None, cwd: Path | None = None) -> Path:
    """The real path PATH names, relative to CWD (default: the workspace root), refused unless it lies inside ROOTS
    (default: the workspace). For a new file the nearest existing parent is checked. Raises PermissionDenied/NotFound.
    """
    roots = roots or (ctx.root,)
    if "\0" in path:
        raise PermissionDenied("the path contains a NUL byte.", hint="use a plain relative path such as src/main.c")
    if len(path) > MAX_PATH_CHARS or any(len(os.fsencode(part)) > NAME_MAX for part in path.split("/")):
        raise BadArguments(f"the path is too long ({len(path)} characters; at most {MAX_PATH_CHARS}, and "
                           f"{NAME_MAX} bytes per name).",
                           hint="use a short path relative to the workspace, such as src/main.c")
    base = cwd or ctx.root
    raw = Path(os.path.expanduser(path)) if path.startswith("~") else Path(path)
    joined = raw if raw.is_absolute() else base / raw
    try:
        real = Path(os.path.realpath(joined))
        exists = os.path.lexists(real)
    except OSError as e:
        if e.errno in (errno.ENAMETOOLONG, errno.ELOOP):
            raise BadArguments(f"{path[:120]!r} cannot be used as a path: {e.strerror}.",
                               hint="use a short path relative to the workspace, such as src/main.c") from None
        # a link swapped in or out while it was being resolved (a build running beside the call)
        raise NotFound(f"{path[:120]!r} changed while it was being checked ({e.strerror}); nothing was read.",
                       hint="call again once the build that changes it has finished") from None
    if not any(is_within(real, r) for r in roots):
        _deny_outside(ctx, path, joined, real, roots)
    content = peek(real.parent, real.name) if exists else lambda: None
    if is_credential(real, content) or is_credential(joined, content):
        raise PermissionDenied(
            f"{path!r} looks like a credential file (keys, tokens, .env); tools never read or write those.",
            hint="a cross build needs no secrets; do not try to reach it under another name")
    if write and is_within(real, ctx.xbuild) and real != ctx.xbuild:
        logs = ctx.toolchain.logs.resolve()
        if not is_within(real, logs):
            raise PermissionDenied(
                f"{path!r} is inside .xbuild/, the toolchain crossbuild generated for {ctx.target.name}.",
                hint="change the project instead (its build files or configure/cmake arguments); the wrappers and "
                     "toolchain files are regenerated for every run")
    if must_exist and not exists:
        parent = real.parent
        near = sorted(p.name for p in parent.iterdir())[:20] if parent.is_dir() else []
        raise NotFound(f"{display(ctx, real)} does not exist.",
                       hint=(f"{display(ctx, parent)}/ contains: {', '.join(near)}" if near
                             else "call list_files to see what exists"))
    return real


def _deny_outside(ctx: RunContext, path: str, joined: Path, real: Path, roots: tuple[Path, ...]) -> None:
    allowed = " or ".join(str(r) for r in roots)
    lexical = Path(os.path.normpath(joined))
    if any(is_within(lexical, r) for r in roots):
        why = f"{path!r} is a symlink (or goes through one) that leads outside the workspace, to {real}."
        hint = "work on files inside the workspace; symlinks out of it are not followed"
    elif Path(path).is_absolute() or path.startswith("~"):
        why = f"{path!r} is outside the workspace ({allowed})."
        hint = ("use paths relative to the workspace (src/..., build/...). " + HOST_PATH_WHY
                if str(real).startswith(("/usr", "/lib", "/opt", "/etc")) else
                "use paths relative to the workspace (src/..., build/...)")
    else:
        why = f"{path!r} climbs out of the workspace with '..' (it resolves to {real})."
        hint = "stay inside the workspace; the project is in src/ and builds go in build/"
    raise PermissionDenied(why, hint=hint + "; do not try other spellings of the same path")


def make_folder(ctx: RunContext, real: Path) -> str | None:
    """Make the missing folder REAL (checked to lie in the workspace) and its missing parents, never through a
    link; its shown path, or None when it was there. Raises NotFound when it cannot be made."""
    if os.path.lexists(real):
        return None
    shown = display(ctx, real)
    try:
        root = ctx.root.resolve()
        with safefs.open_dir(root, real.relative_to(root), create=True):
            pass
    except (OSError, ValueError) as e:
        raise NotFound(f"cwd {shown!r} does not exist and cannot be made ({e}).",
                       hint="give a folder inside the workspace, such as build") from None
    return shown


# crossbuild's own records in .xbuild/ that a clean rebuild's fresh workspace does not have (its logs, the source as
# prepared, the second builds, the dependencies' build folders); the toolchain files it does have
_ONLY_HERE = re.compile(r"^(logs|pristine|rebuild|native|commands\.jsonl|dep-[^/]*|deps-[^/]*)(/|$)")


def refuse_records(ctx: RunContext, cwd: Path, args: list[str]) -> None:
    """Refuse a build step run in CWD, or one of whose ARGS names crossbuild's records in .xbuild/ (as a path, a
    `-DVAR=path` value or a glued `-Ipath`): the clean rebuild replays every successful step in a fresh workspace
    where they do not exist, and the session's record could never verify."""
    if _only_here(ctx, cwd):
        _refuse_only_here(f"cwd {os.path.relpath(cwd, ctx.root)}")
    for arg in args:
        values = [arg, arg.partition("=")[2], arg[2:] if arg[:2] in ("-I", "-L") else ""]
        if any(_only_here(ctx, Path(os.path.normpath(cwd / v))) for v in values if v and not v.startswith("-")):
            _refuse_only_here(arg)


def _only_here(ctx: RunContext, where: Path) -> bool:
    try:
        return _ONLY_HERE.match(where.relative_to(ctx.xbuild).as_posix()) is not None
    except ValueError:
        return False


def _refuse_only_here(shown: str) -> None:
    raise BadArguments(
        f"{shown!r} is crossbuild's record in .xbuild/, which the clean rebuild's fresh workspace does not have: "
        "a build step using it would fail there.",
        hint="read it with read_file or list_files; a dependency's files reach the build through the prefix "
             "(build_dependency), and files the build needs belong in src/")
