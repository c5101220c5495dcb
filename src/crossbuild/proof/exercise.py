"""What a build without a usable test suite still proves on the target: the verifier's probes (level `exercised`,
levels.py). Each product is run there, under the same runner as the test programs:

- the products are what the project's install installed, when it ran (a test helper or a generator left in the
  build folder is not one); else every binary of the build folder;
- every executable (not a test program) on a harmless invocation: `--version`, then `--help`, then no arguments
  (stdin closed), each under a short limit (10 s times the emulator's slowdown); it passes on the first that exits
  0, or when it prints its usage and exits with a usage status (it started and reached its argument handling,
  which is what `--help` shows too), or, failing those, when one exited normally with a message of its own; a
  crash (unless the build machine's build crashes the same way: native_check), a load failure or a time-out is no
  start, and after a time-out no other invocation is tried;
- nothing in the build systems' own folders (CMakeFiles/, meson-private/: configure checks) is started;
- an archive that defines main() (gtest_main) is linked whole as the program itself and started like one;
- every shared library, dlopen()ed with RTLD_NOW by crossbuild's probe program, which then dlsym()s each symbol
  the library's .dynsym exports (read here, host-side) and exits 0 only when all resolve;
- every static library, linked whole (`--whole-archive`) into crossbuild's probe program together with the
  project's other static libraries and the prefix's (the dependencies), and the probe run.

The probes are crossbuild's own C code, compiled with the workspace's toolchain (its zcc/zxx) inside the build's
sandbox after the build has finished, into a fresh folder; what each checked is recorded in its `checked` text.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError

from crossbuild.env.sandbox import Limits, Sandbox
from crossbuild.env.toolchain import Toolchain
from crossbuild.foundation import safefs
from crossbuild.foundation.targets import Target
from crossbuild.proof import slowdown
from crossbuild.proof.binary_formats import archive_defines_global, dynamic_symbols, has_interpreter
from crossbuild.proof.smoke import is_testlike
from crossbuild.proof.target_run import loader_lacks, qemu_command, runner_argv
from crossbuild.proof.triage import Triage, triage

MAX_PER_KIND = 20  # probes of each kind; more are counted, not run
HARMLESS_S = 10.0  # base limit of one harmless invocation (`--version`), multiplied by the emulator's slowdown
_HARMLESS = (["--version"], ["--help"], [])
# A product asked for --help that answers with its usage and a usage status started and parsed its arguments: any
# line naming "usage" counts here (bzip2recover: "usage is `bzip2recover damaged-file-name'"), not only the
# `usage:` forms triage knows for test programs, whose output is their verdict.
_USAGE = re.compile(r"\busage\b", re.IGNORECASE)
_USAGE_EXITS = (1, 2, 64, 255)
# The build systems' own folders: what is there is a configure check (CMake's CheckTypeSize/*.bin, exiting 70/78 on
# purpose), never a product to start. They are still checked for the target like every binary; they only are not run.
_INTERNAL = frozenset({"CMakeFiles", "meson-private", "meson-logs"})

_LOAD_PROBE = r"""/* crossbuild's library probe: load LIBRARY now, resolve each name in NAMES */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: load-probe LIBRARY NAMES\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { printf("crossbuild-probe: dlopen failed: %s\n", dlerror()); return 1; }
    FILE *names = fopen(argv[2], "r");
    if (!names) { perror(argv[2]); return 2; }
    char name[4096];
    long wanted = 0, found = 0;
    while (fgets(name, sizeof name, names)) {
        name[strcspn(name, "\n")] = 0;
        if (!*name) continue;
        wanted++;
        dlerror();
        void *sym = dlsym(lib, name);
        const char *err = dlerror();
        if (sym || !err) found++;
        else if (wanted - found <= 5) printf("crossbuild-probe: unresolved: %s (%s)\n", name, err);
    }
    printf("crossbuild-probe: loaded, %ld of %ld exported symbols resolved\n", found, wanted);
    return found == wanted ? 0 : 1;
}
"""
_LINK_PROBE = r"""/* crossbuild's archive probe: linked whole with a static library; its constructors run before this */
#include <stdio.h>
int main(void) { printf("crossbuild-probe: linked whole and started\n"); return 0; }
"""


@dataclass
class ProbeRun:
    kind: str  # executable | shared_library | static_library
    path: str  # the product, relative to the verified folder
    checked: str = ""  # what this probe did: "ran `xz --version`", "dlopen + dlsym of 42 exported symbols"
    passed: bool = False
    skipped: str | None = None  # why it could not run here
    why: str | None = None  # when it failed: its evidence (an output line, an exit status, a link error)
    duration_s: float = 0.0
    crash: dict | None = None  # a crash's invocation, exit status and last words, for native_check.recheck_probes
    not_counted: str | None = None  # a crash the build machine's build shows too: its evidence; blocks nothing

    def outcome(self) -> str:
        if self.skipped:
            return f"skipped: {self.skipped}"
        if self.not_counted:
            return f"not counted: {self.checked}: {self.not_counted}"
        return f"passed: {self.checked}" if self.passed else f"FAILED: {self.checked}: {self.why}"


@dataclass
class _Runner:
    """How a probe runs: the test programs' sandbox, the target, the library folders, a log folder."""
    target: Target
    root: Path
    box: Sandbox
    lib_rels: list[str]
    lib_dirs: list[str]
    dependency_lib_dirs: list[str]
    timeout: float  # the base limit times the emulator's slowdown (SCALE)
    log_dir: Path
    scale: float
    workspace: Path
    count: int = 0

    def triage(self, code: int | None, stopped: str | None, lines: list[str], limit: float | None = None) -> Triage:
        return triage(code, stopped, lines, limit or self.timeout, scale=self.scale, workspace=self.workspace)

    @property
    def harmless_limit(self) -> float:
        """A `--version` answers in moments: a short limit, scaled like the others, not a test's."""
        return min(self.timeout, HARMLESS_S * self.scale)

    def run(self, probe: ProbeRun, exe: Path, args: list[str], *, dynamic: bool, rel: str | None = None,
            cwd: Path | None = None, limit: float | None = None) -> tuple[int | None, str | None, list[str]] | None:
        """Run EXE ARGS on the target (under LIMIT seconds, default the scaled base limit): (exit status, what
        stopped it, its output), or None with PROBE.skipped."""
        argv, why_not = runner_argv(self.target, exe, dynamic=dynamic, lib_dirs=self.lib_dirs, args=args,
                                    workspace=self.workspace)
        if argv is not None and dynamic and self.target.libc == "musl" and rel is not None:
            why_not = loader_lacks(self.target, self.root, rel, self.lib_rels, self.dependency_lib_dirs)
        if argv is None or why_not:
            probe.skipped = why_not
            return None
        self.count += 1
        log_name = f"probe-{self.count:02d}-{exe.name[:60]}.log"
        cwd = cwd or exe.parent
        env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LC_ALL": "C"}
        res = self.box.run(argv, cwd=cwd, env=env, log_path=self.log_dir / log_name,
                           limits=Limits(timeout_s=limit or self.timeout, max_output_bytes=1 << 20))
        probe.duration_s = round(probe.duration_s + res.duration_s, 3)
        lines = safefs.read_text(self.log_dir, log_name, max_bytes=2 << 20).splitlines()[2:]
        return res.returncode, res.stopped, [line for line in lines if not line.startswith("[crossbuild:")]


