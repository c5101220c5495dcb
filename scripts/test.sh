#!/usr/bin/env bash
# The test suite, including the slow real cross-builds (zig, sandbox, qemu). Pass pytest options through,
# e.g. `scripts/test.sh -m "not slow"` for the fast subset.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
