"""Whether a build turned the project's tests off (issue 34, "No tests switched off to pass"): read from the argv
of the recorded build steps, never from free text. The one definition of an argument that turns tests off: the
planner keeps such arguments out of a verdict's fixes with it, and the knowledge base's `turns_tests_off` flag is
checked against it.

An option counts when its name says test or check (BUILD_TESTING, FOO_BUILD_TESTS, tests, --disable-unit-tests,
check_PROGRAMS): one that turns off examples, documentation or benchmarks only does not, and one that turns off
tests and examples together counts only when its name says so (BUILD_EXAMPLES_AND_TESTS). A switch that only stops
the tests from being *run* while building (JSONCPP_WITH_POST_BUILD_UNITTEST, RUN_TESTS) leaves them built: not
counted. `SKIP_TESTS=ON`, `NO_TESTS=1` are counted the other way round."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from crossbuild.env import ninja_targets, recipes
from crossbuild.env.debian_args import network_tests_only
from crossbuild.env.recipes import BuildStep

# a word of an option's name that says the option is about the tests
TEST_NAME = re.compile(r"(^|[_.-])((unit|self|run)[_-]?)?(tests?|testing|testsuite|test[_-]suite|checks?)([_.-]|$)",
                       re.I)
# a word of a program's, target's or folder's name that says it is a test or an example, not the product
TEST_OR_EXAMPLE = re.compile(r"(^|[/_.-])(unit[_-]?)?(tests?|testing|testsuite|checks?|examples?|demos?|samples?|"
                             r"bench(marks?)?|fuzz(ers?|ing)?|libtests)([/_.-]|$)", re.I)
# a folder of a target's sources that says they are tests (libpng's contrib/libtests/), not examples or benchmarks
_TEST_FOLDER = re.compile(r"(^|[/_.-])(unit[_-]?)?(tests?|testing|testsuite|checks?|libtests)/", re.I)
_RUN_ONLY = re.compile(r"POST_BUILD|(^|[_-])RUN([_-]|$|_?TESTS?)", re.I)
_NEGATED = re.compile(r"(^|[_-])(SKIP|NO|DISABLE|WITHOUT|EXCLUDE)[_-]", re.I)
_OFF = {"off", "false", "no", "n", "0", "disabled", "ignore", "notfound", "none", ""}
_ON = {"on", "true", "yes", "y", "1", "enabled"}
# -DNAME[:TYPE]=VALUE (CMake, Meson), --disable-NAME / --without-NAME, --enable-NAME=no, NAME=VALUE (make)
_DEFINE = re.compile(r"^-D\s*(?P<name>[A-Za-z_][\w.-]*?)(:\w+)?=(?P<value>.*)$")
_SWITCH = re.compile(r"^--(?P<how>disable|without|enable|with)-(?P<name>[\w.-]+?)(=(?P<value>.*))?$")
_VARIABLE = re.compile(r"^(?P<name>[A-Za-z_]\w*)=(?P<value>.*)$")


def _is_test_switch(name: str) -> bool:
    """Whether the option NAME is about building the tests (not running them at build time, not a check result)."""
    return bool(TEST_NAME.search(name)) and not _RUN_ONLY.search(name) and not name.upper().startswith(
        ("HAVE_", "CMAKE_"))


def _option_off(name: str, value: str) -> bool:
    """Whether setting the test option NAME to VALUE turns the project's tests off."""
    value = value.strip().lower()
    if _NEGATED.search(name):
        return value in _ON
    return value in _OFF or value.endswith("-notfound")


# Test switches that need what a cross-build here cannot give (another toolchain, a fuzzer, a checker) or that are
# about something other than the project's test programs
_NOT_HERE = re.compile(r"CUDA|HIP|SYCL|OPENCL|FUZZ|COVERAGE|VALGRIND|SANITI[SZ]|MEMCHECK|INSTALL|BENCH|PERF|DOC|"
                       r"EXAMPLE|SAMPLE|PYTHON|JAVA", re.I)


