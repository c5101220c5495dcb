"""An artifact's name as the corpus's Linux-style globs (`libz.so*`, `brotli`) name it, for targets whose files
are named otherwise (Windows, macOS, WebAssembly)."""

from __future__ import annotations

from crossbuild.foundation.targets import Target


def linux_style_names(name: str, target: Target) -> set[str]:
    """NAME and what the corpus's globs would call it on TARGET."""
    if target.is_windows:
        return windows_aliases(name)
    if target.binary_format == "macho":
        return macos_aliases(name)
    if target.is_wasm:
        return wasm_aliases(name)
    return {name}


def wasm_aliases(name: str) -> set[str]:
    """A WebAssembly artifact's name as the corpus's globs name it: `brotli.wasm` is `brotli`, and a static
    library `libz.a` is also the `libz.so` a Linux build makes (WASI has no shared libraries: the static one is
    the library it delivers)."""
    aliases = {name, name.removesuffix(".wasm")}
    if name.startswith("lib") and name.endswith(".a"):
        aliases.add(name[:-2] + ".so")
    return aliases


def windows_aliases(name: str) -> set[str]:
    """A Windows artifact's name as the corpus's Linux-style globs name it: `brotli.exe` is `brotli`, a DLL
    (`libz.dll`, `zlib1.dll`, MinGW's `libbrotlienc.dll`) is `lib<name>.so`, an MSVC-style `z.lib` is `libz.a`."""
    aliases = {name}
    stem, _, ext = name.rpartition(".")
    if ext.lower() == "exe":
        aliases.add(stem)
    elif ext.lower() == "dll":
        bare = stem.removeprefix("lib").rstrip("0123456789-")
        aliases |= {f"{stem}.so", f"lib{bare}.so"}
    elif ext.lower() == "lib":
        aliases.add(f"lib{stem.removeprefix('lib')}.a")
    return aliases


def macos_aliases(name: str) -> set[str]:
    """A macOS library's name as the corpus's Linux-style globs name it: `libz.1.dylib` is `libz.so.1`, a
    plugin `foo.bundle` is `foo.so`."""
    stem, dot, ext = name.partition(".")
    if not dot or not (name.endswith(".dylib") or name.endswith(".bundle")):
        return {name}
    version = ext.rsplit(".", 1)[0] if "." in ext else ""
    return {name, f"{stem}.so" + (f".{version}" if version else "")}
