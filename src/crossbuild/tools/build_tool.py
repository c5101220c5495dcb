"""provide_build_tool: a program or data file the build runs or reads on the build machine (bison, gperf, nasm,
/usr/share/unicode/...) that this machine lacks, provided from Debian's archive into every later command."""

from __future__ import annotations

from pydantic import Field

from crossbuild.env import build_tools
from crossbuild.tools.base import Tool, ToolArgs, ToolFailure, ToolResult
from crossbuild.tools.context import RunContext


class ProvideBuildToolArgs(ToolArgs):
    name: str = Field(min_length=1, max_length=400,
                      description="A program the build runs on the build machine, as the error names it (bison, "
                                  "flex, gperf, nasm, help2man, BISON), a Perl module its perl lacks "
                                  "(XML::Parser, for intltool), or the absolute path of a data file it "
                                  "could not read (/usr/share/unicode/CaseFolding.txt, "
                                  "/usr/src/googletest/CMakeLists.txt).")


def _provide(ctx: RunContext, args: ProvideBuildToolArgs, _: None) -> ToolResult:
    try:
        found = build_tools.provide(args.name)
    except build_tools.ToolError as e:
        raise ToolFailure(str(e), name=args.name, hint=(
            "if the step that needs it is optional (documentation, man pages, regenerating shipped files), turn it "
            "off; otherwise the project needs a tool this machine cannot get")) from None
    how = ("already available" if found.already else f"unpacked {', '.join(found.added)} from Debian's archive")
    message = (f"{args.name}: {found.package} ({'; '.join(found.evidence)}), {how}. Every later command sees it "
               "(programs on PATH, data in /usr/share and /usr/src); run the failed step again.")
    return ToolResult(ok=True, message=message, data={"name": args.name, "package": found.package,
                                                      "added": found.added, "already": found.already})


PROVIDE_BUILD_TOOL = Tool(
    name="provide_build_tool", args=ProvideBuildToolArgs, run=_provide, idempotent=True,
    description=(
        "Provide a program or data file the build needs on the build machine and this machine lacks (`bison: not "
        "found`, `Could NOT find BISON`, a missing /usr/share/... table, the /usr/src/googletest sources a "
        "Debian-patched build compiles): its Debian package is unpacked, read-only, into every later command "
        "(programs on PATH, data in /usr/share and /usr/src); the host itself is not changed. For "
        "build-machine tools only: libraries the target program links come from build_dependency."),
)
