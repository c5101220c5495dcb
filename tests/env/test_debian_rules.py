"""debian/rules read as text: dh's build system, folders and the literal configure arguments; everything made of
make variables that cannot be known without running make is left out and counted."""

from __future__ import annotations

from crossbuild.env import debian_args, debian_rules
from crossbuild.env.debian_rules import parse


def test_build_system_folders_and_configure_arguments():
    r = parse("#!/usr/bin/make -f\n"
              "include /usr/share/dpkg/architecture.mk\n"
              "COMMON = -DBUILD_DOCS=OFF \\\n\t-DWITH_ZLIB=ON\n"
              "%:\n\tdh $@ --buildsystem=cmake+ninja --sourcedirectory=$(CURDIR)/build/cmake\n"
              "override_dh_auto_configure:\n"
              "\tdh_auto_configure -- $(COMMON) \\\n\t\t-DLIBDIR=lib/$(DEB_HOST_MULTIARCH) -DCERTS=/etc/ssl/ca.pem "
              "-DSHARED=ON # the shared build\n")
    assert r.buildsystem == "cmake+ninja" and r.system == "cmake"
    assert r.sourcedir == "build/cmake"
    assert r.configure_args == ("-DBUILD_DOCS=OFF", "-DWITH_ZLIB=ON", "-DSHARED=ON")
    assert "-DLIBDIR=lib/$(DEB_HOST_MULTIARCH)" in r.dropped_args and "-DCERTS=/etc/ssl/ca.pem" in r.dropped_args


def test_conditionals_and_documentation_rules_are_not_taken_as_the_configure_step():
    r = parse("%:\n\tdh $@\n"
              "override_dh_auto_configure-indep:\n\tdh_auto_configure -- --enable-docs\n"
              "override_dh_auto_configure-arch:\n"
              "ifeq ($(DEB_HOST_ARCH),mips)\n\tdh_auto_configure -- --disable-asm\nendif\n"
              "\tdh_auto_configure -- --without-python\n")
    assert r.buildsystem is None and r.system is None  # dh chooses; crossbuild's own detection stands
    assert r.configure_args == ("--without-python",)


def test_short_options_and_autoreconf():
    r = parse("%:\n\tdh $@ -Bbuild -O--buildsystem=autoconf --without autoreconf\n")
    assert (r.builddir, r.buildsystem, r.autoreconf, r.system) == ("build", "autoconf", False, "configure")
    r = parse("%:\n\tdh $@ --with autoreconf,python3\n")
    assert r.autoreconf is True and r.system is None


def test_a_build_system_crossbuild_can_use_wins_over_one_it_cannot():
    r = parse("ifeq (,$(filter nopython,$(DEB_BUILD_PROFILES)))\n%:\n\tdh $@ --buildsystem=pybuild\n"
              "else\n%:\n\tdh $@ --buildsystem=cmake\nendif\n")
    assert r.system == "cmake"


def test_shell_calls_and_unknown_variables_never_become_arguments():
    r = parse("%:\n\tdh $@\noverride_dh_auto_configure:\n"
              "\tdh_auto_configure -- --enable-threads $(shell dpkg-buildflags --export=configure) $(EXTRA) x=$$HOME\n")
    assert r.configure_args == ("--enable-threads",)
    assert len(r.dropped_args) == 3 and all("$" in a for a in r.dropped_args)


def test_read_finds_the_file_below_the_workspace_and_never_follows_a_link(tmp_path):
    (tmp_path / "src" / "debian").mkdir(parents=True)
    (tmp_path / "src" / "debian" / "rules").write_text("%:\n\tdh $@ --buildsystem=meson\n")
    assert debian_rules.read(tmp_path).system == "meson"
    (tmp_path / "other" / "debian").mkdir(parents=True)
    (tmp_path / "other" / "debian" / "rules").symlink_to("/etc/passwd")
    assert debian_rules.read(tmp_path, "other") is None
    assert debian_rules.read(tmp_path, "missing") is None


