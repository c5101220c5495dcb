"""Retrying transient provider faults (429 with Retry-After, 5xx, timeouts, dropped connections) with exponential
backoff and jitter inside a retry budget; never shown to the model. Fatal statuses stop at once."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from crossbuild.models.base import ProviderError, Turn

T = TypeVar("T")
FATAL_STATUSES = {400: "bad request", 401: "the API key was refused", 402: "payment required (out of credit)",
                  403: "forbidden", 404: "model or endpoint not found", 422: "request rejected"}


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    budget_s: float = 120.0  # total time spent waiting across the attempts of one call


@dataclass
class Transient(Exception):
    """A fault worth retrying; retry_after from the server when it said."""

    reason: str
    status: int | None = None
    retry_after_s: float | None = None


def retry_after(header: str | None) -> float | None:
    """Seconds from a Retry-After header (the delay-seconds form), or None."""
    try:
        return max(0.0, float(header)) if header else None
    except ValueError:
        return None


def timed_turn(create: Callable[[], Any], parse: Callable[[Any], Turn], policy: RetryPolicy, *,
               cancel: threading.Event | None = None,
               on_retry: Callable[[int, Transient, float], None] | None = None) -> Turn:
    """One model call as every adapter makes it: retried inside the budget, parsed, timed."""
    start = time.monotonic()
    turn = parse(call_with_retries(create, policy, cancel=cancel, on_retry=on_retry))
    turn.latency_s = time.monotonic() - start
    return turn


def call_with_retries(fn: Callable[[], T], policy: RetryPolicy, *, cancel: threading.Event | None = None,
                      on_retry: Callable[[int, Transient, float], None] | None = None,
                      rng: random.Random | None = None) -> T:
    rng = rng or random.Random()
    waited = 0.0
    last: Transient | None = None
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return fn()
        except Transient as t:
            last = t
        if attempt == policy.max_attempts:
            break
        delay = last.retry_after_s if last.retry_after_s is not None else \
            min(policy.max_delay_s, policy.base_delay_s * 2 ** (attempt - 1)) * (0.5 + rng.random() / 2)
        if waited + delay > policy.budget_s:
            break
        if on_retry:
            on_retry(attempt, last, delay)
        if cancel is not None and cancel.wait(delay):
            raise ProviderError("cancelled while waiting to retry", fatal=True)
        if cancel is None:
            time.sleep(delay)
        waited += delay
    assert last is not None
    raise ProviderError(f"the provider kept failing ({last.reason}); retry budget spent after {attempt} attempts "
                        f"and {waited:.1f}s of waiting", status=last.status, fatal=True)


def sdk_call(sdk: Any, name: str, create: Callable[[], T], *, also_transient: tuple[int, ...] = ()) -> T:
    """One request through a provider SDK, its errors sorted into Transient (retry) and ProviderError (stop). The
    OpenAI and Anthropic SDKs share these exception names; ALSO_TRANSIENT adds a provider's own busy statuses."""
    try:
        return create()
    except sdk.APIStatusError as e:
        status = e.status_code
        if status == 429 or status >= 500 or status in also_transient:
            raise Transient(f"HTTP {status}", status, retry_after(e.response.headers.get("retry-after"))) from None
        what = FATAL_STATUSES.get(status, "request failed")
        raise ProviderError(f"{name}: HTTP {status} {what}: {_short(str(e.message))}", status=status) from None
    except sdk.APITimeoutError:
        raise Transient("timed out") from None
    except sdk.APIConnectionError as e:
        raise Transient(f"connection failed: {e.__cause__ or e}") from None
    except (sdk.APIResponseValidationError, json.JSONDecodeError) as e:
        raise Transient(f"unreadable response from the server: {_short(str(e))}") from None


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
