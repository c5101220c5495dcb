"""`crossbuild build` with the offline planner on projects that run a program of the build machine while they
build (a parser generator), as a user runs it: the program is provided from Debian's archive when the project's
own records name it, whatever its error message says."""

from __future__ import annotations

import shutil

import pytest

from crossbuild.env import build_tools
from tests.agent.test_planner_builds import _build, _project

_GRAMMAR = """%{
int yylex(void);
void yyerror(const char *s);
%}
%token NUM
%%
sum: NUM '+' NUM { $$ = $1 + $3; } ;
%%
"""


@pytest.mark.slow
def test_a_parser_generator_meson_looks_for_under_its_own_error_message_is_provided(tmp_path):
    """libxkbcommon's meson.build: `find_program('bison', required: false)`, else byacc, else its own error()
    ("Could not find a compatible YACC program"), which no knowledge-base pattern knows. Meson's records (the
    error's location, the find_program() the enclosing if() tests) name the program; the planner provides it for
    the build machine and the parser is generated, compiled for the target and tested there."""
    # byacc, which no other test asks for: taken out of the shared cache of provided tools, so that it is
    # provided by this run (an earlier run's copy would be found, and nothing here tested)
    shutil.rmtree(build_tools.root() / "byacc", ignore_errors=True)
    src = _project(tmp_path / "calc", {
        "meson.build": "project('calc', 'c')\n"
                       "yacc = find_program('byacc', required: false)\n"
                       "if not yacc.found()\n"
                       "  error('Could not find a compatible YACC program (bison or byacc)')\n"
                       "endif\n"
                       "parser = custom_target('parser', input: 'sum.y', output: ['sum.tab.c'],\n"
                       "  command: [yacc, '-o', '@OUTPUT0@', '@INPUT@'])\n"
                       "lib = static_library('calc', 'calc.c', parser, install: true)\n"
                       "test('calc', executable('calc_test', 'calc_test.c', link_with: lib))\n",
        "sum.y": _GRAMMAR,
        "calc.c": "int yylex(void) { return 0; }\nvoid yyerror(const char *s) { (void)s; }\n"
                  "int calc_twice(int x) { return 2 * x; }\n",
        "calc_test.c": "int calc_twice(int);\nint main(void) { return calc_twice(21) == 42 ? 0 : 1; }\n",
    })
    r, out = _build(tmp_path, str(src), "aarch64-linux-musl")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "looked for byacc on the build machine" in out["message"], out["message"]
    assert out["verify"]["proof"] == "tested", out["verify"].get("proof_why")
    assert (tmp_path / "ws" / "build" / "sum.tab.c").is_file()