def test_only_switches_that_turn_a_feature_off_are_offered_and_never_the_proof():
    args = ["-DFMT_DOC=off", "-DX:BOOL=OFF", "-DBUILD_TESTING=OFF", "-DENABLE_PROGRAMS=OFF", "-DUSE_HTTPS=mbedTLS",
            "-DWITH_Y=ON", "--disable-static", "--without-openssl", "--disable-tests", "--enable-z", "--disable-q=no"]
    assert debian_args.switches_off(args, "cmake") == {"cmake_args": ["-DFMT_DOC=off", "-DX:BOOL=OFF"],
                                                        "configure_args": ["--disable-static", "--without-openssl"]}
    assert list(debian_args.switches_off(["-DDOCS=false"], "meson")) == ["meson_args"]
    assert debian_args.switches_off(["-DDOCS=false"], None) == {"cmake_args": ["-DDOCS=false"]}  # Meson would stop


def test_a_switch_whose_name_inverts_it_and_debians_no_network_tests_are_read_the_right_way_round():
    args = ["-DDISABLE_ONLINE_TESTS=ON", "-DLIBX_DISABLE_DOCS=ON", "-DNO_ZLIB=1", "-DDISABLE_FOO=OFF",
            "-DBUILD_TESTS=ON", "-DENABLE_NETWORK_TESTS=OFF", "-DDISABLE_TESTS=ON", "-DCMAKE_SKIP_RPATH=ON"]
    assert debian_args.switches_off(args, "cmake") == {"cmake_args": [
        "-DDISABLE_ONLINE_TESTS=ON", "-DLIBX_DISABLE_DOCS=ON", "-DNO_ZLIB=1", "-DENABLE_NETWORK_TESTS=OFF"]}
    assert debian_args.switches_off(["--disable-network-tests", "--disable-tests"], None) == {
        "configure_args": ["--disable-network-tests"]}


def test_what_debian_exports_only_when_cross_building_is_taken_and_nothing_else():
    # sqlite3's rules: its Makefile builds lemon for the build machine only when CROSS_BUILDING=yes
    rules = debian_rules.parse("""\
export DEB_HOST_GNU_TYPE ?= $(shell dpkg-architecture -qDEB_HOST_GNU_TYPE)
ifeq ($(DEB_BUILD_GNU_TYPE), $(DEB_HOST_GNU_TYPE))
  export CROSS_BUILDING=no
else
  export CROSS_BUILDING=yes
  export CC=$(DEB_HOST_GNU_TYPE)-gcc
  export PKG_CONFIG=aarch64-linux-gnu-pkg-config
  export TCL_DIR=/usr/lib/tcl8.6
  ifeq ($(DEB_HOST_ARCH),arm64)
    export ONLY_ON_ARM64=1
  endif
endif
ifneq ($(DEB_HOST_ARCH),$(DEB_BUILD_ARCH))
  export GENERATOR_FOR_BUILD_TOO=yes
  NOT_EXPORTED=1
endif
%:
\tdh $@
""")
    assert rules.cross_env == (("CROSS_BUILDING", "yes"), ("GENERATOR_FOR_BUILD_TOO", "yes"))
    assert "when cross-building: CROSS_BUILDING=yes GENERATOR_FOR_BUILD_TOO=yes" in rules.describe()


def test_make_goals_and_variables_of_the_build_step_only_when_all_are_plain():
    http_parser = ("%:\n\tdh $@\n\noverride_dh_auto_build:\n\tdh_auto_build -- package\n"
                   "\tdh_auto_build -- library\n")
    assert parse(http_parser).build_args == ("package", "library")
    assert "make: package library" in parse(http_parser).describe()
    assert parse("override_dh_auto_build:\n\tdh_auto_build -- REBUILD_TABLES=1\n").build_args == ("REBUILD_TABLES=1",)
    for unclear in (
        # bzip2: make variables in the same call; libtommath: an option and a path crossbuild cannot place
        "override_dh_auto_build-arch:\n\tdh_auto_build -- libbz2.a bzip2 bzip2recover \\\n"
        "\t  $(foreach v,CC CFLAGS CPPFLAGS LDFLAGS,'$(v)=$($(v))')\n",
        "override_dh_auto_build-arch:\n\tdh_auto_build --buildsystem=makefile -- -f makefile.shared "
        "LIBTOOL=$(CURDIR)/debian/libtool/libtool\n",
        "override_dh_auto_build-indep:\n\tdh_auto_build -- apidoc\n",  # documentation only
        "ifeq ($(DEB_HOST_ARCH),amd64)\noverride_dh_auto_build:\n\tdh_auto_build -- fast\nendif\n",
    ):
        assert parse(unclear).build_args == (), unclear
    # a toolchain variable is crossbuild's to set: the goal stays, Debian's compiler does not
    assert parse("override_dh_auto_build:\n\tdh_auto_build -- CC=gcc-12 all\n").build_args == ("all",)