def tests_off_by_default(options: dict[str, str], projects: Sequence[str]) -> list[str]:
    """Of a configured CMake project's on/off OPTIONS (name -> value), the switches that leave its own test
    programs unbuilt: BUILD_TESTING, or one named after one of its own PROJECTS (the top level's and those declared
    in its tree: absl's ABSL_BUILD_TESTING, fmt's FMT_TEST, googletest's gtest_build_tests), never a vendored
    subproject's (leveldb's BENCHMARK_ENABLE_TESTING) nor one that needs another toolchain (FMT_CUDA_TEST)."""
    own = tuple(p + "_" for p in (re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_") for name in projects) if p)
    return [name for name, value in options.items()
            if _is_test_switch(name) and not _NOT_HERE.search(name) and _option_off(name, value)
            and not _NEGATED.search(name)
            and (name.upper() == "BUILD_TESTING" or name.upper().startswith(own))]


def turns_tests_on(name: str) -> bool:
    """Whether setting the variable NAME true builds the project's own tests (BUILD_TEST, WITH_TESTS), as opposed
    to skipping them (NO_TESTS), running them only, or needing another toolchain or a checker."""
    return _is_test_switch(name) and not _NOT_HERE.search(name) and not _NEGATED.search(name)


def turns_tests_off(arg: str) -> bool:
    """Whether the one argument ARG (of cmake, meson setup, configure or make) turns the project's tests off:
    -DBUILD_TESTING=OFF, -DFOO_TESTS:BOOL=OFF, -Dtests=false, --disable-tests, --without-check, TESTS= ...
    Not one that leaves out only the tests needing the network (-DDISABLE_ONLINE_TESTS=ON): the others run."""
    hit = _test_switch(arg)
    return hit is not None and hit[1] and not network_tests_only(arg)


def _test_switch(arg: str, *, variables: bool = True) -> tuple[str, bool] | None:
    """(the test switch ARG sets, whether it turns the tests off), or None when ARG sets no test switch. VARIABLES:
    make's NAME=VALUE too."""
    if m := _DEFINE.match(arg):
        name, value = m["name"], m["value"]
    elif m := _SWITCH.match(arg):  # --disable-tests, --enable-tests=no: the option set to "yes" or "no"
        disabling = m["how"] in ("disable", "without")
        enabled = (m["value"] is None or m["value"].strip().lower() not in _OFF) != disabling
        name, value = m["name"], "yes" if enabled else "no"
    elif variables and (m := _VARIABLE.match(arg)):
        name, value = m["name"], m["value"]
    else:
        return None
    return (name.lower().replace("-", "_"), _option_off(name, value)) if _is_test_switch(name) else None


def tests_switched_off(steps: Sequence[BuildStep], *, root: Path | None = None,
                       goals_left_out: bool = True) -> str | None:
    """A one-line reason naming the arguments of STEPS (the build's recorded commands) that turned the project's
    tests or test goals off — `tests not built: -DBUILD_TESTING=OFF (configure step)` — else None. The last setting
    of a switch counts (a later -DBUILD_TESTING=ON turns it back on). Also: `cmake --build DIR --target ...` naming
    only targets that are not tests, when no step built DIR's default goal; and, with the workspace ROOT to read the
    Makefiles from, make steps naming goals that leave out test goals of the Makefile's default goal (unless not
    GOALS_LEFT_OUT: the verifier can run those goals itself, harness.py)."""
    found: dict[tuple[str, str], tuple[str, str] | None] = {}  # (tool, switch) -> (argument, step) while off
    for step in steps:
        tool, label, args = _arguments(step.argv)
        for i, arg in enumerate(args):
            if arg == "-D" and i + 1 < len(args):
                arg = "-D" + args[i + 1]  # `-D BUILD_TESTING=OFF`
            hit = _test_switch(arg, variables=tool == "make")
            if hit is None or (tool == "make" and _automake_check(arg, args)) or network_tests_only(arg):
                continue  # a switch leaving out only the tests that need the network leaves the others
            found[(tool, hit[0])] = (arg, label) if hit[1] else None
    reasons: dict[str, list[str]] = {}
    for arg, label in filter(None, found.values()):
        reasons.setdefault(label, []).append(arg)
    parts = [f"{', '.join(dict.fromkeys(args))} ({label})" for label, args in reasons.items()]
    parts += _named_cmake_targets(steps, root)
    if root is not None and goals_left_out:
        parts += _make_goals_leaving_out_tests(steps, root)
    return "tests not built: " + "; ".join(parts) if parts else None


def _arguments(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    """(the tool: cmake | meson | configure | make | other, which step it is, the arguments that can set a switch)."""
    argv = list(argv)
    if len(argv) > 1 and Path(argv[0]).name in ("sh", "bash", "dash") and argv[1].endswith("configure"):
        argv = argv[1:]
    name = Path(argv[0]).name if argv else ""
    if name == "cmake" and not {"--build", "--install", "-E", "-P"} & set(argv[1:]):
        return "cmake", "configure step", argv[1:]
    if name == "meson" and (len(argv) < 2 or argv[1] not in ("compile", "install", "test", "dist")):
        return "meson", "configure step", argv[1:]
    if name == "configure":
        return "configure", "configure step", argv[1:]
    if name in ("make", "gmake"):
        goals = recipes.make_goals(argv)
        which = "install" if "install" in goals else "check" if "check" in goals else "build"
        return "make", f"{which} step", argv[1:]
    return "other", "", []


def _automake_check(arg: str, args: list[str]) -> bool:
    """`make check TESTS=`: automake's way to build the check programs and run none of them (the verifier runs
    them), not a way to leave them out."""
    return arg == "TESTS=" and "check" in args


def _named_cmake_targets(steps: Iterable[BuildStep], root: Path | None = None) -> list[str]:
    """`cmake --build DIR --target A B` when no step built DIR's default goal and no named target is a test: only
    A and B were built, the tests left out. A test is told by its name, or, with the workspace ROOT, as
    split_targets tells it from DIR's build.ninja (libpng's pngvalid, whose sources are in contrib/libtests/)."""
    named: dict[str, list[str]] = {}
    whole: set[str] = set()
    for step in steps:
        argv = list(step.argv)
        if not argv or Path(argv[0]).name != "cmake" or "--build" not in argv[:-1]:
            continue
        folder = str(Path(step.cwd) / argv[argv.index("--build") + 1])
        targets = [a for i, a in enumerate(argv) if i > 0 and not a.startswith("-") and _after_target(argv, i)]
        if not targets or {"all", "install"} & set(targets):
            whole.add(folder)
        elif targets != ["clean"]:
            named.setdefault(folder, []).extend(t for t in targets if t != "clean")
    return [f"only the targets {' '.join(dict.fromkeys(t))} were built (cmake --build {folder} --target)"
            for folder, t in named.items() if folder not in whole and not any(TEST_NAME.search(n) for n in t)
            and not _names_tests(root, folder, t)]


def _names_tests(root: Path | None, folder: str, names: list[str]) -> bool:
    """Whether NAMES hold a test target of the CMake build folder FOLDER (workspace-relative): one whose sources
    are in a test folder (build.ninja's objects); an example, demo or benchmark is not a test."""
    if root is None or Path(folder).is_absolute() or ".." in Path(folder).parts:
        return False
    return any(t["name"] in names and any(_TEST_FOLDER.search(p) for p in t.get("paths") or [])
               for t in ninja_targets.cmake_targets(root, folder))


def _after_target(argv: list[str], i: int) -> bool:
    """Whether argv[I] is one of the names after `--target` / `-t` (CMake takes several)."""
    for j in range(i - 1, 0, -1):
        if argv[j] in ("--target", "-t"):
            return True
        if argv[j].startswith("-"):
            return False
    return False


def _make_goals_leaving_out_tests(steps: Sequence[BuildStep], root: Path) -> list[str]:
    """Make steps that name goals (skip_test_goals: `make libbz2.a bzip2 bzip2recover`) leaving out the test goals
    of the default goal (`all: libbz2.a bzip2 bzip2recover test`), each as a reason."""
    return [f"make {' '.join(named)} instead of `{goal}` leaves out {' '.join(left)} (build step in {folder})"
            for folder, goal, named, left in make_goals_left_out(steps, root)]


def make_goals_left_out(steps: Sequence[BuildStep], root: Path) -> list[tuple[str, str, list[str], list[str]]]:
    """(folder, its default goal, the goals the steps named instead, the test goals left out) for each folder whose
    make steps named goals leaving out test prerequisites of the default goal, when no make step there built the
    default goal itself. Read from the folder's Makefile, as make would."""
    builds: dict[str, list[list[str]]] = {}
    for step in steps:
        if step.argv and Path(step.argv[0]).name in ("make", "gmake"):
            goals = recipes.make_goals(step.argv)
            if not any(recipes.builds_nothing(g) or g == "check" for g in goals):
                builds.setdefault(recipes.make_folder(step), []).append(goals)
    out = []
    for folder, runs in builds.items():
        if any(not goals for goals in runs):
            continue  # the default goal was built
        texts = recipes.makefile_texts(root, folder)
        goal = recipes.default_goal(texts[0]) if texts else None
        named = list(dict.fromkeys(g for goals in runs for g in goals))
        if goal is None or goal.name in named:
            continue
        left_out = [p for p in goal.prerequisites if TEST_NAME.search(p) and p not in named]
        if left_out:
            out.append((folder, goal.name, named, left_out))
    return out


def split_targets(targets: Iterable[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The CMake targets (name, type, paths: what build_status reads from build.ninja) to build by name when test or
    example programs fail to build — libraries and the other programs — and those left out (tests, examples,
    demos, benchmarks, fuzzers: by their name, or a program by its sources' folders, a library when all its sources
    are in such folders: one test helper among a library's sources leaves the library in)."""
    keep, left = [], []
    for t in targets:
        if not t.get("type", "").endswith(("LIBRARY", "EXECUTABLE")):
            continue
        paths = [TEST_OR_EXAMPLE.search(p) for p in t.get("paths") or []]
        source = (all if t["type"].endswith("LIBRARY") else any)(paths) and bool(paths)
        (left if TEST_OR_EXAMPLE.search(t["name"]) or source else keep).append(t["name"])
    return keep, left


def products_not_built(root: Path) -> list[str]:
    """The programs the CMake build folder ROOT links (its build.ninja) that are neither tests nor examples, as
    split_targets tells them, and that the build did not make: a tool the target's libc cannot compile
    (`ru_maxrss` on WASI), left out by building the other targets by name. Empty for other build folders."""
    targets = ninja_targets.cmake_targets(root.parent, root.name)
    products, _ = split_targets(targets)
    return [t["name"] for t in targets if t["name"] in products and t["type"] == "EXECUTABLE"
            and t.get("output") and not t.get("built")]
