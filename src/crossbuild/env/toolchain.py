"""The cross toolchain of one workspace and target: files under `<workspace>/.xbuild/` and the BuildEnv.

`Toolchain.materialise()` writes the zig wrappers, the build machine's compilers behind a recorder of what they
write (CC_FOR_BUILD, plain cc/gcc: proof/for_build.py reads the record), the CMake toolchain file, the Meson cross
file, the autotools config.site and an isolated pkg-config; `Toolchain.env` is the complete environment of every
build command, made from an allow-list (never from os.environ), so builds see no secrets; the only user variables in
it are the ones the user's settings pass through (foundation/settings.py refuses credentials), and crossbuild's own
win.
Longer than the house limit: the four build systems' files and the wrappers are written from one place so their
flags cannot drift apart.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from crossbuild.env import build_tools, compile_cache, cxx_runtime, musl_sysroot, zigcache
from crossbuild.foundation import host, safefs
from crossbuild.foundation.progress import NoteFn
from crossbuild.foundation.targets import Target

ZIGWRAP = Path(__file__).with_name("zigwrap.py")
WASIRUN = Path(__file__).with_name("wasirun.py")
XBUILD = ".xbuild"  # crossbuild's own files in a workspace: read-only to builds
TARGET_RUN = "target-run"  # the workspace's runner of target programs, in .xbuild/bin/


def target_run_script(workspace: Path) -> Path:
    """WORKSPACE's `.xbuild/bin/target-run` (written with the toolchain's other wrappers)."""
    return workspace / XBUILD / "bin" / TARGET_RUN
HOST_BUILD_TOOLS = ("meson", "ninja", "cmake", "ctest", "cpack")  # pip installs these beside crossbuild
SCRATCH = ".scratch"  # what builds may write besides the project (HOME, TMPDIR, their zig cache layer)

# Cache answers for configure run-tests that cannot run when cross-compiling; the values are what a current
# Linux libc (glibc or musl) gives. Windows targets get the same file: these checks are about the C library.
CONFIG_SITE = """\
# crossbuild: answers for autoconf run-tests that cannot run on the build machine.
ac_cv_func_malloc_0_nonnull=${ac_cv_func_malloc_0_nonnull=yes}
ac_cv_func_realloc_0_nonnull=${ac_cv_func_realloc_0_nonnull=yes}
ac_cv_func_calloc_0_nonnull=${ac_cv_func_calloc_0_nonnull=yes}
ac_cv_func_mmap_fixed_mapped=${ac_cv_func_mmap_fixed_mapped=yes}
ac_cv_func_memcmp_working=${ac_cv_func_memcmp_working=yes}
ac_cv_func_strnlen_working=${ac_cv_func_strnlen_working=yes}
ac_cv_func_strtod=${ac_cv_func_strtod=yes}
ac_cv_func_fnmatch_works=${ac_cv_func_fnmatch_works=yes}
ac_cv_func_working_mktime=${ac_cv_func_working_mktime=yes}
ac_cv_func_setpgrp_void=${ac_cv_func_setpgrp_void=yes}
ac_cv_func_getpgrp_void=${ac_cv_func_getpgrp_void=yes}
ac_cv_func_lstat_dereferences_slashed_symlink=${ac_cv_func_lstat_dereferences_slashed_symlink=yes}
ac_cv_func_stat_empty_string_bug=${ac_cv_func_stat_empty_string_bug=no}
ac_cv_func_lstat_empty_string_bug=${ac_cv_func_lstat_empty_string_bug=no}
ac_cv_func_chown_works=${ac_cv_func_chown_works=yes}
ac_cv_func_fork_works=${ac_cv_func_fork_works=yes}
ac_cv_func_vfork_works=${ac_cv_func_vfork_works=yes}
ac_cv_func_snprintf_c99=${ac_cv_func_snprintf_c99=yes}
ac_cv_func_vsnprintf_c99=${ac_cv_func_vsnprintf_c99=yes}
ac_cv_file__dev_zero=${ac_cv_file__dev_zero=yes}
ac_cv_c_bigendian=${ac_cv_c_bigendian=no}
ac_cv_have_long_long_format=${ac_cv_have_long_long_format=yes}
gl_cv_func_working_strerror=${gl_cv_func_working_strerror=yes}
"""


@dataclass(frozen=True)
class BuildEnv:
    """The complete environment of a build command; immutable, and the only one builds ever see."""

    vars: Mapping[str, str]

    def as_dict(self) -> dict[str, str]:
        return dict(self.vars)

    def shell_exports(self) -> str:
        """`export NAME='value'` lines a human can paste (or `eval "$(crossbuild env T --shell)"`)."""
        return "\n".join(f"export {k}={shlex.quote(v)}" for k, v in sorted(self.vars.items()))


def default_prefix(target: Target) -> Path:
    """The shared per-target prefix dependencies are installed into when no --prefix is given."""
    return host.cache_root() / "prefix" / target.name


def own_folder(workspace: Path, rel: str) -> Path:
    """WORKSPACE/REL as a real folder, made when missing: a link or file a build left there is removed first,
    never followed (the sandbox binds what is there by name)."""
    try:
        with safefs.open_dir(workspace, rel, create=True):
            pass
    except safefs.UnsafePath:
        safefs.remove_tree(workspace, rel)
        with safefs.open_dir(workspace, rel, create=True):
            pass
    return workspace / rel


@dataclass(frozen=True)
class Toolchain:
    target: Target
    workspace: Path  # absolute; the .xbuild folder lives here
    prefix: Path  # per-target install prefix for dependencies; CMake/pkg-config search only here
    zig: Path
    zig_cache: Path  # the shared cache; builds see it read-only, through their own layer (zigcache)
    isolated: bool = True  # False for a person's own shell (`crossbuild env`): zig writes the shared cache itself
    # the user's settings: arguments added when configuring ("cmake" | "meson" | "configure" -> args), and
    # variables passed through from their environment
    extra_args: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    passthrough: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    compile_cache: Path | None = None  # another workspace's (the clean rebuild's first build); None: its own

    @classmethod
    def for_target(cls, target: Target, workspace: str | Path, *, prefix: str | Path | None = None,
                   zig_cache: str | Path | None = None, isolated: bool = True,
                   extra_args: Mapping[str, tuple[str, ...]] | None = None,
                   passthrough: Mapping[str, str] | None = None) -> Toolchain:
        zig = host.zig_executable()
        if zig is None:
            raise RuntimeError("zig is not installed: `pip install ziglang==0.17.1` (crossbuild pins its zig)")
        workspace = Path(workspace).resolve()
        return cls(
            target=target,
            workspace=workspace,
            prefix=Path(prefix).resolve() if prefix else default_prefix(target),
            zig=zig,
            zig_cache=Path(zig_cache).resolve() if zig_cache else host.zig_cache_dir(target.zig_target),
            isolated=isolated,
            extra_args=MappingProxyType(dict(extra_args or {})),
            passthrough=MappingProxyType(dict(passthrough or {})),
        )

    # -- locations -------------------------------------------------------------------------------------------
    @property
    def xbuild(self) -> Path:
        return self.workspace / XBUILD

    @property
    def bindir(self) -> Path:
        return self.xbuild / "bin"

    @property
    def scratch(self) -> Path:
        """What builds may write besides the project: HOME, TMPDIR, the wrappers' log, the zig cache layer.
        `.xbuild/` itself is read-only inside the sandbox; crossbuild never reads anything back from here."""
        return self.workspace / SCRATCH

    @property
    def ccache_dir(self) -> Path:
        """The compile cache (compile_cache.py) this workspace's builds read and write."""
        return self.compile_cache or self.scratch / "ccache"

    @property
    def home(self) -> Path:
        return self.scratch / "home"

    @property
    def zig_layer(self) -> Path:
        return self.scratch / "zig"

    @property
    def build_zig_cache(self) -> Path:
        """The zig cache builds write: the private layer, or the shared cache itself when not isolated."""
        return self.zig_layer if self.isolated else self.zig_cache

    @property
    def build_machine_record(self) -> Path:
        """What the build machine's compilers (the for-build wrappers: CC_FOR_BUILD, cc, gcc...) wrote, one
        `sha256<TAB>path` a line: the verifier excuses a program for the build machine only when it is named here."""
        return self.scratch / "build-machine-outputs"

    def build_machine_compilers(self) -> dict[str, str]:
        """The wrapper names in .xbuild/bin -> the host compiler each runs (those the host has)."""
        found = {}
        for name in ("cc", "gcc", "c++", "g++"):
            real = shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")
            if real:
                found[name] = real
        return found

    @property
    def logs(self) -> Path:
        return self.xbuild / "logs"

    @property
    def cmake_toolchain_file(self) -> Path:
        return self.xbuild / "toolchain.cmake"

    @property
    def meson_cross_file(self) -> Path:
        return self.xbuild / "meson-cross.ini"

    @property
    def config_site(self) -> Path:
        return self.xbuild / "config.site"

    @property
    def autotools_scripts(self) -> Path:
        """Current config.sub and config.guess (Debian's autotools-dev): they know riscv64 and musl, where a
        project's own copy may be older than the target."""
        return self.xbuild / "autotools"

    @property
    def emulator(self) -> Path | None:
        """`.xbuild/bin/target-run PROGRAM ARGS`: runs a target program under qemu-user, a Windows one under Wine
        and a WebAssembly one under wasmtime when they are installed (None where nothing runs the target's programs
        here: macOS, FreeBSD)."""
        runs = self.target.qemu is not None or (self.target.is_windows and host.find_wine() is not None) or (
            self.target.is_wasm and host.wasmtime_site() is not None)
        return target_run_script(self.workspace) if runs else None

    @property
    def wine_prefix(self) -> Path:
        """The workspace's own Wine prefix (C:), made on the first Windows program's run and thrown away before the
        verifier's (verify.py): never the user's ~/.wine, never shared with another workspace."""
        return self.scratch / "wine"

    def tool(self, name: str) -> Path:
        return self.bindir / name

    @property
    def pkg_config_libdir(self) -> str:
        return f"{self.prefix}/lib/pkgconfig:{self.prefix}/share/pkgconfig"

    def qemu_sysroot(self) -> Path | None:
        return qemu_sysroot(self.target)

    # -- the files -------------------------------------------------------------------------------------------
    def materialise(self, *, warm: tuple[str, ...] | None = None, layer: bool = True,
                    note: NoteFn | None = None) -> Toolchain:
        """Write `.xbuild/` and the scratch folder (idempotent: rewriting gives the same files). Nothing a build
        left in the workspace is followed: every file goes through safefs below the workspace. For an isolated
        toolchain, the shared zig cache is warmed on the host for WARM languages (default: what the project in
        src/ uses) and, with LAYER, a fresh layer is made (without it, `make_layer` before the first build)."""
        self.workspace.mkdir(parents=True, exist_ok=True)
        for d in (XBUILD, f"{XBUILD}/bin", f"{XBUILD}/logs"):  # a link here is an error, never followed
            with safefs.open_dir(self.workspace, d, create=True):
                pass
        for d in (SCRATCH, f"{SCRATCH}/home", f"{SCRATCH}/tmp", f"{SCRATCH}/ccache"):
            own_folder(self.workspace, d)  # the build's own: whatever it left is reset
        self.prefix.mkdir(parents=True, exist_ok=True)
        self.zig_cache.mkdir(parents=True, exist_ok=True)
        self._write_wrappers()
        self._write(self.cmake_toolchain_file, self.cmake_toolchain_text())
        if self.target.is_wasm:
            self._write(self.xbuild / "cmake" / "Platform" / "WASI.cmake", _CMAKE_WASI_PLATFORM)
        self._write(self.meson_cross_file, self.meson_cross_text())
        self._write(self.config_site, CONFIG_SITE)
        for name, script in host.autotools_scripts().items():  # for projects whose config.sub predates the target
            self._write(self.xbuild / "autotools" / name, script.read_text(encoding="utf-8"), executable=True)
        if self.isolated:
            languages = warm or zigcache.languages_of(self.workspace / "src")
            zigcache.warm(self.target, languages=languages, shared=self.zig_cache, zig=self.zig, note=note)
            if "c++" in languages and cxx_runtime.supported(self.target) and zigcache.has_cxx_sources(
                    self.workspace / "src"):  # its C++ shared libraries and their programs share one runtime
                try:
                    cxx_runtime.build(self.target, self.zig, note=note)
                except cxx_runtime.RuntimeBuildError as e:  # zig's static runtime then, as before: said, not fatal
                    print(f"crossbuild: no shared C++ runtime for {self.target.name}: {e}", file=sys.stderr)
            if layer:
                self.make_layer()
        return self

    def make_layer(self) -> None:
        """A fresh private zig cache layer in the scratch folder (isolated toolchains; a no-op otherwise): one
        entry per shared cache entry, which is most of what setting up a workspace costs, so a context that may
        never compile makes it only before its first build command."""
        if self.isolated:
            zigcache.make_layer(self.zig_cache, self.workspace, f"{SCRATCH}/zig")

    def _write(self, path: Path, text: str, *, executable: bool = False) -> None:
        safefs.write_atomic(self.workspace, path.relative_to(self.workspace), text.encode(),
                            mode=0o755 if executable else 0o644)

    def _wrapper_script(self, tool: str) -> str:
        t = self.target
        argv = [sys.executable, "-I", "-S", str(self.xbuild / ZIGWRAP.name), tool, str(self.zig), t.zig_target, t.arch,
                t.binary_format, str(self.bindir), "--"]
        return "#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in argv) + ' "$@"\n'

    def _write_wrappers(self) -> None:
        t = self.target
        # A copy inside the workspace: the sandbox shows builds the workspace, not crossbuild's source tree.
        self._write(self.xbuild / ZIGWRAP.name, ZIGWRAP.read_text(encoding="utf-8"))
        tools = {"zcc": "cc", "zxx": "c++", "zar": "ar", "zranlib": "ranlib", "zstrip": "strip",
                 "zobjcopy": "objcopy", "zld": "ld"}
        if t.is_windows:
            tools.update({"zwindres": "windres", "zdlltool": "dlltool"})
        for name, tool in tools.items():
            self._write(self.bindir / name, self._wrapper_script(tool), executable=True)
        for name, script in compile_cache.shims(self.zig).items():
            self._write(self.bindir / name, script, executable=True)
        self._write(self.xbuild / "ccache.conf", "")  # read-only to builds: the cache's settings are ours
        # Names autotools (AC_CHECK_TOOL) and Makefiles look for; plain ld/nm stay the host's, since the host
        # compiler's own linker lookups must keep working (plain cc/gcc: below).
        aliases = {"ar": "zar", "ranlib": "zranlib", "strip": "zstrip", "objcopy": "zobjcopy"}
        triple = t.autotools_host
        for suffix, name in {"gcc": "zcc", "cc": "zcc", "g++": "zxx", "c++": "zxx", "ar": "zar",
                             "ranlib": "zranlib", "strip": "zstrip", "objcopy": "zobjcopy", "ld": "zld"}.items():
            aliases[f"{triple}-{suffix}"] = name
        aliases[f"{triple}-pkg-config"] = "pkg-config"
        if t.is_windows:
            aliases.update({"windres": "zwindres", f"{triple}-windres": "zwindres", "dlltool": "zdlltool",
                            f"{triple}-dlltool": "zdlltool"})
        for alias, name in aliases.items():
            safefs.symlink_atomic(self.workspace, f"{XBUILD}/bin/{alias}", name)
        # The build machine's own compilers (CC_FOR_BUILD and plain cc/gcc/c++/g++) stay the host's, run through a
        # recorder of the binaries they write: what the verifier takes as made for the build machine
        for name, real in self.build_machine_compilers().items():
            argv = [sys.executable, "-I", "-S", str(self.xbuild / ZIGWRAP.name), "for-build", real,
                    str(self.build_machine_record), "--"]
            self._write(self.bindir / name, "#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in argv) + ' "$@"\n',
                        executable=True)
        # the build tools installed beside crossbuild (pip's meson and ninja), by name: its environment's folder is
        # not on PATH, so a project's `python3` is the system's, with the system's modules (re2's generators import
        # six), not crossbuild's own interpreter; that one only where the system has no python3
        own = [n for n in HOST_BUILD_TOOLS if (host.scripts_dir() / n).is_file()]
        if not shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin"):
            own.append("python3")
        for name in own:
            safefs.symlink_atomic(self.workspace, f"{XBUILD}/bin/{name}", str(host.scripts_dir() / name))
        host_pkg_config = shutil.which("pkg-config") or "/usr/bin/pkg-config"
        pkg = (
            "#!/bin/sh\n# pkg-config that sees only the per-target prefix, never the host's .pc files\n"
            f"PKG_CONFIG_LIBDIR={shlex.quote(self.pkg_config_libdir)} PKG_CONFIG_PATH= "
            f"PKG_CONFIG_SYSROOT_DIR={shlex.quote(str(self.prefix))} exec {shlex.quote(host_pkg_config)} \"$@\"\n"
        )
        self._write(self.bindir / "pkg-config", pkg, executable=True)
        if self.emulator and t.is_windows:
            self._write(self.emulator, wine_script(host.find_wine() or "wine64", self.wine_prefix), executable=True)
        elif self.emulator and t.is_wasm:
            self._write(self.xbuild / WASIRUN.name, WASIRUN.read_text(encoding="utf-8"))
            argv = [sys.executable, "-I", "-S", str(self.xbuild / WASIRUN.name), str(host.wasmtime_site()),
                    str(self.workspace)]
            self._write(self.emulator, "#!/bin/sh\n# run a WebAssembly program under wasmtime, this workspace "
                        "preopened\nexec " + " ".join(shlex.quote(a) for a in argv) + ' "$@"\n', executable=True)
        elif self.emulator:
            qemu = host.find_qemu(t.qemu) or t.qemu
            sysroot = self.qemu_sysroot()
            run = (
                "#!/bin/sh\n# run a target program under qemu-user with the target's loader and libraries\n"
                f"exec {shlex.quote(qemu)} -L {shlex.quote(str(sysroot))} \"$@\"\n"
            )
            self._write(self.emulator, run, executable=True)

    def cmake_toolchain_text(self) -> str:
        t = self.target
        b = self.bindir
        lines = [
            "# crossbuild CMake toolchain: zig cc for " + t.name,
            f"set(CMAKE_SYSTEM_NAME {t.cmake_system_name})",
            f"set(CMAKE_SYSTEM_PROCESSOR {t.cmake_system_processor})",
            f'set(CMAKE_C_COMPILER "{b}/zcc")',
            f'set(CMAKE_CXX_COMPILER "{b}/zxx")',
            f'set(CMAKE_ASM_COMPILER "{b}/zcc")',
            f'set(CMAKE_AR "{b}/zar" CACHE FILEPATH "archiver")',
            f'set(CMAKE_RANLIB "{b}/zranlib" CACHE FILEPATH "ranlib")',
            f'set(CMAKE_STRIP "{b}/zstrip" CACHE FILEPATH "strip")',
            f'set(CMAKE_OBJCOPY "{b}/zobjcopy" CACHE FILEPATH "objcopy")',
            f'set(CMAKE_FIND_ROOT_PATH "{self.prefix}")',
            f'set(CMAKE_PREFIX_PATH "{self.prefix}")',
            "# Programs run on the build machine; libraries, headers and packages come only from the prefix,",
            "# so a host library can never be linked into a target binary.",
            "set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)",
            "set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)",
            "set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)",
            "set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)",
            f'set(ENV{{PKG_CONFIG_LIBDIR}} "{self.pkg_config_libdir}")',
            f'set(ENV{{PKG_CONFIG_SYSROOT_DIR}} "{self.prefix}")',
            f'set(PKG_CONFIG_EXECUTABLE "{b}/pkg-config" CACHE FILEPATH "pkg-config for the target")',
            "# CMake's optimised build types without their -DNDEBUG, so test programs keep their assert() checks",
            "# (a -D on the command line still wins: these only seed the cache)",
        ]
        for build_type, flags in (("RELEASE", "-O3"), ("RELWITHDEBINFO", "-O2 -g"), ("MINSIZEREL", "-Os")):
            lines += [f'set(CMAKE_{lang}_FLAGS_{build_type} "{flags}" CACHE STRING "{flags}, without NDEBUG")'
                      for lang in ("C", "CXX")]
        if t.is_windows:
            lines.append(f'set(CMAKE_RC_COMPILER "{b}/windres")')
        if t.is_wasm:  # CMake before 3.31 has no Platform/WASI.cmake: crossbuild's (newer CMakes read it too)
            lines.append(f'list(PREPEND CMAKE_MODULE_PATH "{self.xbuild / "cmake"}")')
            # the standard switch, off: a project's shared and static targets of one name would both be static
            lines.append('set(BUILD_SHARED_LIBS OFF CACHE BOOL "WASI has no shared libraries")')
        if self.emulator:
            lines.append(f'set(CMAKE_CROSSCOMPILING_EMULATOR "{self.emulator}")')
        return "\n".join(lines) + "\n"

    def meson_cross_text(self) -> str:
        t = self.target
        b = self.bindir

        def s(p: Path | str) -> str:
            return "'" + str(p).replace("\\", "\\\\").replace("'", "\\'") + "'"

        binaries = {
            "c": b / "zcc", "cpp": b / "zxx", "ar": b / "zar", "ranlib": b / "zranlib", "strip": b / "zstrip",
            "objcopy": b / "zobjcopy", "pkg-config": b / "pkg-config", "pkgconfig": b / "pkg-config",
        }
        if t.is_windows:
            binaries["windres"] = b / "windres"
        if self.emulator:
            binaries["exe_wrapper"] = self.emulator
        out = ["# crossbuild Meson cross file for " + t.name, "[binaries]"]
        out += [f"{k} = {s(v)}" for k, v in binaries.items()]
        out += ["", "[properties]", f"pkg_config_libdir = {s(self.pkg_config_libdir)}",
                f"sys_root = {s(self.prefix)}", "",
                # builds have no network: a wrap that downloads its subproject can only fail, after a clone's
                # error that names no dependency; without downloads Meson says which dependency is missing (one
                # whose subproject ships in subprojects/ still builds; --wrap-mode on the command line wins)
                "[built-in options]", "wrap_mode = 'nodownload'",
                *(["default_library = 'static'  # WASI has no shared libraries"] if t.is_wasm else []), "",
                "[host_machine]", f"system = {s(t.meson_system)}", f"cpu_family = {s(t.meson_cpu_family)}",
                f"cpu = {s(t.meson_cpu)}", f"endian = {s(t.endian)}"]
        return "\n".join(out) + "\n"

    # -- commands a build uses -------------------------------------------------------------------------------
    def configure_args(self) -> list[str]:
        """Arguments for an autotools ./configure."""
        return [f"--host={self.target.autotools_host}", f"--build={host.build_triple()}",
                *self.extra_args.get("configure", ())]

    def cmake_args(self) -> list[str]:
        return [f"-DCMAKE_TOOLCHAIN_FILE={self.cmake_toolchain_file}", *self.extra_args.get("cmake", ())]

    def meson_args(self) -> list[str]:
        return [f"--cross-file={self.meson_cross_file}", *self.extra_args.get("meson", ())]

    @property
    def env(self) -> BuildEnv:
        t = self.target
        b = self.bindir
        # programs provided from Debian's archive for the build machine (build_tools) come after the host's own
        path_dirs = [str(b), "/usr/local/bin", "/usr/bin", "/bin", *build_tools.program_dirs()]
        # the build machine's compilers behind the recorder _write_wrappers puts in .xbuild/bin
        recorded = self.build_machine_compilers()
        host_cc = str(b / "cc") if "cc" in recorded else shutil.which("cc") or "/usr/bin/cc"
        host_cxx = str(b / "c++") if "c++" in recorded else shutil.which("c++") or "/usr/bin/c++"
        v: dict[str, str] = {
            **self.passthrough,
            "PATH": ":".join(dict.fromkeys(path_dirs)),
            "HOME": str(self.home),
            "TMPDIR": str(self.scratch / "tmp"),
            "LC_ALL": "C",  # English messages, so failures match the knowledge base
            "SHELL": "/bin/sh",
            "CC": str(b / "zcc"),
            "CXX": str(b / "zxx"),
            "AR": str(b / "zar"),
            "RANLIB": str(b / "zranlib"),
            "STRIP": str(b / "zstrip"),
            "STRIPPROG": str(b / "zstrip"),
            "OBJCOPY": str(b / "zobjcopy"),
            "LD": str(b / "zld"),
            "PKG_CONFIG": str(b / "pkg-config"),
            "PKG_CONFIG_LIBDIR": self.pkg_config_libdir,
            "PKG_CONFIG_PATH": "",
            "PKG_CONFIG_SYSROOT_DIR": str(self.prefix),
            "CC_FOR_BUILD": host_cc,
            "CXX_FOR_BUILD": host_cxx,
            "BUILD_CC": host_cc,
            "HOSTCC": host_cc,
            "CONFIG_SITE": str(self.config_site),
            "CMAKE_TOOLCHAIN_FILE": str(self.cmake_toolchain_file),
            "CMAKE_POLICY_VERSION_MINIMUM": "3.5",  # CMake 4 refuses older minimums, still common in the wild
            "ZIG_GLOBAL_CACHE_DIR": str(self.build_zig_cache),
            "ZIG_LOCAL_CACHE_DIR": str(self.build_zig_cache),
            "CROSSBUILD_TARGET": t.name,
            "CROSSBUILD_HOST_TRIPLE": t.autotools_host,
            "CROSSBUILD_PREFIX": str(self.prefix),
            "CROSSBUILD_WRAP_LOG": str(self.scratch / "wrappers.log"),
            **compile_cache.environment(self.ccache_dir, self.workspace, self.zig, self.xbuild / "ccache.conf",
                                        self.scratch / compile_cache.STATS_LOG),
        }
        if runtime := cxx_runtime.available(t, self.zig):
            v["CROSSBUILD_SHARED_CXX_RUNTIME"] = str(runtime)
        if libraries := build_tools.library_dirs():
            v["LD_LIBRARY_PATH"] = ":".join(libraries)
        if perl := build_tools.perl_dirs():  # intltool's XML::Parser, provided for the build machine
            v["PERL5LIB"] = ":".join(perl)
        if host.find_tool("ninja"):
            v["CMAKE_GENERATOR"] = "Ninja"
        if t.is_windows:
            v.update({"WINDRES": str(b / "zwindres"), "RC": str(b / "zwindres"), "DLLTOOL": str(b / "zdlltool")})
        if self.emulator:
            v["CROSSBUILD_EMULATOR"] = str(self.emulator)
        if self.emulator and t.qemu is not None:
            v["QEMU_LD_PREFIX"] = str(self.qemu_sysroot())
        return BuildEnv(MappingProxyType(v))


