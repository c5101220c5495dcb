"""Which arguments of Debian's configure step (debian_rules.DebianRules.configure_args) a cross build takes over:
switches that can only turn a feature off, and the upstream version Debian passes where a release tarball has no
git to read it from. Never one that turns something on (it could need a dependency), and never the tests, programs
or examples the verifier runs as proof, except tests that need the network: Debian's builders have none, nor has
crossbuild's sandbox, so a switch that leaves only those out (libgit2's DISABLE_ONLINE_TESTS=ON) is taken."""

from __future__ import annotations

import re

_OFF_VALUE = re.compile(r"^-D[\w.-]+(?::\w+)?=(?:OFF|off|Off|FALSE|false|NO|no|0|disabled)$")
_ON_VALUE = re.compile(r"^-D[\w.-]+(?::\w+)?=(?:ON|on|On|TRUE|true|YES|yes|1)$")
_INVERTING = {"DISABLE", "NO", "WITHOUT", "SKIP"}  # -DDISABLE_X=ON turns X off, -DDISABLE_X=OFF turns it on
_NETWORK = {"ONLINE", "NETWORK", "NET", "INTERNET", "REMOTE"}
_PROOF_OPTION = re.compile(r"TEST|CHECK|PROGRAM|EXAMPLE|DEMO|SAMPLE|BENCH", re.IGNORECASE)
_OPTION_VERBS = {"BUILD", "ENABLE", "DISABLE", "WITH", "WITHOUT", "USE", "INSTALL", "HAVE", "ENABLED"}
# the words that name tests themselves; a word merely holding one (GTEST) names a test framework
_TESTS_THEMSELVES = re.compile(r"(UNIT)?TEST(S|ING)?|CHECKS?|EXAMPLES?|DEMOS?|SAMPLES?|BENCH(MARKS?)?|PROGRAMS?")
_COPY_WORDS = {"BUNDLED", "VENDORED", "EMBEDDED", "INTERNAL", "BUILTIN", "DOWNLOAD", "FETCH", "SYSTEM", "EXTERNAL"}


def switches_off(configure_args: list[str], system: str | None) -> dict[str, list[str]]:
    """The arguments of Debian's configure step that can only turn a feature off (-DX=OFF, --disable-x,
    --without-x: documentation, a TLS backend, a variant of the library), keyed by the recipe argument list they
    join; never one that turns something on (it could need a dependency), and never the tests, programs or examples
    the verifier runs as proof. An unknown -D only warns in CMake and an unknown --disable-x only warns in
    configure, but Meson stops on an unknown option: -D goes to Meson only when dh builds with Meson too."""
    off: dict[str, list[str]] = {}
    for arg in configure_args:
        if _turns_proof_off(arg) and not network_tests_only(arg):
            continue
        if (_OFF_VALUE.match(arg) and not _inverted(arg)) or (_ON_VALUE.match(arg) and _inverted(arg)):
            off.setdefault("meson_args" if system == "meson" else "cmake_args", []).append(arg)
        elif arg.startswith(("--disable-", "--without-")) and "=" not in arg:
            off.setdefault("configure_args", []).append(arg)
    return off


def _name_words(arg: str) -> list[str]:
    return re.split(r"[_-]", arg[2:].split("=", 1)[0].split(":", 1)[0].upper())


def _inverted(arg: str) -> bool:
    """Whether -DNAME's name says what its ON value leaves out (DISABLE_X, NO_X, LIBX_WITHOUT_Y); never one of
    CMake's own settings (CMAKE_SKIP_RPATH=ON changes how the build's programs find its libraries)."""
    words = _name_words(arg)
    return words[0] != "CMAKE" and any(w in _INVERTING for w in words[:-1])


def network_tests_only(arg: str) -> bool:
    """Whether ARG names only the tests that need the network (DISABLE_ONLINE_TESTS, --disable-network-tests)."""
    words = _name_words(arg) if arg.startswith("-D") else re.split(r"[-_]", arg.upper())
    return bool(set(words) & _NETWORK)


def _turns_proof_off(arg: str) -> bool:
    """Whether ARG names tests, programs or examples. For -DNAME, the words before its verb are the project's
    prefix (BENCHMARK_ENABLE_WERROR is not a benchmark switch), and an option choosing a bundled or downloaded copy
    (BENCHMARK_USE_BUNDLED_GTEST=OFF: the system's googletest) keeps the tests."""
    if not arg.startswith("-D"):
        return _PROOF_OPTION.search(arg) is not None
    words = _name_words(arg)
    verb = next((i for i, w in enumerate(words) if 0 < i < len(words) - 1 and w in _OPTION_VERBS), 0)
    words = words[verb:]
    proof = [w for w in words if _PROOF_OPTION.search(w)]
    # USE_BUNDLED_GTEST=OFF picks the system's test framework; BUILD_INTERNAL_TESTS=OFF still turns tests off
    return bool(proof) and not (set(words) & _COPY_WORDS and not any(_TESTS_THEMSELVES.fullmatch(w) for w in proof))


def version_args(configure_args: list[str], system: str | None, upstream_version: str | None) -> dict[str, list[str]]:
    """The -D arguments of Debian's configure step that set a version variable (its name holds VERSION, not one of
    CMake's own) to the upstream version (what a release tarball's build cannot read from git: benchmark's
    GIT_VERSION), keyed like switches_off; they name a version and turn nothing on."""
    if not upstream_version:
        return {}
    pattern = re.compile(r"-D(?!CMAKE_)[\w.-]*VERSION[\w.-]*(?::\w+)?=" + re.escape(upstream_version))
    found = [arg for arg in configure_args if pattern.fullmatch(arg) and not _turns_proof_off(arg)]
    return {"meson_args" if system == "meson" else "cmake_args": found} if found else {}
