"""Read a WebAssembly module's bytes (the binary format's header and sections): whether it is a linked module (a
WASI command with `_start`, a reactor with `_initialize`) or a relocatable object (its `linking` section), which
modules it imports from, and whether it asks for dynamic linking (`dylink.0`). Hand-written: the format is a
header and length-prefixed sections, and no well-kept Python reader exists for it (wasmtime validates, but says
nothing about imports by module without instantiating); every count and length is bounded by the file's size."""

from __future__ import annotations

from crossbuild.proof.binary_formats import Artifact

MAGIC = b"\x00asm"
_CORE_VERSION = b"\x01\x00\x00\x00"
MAX_NAMES = 256  # import modules, `env` imports and exports kept per module
_IMPORT, _EXPORT, _CUSTOM = 2, 7, 0


class _Malformed(ValueError):
    pass


class _Reader:
    def __init__(self, data: bytes, start: int = 0, end: int | None = None):
        self.data, self.pos, self.end = data, start, len(data) if end is None else end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise _Malformed("it ends inside a section")
        self.pos += 1
        return self.data[self.pos - 1]

    def uleb(self) -> int:
        value = shift = 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise _Malformed("an integer longer than 5 bytes")

    def name(self) -> str:
        n = self.uleb()
        if self.pos + n > self.end:
            raise _Malformed("a name runs past its section")
        self.pos += n
        return self.data[self.pos - n:self.pos].decode("utf-8", "replace")

    def limits(self) -> None:
        flags = self.byte()
        self.uleb()
        if flags & 1:
            self.uleb()


def describe_wasm(f, rel: str, *, max_bytes: int) -> Artifact:
    data = f.read(max_bytes + 1)
    a = Artifact(path=rel, format="wasm", kind="unknown", machine="wasm32", bits=32, endian="little")
    if len(data) > max_bytes:
        a.problems.append("too large to check")
        return a
    if data[4:8] != _CORE_VERSION:
        a.problems.append(f"WebAssembly version {data[4:8].hex()}, expected a core module (01000000): a component "
                          "or an unknown version, which a WASI preview 1 runtime does not run")
        return a
    imports: dict[str, list[str]] = {}
    exports: list[str] = []
    custom: set[str] = set()
    try:
        r = _Reader(data, 8)
        while r.pos < len(data):
            section, size = r.byte(), r.uleb()
            end = r.pos + size
            if end > len(data):
                raise _Malformed(f"section {section} runs past the end of the file")
            body = _Reader(data, r.pos, end)
            if section == _CUSTOM:
                custom.add(body.name())
            elif section == _IMPORT:
                _read_imports(body, imports)
            elif section == _EXPORT:
                for _ in range(body.uleb()):
                    name = body.name()
                    body.byte()
                    body.uleb()
                    if len(exports) < MAX_NAMES or name in ("_start", "_initialize"):  # the entries always
                        exports.append(name)
            r.pos = end
    except _Malformed as e:
        a.problems.append(f"not a sound WebAssembly module: {e}")
        return a
    a.needed = sorted(imports)[:MAX_NAMES]
    if "linking" in custom:
        a.kind = "object"
    elif "dylink.0" in custom or "dylink" in custom:
        a.kind = "shared_library"
        a.problems.append("a dynamic-linking module (dylink.0): WASI preview 1 runs whole modules only")
    elif "_start" in exports:
        a.kind, a.linkage = "executable", "static"
    elif "_initialize" in exports:
        a.kind, a.linkage = "shared_library", "static"  # a reactor: a module a host instantiates and calls
    else:
        a.problems.append("a linked module with neither _start (a command) nor _initialize (a reactor)")
    if a.kind != "object":
        foreign = [m for m in imports if not m.startswith("wasi")]
        for module in foreign[:5]:
            names = ", ".join(imports[module][:5])
            a.problems.append(f"imports {names} from {module!r}, which no WASI runtime provides"
                              + (": symbols left undefined at link time" if module == "env" else ""))
    return a


def _read_imports(body: _Reader, imports: dict[str, list[str]]) -> None:
    for _ in range(body.uleb()):
        module, field = body.name(), body.name()
        kind = body.byte()
        if kind == 0:  # function: its type's index
            body.uleb()
        elif kind == 1:  # table: element type, limits
            body.byte()
            body.limits()
        elif kind == 2:  # memory
            body.limits()
        elif kind == 3:  # global: value type, mutability
            body.byte()
            body.byte()
        elif kind == 4:  # tag (exceptions)
            body.byte()
            body.uleb()
        else:
            raise _Malformed(f"an import of unknown kind {kind}")
        names = imports.setdefault(module, []) if len(imports) < MAX_NAMES or module in imports else None
        if names is not None and len(names) < MAX_NAMES:
            names.append(field)
