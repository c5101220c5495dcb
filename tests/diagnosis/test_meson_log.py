"""Failed `meson setup` runs read from Meson's error location, the project's files and its options: real meson on
small projects whose errors name neither the option nor a missing file the usual way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from crossbuild.diagnosis import meson_log

MESON = str(Path(sys.executable).with_name("meson"))
OPTIONS = """option('tls', type : 'feature', value : 'enabled', description : 'TLS')
option('x11', type : 'boolean', value : true)
option('docs', type : 'boolean', value : false)
"""
GIZMO = """project('gizmo', 'c')
msg = '''a multi-line string
if it were code
'''
if get_option('docs')
  message('docs')
endif
if get_option('x11') and host_machine.system() != 'windows'
  xcb = dependency('xcb-nowhere', required : false)
  if not xcb.found()
    error('Gizmo needs its X backend; pass the right settings')
  endif
endif
tls = dependency('gizmo-tls-nowhere',
                 required : get_option('tls'))
"""


def _setup(tmp_path: Path, build: str, *args: str) -> meson_log.Diagnosis | None:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "meson_options.txt").write_text(OPTIONS)
    (src / "meson.build").write_text(build)
    r = subprocess.run([MESON, "setup", "build", "src", *args], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode != 0
    return meson_log.read(tmp_path, r.stdout + r.stderr, cwd=".", source="src")


def test_an_error_after_a_lookup_in_an_if_on_a_boolean_option(tmp_path):
    d = _setup(tmp_path, GIZMO)
    assert d is not None and d.where == "src/meson.build:11" and d.failed.startswith("error('Gizmo needs")
    assert d.missing == ("xcb-nowhere",)  # what xcb looked for
    assert [(s.name, s.arg) for s in d.switches] == [("x11", "-Dx11=false")]  # docs governs nothing here


def test_a_dependency_required_by_a_feature_option(tmp_path):
    d = _setup(tmp_path, GIZMO, "-Dx11=false")
    assert d is not None and d.where == "src/meson.build:14"
    assert d.missing == ("gizmo-tls-nowhere",)
    assert [(s.name, s.arg) for s in d.switches] == [("tls", "-Dtls=disabled")]


def test_an_or_that_held_claims_nothing(tmp_path):
    d = _setup(tmp_path, GIZMO.replace("if get_option('x11') and", "if get_option('x11') or"))
    assert d is not None and d.missing == ("xcb-nowhere",) and d.switches == ()


def test_an_apostrophe_in_a_comment_hides_no_endif(tmp_path):
    d = _setup(tmp_path, "project('c', 'c')\nif get_option('docs')\n  # Build the manual (don't ship it)\n"
                         "  message('docs')\nendif\n"
                         "tls = dependency('gizmo-tls-nowhere', required : get_option('tls'))\n")
    assert d is not None and [(s.name, s.arg) for s in d.switches] == [("tls", "-Dtls=disabled")]


def test_a_comparison_with_an_option_claims_nothing(tmp_path):
    d = _setup(tmp_path, "project('c', 'c')\nif get_option('x11') == false\n"
                         "  error('x11 is needed; a deliberately odd wording')\nendif\n", "-Dx11=false")
    assert d is not None and d.switches == ()


def test_a_generator_looked_for_by_find_program_is_named_as_a_program_the_build_machine_lacks(tmp_path):
    """libxkbcommon: bison, else byacc, each `find_program(..., required: false)`, and an error() in the last else:
    the programs they looked for, in the project's order of preference, for provide_build_tool (not
    build_dependency: they run on the build machine)."""
    d = _setup(tmp_path, """project('kb', 'c')
bison = find_program('bison-nowhere', 'win_bison-nowhere', required: false)
if bison.found()
  message('bison')
else
  byacc = find_program('byacc-nowhere', required: false)
  if byacc.found()
    message('byacc')
  else
    error('Could not find a compatible YACC program (bison or byacc)')
  endif
endif
""")
    assert d is not None and d.where == "src/meson.build:10" and d.missing == ()
    assert d.programs == ("bison-nowhere", "win_bison-nowhere", "byacc-nowhere")
    assert "programs looked for and not found: bison-nowhere" in d.summary()


def test_a_library_looked_for_by_find_library_is_named_with_optional_lookups_before_it_left_out(tmp_path):
    """`cc.find_library('ltdl', required : true)` after optional dependency() lookups that found nothing: Meson's
    error names the library only in its message; the diagnosis names what the failing call looked for (the
    library, which build_dependency resolves through Debian's index), never the optional lookups before it."""
    d = _setup(tmp_path, "project('fl', 'c')\ncc = meson.get_compiler('c')\n"
                         "opt = dependency('optional-nowhere', required : false)\n"
                         "ltdl = cc.find_library('ltdl-nowhere', required : true)\n")
    assert d is not None and d.where == "src/meson.build:4" and d.missing == ("ltdl-nowhere",)
    assert d.failed.startswith("ltdl = cc.find_library(")