def exercise(root: Path, target: Target, artifacts: list[dict], toolchain: Toolchain, build_box: Sandbox,
             test_box: Sandbox, timeout: float, log_dir: Path, dependency_lib_dirs: list[str],
             installed: set[str] | None = None) -> list[ProbeRun]:
    """Probe every product among ARTIFACTS (the verifier's entries below ROOT, "ok" when they fit TARGET): the
    executables that are not test programs, the shared and the static libraries (deduplicated by content). When
    the project's install ran, its products are what it installed (INSTALLED: the file names it wrote): a test
    helper or a generator it leaves in the build folder (miniupnpc's minihttptestserver, libzip's regress/
    programs) is not one."""
    if qemu_command(target)[0] is None or target.binary_format not in ("elf", "wasm"):
        # nothing of this target runs here (the test programs' skip says why); Windows programs run under Wine,
        # but the probes' dlopen is ELF's: Windows reaches `tested` or `built`. WebAssembly has no shared
        # libraries: its modules are started and its archives linked whole into a module, under wasmtime
        return []
    mine = [a for a in artifacts if a["ok"] and not a.get("member_of")
            and not _INTERNAL.intersection(Path(a["path"]).parts)
            and (installed is None or Path(a["path"]).name in installed)]
    executables = [a for a in mine if a["kind"] == "executable" and not is_testlike(a["path"])]
    shared = _distinct(root, [a for a in mine if a["kind"] == "shared_library"])
    static = _distinct(root, [a for a in mine if a["kind"] == "static_library"])
    lib_rels = sorted(a["path"] for a in shared)
    scale = slowdown.factor(target) if executables or shared or static else 1.0
    runner = _Runner(target, root, test_box, lib_rels,
                     sorted({str((root / rel).parent) for rel in lib_rels}) + list(dependency_lib_dirs),
                     list(dependency_lib_dirs), timeout * scale, log_dir, scale, toolchain.workspace)
    probes = [_start(runner, a) for a in executables[:MAX_PER_KIND]]
    work = None
    if shared or static:
        # a fresh folder in the scratch area, made with no link followed (the build could have replaced
        # .scratch by a link to a host folder)
        rel = f"{toolchain.scratch.name}/probes-{secrets.token_hex(6)}"
        try:
            with safefs.open_dir(toolchain.workspace, rel, create=True) as fd:
                os.fchmod(fd, 0o755)  # test programs run as an ordinary user
        except OSError as e:  # safefs.UnsafePath included
            why = f"no folder for crossbuild's probes: {toolchain.scratch.name}/ is not a real folder ({e})"
            return probes + [ProbeRun(a["kind"], a["path"], skipped=why) for a in shared + static]
        work = toolchain.workspace / rel
    probes += [_load(runner, a, toolchain, build_box, work) for a in shared[:MAX_PER_KIND]]
    probes += [_link(runner, a, [s["path"] for s in static if s is not a], toolchain, build_box, work)
               for a in static[:MAX_PER_KIND]]
    left = len(executables) + len(shared) + len(static) - len(probes)
    if left > 0:
        probes.append(ProbeRun("more", "", skipped=f"{left} more products not probed (at most {MAX_PER_KIND} a kind)"))
    return probes