LUA_LIKE_RULES = """\
include /usr/share/dpkg/architecture.mk
LUA_MULTIARCH = lua5.4-deb-multiarch.h
%:
\tdh $@

override_dh_auto_configure:
\techo "#ifndef _LUA_DEB_MULTIARCH_" > src/$(LUA_MULTIARCH)
\techo "#define DEB_HOST_MULTIARCH \\"$(DEB_HOST_MULTIARCH)\\"" >> \\
\t\tsrc/$(LUA_MULTIARCH)
\techo "#endif" >> src/$(LUA_MULTIARCH)
"""


def test_files_the_rules_write_with_echo_are_read_and_filled_for_the_target():
    """lua5.4's rules write the header its Debian patch includes; the host variables get the target's values."""
    rules = parse(LUA_LIKE_RULES)
    assert [path for path, _ in rules.written_files] == ["src/lua5.4-deb-multiarch.h"]
    assert rules.files_written({"DEB_HOST_MULTIARCH": "aarch64-linux-musl"}) == {"src/lua5.4-deb-multiarch.h": (
        '#ifndef _LUA_DEB_MULTIARCH_\n#define DEB_HOST_MULTIARCH "aarch64-linux-musl"\n#endif\n')}
    assert rules.files_written({}) == {}  # a reference left unfilled: the file is not offered at all
    assert "writes src/lua5.4-deb-multiarch.h" in rules.describe()
    assert debian_rules.file_named(["src/src/lua5.4-deb-multiarch.h"], "lua5.4-deb-multiarch") == \
        "src/src/lua5.4-deb-multiarch.h"
    assert debian_rules.file_named(["src/src/lua5.4-deb-multiarch.h"], "lua5.4") is None


def test_only_plain_unconditional_echo_lines_into_package_paths_count():
    for line in (
        "\techo -e 'a\\tb' > x.h",  # an option changes what echo writes
        "\techo a > ../outside.h",  # climbs out of the package
        "\techo a > /etc/x.h",  # absolute
        "\techo a; rm -rf x > x.h",  # another command on the line
        "\techo `date` > x.h",  # a command substitution
        "\tcat a > x.h",  # not echo
    ):
        assert parse(f"build:\n{line}\n").written_files == (), line
    conditional = "ifeq ($(DEB_HOST_ARCH),amd64)\nbuild:\n\techo a > x.h\nendif\n"
    assert parse(conditional).written_files == ()
    assert parse("build:\n\t@echo a > x.h\n\techo b >> x.h\n").written_files == (("x.h", "a\nb\n"),)


BENCHMARK_RULES = """\
#!/usr/bin/make -f
include /usr/share/dpkg/pkg-info.mk

%:
\tdh $@ --buildsystem=cmake

override_dh_auto_configure:
\tdh_auto_configure -- -DGIT_VERSION="$(DEB_VERSION_UPSTREAM)" \\
\t\t-DBUILD_SHARED_LIBS=ON -DFULL=$(DEB_VERSION) -DNAME=$(DEB_SOURCE)
"""


