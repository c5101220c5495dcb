"""Secrets out of provider errors: a provider may echo the API key it refused ("Incorrect API key provided: sk-..."),
so every adapter passes the text of each error through a `Redactor` before the error leaves the model layer, and
nothing downstream (events, runs.db, exported spans) can record a key.

What is removed: every configured secret (the key the client was made with and the keys of the environment and the
user's config file, whatever their shape, also JSON-escaped or URL-quoted, and any run of 12 or more of their
characters, so a key cut short by truncation goes too), and anything shaped like a credential (`sk-...`, `Bearer
TOKEN`, user:password@ in a URL, long opaque tokens)."""

from __future__ import annotations

import re
import traceback
import urllib.parse
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from crossbuild.models.base import ProviderError

MARK = "[redacted]"
MIN_SECRET = 4  # a shorter "key" (a local server's placeholder) is no secret, and would cut words out of the text
PARTIAL = 12  # this many consecutive characters of a secret are removed wherever they appear


def _looks_opaque(token: str) -> bool:
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


# Shapes of credentials nobody configured here: provider keys, bearer tokens, passwords in URLs, long opaque tokens
# (at least 32 characters with letters and digits, not part of a path or a longer word).
_SHAPES = [
    (re.compile(r"(?i)\b(bearer|basic|token)(\s+)([A-Za-z0-9._~+/=-]{8,})"),
     lambda m: m.group(1) + m.group(2) + MARK if _looks_opaque(m.group(3)) or len(m.group(3)) >= 24 else m.group()),
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_*-]{4,}(?:\.{1,3}[A-Za-z0-9_*-]+)*"), MARK),
    (re.compile(r"\b(?:xox[abpr]|gh[pousr]|github_pat|glpat|AKIA|AIza|hf)_?[A-Za-z0-9_-]{16,}"), MARK),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?"), MARK),  # a JWT
    (re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+@"), MARK + "@"),
]
_OPAQUE = re.compile(r"(?<![A-Za-z0-9_\-+/=.])[A-Za-z0-9][A-Za-z0-9_\-+/=]{30,}[A-Za-z0-9=]")


class Redactor:
    """Removes SECRETS and credential-shaped text from error texts (see the module's docstring)."""

    def __init__(self, secrets: Iterable[str | None] = ()):
        forms: set[str] = set()
        for s in secrets:
            s = (s or "").strip()
            if len(s) < MIN_SECRET:
                continue
            forms |= {s, urllib.parse.quote(s, safe=""), urllib.parse.quote_plus(s),
                      s.replace("\\", "\\\\").replace('"', '\\"').replace("/", "\\/")}
        self.secrets = sorted(forms, key=len, reverse=True)

    def text(self, text: str) -> str:
        if not text:
            return text
        spans: list[tuple[int, int]] = []
        for s in self.secrets:
            k = min(len(s), PARTIAL)
            windows = {s[i:i + k] for i in range(len(s) - k + 1)}
            spans += [(i, i + k) for i in range(len(text) - k + 1) if text[i:i + k] in windows]
        if spans:
            merged: list[list[int]] = []
            for start, stop in sorted(spans):
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], stop)
                else:
                    merged.append([start, stop])
            out, pos = [], 0
            for start, stop in merged:
                out += [text[pos:start], MARK]
                pos = stop
            out.append(text[pos:])
            text = "".join(out)
        for pattern, replacement in _SHAPES:  # (a str or a function of the match)
            text = pattern.sub(replacement, text)
        return _OPAQUE.sub(lambda m: MARK if _looks_opaque(m.group()) else m.group(), text)

    def provider_error(self, error: ProviderError) -> ProviderError:
        return ProviderError(self.text(str(error)), status=error.status, fatal=error.fatal)

    def exception(self, error: BaseException) -> BaseException:
        """ERROR itself when neither its text nor its traceback holds a secret; else a RedactedError carrying
        both, cleaned (a bug in crossbuild stays a bug: it is not turned into a provider error)."""
        if isinstance(error, ProviderError):
            return self.provider_error(error)
        told = "".join(traceback.format_exception(error))
        clean = self.text(told)
        if clean == told:
            return error
        return RedactedError(f"{type(error).__name__}: {self.text(str(error))}\n{clean}")

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Whatever leaves the block as an error leaves it without a secret."""
        try:
            yield
        except Exception as e:  # noqa: BLE001 - every error is cleaned, and raised again
            clean = self.exception(e)
            if clean is e:
                raise
            raise clean from None


class RedactedError(RuntimeError):
    """An unexpected error inside a model adapter whose text held a secret: its type, text and traceback, cleaned."""
