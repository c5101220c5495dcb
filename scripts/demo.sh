#!/usr/bin/env bash
# The main job today: cross-build the bundled example for aarch64-linux-musl in the sandbox, verify every artifact,
# rebuild it clean, and run its test program under qemu-aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export COLUMNS=${COLUMNS:-140}
exec .venv/bin/crossbuild quick examples/libcalc --target "${1:-aarch64-linux-musl}" \
  --workspace "crossbuild-runs/libcalc-$(date +%Y%m%d-%H%M%S)"
