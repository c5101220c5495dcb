"""Failed CMake configures read from CMake's own records: real cmake runs on small projects, each failing in a
different wording, with the trace on; the diagnosis names the failing call, what it looked for and the switch."""

from __future__ import annotations

import subprocess
from pathlib import Path

from crossbuild.diagnosis import cmake_trace

TLS_FILE = """function(gadget_find_tls)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(TLSLIB QUIET gadget-nonexistent-tls>=3.0)
  if(NOT TLSLIB_FOUND)
    message(FATAL_ERROR "Gadget: no secure transport backend available")
  endif()
endfunction()
"""
GADGET = """cmake_minimum_required(VERSION 3.16)
project(gadget NONE)
option(GADGET_SECURE_TRANSPORT "Talk to servers over TLS" ON)
option(GADGET_DOCS "docs" OFF)
if(GADGET_DOCS)
  message(STATUS docs)
endif()
if(GADGET_SECURE_TRANSPORT AND NOT WIN32)
  include(cmake/tls.cmake)
  gadget_find_tls()
endif()
"""
BUNDLED = """cmake_minimum_required(VERSION 3.16)
project(bund NONE)
set(BUND_USE_VENDORED_ZSTD OFF CACHE BOOL "use the copy in third_party/")
if(BUND_USE_VENDORED_ZSTD)
  message(STATUS vendored)
else()
  find_package(ZstdNowhere REQUIRED)
endif()
"""


def _configure(tmp_path: Path, files: dict[str, str], *args: str) -> cmake_trace.Diagnosis | None:
    for rel, text in files.items():
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / rel).write_text(text)
    (tmp_path / "build").mkdir(exist_ok=True)
    trace = tmp_path / "build" / "trace.json"
    r = subprocess.run(["cmake", "-S", "src", "-B", "build", *args, *cmake_trace.TRACE_ARGS,
                        f"--trace-redirect={trace}"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    cache = (tmp_path / "build" / "CMakeCache.txt").read_text()
    return cmake_trace.read((tmp_path, "build/trace.json"), r.stdout + r.stderr, root=tmp_path, source="src",
                            cache=cache)


def test_a_projects_own_message_in_a_function_of_an_included_file(tmp_path):
    d = _configure(tmp_path, {"CMakeLists.txt": GADGET, "cmake/tls.cmake": TLS_FILE})
    assert d is not None
    assert d.failed.startswith("message(FATAL_ERROR Gadget: no secure transport")
    assert d.where == "src/cmake/tls.cmake:5"
    assert d.chain == ("src/CMakeLists.txt:10 gadget_find_tls()",)
    assert d.missing == ("gadget-nonexistent-tls",)  # TLSLIB_FOUND names pkg_check_modules' prefix
    [switch] = d.switches  # WIN32 is no option; GADGET_DOCS governs nothing here
    assert (switch.name, switch.value, switch.arg) == ("GADGET_SECURE_TRANSPORT", "ON", "-DGADGET_SECURE_TRANSPORT=OFF")
    assert switch.declared == "src/CMakeLists.txt:3"
    assert "src/CMakeLists.txt:8" in switch.why
    assert d.message == "Gadget: no secure transport backend available"


def test_a_required_package_in_the_else_of_a_cache_bool_is_switched_by_turning_it_on(tmp_path):
    d = _configure(tmp_path, {"CMakeLists.txt": BUNDLED})
    assert d is not None and d.failed.startswith("find_package(ZstdNowhere REQUIRED")
    assert d.missing == ("ZstdNowhere",)
    assert [(s.name, s.arg) for s in d.switches] == [("BUND_USE_VENDORED_ZSTD", "-DBUND_USE_VENDORED_ZSTD=ON")]
    assert "which was false" in d.switches[0].why


def test_a_value_set_on_the_command_line_is_the_switchs_current_value(tmp_path):
    d = _configure(tmp_path, {"CMakeLists.txt": GADGET, "cmake/tls.cmake": TLS_FILE},
                   "-DGADGET_SECURE_TRANSPORT=yes")
    assert d is not None and d.switches[0].value == "yes"


def test_a_trace_that_is_a_link_is_not_followed(tmp_path):
    """The trace is written by the build: a link in its place (to a host file) reads as no trace at all."""
    secret = tmp_path / "secret.json"
    secret.write_text('{"args":["FATAL_ERROR","x"],"cmd":"message","file":"/x","line":1,"frame":1}\n')
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "trace.json").symlink_to(secret)
    assert cmake_trace.read((tmp_path, "build/trace.json"), "CMake Error at x:1 (message):\n", root=tmp_path,
                            source="src", cache=None) is None


def test_the_error_location_is_matched_exactly_not_by_a_files_suffix(tmp_path):
    """CMakeLists.txt:6 failed; sub/CMakeLists.txt:6 ran a message() under its own option: that one is not it."""
    d = _configure(tmp_path, {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(top NONE)\noption(TOP_X \"x\" ON)\n"
                          "add_subdirectory(sub)\nif(TOP_X)\nmessage(FATAL_ERROR \"top failed\")\nendif()\n",
        "sub/CMakeLists.txt": "option(SUB_DOCS \"docs\" ON)\nif(SUB_DOCS)\n\n\n\nmessage(STATUS \"docs\")\n"
                              "endif()\n"})
    assert d is not None and d.where == "src/CMakeLists.txt:6"
    assert [s.name for s in d.switches] == ["TOP_X"]


def test_the_build_systems_own_settings_are_never_offered(tmp_path):
    d = _configure(tmp_path, {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(t NONE)\n"
                                                "option(CMAKE_SKIP_THINGS \"x\" ON)\noption(T_TLS \"x\" ON)\n"
                                                "if(CMAKE_SKIP_THINGS AND T_TLS)\nmessage(FATAL_ERROR \"no\")\n"
                                                "endif()\n"})
    assert d is not None and [s.name for s in d.switches] == ["T_TLS"]


def test_a_module_include_could_not_find_is_what_was_missing_and_only_that_include(tmp_path):
    d = _configure(tmp_path, {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(k NONE)\n"
                                                "include(cmake/own.cmake)\n",
                              "cmake/own.cmake": "include(ECMNowhereModule)\n"})
    assert d is not None and d.failed == "include(ECMNowhereModule)" and d.chain == ("src/CMakeLists.txt:3 include()",)
    assert d.missing == ("ECMNowhereModule.cmake",)  # not the project's own include that led there


def test_a_package_named_through_a_variable_is_named_as_cmake_looked_for_it(tmp_path):
    """KDE's `find_package(Qt${QT_MAJOR_VERSION} ...)`: the trace's arguments are expanded, so the name handed to
    build_dependency is the one CMake searched for, never `Qt${QT_MAJOR_VERSION}`."""
    d = _configure(tmp_path, {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(k C)\n"
                                                "set(GUI_MAJOR 7)\n"
                                                "find_package(GuiNowhere${GUI_MAJOR} 7.2 REQUIRED NO_MODULE)\n"})
    assert d is not None and d.missing == ("GuiNowhere7",), d
    assert d.failed.startswith("find_package(GuiNowhere7 7.2 REQUIRED")
