"""search_knowledge: the model's front door to the knowledge base of cross-build failures."""

from __future__ import annotations

from pydantic import Field

from crossbuild.tools.base import Tool, ToolArgs, ToolResult
from crossbuild.tools.context import RunContext


class SearchKnowledgeArgs(ToolArgs):
    query: str = Field(min_length=3, max_length=4_000,
                       description="An error message or a symptom, e.g. 'Could NOT find ZLIB' or "
                                   "'undefined reference to __isoc23_sscanf'.")
    limit: int = Field(3, ge=1, le=10, description="How many entries to return at most.")


def _search(ctx: RunContext, args: SearchKnowledgeArgs, _: None) -> ToolResult:
    if ctx.kb is None:
        return ToolResult(ok=True, message="no knowledge base is loaded in this run.", data={"matches": []})
    matches = ctx.kb.search(args.query, limit=args.limit)
    if not matches:
        return ToolResult(ok=True, message="no knowledge-base entry matches this query.",
                          hint="search with the first error line of the log, not its last lines",
                          data={"matches": []})
    text = "\n\n".join(m.entry.render() for m in matches)
    return ToolResult(ok=True, message=text,
                      data={"matches": [{"id": m.entry.id, "score": round(m.score, 2), "how": m.how} for m in matches]})


SEARCH_KNOWLEDGE = Tool(
    name="search_knowledge", args=SearchKnowledgeArgs, run=_search, read_only=True, idempotent=True,
    description=(
        "Search crossbuild's knowledge base of cross-compilation failures (missing dependencies, -Werror, try_run, "
        "host paths leaking in, zig linker flags, musl gaps, Windows quirks) for an error message; returns each "
        "matching entry's cause and fix. Failed configure/build commands already get matching entries attached, so "
        "use this for other questions. Returns nothing rather than something irrelevant."),
)
