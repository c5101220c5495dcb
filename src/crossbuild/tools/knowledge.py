"""search_knowledge: the model's front door to the knowledge base of cross-build failures."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from crossbuild.env import debian_rules, dependency_names
from crossbuild.kb.base import MIN_RELATED_SCORE
from crossbuild.tools.base import Tool, ToolArgs, ToolResult
from crossbuild.tools.context import RunContext

KB_PER_RESULT = 2  # knowledge entries attached to one failure (new ones only)
KB_PER_VERDICT = 4  # to a verdict with several failed tests: the best new one for each, in order, up to this
KB_TEXTS = 16  # the failed tests searched (each search reads its output: a suite of 2,000 failures stays cheap)


class SearchKnowledgeArgs(ToolArgs):
    query: str = Field(min_length=3, max_length=4_000,
                       description="An error message or a symptom, e.g. 'Could NOT find ZLIB' or "
                                   "'undefined reference to __isoc23_sscanf'.")
    limit: int = Field(3, ge=1, le=10, description="How many entries to return at most.")


def _search(ctx: RunContext, args: SearchKnowledgeArgs, _: None) -> ToolResult:
    if ctx.kb is None:
        return ToolResult(ok=True, message="no knowledge base is loaded in this run.", data={"matches": []})
    # asked for, a weaker match is still worth showing, said as such (Match.fit; measured by `crossbuild kb eval`)
    matches = ctx.kb.search(args.query, limit=args.limit, min_score=MIN_RELATED_SCORE)
    if not matches:
        return ToolResult(ok=True, message="no knowledge-base entry matches this query.",
                          hint="search with the error's own lines (what the tool printed after `CMake Error at` or "
                               "`error:`), not the log's last lines",
                          data={"matches": []})
    text = "\n\n".join(f"{FIT_WORDS[m.fit]}\n{m.entry.render()}" for m in matches)
    return ToolResult(ok=True, message=text,
                      data={"matches": [{"id": m.entry.id, "score": round(m.score, 2), "how": m.how, "fit": m.fit}
                                        for m in matches]})


FIT_WORDS = {"fix": "matches its exact symptom (right 99% of the time):",
             "related": "related by its words (right about 9 times in 10): check it fits before applying",
             "weak": "a few words in common (right about half the time): read it as a lead only"}


def attach_knowledge(ctx: RunContext, text: str | Sequence[str], message: str, hint: str | None,
                     data: dict) -> tuple[str, str | None]:
    """Knowledge-base entries matching a failure's text (a failed command's log end), or each of several failures'
    (a verdict's failed test programs: one entry for each, so that one test's match cannot crowd out another's),
    once per entry and workspace session, for every face alike (agent loop, MCP): added to MESSAGE and
    DATA["kb"]. A dependency fix names the call."""
    texts = [t for t in ([text] if isinstance(text, str) else text) if t.strip()][:KB_TEXTS]
    if ctx.kb is None or not texts:
        return message, hint
    chosen: list = []
    each, most = (KB_PER_RESULT, KB_PER_RESULT) if len(texts) == 1 else (1, KB_PER_VERDICT)
    for one in texts:
        known = set(ctx.kb_attached) | {attach_key(m) for m in chosen}
        chosen += [m for m in ctx.kb.search(one, limit=4, seen=lambda m: attach_key(m) in ctx.kb_attached)
                   if attach_key(m) not in known][:each]
        if len(chosen) >= most:
            break
    chosen = chosen[:most]
    if not chosen:
        return message, hint
    ctx.kb_attached += [attach_key(m) for m in chosen]
    data["kb"] = [{"id": m.entry.id, "title": m.entry.title, "score": m.score, "how": m.how, "fit": m.fit,
                   "priority": m.entry.priority,
                   "actions": [a.model_dump(exclude_none=True) for a in m.actions()]} for m in chosen]
    fixes, related = [m for m in chosen if m.fit == "fix"], [m for m in chosen if m.fit != "fix"]
    if fixes:
        message += "\n\nKnowledge base (its exact symptom matched; apply the fix):\n" + "\n".join(
            m.entry.render() for m in fixes)
    if related:
        message += ("\n\nRelated knowledge (matched by words, not by its symptom; check it fits before applying):\n"
                    + "\n".join(m.entry.render() for m in related))
    # the call a hint names comes from an exact match only
    exact = [k for k in data["kb"] if k["fit"] == "fix"]
    names = [a["name"] for k in exact for a in k["actions"] if a.get("kind") == "dependency" and a.get("name")]
    tools = [a["name"] for k in exact for a in k["actions"] if a.get("kind") == "build_tool" and a.get("name")]
    written = _written_by_debian_rules(ctx, names[0]) if names else None
    if written:
        hint = (f"{written} is a file debian/rules writes, not a library: build_status shows its text (data "
                f"debian_files[{written!r}]); write it to {written} with write_file, then build "
                f"again")
    elif names:
        hint = (f'call build_dependency(name="{dependency_names.buildable_name(names[0])}") to cross-build it into '
                'the prefix, then configure again')
    elif tools:
        hint = f'call provide_build_tool(name="{tools[0]}") for the build machine, then run the failed step again'
    return message, hint


def _written_by_debian_rules(ctx: RunContext, name: str) -> str | None:
    """The workspace path of the file debian/rules writes that the missing NAME is."""
    rules = debian_rules.read(ctx.root)
    return debian_rules.file_named([f"src/{p}" for p, _ in rules.written_files], name) if rules else None


def attach_key(match) -> str:
    """An entry is shown once per session for each thing it names: `cmake-package-not-found` for ZLIB after it was
    shown for Nettle is news; the same entry for the same package again is not."""
    actions = ",".join(sorted(a.model_dump_json(exclude_none=True) for a in match.actions()))
    return f"{match.entry.id}|{actions}"


SEARCH_KNOWLEDGE = Tool(
    name="search_knowledge", args=SearchKnowledgeArgs, run=_search, read_only=True, idempotent=True,
    description=(
        "Search crossbuild's knowledge base of cross-compilation failures (missing dependencies, -Werror, try_run, "
        "host paths leaking in, zig linker flags, musl gaps, Windows quirks) for an error message; returns each "
        "matching entry's cause and fix. Failed configure/build commands already get matching entries attached, so "
        "use this for other questions. Returns nothing rather than something irrelevant."),
)
