"""File tools: list_files, read_file (paged), write_file (atomic), edit_file (exact, unique replacements)."""

from __future__ import annotations

import difflib
import io
import os
import stat
from pathlib import Path

from pydantic import BaseModel, Field

from crossbuild.foundation import safefs
from crossbuild.proof.binary_formats import sniff
from crossbuild.tools import paths
from crossbuild.tools.base import BadArguments, NotFound, PermissionDenied, Tool, ToolArgs, ToolFailure, ToolResult
from crossbuild.tools.context import RunContext

MAX_LIST_ENTRIES = 300
MAX_DEPTH = 6
READ_MAX_LINES = 400
READ_MAX_CHARS = 24_000
LINE_MAX_CHARS = 2_000
DIFF_MAX_CHARS = 6_000
WRITE_MAX_CHARS = 2_000_000
EDIT_MAX_BYTES = 8 << 20
SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "CMakeFiles", ".deps", ".libs"}


# ---- list_files ---------------------------------------------------------------------------------------------------

class ListFilesArgs(ToolArgs):
    path: str = Field(".", description="Folder relative to the workspace root, e.g. 'src' or 'build'.")
    depth: int = Field(2, ge=1, le=MAX_DEPTH, description=f"How many levels to descend (1-{MAX_DEPTH}).")


def _list_files(ctx: RunContext, args: ListFilesArgs, real: Path) -> ToolResult:
    if not real.is_dir():
        raise BadArguments(f"{args.path} is a file, not a folder.", hint="use read_file to read a file")
    lines: list[str] = []
    hidden = truncated = 0

    def walk(d: Path, level: int) -> None:
        nonlocal hidden, truncated
        try:
            entries = sorted(os.scandir(d), key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))
        except OSError as e:
            lines.append(f"{'  ' * level}[cannot list: {e.strerror}]")
            return
        for e in entries:
            rel = Path(e.path)
            if paths.is_credential(rel, paths.peek(rel.parent, rel.name)):
                hidden += 1
                continue
            if len(lines) >= MAX_LIST_ENTRIES:
                truncated += 1
                continue
            indent = "  " * level
            if e.is_symlink():
                lines.append(f"{indent}{e.name} -> {os.readlink(e.path)}")
            elif e.is_dir(follow_symlinks=False):
                skipped = e.name in SKIP_DIRS
                lines.append(f"{indent}{e.name}/" + (" (not expanded)" if skipped and level + 1 < args.depth else ""))
                if level + 1 < args.depth and not skipped:
                    walk(Path(e.path), level + 1)
            else:
                st = e.stat(follow_symlinks=False)
                exe = "*" if st.st_mode & stat.S_IXUSR else ""
                lines.append(f"{indent}{e.name}{exe}  {_size(st.st_size)}")

    walk(real, 0)
    header = f"{paths.display(ctx, real)}/ (depth {args.depth}; '*' = executable, sizes in bytes/K/M)"
    notes = []
    if truncated:
        notes.append(f"[{truncated} more entries not shown — list a subfolder, or use a smaller depth]")
    if hidden:
        notes.append(f"[{hidden} credential files hidden]")
    text = "\n".join([header, *lines, *notes]) if lines else header + "\n(empty)"
    return ToolResult(ok=True, message=text, data={"entries": len(lines), "truncated": truncated, "hidden": hidden})


def _size(n: int) -> str:
    return f"{n}" if n < 10_000 else f"{n // 1024}K" if n < 10_000_000 else f"{n // (1 << 20)}M"


# ---- read_file ----------------------------------------------------------------------------------------------------

class ReadFileArgs(ToolArgs):
    path: str = Field(description="File relative to the workspace root, e.g. 'src/CMakeLists.txt' or a log under "
                                  "'.xbuild/logs/'.")
    offset: int = Field(1, ge=1, description="First line to read (1-based).")
    limit: int = Field(READ_MAX_LINES, ge=1, le=READ_MAX_LINES,
                       description=f"Lines to read (at most {READ_MAX_LINES}).")


