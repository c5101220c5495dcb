"""Host-side access to trees a build can write (workspace, build outputs, staged installs): never follow a link,
accept only the file types asked for, bound every read. Every such access in crossbuild goes through here.

Paths are split into an ANCHOR the host trusts (a folder crossbuild made, or the user named) and a path below it;
every component below the anchor is opened with O_NOFOLLOW relative to its parent's descriptor, so a link or a
FIFO swapped in at any moment makes the call fail instead of leading elsewhere.
Longer than 350 lines: every host-side way into a build's tree is here, so that one place holds the rule.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO never blocks the open


class UnsafePath(OSError):
    """A path below the anchor is a link, a special file, outside the anchor, or too large."""


def _parts(rel: str | Path) -> list[str]:
    p = Path(rel)
    if p.is_absolute():
        raise UnsafePath(errno.EPERM, "an absolute path where a path below the anchor was expected", str(rel))
    parts = [x for x in p.parts if x not in ("", ".")]
    if ".." in parts:
        raise UnsafePath(errno.EPERM, "'..' climbs out of the anchor", str(rel))
    return parts


def _parent(parts: list[str]) -> Path:
    """The folder holding the last of PARTS, relative to the anchor."""
    return Path(*parts[:-1]) if len(parts) > 1 else Path(".")


def _open_dir_chain(anchor_fd: int, parts: list[str], *, create: bool = False, mode: int = 0o755) -> int:
    """A descriptor of anchor/parts[0]/..., each opened without following links (created when asked)."""
    fd = os.dup(anchor_fd)
    try:
        for name in parts:
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafePath(errno.ELOOP, "a link or a non-folder where a folder was expected", name) from None
                raise
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def open_dir(anchor: str | Path, rel: str | Path = ".", *, create: bool = False) -> Iterator[int]:
    """A directory descriptor for ANCHOR/REL with no link followed below ANCHOR (made when `create`)."""
    anchor = Path(anchor)
    if create:
        anchor.mkdir(parents=True, exist_ok=True)
    afd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = _open_dir_chain(afd, _parts(rel), create=create)
    finally:
        os.close(afd)
    try:
        yield fd
    finally:
        os.close(fd)


def open_regular(anchor: str | Path, rel: str | Path, *, max_bytes: int | None = None) -> int:
    """A read descriptor of the regular file ANCHOR/REL (no links, no FIFOs or devices, at most MAX_BYTES)."""
    parts = _parts(rel)
    if not parts:
        raise UnsafePath(errno.EISDIR, "a folder, not a file", str(rel))
    with open_dir(anchor, _parent(parts)) as dfd:
        return open_regular_at(dfd, parts[-1], max_bytes=max_bytes)


def open_regular_at(dir_fd: int, name: str, *, max_bytes: int | None = None) -> int:
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePath(errno.ELOOP, "a symbolic link", name) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(errno.EPERM, f"not a regular file ({file_kind(st.st_mode)})", name)
        if max_bytes is not None and st.st_size > max_bytes:
            raise UnsafePath(errno.EFBIG, f"larger than {max_bytes} bytes ({st.st_size})", name)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_bytes(anchor: str | Path, rel: str | Path, *, max_bytes: int) -> bytes:
    """The whole of a regular file below ANCHOR, refused when larger than MAX_BYTES."""
    fd = open_regular(anchor, rel, max_bytes=max_bytes)
    with os.fdopen(fd, "rb") as f:
        return f.read(max_bytes + 1)[:max_bytes]


def read_text(anchor: str | Path, rel: str | Path, *, max_bytes: int) -> str:
    return read_bytes(anchor, rel, max_bytes=max_bytes).decode("utf-8", errors="replace")


def read_text_or_none(anchor: str | Path, rel: str | Path, *, max_bytes: int) -> str | None:
    """read_text, or None when the file is missing, not a regular file, behind a link or too large: for the files
    of a project (or of its build) that may or may not be there."""
    try:
        return read_text(anchor, rel, max_bytes=max_bytes)
    except OSError:
        return None


def read_page(anchor: str | Path, rel: str | Path, *, offset: int, size: int) -> tuple[bytes, int]:
    """SIZE bytes of the regular file ANCHOR/REL from OFFSET, and the file's whole size: a long log read a page at
    a time, never whole."""
    with os.fdopen(open_regular(anchor, rel), "rb") as f:
        return os.pread(f.fileno(), size, max(0, offset)), os.fstat(f.fileno()).st_size


def file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "symbolic link"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"), (stat.S_ISDIR, "folder"),
                       (stat.S_ISREG, "regular file")):
        if test(mode):
            return name
    return "unknown file type"


def create_new(anchor: str | Path, rel: str | Path, *, mode: int = 0o644) -> int:
    """A write descriptor of a file that did not exist (O_EXCL), below ANCHOR, parents made without following
    links: whatever a build planted there, nothing outside is opened."""
    parts = _parts(rel)
    with open_dir(anchor, _parent(parts), create=True) as dfd:
        return os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                       dir_fd=dfd)


def write_atomic(anchor: str | Path, rel: str | Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ANCHOR/REL with DATA through a fresh temporary file and a rename in the same folder: a link planted
    at REL is replaced, never written through."""
    parts = _parts(rel)
    with open_dir(anchor, _parent(parts), create=True) as dfd:
        tmp = f".{parts[-1]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                os.fchmod(f.fileno(), mode)  # the umask must not drop an executable bit asked for
            os.replace(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except FileNotFoundError:
                pass
            raise


def symlink_atomic(anchor: str | Path, rel: str | Path, target: str) -> None:
    """Make ANCHOR/REL a link to TARGET, replacing whatever is there by a rename (never following it)."""
    parts = _parts(rel)
    with open_dir(anchor, _parent(parts), create=True) as dfd:
        tmp = f".{parts[-1]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        os.symlink(target, tmp, dir_fd=dfd)
        try:
            os.replace(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            os.unlink(tmp, dir_fd=dfd)
            raise


def remove_tree(anchor: str | Path, rel: str | Path) -> None:
    """Delete ANCHOR/REL whatever a build left there: every folder on the way is opened without following links
    (a link planted for a parent fails the call instead of redirecting it), a link at REL is removed itself, and a
    folder is removed on descriptors (shutil.rmtree with dir_fd follows no link inside it)."""
    parts = _parts(rel)
    if not parts:
        raise UnsafePath(errno.EPERM, "refusing to remove the anchor itself", str(anchor))
    try:
        with open_dir(anchor, _parent(parts)) as dfd:
            try:
                st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                return
            if stat.S_ISDIR(st.st_mode):
                assert shutil.rmtree.avoids_symlink_attacks
                shutil.rmtree(parts[-1], dir_fd=dfd)
            else:
                os.unlink(parts[-1], dir_fd=dfd)
    except FileNotFoundError:
        return


@dataclass
class WalkEntry:
    rel: str  # relative to the walked root
    dir_fd: int  # descriptor of the folder holding it (valid during the iteration step only)
    name: str
    st: os.stat_result  # lstat: links and special files are reported as what they are


def walk_files(root: str | Path, *, prune: Callable[[str], bool] = lambda rel: False) -> Iterator[WalkEntry]:
    """Every non-folder entry below ROOT, without following links (os.fwalk on descriptors), sorted per folder;
    folders for which PRUNE(relative path) is true are left out."""
    root = str(root)
    for dirpath, dirnames, filenames, dfd in os.fwalk(root, follow_symlinks=False):
        rel_dir = os.path.relpath(dirpath, root)
        at_top = rel_dir == "."
        links = _dir_links(dirnames, dfd)  # fwalk lists links to folders as folders; they are links here
        dirnames[:] = sorted(d for d in dirnames
                             if d not in links and not prune(d if at_top else os.path.join(rel_dir, d)))
        for name in sorted([*filenames, *links]):
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            yield WalkEntry(name if at_top else os.path.join(rel_dir, name), dfd, name, st)


@dataclass
class CopyReport:
    files: int = 0
    bytes: int = 0
    links: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (relative path, why)


def copy_tree(src_anchor: str | Path, src_rel: str | Path, dst_anchor: str | Path, dst_rel: str | Path, *,
              links: str = "keep", max_file_bytes: int = 4 << 30, max_total_bytes: int = 64 << 30,
              skip=lambda rel: False) -> CopyReport:
    """Copy the tree SRC_ANCHOR/SRC_REL (which a build may have written) to DST_ANCHOR/DST_REL, which must not exist
    yet. Only folders, regular files and links are copied; links are copied as links ("keep"), only when they stay
    inside the tree ("internal": resolved through the links the copy holds, see `resolve_link`), or not at all
    ("drop"); FIFOs, devices and sockets are skipped and reported. No link is followed on either side, nor in any
    folder between an anchor and its tree. SKIP(rel) leaves out what it is true for."""
    with open_dir(src_anchor, src_rel) as src_fd:
        report = _copy_tree_fd(src_fd, dst_anchor, dst_rel, links, max_file_bytes, max_total_bytes, skip)
    if links == "internal":  # judged in the copy, which only crossbuild writes, once all of it is there
        with open_dir(dst_anchor, dst_rel) as dst_fd:
            dropped = drop_escaping_links(dst_fd)
        report.links -= len(dropped)
        report.skipped += dropped
    return report


def _copy_tree_fd(src_fd: int, dst_anchor: str | Path, dst_rel: str | Path, links: str, max_file_bytes: int,
                  max_total_bytes: int, skip) -> CopyReport:
    report = CopyReport()
    parts = _parts(dst_rel)
    with open_dir(dst_anchor, _parent(parts), create=True) as parent:
        os.mkdir(parts[-1], 0o755, dir_fd=parent)
        top = os.open(parts[-1], _DIR_FLAGS, dir_fd=parent)
    dst_fds = {".": top}
    try:
        for dirpath, dirnames, filenames, sfd in os.fwalk(".", follow_symlinks=False, dir_fd=src_fd):
            rel_dir = os.path.normpath(dirpath)
            dfd = dst_fds.pop(rel_dir)
            try:
                keep_dirs = []
                dir_links = _dir_links(dirnames, sfd)
                filenames = [*filenames, *dir_links]
                for d in sorted(set(dirnames) - set(dir_links)):
                    rel = os.path.normpath(os.path.join(rel_dir, d))
                    if skip(rel):
                        report.skipped.append((rel, "left out"))
                        continue
                    os.mkdir(d, 0o755, dir_fd=dfd)
                    dst_fds[rel] = os.open(d, _DIR_FLAGS, dir_fd=dfd)
                    keep_dirs.append(d)
                dirnames[:] = keep_dirs
                for name in sorted(filenames):
                    rel = os.path.normpath(os.path.join(rel_dir, name))
                    if skip(rel):
                        report.skipped.append((rel, "left out"))
                        continue
                    _copy_entry(sfd, dfd, name, rel, links, max_file_bytes, max_total_bytes, report)
            finally:
                os.close(dfd)
    finally:
        for fd in dst_fds.values():
            os.close(fd)
    return report


def _dir_links(dirnames: list[str], dir_fd: int) -> list[str]:
    out = []
    for d in dirnames:
        try:
            if stat.S_ISLNK(os.stat(d, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                out.append(d)
        except OSError:
            out.append(d)  # gone or changed: let the caller's no-follow open decide
    return out


def _copy_entry(sfd: int, dfd: int, name: str, rel: str, links: str, max_file: int, max_total: int,
                report: CopyReport) -> None:
    try:
        st = os.stat(name, dir_fd=sfd, follow_symlinks=False)
    except OSError as e:
        report.skipped.append((rel, f"unreadable: {e.strerror}"))
        return
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(name, dir_fd=sfd)
        if links == "drop" or (links == "internal" and not link_stays_inside(rel, target)):
            report.skipped.append((rel, f"link to {target} leads outside the tree"))
            return
        os.symlink(target, name, dir_fd=dfd)
        report.links += 1
        return
    if not stat.S_ISREG(st.st_mode):
        report.skipped.append((rel, file_kind(st.st_mode)))
        return
    if st.st_size > max_file or report.bytes + st.st_size > max_total:
        report.skipped.append((rel, f"too large ({st.st_size} bytes)"))
        return
    try:
        ifd = open_regular_at(sfd, name, max_bytes=max_file)
    except OSError as e:  # swapped for a link or a FIFO since the stat
        report.skipped.append((rel, str(e.strerror or e)))
        return
    with os.fdopen(ifd, "rb") as fin:
        ofd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      stat.S_IMODE(st.st_mode) & 0o777, dir_fd=dfd)
        with os.fdopen(ofd, "wb") as fout:
            copied = 0
            while chunk := fin.read(min(1 << 20, max_file + 1 - copied)):
                copied += len(chunk)
                if copied > max_file:
                    break
                fout.write(chunk)
            fout.flush()  # a write after the utime (the buffer, at close) would make the copy newer than it is:
            os.utime(fout.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))  # make then rebuilds generated files
    report.files += 1
    report.bytes += copied


def link_stays_inside(rel: str, target: str) -> bool:
    """Whether a link at REL (relative to a tree's top) pointing to TARGET resolves inside the tree, lexically."""
    if os.path.isabs(target):
        return False
    joined = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    return joined != ".." and not joined.startswith("../") and not os.path.isabs(joined)


def resolve_link(tree_fd: int, rel: str, target: str, *, max_links: int = 40) -> str | None:
    """Where the link REL of the tree at TREE_FD, pointing to TARGET, leads: resolved as the kernel would, through
    the links the tree holds now (each read with readlinkat on its folder's descriptor; the kernel follows none),
    relative to the tree's top; None when it leaves the tree. Also None (it may leave the tree later) when it is
    absolute, loops, or climbs with '..' out of a name that is not a real folder of the tree: a missing name or a
    file that a later install could make a link. `link_stays_inside` checks one link on paper; a chain of links each
    inside on paper (lib/a -> ../x, x -> ., lib/b -> a/../outside) leaves the tree only this way."""
    if os.path.isabs(target):
        return None
    stack = [p for p in Path(rel).parent.parts if p not in ("", ".")]
    pending = target.split("/")
    pending.reverse()  # popped from the end: the next component last
    hops = 0
    real = True  # every name on the stack is a real folder of the tree
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            if not stack or not real:
                return None
            stack.pop()
            continue
        if not real:
            stack.append(name)
            continue
        try:
            fd = _open_dir_chain(tree_fd, stack)
        except OSError:
            return None  # a folder on the way changed into something else
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            link = os.readlink(name, dir_fd=fd) if stat.S_ISLNK(st.st_mode) else None
        except OSError:  # missing (or gone): nothing below it is known
            st, link = None, None
        finally:
            os.close(fd)
        if link is not None:
            hops += 1
            if hops > max_links or os.path.isabs(link):
                return None
            pending += reversed(link.split("/"))  # relative to the link's own folder: the stack as it is
            continue
        stack.append(name)
        real = st is not None and stat.S_ISDIR(st.st_mode)
    return "/".join(stack) or "."


def _entries_below(tree_fd: int) -> Iterator[str]:
    """The relative path of every non-folder entry below TREE_FD (links to folders included), none followed."""
    for dirpath, dirnames, filenames, dfd in os.fwalk(".", follow_symlinks=False, dir_fd=tree_fd):
        rel_dir = os.path.normpath(dirpath)
        links = _dir_links(dirnames, dfd)
        dirnames[:] = [d for d in dirnames if d not in links]
        for name in sorted({*filenames, *links}):
            yield os.path.normpath(os.path.join(rel_dir, name))


def links_leaving(tree_fd: int) -> list[tuple[str, str]]:
    """(relative path, target) of every link below TREE_FD that leads out of the tree (resolve_link)."""
    out = []
    for dirpath, dirnames, filenames, dfd in os.fwalk(".", follow_symlinks=False, dir_fd=tree_fd):
        rel_dir = os.path.normpath(dirpath)
        for name in sorted({*filenames, *_dir_links(dirnames, dfd)}):
            try:
                if not stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
                    continue
                target = os.readlink(name, dir_fd=dfd)
            except OSError:
                continue
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if not link_stays_inside(rel, target) or resolve_link(tree_fd, rel, target) is None:
                out.append((rel, target))
    return out


def drop_escaping_links(tree_fd: int) -> list[tuple[str, str]]:
    """Remove every link of the tree at TREE_FD that leads out of it (resolve_link), until none does; returns
    (relative path, why) for each. For trees only crossbuild writes (a cache entry, the per-target prefix)."""
    dropped: list[tuple[str, str]] = []
    while leaving := links_leaving(tree_fd):
        for rel, target in leaving:
            parts = _parts(rel)
            fd = _open_dir_chain(tree_fd, parts[:-1])
            try:
                os.unlink(parts[-1], dir_fd=fd)
            except FileNotFoundError:
                continue
            finally:
                os.close(fd)
            dropped.append((rel, f"link to {target} leads outside the tree through the links in it"))
    return dropped


def is_regular(anchor: str | Path, rel: str | Path) -> bool:
    """Whether ANCHOR/REL is a regular file, no link followed on the way nor at the end."""
    parts = _parts(rel)
    try:
        with open_dir(anchor, _parent(parts)) as dfd:
            return stat.S_ISREG(os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False).st_mode)
    except (OSError, IndexError):
        return False


def is_dir(anchor: str | Path, rel: str | Path) -> bool:
    """Whether ANCHOR/REL is a folder reached without following a link."""
    try:
        with open_dir(anchor, rel):
            return True
    except OSError:
        return False


def lstat(anchor: str | Path, rel: str | Path) -> os.stat_result:
    """ANCHOR/REL's own status (a link as itself), no link followed on the way: FileNotFoundError when it is plainly
    absent, UnsafePath (an OSError) when a link or a non-folder stands on the way."""
    parts = _parts(rel)
    if not parts:
        raise UnsafePath(errno.EINVAL, "the anchor itself, not a path below it", str(rel))
    with open_dir(anchor, _parent(parts)) as dfd:
        return os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)