def _distinct(root: Path, entries: list[dict]) -> list[dict]:
    """One entry per content: a library installed twice, or libtool's .libs/ copy, is probed once."""
    seen: set[str] = set()
    out = []
    for a in sorted(entries, key=lambda a: (a["path"].count("/"), a["path"])):
        try:
            digest = hashlib.sha256(safefs.read_bytes(root, a["path"], max_bytes=512 << 20)).hexdigest()
        except OSError:
            continue
        if digest not in seen:
            seen.add(digest)
            out.append(a)
    return out


def _start(runner: _Runner, a: dict) -> ProbeRun:
    """Start one executable: passed on the first harmless invocation that exits 0 or prints its usage; failing
    that, on one that exited normally with a message of its own (a filter reading its closed stdin: "GIF-LIB error:
    not a GIF file"), which shows it loaded and reached its own code as well. A crash, a load failure, a time limit
    or silent failures are no start."""
    return _harmless(runner, ProbeRun("executable", a["path"]), runner.root / a["path"],
                     dynamic=a.get("linkage") == "dynamic", rel=a["path"])


def _harmless(runner: _Runner, probe: ProbeRun, exe: Path, *, dynamic: bool, rel: str | None) -> ProbeRun:
    tried, own_error, crashed = [], None, False
    limit = runner.harmless_limit
    for args in _HARMLESS:
        shown = " ".join([exe.name, *args])
        done = runner.run(probe, exe, args, dynamic=dynamic, rel=rel, limit=limit)
        if done is None:
            return probe
        code, stopped, lines = done
        if code == 0 and not stopped:
            probe.passed, probe.checked = True, f"ran `{shown}`: exit 0"
            return probe
        verdict = runner.triage(code, stopped, lines, limit)
        if verdict.kind == "usage" or (verdict.kind == "failed" and code in _USAGE_EXITS and not stopped
                                       and any(_USAGE.search(line) for line in lines[:20])):
            probe.passed, probe.checked = True, f"ran `{shown}`: printed its usage (exit {code})"
            return probe
        said = next((line.strip() for line in lines if line.strip()), None)
        if own_error is None and verdict.kind == "failed" and not stopped and code is not None and 0 < code < 126 \
                and said:
            own_error = f"ran `{shown}`: exited normally with its own error (exit {code}: \"{said[:120]}\")"
        tried.append(f"`{shown}`: {verdict.why}")
        if verdict.kind == "crashed" or verdict.aborted:  # an assert() on a harmless start: rechecked as a crash
            crashed = True
            said = next((line.strip() for line in lines if line.strip() and not line.startswith("qemu:")), "")
            probe.crash = {"args": args, "exit": code, "said": said[:200]}
            break  # a crash is the answer: no other invocation makes it a clean start
        if stopped == "timeout":
            break  # it waits (a server, a reader of a terminal): other invocations would wait as long
    if own_error and not crashed:
        probe.passed, probe.checked = True, own_error
        return probe
    probe.checked = "ran " + ", ".join(t.split(":")[0] for t in tried)
    probe.why = "; ".join(tried)[:400]
    return probe