def open_in_workspace(ctx: RunContext, real: Path, shown: str) -> int:
    """A descriptor of the regular file REAL (already resolved inside the workspace), opened again below the
    workspace without following any link: a file swapped for a link or a FIFO after the check is refused."""
    try:
        return safefs.open_regular(ctx.root, real.relative_to(ctx.root))
    except safefs.UnsafePath as e:
        raise PermissionDenied(f"{shown} cannot be opened: {e.strerror} ({e.filename}).",
                               hint="only regular files inside the workspace can be read; links are not followed") \
            from None
    except FileNotFoundError:
        raise NotFound(f"{shown} does not exist (any more).", hint="call list_files to see what exists") from None


def _read_file(ctx: RunContext, args: ReadFileArgs, real: Path) -> ToolResult:
    if real.is_dir():
        raise BadArguments(f"{args.path} is a folder.", hint="use list_files to see what it contains")
    with os.fdopen(open_in_workspace(ctx, real, args.path), "rb") as raw:
        return _read_text(args, raw)


def _read_text(args: ReadFileArgs, raw) -> ToolResult:
    head = raw.read(8192)
    if b"\0" in head:
        kind = sniff(head)
        what = {"elf": "an ELF binary", "ar": "an ar archive (static library)", "thin-ar": "a thin ar archive",
                "pe": "a Windows PE binary", "coff": "a COFF object", "macho": "a Mach-O binary"}.get(kind or "",
                                                                                              "a binary file")
        raise ToolFailure(f"{args.path} is {what} ({os.fstat(raw.fileno()).st_size} bytes), not text.",
                          hint="inspect binaries with run_command: file, readelf -h, nm, objdump -p",
                          binary=kind or "unknown")
    out: list[str] = []
    chars = 0
    last = args.offset - 1
    total = 0
    cut_lines = 0
    stop = args.offset + args.limit - 1
    raw.seek(0)
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="") as f:
        for total, line in enumerate(f, 1):
            if total < args.offset or total > stop or chars >= READ_MAX_CHARS:
                continue
            line = line.rstrip("\r\n")
            if len(line) > LINE_MAX_CHARS:
                line = line[:LINE_MAX_CHARS] + f" [... line cut: {len(line) - LINE_MAX_CHARS} more characters]"
                cut_lines += 1
            if chars + len(line) > READ_MAX_CHARS and out:
                chars = READ_MAX_CHARS
                continue
            out.append(f"{total:6d}\t{line}")
            chars += len(line) + 8
            last = total
    if total == 0:
        return ToolResult(ok=True, message=f"{args.path} is empty (0 lines).", data={"lines": 0})
    if args.offset > total:
        raise BadArguments(f"offset {args.offset} is past the end: {args.path} has {total} lines.",
                           hint=f"use an offset between 1 and {total}")
    text = "\n".join(out)
    if args.offset > 1 or last < total:
        more = f" — call read_file with offset={last + 1} to continue" if last < total else ""
        text += f"\n[lines {args.offset}–{last} of {total}{more}]"
    return ToolResult(ok=True, message=text, data={"first": args.offset, "last": last, "lines": total,
                                                   "cut_lines": cut_lines})


# ---- write_file ---------------------------------------------------------------------------------------------------

class WriteFileArgs(ToolArgs):
    path: str = Field(description="File relative to the workspace root; parent folders are created.")
    content: str = Field(max_length=WRITE_MAX_CHARS, description="The complete new content of the file.")


def _authorize_write(ctx: RunContext, args: WriteFileArgs | EditFileArgs) -> Path:
    return paths.resolve(ctx, args.path, write=True, must_exist=isinstance(args, EditFileArgs))


