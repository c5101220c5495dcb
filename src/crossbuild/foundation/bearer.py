"""The bearer token a network face (HTTP MCP, the web page) demands: from a file the user names, an environment
variable, or generated and shown once; compared in constant time."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

MIN_CHARS = 16


def bearer_token(token_file: Path | None, env_var: str) -> tuple[str, str]:
    """The token clients must send, and where it came from: TOKEN_FILE, $ENV_VAR, or a new random one
    ("generated": the caller shows it once)."""
    if token_file is not None:
        token = token_file.read_text().strip()
        if len(token) < MIN_CHARS:
            raise ValueError(f"{token_file} holds a token of {len(token)} characters; use at least {MIN_CHARS}")
        return token, f"from {token_file}"
    if os.environ.get(env_var):
        token = os.environ[env_var].strip()
        if len(token) < MIN_CHARS:
            raise ValueError(f"${env_var} holds a token of {len(token)} characters; use at least {MIN_CHARS}")
        return token, f"from ${env_var}"
    return secrets.token_urlsafe(32), "generated"


def matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())