def lexists(anchor: str | Path, rel: str | Path) -> bool:
    """Whether ANCHOR/REL exists (a link counts as itself), no link followed on the way."""
    parts = _parts(rel)
    try:
        with open_dir(anchor, _parent(parts)) as dfd:
            os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
        return True
    except (OSError, IndexError):
        return False


def install_tree(src_anchor: str | Path, src_rel: str | Path, dst_anchor: str | Path, *,
                 files: list[str] | None = None, skip=lambda rel: False) -> CopyReport:
    """Merge the tree SRC_ANCHOR/SRC_REL (FILES below it, or all of it) into the existing tree DST_ANCHOR (a prefix
    that other installs share), never writing through a link: every destination folder is opened without following
    links (made when missing), each file and link is made under a temporary name and renamed over what is there (an
    old link is replaced, never followed), and an entry whose folder in the destination is a link or a file is not
    written and is reported. Afterwards every link of the destination that leads out of it, through the links it now
    holds, is removed and reported (resolve_link)."""
    report = CopyReport()
    with open_dir(src_anchor, src_rel) as src_fd, open_dir(dst_anchor, ".", create=True) as dst_fd:
        if files is None:
            files = list(_entries_below(src_fd))
        for rel in sorted(files):
            if skip(rel):
                report.skipped.append((rel, "left out"))
                continue
            _install_entry(src_fd, dst_fd, rel, report)
        report.skipped += drop_escaping_links(dst_fd)
    return report


