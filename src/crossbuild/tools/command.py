"""run_command: one build-tool invocation, no shell, every path argument checked, run in the sandbox with the
BuildEnv; the model gets the exit status first and the head and tail of the output, the full log stays on disk."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from pathlib import Path

from pydantic import Field

from crossbuild.kb.base import error_fingerprint
from crossbuild.proof import target_run
from crossbuild.tools import diagnose, foreign_objects, paths
from crossbuild.tools.base import BadArguments, ErrorType, PermissionDenied, Tool, ToolArgs, ToolResult
from crossbuild.tools.context import CommandRecord, RunContext
from crossbuild.tools.knowledge import attach_knowledge

DEFAULT_TIMEOUT_S = 900
MAX_TIMEOUT_S = 3600
HEAD_LINES = 25
TAIL_LINES = 60
OUTPUT_MAX_CHARS = 7_000
OUTPUT_LINE_MAX_CHARS = 400

BUILD_TOOLS = frozenset({
    "cmake", "ctest", "make", "gmake", "ninja", "meson", "autoreconf", "autoconf", "automake", "aclocal",
    "autoheader", "autopoint", "libtoolize", "pkg-config", "pkgconf", "file", "readelf", "nm", "objdump", "strings",
    "size", "ls", "cat", "head", "tail", "grep", "find", "wc", "diff", "patch", "sed", "mkdir", "rm", "cp", "mv",
    "touch", "chmod", "ln", "tar", "test", "true", "echo", "which",
})
# Commands that only look: no knowledge is attached to their failures, and a clean rebuild does not replay them.
INSPECTION_TOOLS = frozenset({"file", "readelf", "nm", "objdump", "strings", "size", "ls", "cat", "head", "tail",
                              "grep", "find", "wc", "diff", "test", "true", "echo", "which", "pkg-config", "pkgconf"})
KB_LOG_BYTES = 512 * 1024  # how much of a failed command's log (its end) is matched against the knowledge base
FINGERPRINT_LINES = 400  # the first error line among a failed build's last lines is its fingerprint
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "env", "xargs", "nohup", "sudo", "su", "eval", "exec"})
NO_SHELL = ("run_command runs one program without a shell, so {what} is not supported (it would not do what you "
            "expect). Make one run_command call per program; use cwd= instead of `cd`; the full output of every "
            "command is saved to a log you can page with read_file, so no redirection is needed")
# Path-valued parts of an argument: after `--opt=`, `-DNAME=`, `-DNAME:TYPE=`, glued short options (-I/x, -L/x,
# -isystem/x), and inside comma/colon lists (-Wl,-rpath,/x; PATH-like a:b).
_OPTION_NAME = re.compile(r"^-{1,2}[A-Za-z][A-Za-z0-9_+-]*?(?=[/.=:,~]|$)")
_SHORT_GLUED = ("-isystem", "-iquote", "-idirafter", "-include", "-imacros", "-I", "-L", "-B", "-F", "-o")
ALWAYS_ALLOWED = ("/dev/null",)


class RunCommandArgs(ToolArgs):
    command: str = Field(min_length=1, max_length=8_000,
                         description="One command line, e.g. 'cmake -S src -B build' or 'make -C build -j2'. "
                                     "Parsed like a shell would split words; no pipes, &&, redirection or $VARS.")
    cwd: str = Field(".", description="Folder to run in, relative to the workspace root (made first when it does "
                                      "not exist, e.g. a new build folder).")
    env: dict[str, str] = Field(default_factory=dict, max_length=20,
                                description="Extra environment variables for this command only, e.g. "
                                            "{\"CFLAGS\": \"-O2\"} or {\"CROSSBUILD_NO_WERROR\": \"1\"} (drops "
                                            "-Werror in the compiler wrapper), or {\"CROSSBUILD_EMULATE_TARGET\": "
                                            "\"1\"} (programs built for the target that the command starts, such "
                                            "as a generator compiled with $CC, run under the target's emulator), "
                                            "or {\"CROSSBUILD_FORCE_INCLUDE\": \"sys/types.h\"} (headers every "
                                            "C and C++ compile includes first, space-separated). "
                                            "The toolchain's own variables (CC, PATH, PKG_CONFIG...) cannot be "
                                            "changed.")
    timeout: int = Field(DEFAULT_TIMEOUT_S, ge=1, le=MAX_TIMEOUT_S,
                         description=f"Seconds before the command is killed (default {DEFAULT_TIMEOUT_S}, "
                                     f"at most {MAX_TIMEOUT_S}).")


@dataclasses.dataclass(frozen=True)
class AuthorizedCommand:
    argv: list[str]
    cwd: Path
    env: dict[str, str]


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ENV_OVERRIDABLE = frozenset({"CROSSBUILD_NO_WERROR", "CROSSBUILD_PIE"})
ENV_REFUSED = frozenset({"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "PYTHONPATH",
                         "PYTHONSTARTUP", "PERL5OPT", "PERL5LIB", "GCONV_PATH", "MAKESHELL", "CONFIG_SHELL",
                         # crossbuild's own: which loader and C++ runtime the wrapper links programs with
                         "CROSSBUILD_PROGRAM_LOADER", "CROSSBUILD_SHARED_CXX_RUNTIME"})


def _authorize_env(ctx: RunContext, env: dict[str, str], cwd: Path) -> dict[str, str]:
    build_env = ctx.toolchain.env.vars
    for name, value in env.items():
        if not _ENV_NAME.match(name):
            raise BadArguments(f"{name!r} is not a valid environment variable name.")
        if name in ENV_REFUSED:
            raise PermissionDenied(f"setting {name} is refused: it changes how programs are loaded or which shell "
                                   "runs, not what is built.", hint="pass build options as arguments instead")
        if name in build_env and name not in ENV_OVERRIDABLE:
            raise PermissionDenied(f"{name} is set by the cross toolchain ({build_env[name][:80]}); overriding it "
                                   "would bypass the target's toolchain.",
                                   hint="pass flags with CFLAGS/CXXFLAGS/LDFLAGS or build-system arguments instead")
        for cand in path_candidates(value):
            if cand not in ALWAYS_ALLOWED:
                paths.resolve(ctx, cand, cwd=cwd, roots=(ctx.root, ctx.prefix), must_exist=False)
    return dict(env)


def split_command(command: str) -> list[str]:
    """shlex words; shell operators become their own tokens so they can be refused, not passed on."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="|&;<>()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError as e:
        raise BadArguments(f"cannot split the command: {e}.",
                           hint="close every quote; quote arguments that contain spaces") from None


