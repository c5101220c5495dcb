"""The agent loop: a model proposes tool calls, the tools decide what runs, the verifier decides success."""

from crossbuild.agent.budgets import Budgets
from crossbuild.agent.events import Event
from crossbuild.agent.loop import Agent, RunOutcome

__all__ = ["Agent", "Budgets", "Event", "RunOutcome"]
