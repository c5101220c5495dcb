#!/usr/bin/env bash
# The main job: `crossbuild build` drives the offline planner through the guarded tools to cross-build the bundled
# example for aarch64-linux-musl in the sandbox; the verifier checks every artifact, rebuilds it clean and runs its
# test program under qemu-aarch64. No API key needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export COLUMNS=${COLUMNS:-140}
exec .venv/bin/crossbuild build examples/libcalc --target "${1:-aarch64-linux-musl}"
