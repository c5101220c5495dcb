"""Compiler and linker flag variables given more than once on one command line, combined into one.

CMake (`-DCMAKE_C_FLAGS=...`), Meson (`-Dc_args=...`), configure and make (`CFLAGS=...`) each keep only the last
value of a variable given twice, so two fixes that each add flags (libdigidoc: `-Wno-error=implicit-function-
declaration`, then `-Wno-error=incompatible-pointer-types`) silently dropped the first, and the first error came
back. The values are joined in order, a flag already there not repeated, at the place of the first; every other
argument is left as it is.
"""

from __future__ import annotations

import re

# -DCMAKE_C_FLAGS[:STRING]=..., per-configuration and linker variants too
_CMAKE = re.compile(r"^-D(CMAKE_(?:C|CXX|OBJC|OBJCXX|ASM|CUDA)_FLAGS(?:_[A-Z]+)?|"
                    r"CMAKE_(?:EXE|SHARED|MODULE|STATIC)_LINKER_FLAGS(?:_[A-Z]+)?)(?::[A-Z]+)?=(.*)$", re.DOTALL)
_MESON = re.compile(r"^-D((?:c|cpp|objc|objcpp)_(?:args|link_args))=(.*)$", re.DOTALL)  # arrays: comma-separated
_VARIABLE = re.compile(r"^(CFLAGS|CXXFLAGS|CPPFLAGS|OBJCFLAGS|LDFLAGS|LIBS)=(.*)$", re.DOTALL)  # configure, make


def combined(argv: list[str]) -> list[str]:
    """ARGV with each flag variable given more than once given once, its values joined in order."""
    out: list[str] = []
    at: dict[tuple[str, str], int] = {}  # (kind, variable) -> its index in OUT
    words: dict[tuple[str, str], list[str]] = {}
    for arg in argv:
        kind, name, value, separator = _flag(arg)
        if kind is None:
            out.append(arg)
            continue
        key = (kind, name)
        parts = [p for p in (value.split(",") if separator == "," else value.split()) if p]
        if key not in at:
            at[key], words[key] = len(out), parts
            out.append(arg)
            continue
        words[key] += [p for p in parts if p not in words[key]]
        prefix = out[at[key]].split("=", 1)[0]
        out[at[key]] = f"{prefix}={separator.join(words[key])}"
    return out


def _flag(arg: str) -> tuple[str | None, str, str, str]:
    """(kind, variable, value, how its values are separated) of a flag variable's argument; kind None otherwise."""
    for kind, pattern, separator in (("cmake", _CMAKE, " "), ("meson", _MESON, ","), ("variable", _VARIABLE, " ")):
        m = pattern.match(arg)
        if m and not (kind == "meson" and m.group(2).lstrip().startswith("[")):  # a list literal: left as it is
            return kind, m.group(1), m.group(2), separator
    return None, "", "", ""
