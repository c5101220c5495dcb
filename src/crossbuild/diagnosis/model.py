"""One structured diagnosis of a failed configure, whatever build system's records it was read from: what failed
and where, what it looked for, and the project's switches that govern it, each with the argument that flips it."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

# Switches a diagnosis never offers, whoever declares them: the build system's own settings (CMAKE_*, Meson's
# built-ins), the toolchain and where things go; and values that are not a plain word (a path, another option)
_NOT_A_FEATURE = re.compile(r"^(CMAKE_|b_)|TOOLCHAIN|COMPILER|SYSROOT|LINKER|^(host|build|target|prefix|exec[-_]prefix|"
                            r"program[-_](prefix|suffix)|[a-z]*dir|cross[-_]file|native[-_]file|pkg[-_]config.*)$",
                            re.IGNORECASE)
_PLAIN_VALUE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")


def offered(name: str, value: str) -> bool:
    """Whether a diagnosis may offer setting the switch NAME to VALUE: a project feature, to a plain word."""
    return not _NOT_A_FEATURE.search(name) and bool(_PLAIN_VALUE.match(value))


@dataclass(frozen=True)
class Switch:
    name: str
    value: str  # what it is now (the cache's value, else the declared default)
    arg: str  # the argument that takes the failing branch away: -DUSE_TLS=OFF
    why: str  # the condition it governs and where: `if(USE_TLS)` at src/CMakeLists.txt:40
    declared: str = ""  # where the project declares it: src/CMakeLists.txt:12


@dataclass(frozen=True)
class Diagnosis:
    system: str  # cmake | meson | autotools
    failed: str  # the project's own call that failed: `pkg_check_modules(TLS REQUIRED gnutls)`
    where: str  # its file and line, workspace-relative
    message: str = ""  # the first line of the build system's own error
    chain: tuple[str, ...] = ()  # the project's calls that led there, outermost first: `src/x.cmake:9 need_tls()`
    missing: tuple[str, ...] = ()  # what it looked for and did not find, as build_dependency takes names
    not_found: tuple[str, ...] = ()  # the cache's *-NOTFOUND entries
    # build-machine programs it looked for and did not find (a generator: bison or byacc), the first preferred, as
    # provide_build_tool takes names
    programs: tuple[str, ...] = ()
    # dependencies earlier failed checks of the same run looked for, nearest first: configure went on past each, so
    # none was required alone and the error may be about any one of them (crypto backends); tried in turn when
    # what it looked for last cannot be built
    alternatives: tuple[str, ...] = ()
    switches: tuple[Switch, ...] = field(default_factory=tuple)
    record: str = ""  # what it was read from: "CMake's trace", "config.log"

    def to_dict(self) -> dict[str, Any]:
        """As JSON has it (lists), the same in a live result as in one read back from the trace."""
        return json.loads(json.dumps(asdict(self)))

    def summary(self) -> str:
        """Lines for a tool result: what failed where, what is missing, which switch would build without it."""
        lines = [f"diagnosis (from {self.record or self.system}): {self.failed} failed at {self.where}"
                 + (f", called from {' <- '.join(reversed(self.chain))}" if self.chain else "")]
        if self.missing:
            lines.append(f"  looked for and not found: {', '.join(self.missing)} (build_dependency may build it)")
        if self.alternatives:
            lines.append(f"  or any one of these, looked for before it and gone on past: "
                         f"{', '.join(self.alternatives)}")
        if self.programs:
            lines.append(f"  programs looked for and not found: {', '.join(self.programs)} (provide_build_tool "
                         "gives one)")
        for s in self.switches:
            facts = [f"now {s.value}"] * bool(s.value) + [f"declared at {s.declared}"] * bool(s.declared)
            lines.append(f"  governed by {s.name}{' (' + ', '.join(facts) + ')' if facts else ''}: {s.arg} takes "
                         f"this branch away ({s.why})")
        if not self.switches:
            lines.append("  no project switch governs this call")
        return "\n".join(lines)

