"""A failed CMake configure read from CMake's own records: its error's location (`CMake Error at FILE:LINE
(command)`), the JSON trace of the same configure run again (`--trace-format=json-v1`), the project's files and
the cache. From them: the chain of the project's calls that reached the failing command, what those calls looked
for (find_package, pkg_check_modules, find_path, check_include_file...), and the options (option(),
cmake_dependent_option(), cache BOOLs) tested by the if() branches around each call — so the switch that drops a
feature is found from the code, however the failure was worded."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crossbuild.diagnosis import cmake_lists
from crossbuild.diagnosis.model import Diagnosis, Switch, offered
from crossbuild.foundation import safefs

TRACE_MAX_BYTES = 512 << 20  # a big project's trace runs to tens of MB
LINE_MAX_BYTES = 256 << 10  # one traced command; longer ones are skipped, so memory stays bounded
ARGS_MAX = 2000
# the rerun's switches: variables expanded in each call's arguments, so a call names what it looked for
# (`find_package(Qt${QT_MAJOR_VERSION} ...)` is traced as find_package(Qt5 ...))
TRACE_ARGS = ("--trace-format=json-v1", "--trace-expand")
FILE_MAX_BYTES = 2 << 20
_ERROR_AT = re.compile(r"^CMake Error at (.+?):(\d+) \(([A-Za-z_][A-Za-z0-9_]*)\):\s*$", re.MULTILINE)
_CACHE_ENTRY = re.compile(r"^([A-Za-z0-9_.+-]+):([A-Z]+)=(.*)$", re.MULTILINE)
_PKG_KEYWORDS = {"REQUIRED", "QUIET", "NO_CMAKE_PATH", "NO_CMAKE_ENVIRONMENT_PATH", "IMPORTED_TARGET", "GLOBAL"}
_FINDS = {"find_package", "pkg_check_modules", "pkg_search_module", "find_path", "find_file", "check_include_file",
          "check_include_files", "check_include_file_cxx"}


def read(trace: tuple[Path, str], log: str, *, root: Path, source: str, cache: str | None) -> Diagnosis | None:
    """The diagnosis of the configure whose output is LOG. TRACE: (anchor, path below it) of the JSON trace of the
    same configure; ROOT: the workspace, SOURCE the project's folder below it; CACHE: CMakeCache.txt's text. None
    when CMake's error names no command the trace ran."""
    located = _error_location(log)
    cache_entries = {m[1]: (m[2], m[3]) for m in _CACHE_ENTRY.finditer(cache or "")}
    source_abs = str(root / source).rstrip("/") + "/"
    found = _chain_at(_records(*trace), located, source_abs)
    if not found:
        return None
    chain, options, finds = found
    own = [r for r in chain if r["file"].startswith(source_abs)]
    if not own:
        return None
    failing = own[-1]
    shown = [f"{_rel(r, root)}:{r['line']} {r['cmd']}()" for r in own[:-1]]
    files: dict[str, list[cmake_lists.Command]] = {}
    branches = [(r, b) for r in own for b in _branches(r, root, files)]
    missing = [name for r in reversed(own) for name in _looked_for(r)]
    if failing["cmd"] == "include" and failing["args"] and cmake_lists.is_name(str(failing["args"][0])):
        # a module by name that include() could not find (ECMSetupVersion), which a package provides
        missing.insert(0, f"{failing['args'][0]}.cmake")
    for _record, branch in branches:  # `if(NOT TLS_FOUND) message(FATAL_ERROR ...)`: what TLS looked for
        for condition, held in branch.conditions:
            for name, value in cmake_lists.switch_terms(condition.args, held).items():
                # only a find that ran: a `_FOUND` of a branch for another platform (SECURITY_FOUND) names none
                if name.endswith("_FOUND") and not value and (found := finds.get(name.removesuffix("_FOUND").upper())):
                    missing += _looked_for(found)
    # the cache's failed lookups, without CMake's own tools it did not need (CMAKE_DLLTOOL)
    not_found = [n for n, (_t, v) in cache_entries.items() if v.endswith("-NOTFOUND") and not n.startswith("CMAKE_")]
    if not missing:  # `if(NOT BACKEND) message(FATAL_ERROR ...)` after trying several: those the cache says failed
        missing = [name for r in finds.values() if r["cmd"] == "find_package"
                   for name in _looked_for(r) if any(n.upper().startswith(name.upper() + "_") for n in not_found)]
    return Diagnosis(
        system="cmake", failed=_call(failing), where=f"{_rel(failing, root)}:{failing['line']}",
        message=located[3] if located else "", chain=tuple(shown), missing=tuple(dict.fromkeys(missing)),
        not_found=tuple(not_found),
        switches=tuple(_switches(branches, options, cache_entries, root)), record="CMake's trace")


def _error_location(log: str) -> tuple[str, int, str, str] | None:
    """CMake's first located error: (file, line, command, the first line of its message)."""
    m = _ERROR_AT.search(log)
    if not m:
        return None
    after = [line.strip() for line in log[m.end():].splitlines() if line.strip()]
    return m[1], int(m[2]), m[3].lower(), after[0][:300] if after else ""