def atomic_write(ctx: RunContext, real: Path, data: bytes) -> None:
    """Write via a temp file + rename, every folder below the workspace opened without following links: neither a
    link swapped in for the file (the rename replaces the link itself) nor one swapped in for a folder can
    redirect the write. An existing file keeps its permissions. The file is recorded as the agent's edit."""
    rel = real.relative_to(ctx.root)
    try:
        st = os.lstat(real)
        mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o644
    except FileNotFoundError:
        mode = 0o644
    try:
        safefs.write_atomic(ctx.root, rel, data, mode=mode)
    except safefs.UnsafePath as e:
        raise PermissionDenied(f"{paths.display(ctx, real.parent)} now leads outside the workspace ({e.filename} "
                               "is a link).", hint="a folder was replaced by a symlink; nothing was written") from None
    ctx.record_edit(real)


def _write_file(ctx: RunContext, args: WriteFileArgs, real: Path) -> ToolResult:
    if real.is_dir():
        raise BadArguments(f"{args.path} is a folder.", hint="give the path of a file inside it")
    with ctx.path_lock(real):
        existed = real.is_file()
        old = ""
        if existed:
            with os.fdopen(open_in_workspace(ctx, real, args.path), "rb") as f:
                old = f.read(EDIT_MAX_BYTES).decode(errors="replace")
        atomic_write(ctx, real, args.content.encode())
    new_lines = args.content.count("\n") + (0 if args.content.endswith("\n") or not args.content else 1)
    shown = paths.display(ctx, real)
    if existed:
        old_lines = old.count("\n") + (0 if old.endswith("\n") or not old else 1)
        msg = f"overwrote {shown}: {old_lines} → {new_lines} lines ({len(args.content)} characters)"
    else:
        msg = f"created {shown}: {new_lines} lines ({len(args.content)} characters)"
    return ToolResult(ok=True, message=msg, data={"path": shown, "created": not existed, "lines": new_lines})


# ---- edit_file ----------------------------------------------------------------------------------------------------

class Edit(BaseModel):
    model_config = {"strict": True, "extra": "forbid"}
    old: str = Field(min_length=1, description="Exact text to replace, including whitespace; must occur once.")
    new: str = Field(description="Replacement text.")


class EditFileArgs(ToolArgs):
    path: str = Field(description="Text file relative to the workspace root.")
    edits: list[Edit] = Field(min_length=1, max_length=50,
                              description="Replacements, each matched against the original file (not after earlier "
                                          "edits); matches must not overlap.")


def _edit_file(ctx: RunContext, args: EditFileArgs, real: Path) -> ToolResult:
    if not real.is_file():
        raise BadArguments(f"{args.path} is not a regular file.")
    with ctx.path_lock(real):
        with os.fdopen(open_in_workspace(ctx, real, args.path), "rb") as f:
            if os.fstat(f.fileno()).st_size > EDIT_MAX_BYTES:
                raise BadArguments(f"{args.path} is larger than {EDIT_MAX_BYTES >> 20} MiB; edit_file changes "
                                   "source and build files.", hint="edit a smaller file")
            raw = f.read(EDIT_MAX_BYTES + 1)
        if b"\0" in raw[:8192]:
            raise ToolFailure(f"{args.path} is binary; edit_file changes text files only.")
        bom = raw.startswith(b"\xef\xbb\xbf")
        text = raw[3 if bom else 0:].decode("utf-8", errors="surrogateescape")
        crlf = text.count("\r\n") > text.count("\n") // 2 and "\r\n" in text
        work = text.replace("\r\n", "\n") if crlf else text
        spans = []
        for i, e in enumerate(args.edits, 1):
            old = e.old.replace("\r\n", "\n") if crlf else e.old
            first = work.find(old)
            if first < 0:
                raise NotFound(f"edit {i}: the text to replace was not found in {args.path}.",
                               hint="read_file the region again and copy the lines exactly, including indentation "
                                    "and whitespace; edits match the original file, not the result of earlier edits")
            count = work.count(old)
            if count > 1:
                raise BadArguments(f"edit {i}: the text to replace was found {count} times in {args.path}.",
                                   hint="add surrounding lines to `old` to make it unique")
            spans.append((first, first + len(old), e.new.replace("\r\n", "\n") if crlf else e.new, i))
        spans.sort()
        for (_, e1, _, i1), (s2, _, _, i2) in zip(spans, spans[1:], strict=False):
            if s2 < e1:
                raise BadArguments(f"edits {i1} and {i2} overlap in {args.path}.",
                                   hint="merge them into one edit")
        parts, pos = [], 0
        for s, e, new, _ in spans:
            parts += [work[pos:s], new]
            pos = e
        result = "".join(parts) + work[pos:]
        if result == work:
            raise BadArguments("the edits change nothing (each `new` equals its `old`).")
        out = result.replace("\n", "\r\n") if crlf else result
        atomic_write(ctx, real, (b"\xef\xbb\xbf" if bom else b"") + out.encode("utf-8", errors="surrogateescape"))
    shown = paths.display(ctx, real)
    diff = "".join(difflib.unified_diff(work.splitlines(keepends=True), result.splitlines(keepends=True),
                                        f"a/{shown}", f"b/{shown}", n=2))
    if len(diff) > DIFF_MAX_CHARS:
        diff = diff[:DIFF_MAX_CHARS] + f"\n[diff cut: {len(diff) - DIFF_MAX_CHARS} more characters]"
    return ToolResult(ok=True, message=f"edited {shown} ({len(spans)} replacement(s)):\n{diff}",
                      data={"path": shown, "edits": len(spans), "crlf": crlf, "bom": bom})


