"""Where a run's time went: its commands by what they did (configure, build, install, test), the dependencies it
built, the model's turns, and the verdict by its own phases (clean rebuild, scan, tests, probes: verify.py records
them). What `runs show` prints, and what a speed comparison with a build by hand reads."""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
from pathlib import PurePosixPath

from crossbuild.env.recipes import CMAKE_NOT_CONFIGURE
from crossbuild.trace.runs import command_of

_CONFIGURE_PROGRAMS = {"configure", "autoreconf", "autogen.sh", "bootstrap", "bootstrap.sh", "qmake"}
_BUILD_PROGRAMS = {"make", "gmake", "ninja", "samu"}
_TEST_GOALS = {"check", "test", "tests"}
_SEGMENTS = re.compile(r"&&|\|\||;")
COMMAND_PHASES = ("configure", "build", "install", "test", "other commands")


def command_phase(command: str) -> str:
    """What a shell command line did, read from its words: the first part of a compound line (`cd build && make`)
    that is a configure, build, install or test decides; anything else is "other commands"."""
    for segment in _SEGMENTS.split(command):
        phase = _segment_phase(segment)
        if phase != "other commands":
            return phase
    return "other commands"


def _segment_phase(segment: str) -> str:
    try:
        words = shlex.split(segment)
    except ValueError:
        return "other commands"
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):  # VAR=value before the program
        words.pop(0)
    if not words:
        return "other commands"
    program, args = PurePosixPath(words[0]).name, words[1:]
    if program == "cmake":
        if "--install" in args:
            return "install"
        return "build" if "--build" in args else "other commands" if CMAKE_NOT_CONFIGURE & set(args) \
            else "configure"
    if program == "meson":
        return {"setup": "configure", "configure": "configure", "compile": "build", "install": "install",
                "test": "test"}.get(args[0] if args else "", "other commands")
    if program == "ctest":
        return "test"
    if program in _CONFIGURE_PROGRAMS:
        return "configure"
    if program in _BUILD_PROGRAMS:
        goals = {a for a in args if not a.startswith("-") and "=" not in a}
        if "install" in goals:
            return "install"
        return "test" if goals & _TEST_GOALS else "build"
    return "other commands"


def run_phases(db: sqlite3.Connection, run_id: str) -> dict[str, float]:
    """Seconds per phase of the run RUN_ID, in the order a build meets them, phases that took no time left out.
    The last verdict's phases are "verdict: <phase>" (a verdict recorded before phases were has none); "the rest"
    is the run's wall time less all of these: earlier verdicts, the workspace's preparation, crossbuild itself."""
    seconds: dict[str, float] = dict.fromkeys(COMMAND_PHASES, 0.0)
    seconds |= {"dependencies": 0.0, "other tools": 0.0}
    for row in db.execute("SELECT name, raw_arguments, duration_s FROM tool_calls WHERE run_id=?", (run_id,)):
        took = float(row["duration_s"] or 0.0)
        if row["name"] == "run_command":
            seconds[command_phase(command_of(row["raw_arguments"]) or "")] += took
        elif row["name"] == "build_dependency":
            seconds["dependencies"] += took
        elif row["name"] not in ("finish", "verify"):  # a verdict's time is told by its phases below
            seconds["other tools"] += took
    seconds["model"] = float(db.execute("SELECT COALESCE(SUM(latency_s), 0) FROM model_calls WHERE run_id=?",
                                        (run_id,)).fetchone()[0])
    run = db.execute("SELECT wall_s, verify_json FROM runs WHERE id=?", (run_id,)).fetchone()
    try:
        verdict = json.loads(run["verify_json"] or "null") if run else None
    except ValueError:
        verdict = None
    parts = verdict.get("seconds") if isinstance(verdict, dict) else None
    for name, took in (parts.items() if isinstance(parts, dict) else ()):
        if isinstance(took, (int, float)):
            seconds[f"verdict: {name}"] = float(took)
    if run and run["wall_s"]:
        seconds["the rest"] = float(run["wall_s"]) - sum(seconds.values())
    return {k: round(v, 1) for k, v in seconds.items() if v >= 0.05}