def _install_entry(src_fd: int, dst_fd: int, rel: str, report: CopyReport) -> None:
    parts = _parts(rel)
    if not parts:
        return
    name = parts[-1]
    try:
        sfd = _open_dir_chain(src_fd, parts[:-1])
    except OSError as e:
        report.skipped.append((rel, f"unreadable: {e.strerror}"))
        return
    try:
        try:
            dfd = _open_dir_chain(dst_fd, parts[:-1], create=True)
        except UnsafePath:
            report.skipped.append((rel, "a link or a file is where its folder should be: not written through"))
            return
        try:
            _install_one(sfd, dfd, name, rel, report)
        finally:
            os.close(dfd)
    finally:
        os.close(sfd)


def _install_one(sfd: int, dfd: int, name: str, rel: str, report: CopyReport) -> None:
    try:
        st = os.stat(name, dir_fd=sfd, follow_symlinks=False)
    except OSError as e:
        report.skipped.append((rel, f"unreadable: {e.strerror}"))
        return
    tmp = f".{name[:100]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(name, dir_fd=sfd), tmp, dir_fd=dfd)
    elif stat.S_ISREG(st.st_mode):
        with os.fdopen(open_regular_at(sfd, name), "rb") as fin:
            ofd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
            with os.fdopen(ofd, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
                fout.flush()
                os.fchmod(fout.fileno(), stat.S_IMODE(st.st_mode) & 0o777)
                os.utime(fout.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))
        report.bytes += st.st_size
    else:
        report.skipped.append((rel, file_kind(st.st_mode)))
        return
    try:
        there = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        there = None
    try:
        if there is not None and stat.S_ISDIR(there.st_mode):
            report.skipped.append((rel, "a folder is there: not replaced"))
            return
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except FileNotFoundError:
            pass
    if stat.S_ISLNK(st.st_mode):
        report.links += 1
    else:
        report.files += 1