def path_candidates(arg: str) -> list[str]:
    """The parts of one argument that name a path (absolute, home-relative, or climbing with '..')."""
    found: list[str] = []
    _collect(arg, found, 0)
    return found


def _collect(text: str, found: list[str], depth: int) -> None:
    if not text or depth > 6:
        return
    if any(c.isspace() for c in text):  # a quoted value such as CFLAGS="-I/usr/include -O2"
        for word in text.split():
            _collect(word, found, depth + 1)
        return
    if text.startswith("-"):
        for short in _SHORT_GLUED:
            if text.startswith(short) and len(text) > len(short) and text[len(short)] in "/.~":
                _collect(text[len(short):], found, depth + 1)
                return
        m = _OPTION_NAME.match(text)
        rest = text[m.end():] if m else text.lstrip("-")
        rest = re.sub(r"^:[A-Za-z]+(?==)", "", rest)  # -DVAR:PATH=/x
        if rest.startswith(("=", ",")):
            rest = rest[1:]
        elif not rest.startswith(("/", "~", ".")):
            return
        for piece in re.split(r"[,:;]", rest):
            if piece:
                _collect(piece, found, depth + 1)
        return
    if "=" in text and not text.startswith(("/", ".", "~")):  # NAME=value (make variables, env-like)
        name, _, value = text.partition("=")
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name):
            _collect(value, found, depth + 1)
            return
    if text.startswith(("/", "~")) or text == ".." or text.startswith("../") or "/../" in text or text.endswith("/.."):
        for piece in text.split(":") if text.count(":") and not text.startswith("~") else [text]:
            if piece.startswith(("/", "~")) or ".." in Path(piece).parts:
                found.append(piece)


