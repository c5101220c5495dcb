"""Host readiness checks for `crossbuild doctor`: each tool is OK, or missing with the exact command that fixes it."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from crossbuild.env import sandbox
from crossbuild.env.musl_sysroot import sysroot_for
from crossbuild.env.toolchain import qemu_sysroot
from crossbuild.foundation import host
from crossbuild.foundation.targets import TARGETS


@dataclass
class Check:
    name: str
    status: str  # ok | missing | warn
    detail: str
    required: bool = True


def _version(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if out.returncode == 0 and text else None


def _tool(name: str, fix: str, version_args=("--version",), required=True, minimum: tuple | None = None) -> Check:
    path = host.find_tool(name)
    if not path:
        return Check(name, "missing", f"not found; fix: {fix}", required)
    ver = _version([path, *version_args]) or "?"
    if minimum:
        m = re.search(r"(\d+)\.(\d+)", ver)
        if m and (int(m.group(1)), int(m.group(2))) < minimum:
            return Check(name, "missing", f"{ver} at {path} is older than {'.'.join(map(str, minimum))}; fix: {fix}",
                         required)
    return Check(name, "ok", f"{ver} ({path})", required)


def run_checks() -> list[Check]:
    checks: list[Check] = []
    zig = host.zig_executable()
    if zig:
        checks.append(Check("zig", "ok", f"{_version([str(zig), 'version'])} ({zig})"))
    else:
        checks.append(Check("zig", "missing", "fix: pip install ziglang==0.17.1"))
    checks.append(_tool("cmake", "apt-get install cmake (or pip install 'cmake<4')", minimum=(3, 16)))
    checks.append(_tool("ninja", "pip install ninja"))
    checks.append(_tool("meson", "pip install meson", minimum=(1, 0)))
    checks.append(_tool("make", "apt-get install make"))
    checks.append(_tool("pkg-config", "apt-get install pkgconf"))
    checks.append(_tool("autoreconf", "apt-get install autoconf automake libtool", required=False))
    checks.append(_tool("libtoolize", "apt-get install libtool", required=False))
    checks.append(_tool("autopoint", "apt-get install autopoint (autoreconf runs it for gettext projects)",
                        required=False))
    checks.append(_tool("cc", "apt-get install gcc (the build machine's compiler, for CC_FOR_BUILD)"))
    wine = host.find_wine()
    checks.append(Check("wine64", "ok", f"{_version([wine, '--version']) or '?'} ({wine}): Windows test programs run "
                        "under it", False) if wine else Check(
        "wine64", "missing", "Windows programs are scanned only; fix: apt-get install --no-install-recommends wine64",
        False))
    site = host.wasmtime_site()
    checks.append(Check("wasmtime", "ok", f"the Python package ({site}): WebAssembly test programs run under it",
                        False) if site else Check(
        "wasmtime", "missing", "WebAssembly modules are scanned only; fix: pip install wasmtime", False))
    for qemu in sorted({t.qemu for t in TARGETS.values() if t.qemu}):
        checks.append(_tool(qemu, "apt-get install qemu-user", version_args=("-version",), required=False))
    # the one crossbuild prefers: a test's LD_PRELOAD for its target program never reaches a static qemu's host loader
    checks.append(_tool("qemu-aarch64-static", "apt-get install qemu-user-static (a test that preloads a library "
                        "for its target program fails under the dynamic qemu)", version_args=("-version",),
                        required=False))
    for t in (TARGETS["aarch64-linux-gnu"], TARGETS["riscv64-linux-gnu"], TARGETS["arm-linux-gnueabihf"]):
        root = qemu_sysroot(t)
        ok = (root / "lib").exists()
        checks.append(Check(f"glibc runtime {t.debian_arch}", "ok" if ok else "warn",
                            str(root) if ok else f"dynamic glibc test programs cannot run; fix: apt-get install "
                                            f"libc6-{t.debian_arch}-cross", required=False))
    for name in ("aarch64-linux-musl", "x86_64-linux-musl", "riscv64-linux-musl", "arm-linux-musleabihf"):
        arch = TARGETS[name].arch
        root = sysroot_for(arch)
        checks.append(Check(f"musl loader {arch}", "ok" if root else "warn",
                            str(root) if root else f"dynamic musl test programs cannot run under qemu; fix: "
                                                   f"crossbuild musl-loader {name}", required=False))
    status = sandbox.probe(refresh=True)
    # required: without it builds are refused unless the user passes --sandbox none
    checks.append(Check("sandbox", "ok" if status.backend == "bubblewrap" else "missing",
                        f"{status.backend}: {status.reason}" if status.backend == "bubblewrap" else
                        f"none: {status.reason}; builds are refused without one unless you pass --sandbox none"))
    checks.append(Check("sandbox limits", "ok" if status.cgroup else "warn",
                        f"cgroups: {status.cgroup}" if status.cgroup else
                        "no writable cgroup: memory and process limits are per process (rlimits) only",
                        required=False))
    cache = host.cache_root()
    cache.mkdir(parents=True, exist_ok=True)
    free_gb = shutil.disk_usage(cache).free / 1e9
    checks.append(Check("disk", "ok" if free_gb >= 5 else "warn",
                        f"{free_gb:.1f} GB free for {host.zig_caches()} (zig's cache grows ~1 GB per target)",
                        required=False))
    return checks
