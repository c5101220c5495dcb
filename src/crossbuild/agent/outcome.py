"""How a run ends: the `Stop` the loop raises (with its reason) and the `RunOutcome` every face reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from crossbuild.models.base import Usage
from crossbuild.proof.verify import VerifyReport


class StopReason(StrEnum):
    VERIFIED = "verified"
    GAVE_UP = "gave_up"
    BUDGET_STEPS = "budget_steps"
    BUDGET_TOOL_CALLS = "budget_tool_calls"
    BUDGET_TOKENS = "budget_tokens"
    BUDGET_WALL = "budget_wall"
    BUDGET_COST = "budget_cost"
    STUCK = "stuck"
    PERMISSION_LOOP = "permission_loop"
    PROVIDER_ERROR = "provider_error"
    ERROR = "error"
    CANCELLED = "cancelled"

    @property
    def status(self) -> str:
        """verified | cancelled | error | failed"""
        if self in (StopReason.VERIFIED, StopReason.CANCELLED, StopReason.ERROR):
            return self.value
        return "failed"


class Stop(Exception):  # noqa: N818 - it is how a run stops, not an error
    """Raised inside the loop to end the run; the message is what the user reads."""

    def __init__(self, reason: StopReason, message: str, verify_report: VerifyReport | None = None,
                 output_dir: str | None = None):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.verify = verify_report
        self.output_dir = output_dir


@dataclass
class RunOutcome:
    run_id: str
    status: str  # verified | failed | cancelled | error
    stop_reason: StopReason
    message: str
    verify: VerifyReport | None = None
    output_dir: str | None = None
    steps: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    wall_s: float = 0.0
    kb_attached: list[str] = field(default_factory=list)
    # when the build is for the glibc variant of the musl target asked for: from, to, because, first_run_id
    libc_switch: dict[str, str] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "verified"

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "stop_reason": str(self.stop_reason),
                "message": self.message, "output_dir": self.output_dir, "steps": self.steps,
                "tool_calls": self.tool_calls, "usage": self.usage.__dict__, "cost_usd": self.cost_usd,
                "wall_s": round(self.wall_s, 3), "kb_attached": self.kb_attached,
                "verify": self.verify.to_dict() if self.verify else None, "libc_switch": self.libc_switch}