# ---- specs --------------------------------------------------------------------------------------------------------

def _resolve_existing(ctx: RunContext, args: ListFilesArgs | ReadFileArgs) -> Path:
    return paths.resolve(ctx, args.path)


LIST_FILES = Tool(
    name="list_files", args=ListFilesArgs, run=_list_files, authorize=_resolve_existing,
    read_only=True, idempotent=True,
    description=(
        "List a folder of the workspace as a tree: names, '/' for folders, '*' for executables, sizes. The workspace "
        "holds src/ (the project), build/ (your build folder) and .xbuild/ (the generated toolchain and every "
        f"command's log). Use it first to see the project's layout. At most {MAX_LIST_ENTRIES} entries; list a "
        "subfolder for more. Credential files are hidden."),
)
READ_FILE = Tool(
    name="read_file", args=ReadFileArgs, run=_read_file, authorize=_resolve_existing,
    read_only=True, idempotent=True,
    description=(
        f"Read a text file by line numbers (1-based), at most {READ_MAX_LINES} lines or {READ_MAX_CHARS} characters "
        "per call; a partial read ends with '[lines a–b of N — call read_file with offset=b+1 to continue]'. Use it "
        "for build files (CMakeLists.txt, configure.ac, meson.build, Makefile), sources, and the full logs of "
        f"commands under .xbuild/logs/. Lines longer than {LINE_MAX_CHARS} characters are cut. Binary files are "
        "refused; inspect them with run_command (file, readelf, nm)."),
)
WRITE_FILE = Tool(
    name="write_file", args=WriteFileArgs, run=_write_file, authorize=_authorize_write,
    destructive=True, idempotent=True, changes_files=True,
    description=(
        "Create or overwrite a whole file inside the workspace (parent folders are created; the write is atomic). "
        "Prefer edit_file for changing part of an existing file. Files under .xbuild/ (the generated toolchain) "
        "cannot be written. Returns whether the file was created or overwritten and its line count."),
)
EDIT_FILE = Tool(
    name="edit_file", args=EditFileArgs, run=_edit_file, authorize=_authorize_write,
    destructive=True, changes_files=True,
    description=(
        "Replace exact text in a file: each edit's `old` must occur exactly once in the original file (copy it "
        "from read_file, with its whitespace, and add neighbouring lines when it is not unique); edits must not "
        "overlap. Line endings and a UTF-8 BOM are kept. Returns a unified diff. Use it to fix build files or "
        "sources, e.g. to drop -Werror or guard glibc-only code."),
)
FILE_TOOLS = [LIST_FILES, READ_FILE, WRITE_FILE, EDIT_FILE]
