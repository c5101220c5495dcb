"""`crossbuild serve`: the web face (Starlette, server-sent events, a little plain JavaScript shipped here)."""