def test_the_version_is_read_from_the_top_of_a_long_changelog(tmp_path):
    (tmp_path / "src" / "debian").mkdir(parents=True)
    (tmp_path / "src" / "debian" / "rules").write_text(BENCHMARK_RULES)
    (tmp_path / "src" / "debian" / "changelog").write_text(
        "benchmark (1.7.1-1) unstable; urgency=medium\n" + "  * an old change\n" * 2000)
    assert debian_rules.read(tmp_path).upstream_version == "1.7.1"


def test_the_upstream_version_debian_passes_for_a_tarball_without_git_is_taken_and_nothing_else():
    # google benchmark's release tarball has no .git: its CMake reads the version from git, Debian passes it
    rules = debian_rules.parse(BENCHMARK_RULES, "benchmark (1:1.7.1-1) unstable; urgency=medium")
    assert rules.upstream_version == "1.7.1"
    assert "-DGIT_VERSION=1.7.1" in rules.configure_args and "-DFULL=1:1.7.1-1" in rules.configure_args
    assert debian_args.version_args(list(rules.configure_args), rules.system, rules.upstream_version) == \
        {"cmake_args": ["-DGIT_VERSION=1.7.1"]}
    # a native package has no revision; an epoch stays only where dpkg keeps it
    native = debian_rules.parse(BENCHMARK_RULES, "benchmark (2:1.8) unstable; urgency=medium")
    assert native.upstream_version == "1.8" and "-DFULL=2:1.8" in native.configure_args
    # without pkg-info.mk the variables are empty in make: nothing is made up
    plain = debian_rules.parse(BENCHMARK_RULES.replace("include /usr/share/dpkg/pkg-info.mk", ""),
                               "benchmark (1.7.1-1) unstable; urgency=medium")
    assert plain.upstream_version is None and not any("GIT_VERSION" in a for a in plain.configure_args)
    # a changelog line that is not one (a hostile package) gives no version
    odd = debian_rules.parse(BENCHMARK_RULES, "benchmark ($(shell rm -rf /)) unstable")
    assert odd.upstream_version is None
    assert debian_args.version_args(["-DGIT_VERSION=1.7.1"], "cmake", None) == {}


def test_a_projects_prefix_or_a_bundled_copy_does_not_make_a_switch_a_test_switch():
    taken = debian_args.switches_off(["-DBENCHMARK_ENABLE_WERROR=OFF", "-DBENCHMARK_USE_BUNDLED_GTEST=OFF",
                                       "-DBENCHMARK_ENABLE_GTEST_TESTS=OFF", "-DBENCHMARK_ENABLE_TESTING=OFF",
                                       "-DLEVELDB_BUILD_BENCHMARKS=OFF", "-DZSTD_BUILD_PROGRAMS=OFF",
                                       "-DBUILD_TESTING=OFF", "--disable-tests"], "cmake")
    assert taken == {"cmake_args": ["-DBENCHMARK_ENABLE_WERROR=OFF", "-DBENCHMARK_USE_BUNDLED_GTEST=OFF"]}


def test_real_test_switches_and_non_version_names_are_still_refused():
    for arg in ("-DFOO_TESTS_ENABLED=OFF", "-DCHECK_ENABLE=OFF", "-DBUILD_INTERNAL_TESTS=OFF"):
        assert debian_args.switches_off([arg], "cmake") == {}, arg
    assert debian_args.switches_off(["-DUSE_SYSTEM_CATCH2=OFF"], "cmake") == {"cmake_args": ["-DUSE_SYSTEM_CATCH2=OFF"]}
    got = debian_args.version_args(["-DCMAKE_TOOLCHAIN_FILE=0", "-DBUILD_TESTING=0", "-DTEST_VERSION=0",
                                    "-DPROJECT_VERSION=0"], "cmake", "0")
    assert got == {"cmake_args": ["-DPROJECT_VERSION=0"]}


def test_a_rules_file_of_blank_lines_is_read_in_linear_time():
    import time
    start = time.monotonic()
    debian_rules.parse("%:\n\tdh $@\n" + "\n" * 200_000 + "include /usr/share/dpkg/pkg-info.mk\n", "x (1-1) u")
    assert time.monotonic() - start < 5  # quadratic took hours on 1 MB
