#!/usr/bin/env bash
# Installs agentloom and everything it needs into .venv, on a fresh Debian machine.
#   scripts/setup.sh        the server, every pack, the local embedding model
#   scripts/setup.sh test   the same, plus what the test suite and benchmarks need
set -euo pipefail
cd "$(dirname "$0")/.."

extras="all"
[ "${1:-}" = "test" ] && extras="all,test"

# System packages: git (docs sources); Python 3.11 with venv.
missing=()
command -v git >/dev/null || missing+=(git)
PY=$(command -v python3.11 || command -v python3 || true)
[ -n "$PY" ] || missing+=(python3 python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${missing[@]}"
    PY=$(command -v python3.11 || command -v python3)
  else
    echo "setup: missing system packages: ${missing[*]} (install them with apt-get, then rerun)" >&2
    exit 1
  fi
fi
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), "agentloom needs Python 3.11, found " + sys.version' 

[ -x .venv/bin/python ] || "$PY" -m venv .venv
# torch first, pinned: this CPU build lies on the machine; an unpinned torch pulls a multi-GB CUDA build.
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[${extras}]"
# Export the local embedding model to ONNX once (cached under ~/.cache/agentloom).
.venv/bin/agentloom models prepare
