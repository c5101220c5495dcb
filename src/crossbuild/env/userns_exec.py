"""Start a program with a new user namespace in which several ids are mapped (bubblewrap maps only the caller's):
`python -I -S userns_exec.py MAP -- ARGV...`, where MAP is `inside:outside,...` for uids and gids alike, and the
first `{userns}` word of ARGV becomes the namespace's descriptor (for `bwrap --userns FD`).

Why: a test sandbox whose only id is the test user's answers chown(file, 0, 0) with EINVAL (uid 0 does not exist
there), where a real machine says EPERM (libuv's fs_chown checks that). Mapping root to the host's nobody as well
makes the kernel answer as a machine would, without giving the sandbox any id it did not have: nobody owns nothing
writable. Writing a map of more than one id needs CAP_SETUID/CAP_SETGID over the namespace this runs in (a root
crossbuild, or the root of a bwrap namespace that kept them).

Run as a script with -I -S: it imports nothing of crossbuild's (the sandbox's outer step runs it on a read-only
view of the host)."""

import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000
PLACEHOLDER = "{userns}"


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or PLACEHOLDER not in argv[2:]:
        print(f"usage: userns_exec.py inside:outside[,...] -- ARGV (with one {PLACEHOLDER} word)", file=sys.stderr)
        return 125
    try:
        pairs = [tuple(int(n) for n in pair.split(":")) for pair in argv[0].split(",")]
    except ValueError:
        pairs = []
    if not pairs or any(len(p) != 2 for p in pairs):
        print(f"userns_exec.py: a map is inside:outside[,...], not {argv[0]!r}", file=sys.stderr)
        return 125
    fd = _namespace("".join(f"{inside} {outside} 1\n" for inside, outside in pairs))
    if fd is None:
        return 125
    command = argv[2:]
    command[command.index(PLACEHOLDER)] = str(fd)
    os.set_inheritable(fd, True)
    os.execvp(command[0], command)


def _namespace(mapping: str) -> int | None:
    """A descriptor of a new user namespace with MAPPING as its uid and gid map: a child makes it and waits until
    the map is written and the namespace held open here, then leaves."""
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(done_w)
        made = ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWUSER) == 0
        os.write(ready_w, b"1" if made else b"0")
        os.read(done_r, 1)
        os._exit(0)
    os.close(ready_w)
    os.close(done_r)
    try:
        if os.read(ready_r, 1) != b"1":
            print("userns_exec.py: cannot make a user namespace here", file=sys.stderr)
            return None
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(mapping)
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
    except OSError as e:
        print(f"userns_exec.py: cannot map {mapping.strip()!r}: {e}", file=sys.stderr)
        return None
    finally:
        os.close(done_w)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