def _authorize(ctx: RunContext, args: RunCommandArgs) -> AuthorizedCommand:
    cwd = paths.resolve(ctx, args.cwd, must_exist=False)
    if not os.path.lexists(cwd):  # made by _run, as a model wants: where a new file may go, a new folder may too
        cwd = paths.resolve(ctx, args.cwd, must_exist=False, write=True)
    elif not cwd.is_dir():
        raise BadArguments(f"cwd {args.cwd!r} is not a folder.", hint="cwd is a folder relative to the workspace")
    argv = split_command(args.command)
    if not argv:
        raise BadArguments("the command is empty.")
    for tok in argv:
        if tok and all(c in "|&;<>()" for c in tok):
            raise PermissionDenied(NO_SHELL.format(what=f"`{tok}`") + ".",
                                   hint="split it into separate run_command calls")
        if "`" in tok or "$(" in tok:
            raise PermissionDenied(NO_SHELL.format(what="command substitution") + ".")
        if re.search(r"\$\{?[A-Za-z_]", tok):
            raise PermissionDenied(
                f"`{tok}` uses a shell variable, but there is no shell to expand it.",
                hint="the BuildEnv (CC, CXX, AR, PKG_CONFIG, CMAKE_TOOLCHAIN_FILE, CROSSBUILD_PREFIX, ...) is already "
                     "in the environment of every command; write literal values otherwise")
    prog = argv[0]
    roots = (ctx.root, ctx.prefix)
    if "/" in prog:
        real = paths.resolve(ctx, prog, cwd=cwd, roots=roots)
        if not real.is_file() or not os.access(real, os.X_OK):
            raise BadArguments(f"{prog} is not an executable file.",
                               hint="scripts need their executable bit (chmod +x FILE); run them as ./script")
    elif prog in SHELLS:
        raise PermissionDenied(
            f"`{prog}` is not allowed: run_command has no shell and does not start one.",
            hint="run the program directly (./configure, ./autogen.sh, make ...), one run_command call each")
    elif prog not in BUILD_TOOLS:
        hint = ("the compiler is the zig wrapper already set as CC/CXX; let the build system call it"
                if prog in ("cc", "gcc", "g++", "clang", "clang++", "c++", "zig", "ld") else
                "run scripts that are inside the workspace by path (./configure, src/autogen.sh)")
        raise PermissionDenied(f"`{prog}` is not on the build-tool allow-list.",
                               hint=f"{hint}; allowed: {', '.join(sorted(BUILD_TOOLS))}")
    if prog == "find" and any(a in ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint") for a in argv):
        raise PermissionDenied("find may only search here (-exec, -delete and -fprint are refused).",
                               hint="use find to locate files, then act on them with separate calls")
    if Path(prog).name not in INSPECTION_TOOLS:  # a step the clean rebuild replays
        paths.refuse_records(ctx, cwd, argv[1:])
    for arg in argv[1:]:
        for cand in path_candidates(arg):
            if cand in ALWAYS_ALLOWED:
                continue
            paths.resolve(ctx, cand, cwd=cwd, roots=roots, must_exist=False)
        if not arg.startswith("-") and "=" not in arg and os.path.lexists(cwd / arg):
            paths.resolve(ctx, arg, cwd=cwd, roots=roots)  # catches symlinks out of the workspace and credentials
    return AuthorizedCommand(argv=argv, cwd=cwd, env=_authorize_env(ctx, args.env, cwd))


def _make_cwd(ctx: RunContext, cwd: Path) -> str | None:
    """The missing folder CWD made (paths.make_folder) and recorded as a `mkdir -p` step, so a clean rebuild makes
    it too; its shown path, or None when it was there."""
    if (shown := paths.make_folder(ctx, cwd)) is not None:
        ctx.record(CommandRecord(argv=["mkdir", "-p", shown], cwd=".", exit_code=0, stopped=None, log="",
                                 duration_s=0.0))
    return shown


def _run(ctx: RunContext, args: RunCommandArgs, auth: AuthorizedCommand) -> ToolResult:
    stem = re.sub(r"[^A-Za-z0-9]+", "-", Path(auth.argv[0]).name).strip("-") or "cmd"
    made = _make_cwd(ctx, auth.cwd)
    log = ctx.next_log(stem)
    limits = dataclasses.replace(ctx.command_limits, timeout_s=float(args.timeout))
    ctx.ready_to_build()
    box = target_run.build_box(ctx.sandbox, ctx.toolchain.target, ctx.toolchain.workspace, auth.env)
    foreign = foreign_objects.ForeignObjectWatch(ctx.toolchain.workspace, ctx.toolchain.target) \
        if ctx.toolchain.target.binary_format == "elf" else None  # no build-machine objects to tell apart elsewhere
    res = box.run(auth.argv, cwd=auth.cwd, env={**ctx.toolchain.env.as_dict(), **auth.env}, log_path=log,
                  limits=limits, cancel=ctx.cancel, stop_when=foreign)
    shown_log = paths.display(ctx, log.resolve())
    whole, tail = _log_end(log)  # read once: the ignored-errors check and the knowledge match both use it
    ignored = _ignored_objects(whole) if res.ok else []
    stopped = res.stopped or ("ignored_errors" if ignored else None)  # not a success: no clean rebuild replays it
    ctx.record(CommandRecord(argv=auth.argv, cwd=paths.display(ctx, auth.cwd), exit_code=res.returncode,
                             stopped=stopped, log=shown_log, duration_s=res.duration_s, env=auth.env))
    stops = {"timeout": f"[timed out after {args.timeout}s]", "cancelled": "[cancelled]",
             "output_limit": f"[stopped: output passed {ctx.command_limits.max_output_bytes >> 20} MB]",
             foreign_objects.STOPPED: f"[stopped: {foreign.finding if foreign else ''}]"}
    status = (f"[exit=0, but make ignored a missing command in the recipes of {len(ignored)} object "
              f"file{'s' if len(ignored) > 1 else ''}: {ignored[0]}]") if ignored else \
        stops.get(res.stopped or "", f"[exit={res.returncode}]")
    body, lines = summarize_log(log, skip_header=2)
    made_note = f"(cwd {made}/ did not exist: made first, as `mkdir -p {made}`)\n" if made else ""
    message = f"{status} {shlex.join(auth.argv)}  ({res.duration_s:.1f}s)\n{made_note}{body}\n" \
              f"[full log: {shown_log} ({lines} lines) — page it with read_file]"
    data = {"exit_code": res.returncode, "stopped": res.stopped, "log": shown_log, "log_lines": lines,
            "argv": auth.argv, "env": auth.env, "cwd": paths.display(ctx, auth.cwd),
            "duration_s": round(res.duration_s, 3), "sandbox": res.backend}
    if ignored:
        data["ignored_objects"] = ignored[:20]
    if res.ok and not ignored:
        return ToolResult(ok=True, message=message, data=data)
    error_type = {"timeout": ErrorType.TIMEOUT, "cancelled": ErrorType.CANCELLED}.get(res.stopped or "",
                                                                                   ErrorType.COMMAND_FAILED)
    hint = (diagnose.failure_hint(auth.argv, whole, shown_log) if error_type == ErrorType.COMMAND_FAILED else
            "raise timeout (at most 3600) or build less at once" if error_type == ErrorType.TIMEOUT else None)
    if Path(auth.argv[0]).name in INSPECTION_TOOLS:  # a failed grep or ls is an answer, not a build failure
        return ToolResult(ok=False, error_type=error_type, message=message, hint=hint, data=data)
    if tests_here := diagnose.tests_started_here(auth.argv, whole):  # verify's job, not a fix to look up
        return ToolResult(ok=False, error_type=error_type, message=message, data=data, hint=tests_here)
    if error_type == ErrorType.COMMAND_FAILED:
        try:
            diagnosis = diagnose.failed_configure(ctx, auth.argv, auth.cwd, auth.env, "\n".join(whole),
                                                  took_s=res.duration_s)
        except diagnose.DiagnosisFailed as e:  # the command's own result stands
            diagnosis, message = None, f"{message}\n(its records could not be read: {e})"
        if diagnosis:
            data["diagnosis"] = ctx.last_diagnosis = diagnosis.to_dict()
            message += "\n" + diagnosis.summary()
            hint = diagnose.hint_for(diagnosis) or hint
        message, hint = attach_knowledge(ctx, "\n".join(tail), message, hint, data)
    return ToolResult(ok=False, error_type=error_type, message=message, hint=hint, data=data,
                      fingerprint=error_fingerprint("\n".join(whole[-FINGERPRINT_LINES:]) or message))


# make's line for a recipe whose command was not found (Error 127) and whose failure it was told to ignore
# (`-cmd`, `make -i`), when the target is an object file: the compiler never ran, the step "succeeded" and built
# nothing (lua5.4's Debian patch compiles through $(LIBTOOL), which only debian/rules sets). A `-ldconfig` or
# `-rm` that fails names no object file and stays a success.
_IGNORED_OBJECT = re.compile(r"^make(?:\[\d+\])?: \[[^\]\n]*?:\d+: ([^\]\n]+\.(?:o|lo|obj))\] Error 127 \(ignored\)",
                             re.MULTILINE)


def _ignored_objects(lines: list[str]) -> list[str]:
    """The object files whose failed recipes make ignored, from the end of the log (its LINES)."""
    return list(dict.fromkeys(m.group(1) for m in _IGNORED_OBJECT.finditer("\n".join(lines))))


def _log_end(log: Path) -> tuple[list[str], list[str]]:
    """The last KB_LOG_BYTES of a log as lines: all of them, and without the command line or a cut first line."""
    with open(log, "rb") as f:  # crossbuild's own log, in a folder builds cannot write
        start = max(0, os.fstat(f.fileno()).st_size - KB_LOG_BYTES)
        f.seek(start)
        lines = f.read().decode(errors="replace").split("\n")
    return lines, lines[2:] if start == 0 else lines[1:]


def summarize_log(log: Path, *, skip_header: int = 0) -> tuple[str, int]:
    """Head and tail of a log within the output budget, without loading it whole; and its line count."""
    size = log.stat().st_size
    lines = 0
    with open(log, "rb") as f:
        while chunk := f.read(1 << 20):
            lines += chunk.count(b"\n")
        f.seek(0)
        head_bytes = f.read(64 * 1024)
        f.seek(max(0, size - 64 * 1024))
        tail_bytes = f.read()
    head = head_bytes.decode(errors="replace").splitlines()[skip_header:]
    body_lines = max(0, lines - skip_header)
    if size <= 64 * 1024 and len(head) <= HEAD_LINES + TAIL_LINES:
        chosen, omitted = head, 0
    else:
        tail = tail_bytes.decode(errors="replace").splitlines()
        if size > 64 * 1024:
            tail = tail[1:]  # the first line of the tail window is probably partial
        chosen = head[:HEAD_LINES] + ["\0"] + tail[-TAIL_LINES:]
        omitted = max(0, body_lines - HEAD_LINES - len(tail[-TAIL_LINES:]))
    out: list[str] = []
    budget = OUTPUT_MAX_CHARS
    for line in chosen:
        if line == "\0":
            out.append(f"[... {omitted} lines omitted ...]")
            continue
        if len(line) > OUTPUT_LINE_MAX_CHARS:
            line = line[:OUTPUT_LINE_MAX_CHARS] + " [...]"
        out.append(line)
    text = "\n".join(out)
    if len(text) > budget:  # keep the end: errors and the final status are there
        text = "[... output cut ...]\n" + text[-budget:].split("\n", 1)[-1]
    return text if text.strip() else "(no output)", lines


RUN_COMMAND = Tool(
    name="run_command", args=RunCommandArgs, run=_run, authorize=_authorize,
    destructive=True,
    description=(
        "Run one build-tool command in the sandbox with the cross toolchain's environment (CC, CXX, AR, "
        "PKG_CONFIG, CMAKE_TOOLCHAIN_FILE, CONFIG_SITE are set for the target; do not pass host paths). argv[0] must "
        f"be a build tool ({', '.join(sorted(BUILD_TOOLS - {'true', 'test', 'echo', 'which'}))}) or a script inside "
        "the workspace such as ./configure. No shell: no pipes, &&, redirection or $VARS; use cwd= instead of cd. "
        "Every path argument must be inside the workspace or the per-target prefix. Typical: "
        "'cmake -S src -B build', 'cmake --build build -j2', "
        "'meson setup build src --cross-file .xbuild/meson-cross.ini', '../src/configure --host=...' with cwd='build'. "
        "The result starts with [exit=N] (or [timed out after Ns]), "
        f"then the first {HEAD_LINES} and last {TAIL_LINES} lines of output with '[... N lines omitted ...]' between "
        f"(lines over {OUTPUT_LINE_MAX_CHARS} characters are cut; past {OUTPUT_MAX_CHARS} characters in all only the "
        "end is kept, marked '[... output cut ...]'), and names the full log under .xbuild/logs/ with its line count "
        f"for read_file. Timeout: default {DEFAULT_TIMEOUT_S}s, at most {MAX_TIMEOUT_S}s."),
)
