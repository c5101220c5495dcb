"""crossbuild's guarded tools for your own LangGraph graph: the tools as LangChain tools (to bind to your chat
model), a tools node that answers every call of the last AIMessage — `invalid_tool_calls` included, which
LangGraph's prebuilt ToolNode and tools_condition leave unanswered — and the route that goes with it.

    from crossbuild.integrations.langgraph import crossbuild_tools, tools_node, route_tools, open_workspace
    ctx = open_workspace("debian:zlib", "ws", "aarch64-linux-musl")
    model = ChatOpenAI(model="gpt-4o").bind_tools(crossbuild_tools(ctx))
    ...  (README: "LangGraph")

Every call goes through crossbuild's own dispatcher: the same argument checks, path guards, sandbox, output
budgets, structured errors and knowledge attachment as `crossbuild build` and the MCP server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crossbuild import kb
from crossbuild.env import workspace
from crossbuild.foundation.targets import parse_target
from crossbuild.models.langchain_chat import calls_of
from crossbuild.tools import Toolset, default_toolset
from crossbuild.tools.context import RunContext
from crossbuild.tools.schemas import input_schema


def open_workspace(source: str, root: str | Path, target: str) -> RunContext:
    """Prepare SOURCE (a folder, tarball, git URL or debian:NAME) in ROOT and the context the tools act on."""
    ws = workspace.prepare(source, Path(root))
    return RunContext.create(ws.root, parse_target(target), kb=kb.load())


def crossbuild_tools(ctx: RunContext, toolset: Toolset | None = None) -> list[Any]:
    """The tools as LangChain StructuredTools (JSON Schema arguments, the model-facing descriptions)."""
    from langchain_core.tools import StructuredTool

    toolset = toolset or default_toolset()

    def runner(name: str):
        def run(**arguments: Any) -> str:
            return toolset.dispatch(ctx, name, json.dumps(arguments)).render()
        return run

    return [StructuredTool.from_function(func=runner(t.name), name=t.name, description=t.description,
                                         args_schema=input_schema(t)) for t in toolset.tools.values()]


def tools_node(ctx: RunContext, toolset: Toolset | None = None):
    """A graph node answering every call of the last AIMessage with exactly one ToolMessage, in the model's order:
    a call whose arguments were not JSON gets crossbuild's structured `invalid_json` error, an unknown tool
    `unknown_tool` with the names that exist."""
    from langchain_core.messages import ToolMessage

    toolset = toolset or default_toolset()

    def node(state: dict[str, Any]) -> dict[str, Any]:
        answers = []
        for call in calls_of(state["messages"][-1]):
            result = toolset.dispatch(ctx, call.name, call.arguments)
            answers.append(ToolMessage(content=result.render(), tool_call_id=call.id, name=call.name,
                                       status="success" if result.ok else "error", artifact=result.to_dict()))
        return {"messages": answers}
    return node


def route_tools(state: dict[str, Any]) -> str:
    """"tools" when the last AIMessage made any call, valid or not; else END."""
    from langgraph.graph import END

    last = state["messages"][-1]
    return "tools" if getattr(last, "tool_calls", None) or getattr(last, "invalid_tool_calls", None) else END
