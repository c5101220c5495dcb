"""Run budgets and token prices. A run stops with `budget_<name>` when one is spent."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from crossbuild.models.base import Usage

# Prices come from genai-prices (pydantic's maintained table of providers' published prices); this table overrides
# it: USD per million tokens (input, cache read, output, cache write) as the providers published them in 2026.
PRICES: dict[str, tuple[float, float, float, float]] = {
    "deepseek-chat": (0.27, 0.07, 1.10, 0.27),
    "deepseek-reasoner": (0.55, 0.14, 2.19, 0.55),
    "gpt-4o": (2.50, 1.25, 10.00, 2.50),
    "gpt-4o-mini": (0.15, 0.075, 0.60, 0.15),
    "gpt-4.1": (2.00, 0.50, 8.00, 2.00),
    "gpt-4.1-mini": (0.40, 0.10, 1.60, 0.40),
    "claude-sonnet-4-5": (3.00, 0.30, 15.00, 3.75),
    "claude-haiku-4-5": (1.00, 0.10, 5.00, 1.25),
}


def cost_usd(model_name: str, usage: Usage) -> float | None:
    """What USAGE costs with MODEL_NAME ("provider:model"), or None when no price is known (then no money budget
    is enforced). USAGE's input counts every input token, cache reads and writes included (models/base.py)."""
    provider, _, bare = model_name.rpartition(":")
    price = PRICES.get(bare)
    if price is None:
        return _maintained_price(provider, bare, usage)
    fresh = max(0, usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens)
    return (fresh * price[0] + usage.cached_tokens * price[1] + usage.output_tokens * price[2]
            + usage.cache_write_tokens * price[3]) / 1e6


def _maintained_price(provider: str, model: str, usage: Usage) -> float | None:
    import genai_prices

    counted = genai_prices.Usage(input_tokens=usage.input_tokens, cache_read_tokens=usage.cached_tokens,
                                 cache_write_tokens=usage.cache_write_tokens, output_tokens=usage.output_tokens)
    # an OpenAI-compatible server (DeepSeek, vLLM) is "openai:" here: look the model up by name alone next
    for provider_id in dict.fromkeys([provider or None, None]):
        try:
            return float(genai_prices.calc_price(counted, model_ref=model, provider_id=provider_id).total_price)
        except LookupError:
            continue
    return None


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