def _compile(toolchain: Toolchain, box: Sandbox, work: Path, name: str, source: str | None, link_tail: list[str],
             *, cxx: bool = False) -> tuple[Path | None, str | None]:
    """Build one probe program in WORK with the workspace's compiler, in the build's sandbox: its object first,
    then the link with it ahead of LINK_TAIL (zig puts a source's object after every archive, so an archive's own
    main() - gtest_main's - would be taken first). Without SOURCE, LINK_TAIL is the whole program."""
    env = toolchain.env.as_dict()
    linker = str(toolchain.bindir / ("zxx" if cxx else "zcc"))
    steps = [([linker, "-o", name, *link_tail], work, env)]
    if source is not None:
        (work / f"{name}.c").write_text(source, encoding="utf-8")
        steps = [([str(toolchain.bindir / "zcc"), "-O1", "-c", "-o", f"{name}.o", f"{name}.c"], work, env),
                 ([linker, "-o", name, f"{name}.o", *link_tail], work, env)]
    failed = box.run_steps(steps, log_dir=work, stem=name)
    if failed is None and (work / name).is_file():
        return work / name, None
    res = failed[1] if failed else None
    log = Path(res.log_path) if res else work / name
    text = safefs.read_text(log.parent, log.name, max_bytes=1 << 20).splitlines()[2:] if res else []
    error = next((line.strip() for line in text if "error" in line.lower()), text[-1].strip() if text else "")
    return None, f"the probe did not link (exit {res.returncode if res else '?'}): {error[:240]}"


def _load(runner: _Runner, a: dict, toolchain: Toolchain, box: Sandbox, work: Path) -> ProbeRun:
    probe = ProbeRun("shared_library", a["path"])
    try:
        with os.fdopen(safefs.open_regular(runner.root, a["path"]), "rb") as f:
            exported = sorted(dynamic_symbols(f)[0])
    except (OSError, ELFError) as e:
        probe.why, probe.checked = f"its symbols cannot be read: {e}", "read .dynsym"
        return probe
    loader = work / "load-probe"
    if not loader.is_file():
        built, error = _compile(toolchain, box, work, "load-probe", _LOAD_PROBE, ["-dynamic", "-ldl"]
                                if runner.target.libc == "musl" else ["-ldl"])
        if built is None:
            probe.skipped = error
            return probe
    index = len(list(work.glob("names-*.txt")))
    names = work / f"names-{index}.txt"
    names.write_text("".join(f"{n}\n" for n in exported), encoding="utf-8")
    probe.checked = f"dlopen (RTLD_NOW) and dlsym of its {len(exported)} exported symbols"
    done = runner.run(probe, loader, [str(runner.root / a["path"]), str(names)], dynamic=True,
                      cwd=(runner.root / a["path"]).parent)
    if done is not None:
        probe.passed, probe.why = _verdict(runner, *done)
    return probe


def _link(runner: _Runner, a: dict, others: list[str], toolchain: Toolchain, box: Sandbox, work: Path) -> ProbeRun:
    probe = ProbeRun("static_library", a["path"])
    name = f"link-probe-{hashlib.sha256(a['path'].encode()).hexdigest()[:10]}"
    prefix_libs = [str(p) for d in ("lib", "lib64") if (toolchain.prefix / d).is_dir()
                   for p in sorted((toolchain.prefix / d).glob("*.a"))]
    group = [str(runner.root / rel) for rel in others] + prefix_libs
    system = ["-lm"] + (["-lpthread"] if not runner.target.is_wasm else []) + (
        ["-ldl"] if runner.target.libc == "glibc" else [])
    tail = ["-Wl,--whole-archive", str(runner.root / a["path"]), "-Wl,--no-whole-archive",
            *(["-Wl,--start-group", *group, "-Wl,--end-group"] if group else []), *system]
    linked = f"linked whole ({len(others)} other project archives, {len(prefix_libs)} of the prefix's)"
    main_inside = _defines_main(runner.root, a["path"])  # gtest_main: the archive is a program's entry
    probe.checked = f"{linked} and run" if not main_inside else f"{linked} as the program (it defines main())"
    built, error = _compile(toolchain, box, work, name, None if main_inside else _LINK_PROBE, tail, cxx=True)
    if built is None:
        probe.why = error
        return probe
    with open(built, "rb") as f:
        dynamic = not runner.target.is_wasm and has_interpreter(f)
    if main_inside:
        _harmless(runner, probe, built, dynamic=dynamic, rel=None)
        probe.checked = f"{linked} as the program (it defines main()), then {probe.checked}"
        return probe
    done = runner.run(probe, built, [], dynamic=dynamic)
    if done is not None:
        probe.passed, probe.why = _verdict(runner, *done)
    return probe


def _defines_main(root: Path, rel: str) -> bool:
    try:
        return archive_defines_global(safefs.read_bytes(root, rel, max_bytes=512 << 20), "main")
    except OSError:
        return False


def _verdict(runner: _Runner, code: int | None, stopped: str | None, lines: list[str]) -> tuple[bool, str | None]:
    """A probe passes on exit 0; otherwise its evidence: the probe's own line, a crash, what stopped it."""
    if code == 0 and not stopped:
        return True, None
    said = next((line.strip() for line in lines if line.startswith("crossbuild-probe: ")), None)
    verdict = runner.triage(code, stopped, lines)
    return False, (said or verdict.why)[:300]
