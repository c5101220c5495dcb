"""Run budgets and token prices. A run stops with `budget_<name>` when one is spent."""

from __future__ import annotations

from dataclasses import asdict, dataclass

# USD per million tokens (input, cached input, output), as published by the providers in 2026; unknown models have
# no price and no money budget is enforced for them.
PRICES: dict[str, tuple[float, float, float]] = {
    "deepseek-chat": (0.27, 0.07, 1.10),
    "deepseek-reasoner": (0.55, 0.14, 2.19),
    "gpt-4o": (2.50, 1.25, 10.00),
    "gpt-4o-mini": (0.15, 0.075, 0.60),
    "gpt-4.1": (2.00, 0.50, 8.00),
    "gpt-4.1-mini": (0.40, 0.10, 1.60),
    "claude-sonnet-4-5": (3.00, 0.30, 15.00),
    "claude-haiku-4-5": (1.00, 0.10, 5.00),
}


def price_of(model_name: str) -> tuple[float, float, float] | None:
    bare = model_name.split(":", 1)[-1]
    return PRICES.get(bare)


def cost_usd(model_name: str, input_tokens: int, cached_tokens: int, output_tokens: int) -> float | None:
    price = price_of(model_name)
    if price is None:
        return None
    fresh = max(0, input_tokens - cached_tokens)
    return (fresh * price[0] + cached_tokens * price[1] + output_tokens * price[2]) / 1e6


@dataclass(frozen=True)
class Budgets:
    max_steps: int = 60  # model turns
    max_tool_calls: int = 250
    max_tokens: int = 3_000_000  # input + output over the run
    max_wall_s: float = 3 * 3600
    max_cost_usd: float | None = 5.0  # enforced only when the model's price is known
    max_permission_denials: int = 3
    max_text_only_turns: int = 2  # turns without a tool call before the run counts as given up
    context_chars: int = 240_000  # about 60k tokens: older tool outputs are compacted beyond this

    def to_dict(self) -> dict:
        return asdict(self)
