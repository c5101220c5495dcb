"""Retrying transient provider faults with exponential backoff and jitter inside a retry budget, never shown to the
model; fatal statuses stop at once. Which faults and how long to wait follow the official OpenAI and Anthropic SDKs:
408, 409, 429 and 5xx are retried, the server's `x-should-retry` overrides that, and its `retry-after-ms` or
`Retry-After` (seconds or an HTTP date) is the delay when it lies within a minute."""

from __future__ import annotations

import datetime
import email.utils
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from crossbuild.models.base import ProviderError, Turn
from crossbuild.models.redact import Redactor

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


RETRIED_STATUSES = (408, 409, 429)  # request timeout, lock timeout, rate limit (and every 5xx)
MAX_SERVER_DELAY_S = 60.0  # a longer Retry-After is not believed: backoff instead, as the SDKs do


def server_delay(headers: Any) -> float | None:
    """The delay the server asked for, in seconds: `retry-after-ms`, else `Retry-After` as seconds or as an HTTP
    date; None when it said nothing usable or more than a minute."""
    delay = None
    try:
        if headers.get("retry-after-ms"):
            delay = float(headers["retry-after-ms"]) / 1000
    except ValueError:
        pass
    text = headers.get("retry-after")
    if delay is None and text:
        try:
            delay = float(text)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(text)
                delay = (when - datetime.datetime.now(datetime.UTC)).total_seconds()
            except (TypeError, ValueError):
                return None
    return delay if delay is not None and 0 <= delay <= MAX_SERVER_DELAY_S else None


def should_retry(status: int, headers: Any, also: tuple[int, ...] = ()) -> bool:
    """The server's `x-should-retry: true|false` first; else 408, 409, 429, 5xx and ALSO are retried."""
    said = (headers.get("x-should-retry") or "").lower()
    if said in ("true", "false"):
        return said == "true"
    return status in RETRIED_STATUSES or status >= 500 or status in also


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


def sdk_call(sdk: Any, name: str, create: Callable[[], T], *, also_transient: tuple[int, ...] = (),
             redactor: Redactor | None = None) -> T:
    """One request through a provider SDK, its errors sorted into Transient (retry) and ProviderError (stop). The
    OpenAI and Anthropic SDKs share these exception names; ALSO_TRANSIENT adds a provider's own busy statuses. Every
    text taken from the provider's error passes REDACTOR (before it is shortened, so no cut-off key survives): it
    reaches retry events and the error the run ends with."""
    clean = (redactor or Redactor()).text
    try:
        return create()
    except sdk.APIStatusError as e:
        status, headers = e.status_code, e.response.headers
        if should_retry(status, headers, also_transient):
            raise Transient(f"HTTP {status}", status, server_delay(headers)) from None
        what = FATAL_STATUSES.get(status, "request failed")
        raise ProviderError(f"{name}: HTTP {status} {what}: {_short(clean(str(e.message)))}",
                            status=status) from None
    except sdk.APITimeoutError:
        raise Transient("timed out") from None
    except sdk.APIConnectionError as e:
        raise Transient(f"connection failed: {clean(str(e.__cause__ or e))}") from None
    except (sdk.APIResponseValidationError, json.JSONDecodeError) as e:
        raise Transient(f"unreadable response from the server: {_short(clean(str(e)))}") from None


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
