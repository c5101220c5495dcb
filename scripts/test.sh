#!/usr/bin/env bash
# The test suite, including the slow real cross-builds (zig, sandbox, qemu). Pass pytest options through,
# e.g. `scripts/test.sh -m "not slow"` for the fast subset, `-n 0` for one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

# One worker per core: most of the suite waits on single-threaded builds and qemu. Each run's temporary folders go
# to a folder of its own under .pytest-tmp/ and older runs are removed in the background: a full run leaves over a
# million files (every workspace has a zig cache layer of links), and pytest's own clean-up of old runs in
# /tmp/pytest-of-$USER happens before it prints its summary, so the suite would wait minutes for it.
runs=.pytest-tmp
mkdir -p "$runs"
this="$runs/$(date +%Y%m%d-%H%M%S)-$$"
old=$(find "$runs" -mindepth 1 -maxdepth 1 -type d)
if [ -n "$old" ]; then
  (echo "$old" | xargs -d '\n' nice -n 19 rm -rf >/dev/null 2>&1 &)
fi
# --durations: the slowest tests, printed in every run (CI too), show where the suite's time goes
exec .venv/bin/python -m pytest -n auto --dist worksteal --durations=50 --basetemp "$this" "$@"
