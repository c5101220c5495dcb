"""`crossbuild build --engine langgraph`: the same agent driven by a LangGraph StateGraph — a model node, a tools
node and the usual conditional edge between them. Only the control flow is the graph's: each node calls the
loop's own step (budgets, trace, replay, knowledge attachment, progress checks, guards, verification), so the two
engines cannot drift apart.

The graph's state is LangChain messages. The tools node answers every call of the last AIMessage — its
`tool_calls` and its `invalid_tool_calls` alike (the trap the reference text names: a graph that answers only
`tool_calls` leaves a broken call unanswered, and the API rejects the next request)."""

from __future__ import annotations

from typing import Any

from crossbuild.agent.loop import CONTINUE, Agent
from crossbuild.models.base import Turn
from crossbuild.models.langchain_chat import LangChainUnavailable, ai_message, calls_of


def _langgraph():
    try:
        from langgraph.graph import START, MessagesState, StateGraph
    except ImportError:
        raise LangChainUnavailable("--engine langgraph needs the langgraph extra: "
                                   "pip install 'crossbuild[langgraph]'") from None
    return StateGraph, MessagesState, START


class GraphAgent(Agent):
    """An Agent whose control flow is a compiled LangGraph graph."""

    def _drive(self) -> None:
        graph = build_graph(self)
        # each step is two graph steps (model, tools); the agent's own step budget ends the run first
        graph.invoke({"messages": []}, {"recursion_limit": 2 * self.budgets.max_steps + 10})


def build_graph(agent: Agent) -> Any:
    StateGraph, MessagesState, START = _langgraph()  # no END: a run ends only by a Stop from the loop's policy
    from langchain_core.messages import HumanMessage, ToolMessage

    def model(state: dict[str, Any]) -> dict[str, Any]:
        turn = agent.model_step()
        reply: list[Any] = [ai_message(turn)]
        if not turn.tool_calls:
            reply.append(HumanMessage(content=CONTINUE))
        return {"messages": reply}

    def tools(state: dict[str, Any]) -> dict[str, Any]:
        calls = calls_of(state["messages"][-1])  # valid and invalid alike
        answers = agent.tool_step(Turn(tool_calls=calls))
        return {"messages": [ToolMessage(content=m.text, tool_call_id=m.call_id or "", name=m.name,
                                         status="error" if m.is_error else "success") for m in answers]}

    def route(state: dict[str, Any]) -> str:
        last = state["messages"][-1]
        return "tools" if getattr(last, "tool_calls", None) or getattr(last, "invalid_tool_calls", None) \
            else "model"

    g = StateGraph(MessagesState)
    g.add_node("model", model)
    g.add_node("tools", tools)
    g.add_edge(START, "model")
    g.add_conditional_edges("model", route, {"tools": "tools", "model": "model"})
    g.add_edge("tools", "model")
    return g.compile()