# WASI preview 1 as CMake should know it: a Unix-like system (`if(UNIX)` branches are the ones it needs: libm,
# POSIX headers) of static modules; a SHARED library is built STATIC, as CMake does wherever shared ones are not
# supported
_CMAKE_WASI_PLATFORM = """# crossbuild: WASI (preview 1), for CMake releases without Platform/WASI.cmake
include(Platform/UnixPaths)
set(WASI 1)
set(UNIX 1)
set_property(GLOBAL PROPERTY TARGET_SUPPORTS_SHARED_LIBS FALSE)
set(CMAKE_FIND_LIBRARY_SUFFIXES ".a")
"""


def wine_script(wine: str, prefix: Path) -> str:
    """`target-run` for Windows: the program under Wine with the workspace's own prefix (wineboot makes it on first
    use, once, under a lock: CTest runs tests in parallel), no display, no Mono or Gecko installer prompts, no
    debug chatter. Wine's exit status is the program's."""
    q = shlex.quote
    return (
        "#!/bin/sh\n# run a Windows program under Wine, with this workspace's own prefix\n"
        f"WINEPREFIX={q(str(prefix))}; export WINEPREFIX\n"
        "WINEDEBUG=-all; WINEDLLOVERRIDES='mscoree,mshtml='; export WINEDEBUG WINEDLLOVERRIDES\n"
        "unset DISPLAY WAYLAND_DISPLAY\n"
        'if [ ! -f "$WINEPREFIX/system.reg" ]; then\n'
        f'  flock "$WINEPREFIX.lock" sh -c \'[ -f "$WINEPREFIX/system.reg" ] || {q(wine)} wineboot -i\' '
        ">/dev/null 2>&1\n"
        "fi\n"
        f'exec {q(wine)} "$@"\n'
    )


def qemu_sysroot(target: Target) -> Path | None:
    """Where qemu finds the target's dynamic loader and libc (-L): Debian's cross libc for glibc targets,
    crossbuild's cached musl loader for musl targets (None for targets qemu-user cannot run: Windows, macOS,
    FreeBSD). The folder may not exist yet."""
    if target.qemu is None:
        return None
    if target.libc == "glibc":
        return Path("/usr") / target.gnu_triple
    return musl_sysroot.sysroot_dir(target.arch)

