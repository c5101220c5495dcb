"""The offline planner (policy.py): one package for its policy, its state, and its families of remedies."""

from crossbuild.models.planner.policy import Planner
from crossbuild.models.planner.state import MAX_ATTEMPTS, PlannerState

__all__ = ["MAX_ATTEMPTS", "Planner", "PlannerState"]
