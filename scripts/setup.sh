#!/usr/bin/env bash
# Set up everything crossbuild needs on a fresh Debian machine: system packages (as root), then .venv with
# crossbuild, zig (PyPI ziglang), ninja and meson. Safe to run again; it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(qemu-user qemu-user-static bubblewrap cmake make gcc g++ pkgconf autoconf automake autotools-dev libtool libtool-bin file dpkg-dev llvm
          autopoint  # autoreconf runs it for gettext projects, as dh_autoreconf's set has it (its archive is not a tool
                     # crossbuild can provide alone: /usr/share/gettext is the host's)
          libc6-arm64-cross libc6-riscv64-cross libc6-armhf-cross openssl
          ccache  # the workspace's compile cache: the clean rebuild takes the first build's objects (compile_cache.py)
          chromium)  # chromium: the web page's browser tests (driven headless by Playwright)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Wine runs Windows test programs; without its recommends (no GPU drivers, fonts or GStreamer: 11 packages, not 87)
if ! dpkg-query -W -f='${Status}' wine64 2>/dev/null | grep -q "install ok installed"; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing wine64 (no recommends)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wine64 >/dev/null
  else
    echo "setup: please install as root: apt-get install --no-install-recommends wine64" >&2
  fi
fi
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: please install as root: apt-get install ${missing[*]}" >&2
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
