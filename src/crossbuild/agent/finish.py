"""The `finish` tool: how a model ends a run. "built" asks for verification (the verifier decides, not the claim);
"blocked" gives up and says why."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from crossbuild.models.base import FINISH_SUMMARY_MAX
from crossbuild.tools import paths
from crossbuild.tools.base import Tool, ToolArgs, ToolResult
from crossbuild.tools.context import RunContext


class FinishArgs(ToolArgs):
    status: Literal["built", "blocked"] = Field(description="built: ask crossbuild to verify the build; blocked: "
                                                            "give up, with the reason in summary.")
    summary: str = Field(max_length=FINISH_SUMMARY_MAX,
                         description="What you did, or what blocked you and what you tried.")
    output_dir: str = Field("build", description="Folder holding the build's results, relative to the workspace "
                                                 "(build, or src for in-tree builds).")


def _authorize(ctx: RunContext, args: FinishArgs):
    return paths.resolve(ctx, args.output_dir) if args.status == "built" else None


def _finish(ctx: RunContext, args: FinishArgs, output_dir) -> ToolResult:
    shown = paths.display(ctx, output_dir) if output_dir else None
    return ToolResult(ok=True, message=f"finish requested ({args.status})",
                      data={"status": args.status, "summary": args.summary, "output_dir": shown})


FINISH = Tool(
    name="finish", args=FinishArgs, run=_finish, authorize=_authorize,
    description=(
        "End the run. With status='built', crossbuild verifies output_dir (every binary for the target, test "
        "programs pass under qemu, a clean rebuild from src/ replaying your successful commands gives the same "
        "artifacts); if verification fails you get the reasons and can continue. With status='blocked', the run "
        "stops and your summary is reported: say what blocked you and what you tried. If only test programs failing "
        "without a crash refused the last verdict, crossbuild then builds for the build machine too: when each fails "
        "the same way there, the build is verified with them not counted."),
)