def _records(anchor: Path, rel: str) -> Iterator[dict[str, Any]]:
    """The trace's records, read without following a link the build may have put in the trace's place."""
    try:
        fd = safefs.open_regular(anchor, rel, max_bytes=TRACE_MAX_BYTES)
    except OSError:
        return
    with os.fdopen(fd, "rb") as f:
        while raw := f.readline(LINE_MAX_BYTES):
            if not raw.endswith(b"\n") and len(raw) == LINE_MAX_BYTES:  # no real command is that long: skipped
                while (rest := f.readline(LINE_MAX_BYTES)) and not rest.endswith(b"\n"):
                    pass
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("cmd"), str) and isinstance(record.get("file"), str) \
                    and isinstance(record.get("line"), int) and isinstance(record.get("args"), list) \
                    and len(record["args"]) <= ARGS_MAX:
                record["cmd"] = record["cmd"].lower()
                yield record


def _chain_at(records: Iterator[dict[str, Any]], located: tuple[str, int, str, str] | None, source_abs: str):
    """The calls that were open when the failing command ran, outermost first; the options declared until then
    (name -> (record, default)); and the project's find calls by the prefix of their result variables
    (pkg_check_modules(TLS ...) sets TLS_FOUND). The failing command is the located one; without a location, the
    first message(FATAL_ERROR|SEND_ERROR)."""
    open_calls: dict[int, dict[str, Any]] = {}  # global frame -> the last record at it
    options: dict[str, tuple[dict[str, Any], str]] = {}
    finds: dict[str, dict[str, Any]] = {}
    for r in records:
        frame = r.get("global_frame", r.get("frame", 1))
        if not isinstance(frame, int):
            continue
        for deeper in [k for k in open_calls if k > frame]:
            del open_calls[deeper]
        open_calls[frame] = r
        args = [str(a) for a in r["args"]]
        if r["cmd"] in ("option", "cmake_dependent_option") and args and r["file"].startswith(source_abs):
            options.setdefault(args[0], (r, args[2] if len(args) > 2 else "OFF"))
        elif r["cmd"] == "set" and len(args) > 3 and args[2] == "CACHE" and args[3] == "BOOL" \
                and r["file"].startswith(source_abs):
            options.setdefault(args[0], (r, args[1]))
        elif r["cmd"] in _FINDS and args and r["file"].startswith(source_abs):
            finds[args[0].upper()] = r
        if _is_failure(r, args, located, source_abs):
            return [open_calls[k] for k in sorted(open_calls)], options, finds
    return None


def _is_failure(r: dict[str, Any], args: list[str], located: tuple[str, int, str, str] | None,
                source_abs: str) -> bool:
    if located is None:
        return r["cmd"] == "message" and bool(args) and args[0] in ("FATAL_ERROR", "SEND_ERROR")
    file, line, cmd, _ = located  # CMake names a file below the top source folder relative to it
    return r["line"] == line and r["cmd"] == cmd and r["file"] == (file if file.startswith("/") else source_abs + file)


def _rel(record: dict[str, Any], root: Path) -> str:
    return os.path.relpath(record["file"], root)


def _call(record: dict[str, Any]) -> str:
    args = " ".join(str(a) for a in record["args"])
    return f"{record['cmd']}({args[:160]}{' ...' if len(args) > 160 else ''})"


def _branches(record: dict[str, Any], root: Path, files: dict[str, list[cmake_lists.Command]]):
    rel = _rel(record, root)
    if rel not in files:
        text = safefs.read_text_or_none(root, rel, max_bytes=FILE_MAX_BYTES)
        files[rel] = cmake_lists.commands(text) if text else []
    return cmake_lists.enclosing_branches(files[rel], record["line"])


def _looked_for(record: dict[str, Any]) -> list[str]:
    """What a find call looked for, as build_dependency takes names: a CMake package, pkg-config modules
    (without their version constraints), a header."""
    args = [str(a) for a in record["args"]]
    cmd = record["cmd"]
    if cmd not in _FINDS or not args:
        return []
    if cmd == "find_package":
        return [args[0]]
    if cmd in ("pkg_check_modules", "pkg_search_module"):
        return [re.split(r"[<>=]", a, maxsplit=1)[0] for a in args[1:] if a not in _PKG_KEYWORDS and a.strip()]
    if cmd.startswith("check_include"):
        return [h for h in args[0].split(";") if h][-1:]
    names = args[args.index("NAMES") + 1:] if "NAMES" in args else args[1:2]
    return [n for n in names[:1] if re.search(r"\.(h|hh|hpp|hxx)$", n)]


def _switches(branches, options: dict[str, tuple[dict[str, Any], str]], cache: dict[str, tuple[str, str]],
              root: Path) -> Iterator[Switch]:
    """The declared options the branches around the failing calls test, each with the value that avoids them."""
    seen: set[str] = set()
    for record, branch in branches:
        for condition, held in branch.conditions:
            for name, value in cmake_lists.switch_terms(condition.args, held).items():
                declared = options.get(name)
                in_cache = cache.get(name, ("", ""))
                if name in seen or (not declared and in_cache[0] != "BOOL") or not offered(name, "OFF"):
                    continue
                seen.add(name)
                shown = f"`{condition.name}({' '.join(condition.args)})` at {_rel(record, root)}:{condition.line}"
                yield Switch(name=name, value=in_cache[1] or (declared[1] if declared else ""),
                             arg=f"-D{name}={'OFF' if value else 'ON'}",
                             why=shown + ("" if held else ", which was false"),
                             declared=f"{_rel(declared[0], root)}:{declared[0]['line']}" if declared else "")
