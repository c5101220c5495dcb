"""The agent loop: a model proposes tool calls, the tools decide what runs, the verifier decides success."""

from .budgets import Budgets
from .events import Event
from .loop import Agent, RunOutcome

__all__ = ["Agent", "Budgets", "Event", "RunOutcome"]
