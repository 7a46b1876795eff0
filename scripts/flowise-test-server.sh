#!/usr/bin/env bash
# A real Flowise 3.1.2 for the flowise pack's live tests and benchmarks, and for trying the pack.
#   scripts/flowise-test-server.sh install      install it once into $FLOWISE_HOME (outside the repo;
#                                               about 10 min and 3 GB the first time, then nothing)
#   scripts/flowise-test-server.sh start DIR [PORT]
#                                               run it in the foreground on 127.0.0.1:PORT (default
#                                               3000) with its database, keys and logs under DIR
# FLOWISE_HOME defaults to ~/.cache/agentloom/flowise-3.1.2. 3.1.2 is the last release whose engines
# allow Node 20. A plain `npm install flowise` fails here (faiss-node clones from the internet in an
# install script), so scripts are skipped and only the two SQLite bindings are rebuilt.
# The exact dependency tree is pinned by the workplace's lock file when it is present
# ($AGENTLOOM_SHARED_DATA, ../shared or /work/shared: flowise/live-3.1.2/flowise-3.1.2-package-lock.json).
set -euo pipefail
VERSION=3.1.2
FLOWISE_HOME="${FLOWISE_HOME:-$HOME/.cache/agentloom/flowise-$VERSION}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
usage() { echo "usage: scripts/flowise-test-server.sh install | start DIR [PORT]" >&2; exit 2; }

install() {
  if [ -f "$FLOWISE_HOME/.installed" ]; then return 0; fi
  command -v npm >/dev/null || { echo "flowise: npm is missing (scripts/setup.sh test installs Node.js and npm)" >&2; exit 1; }
  mkdir -p "$FLOWISE_HOME"
  cd "$FLOWISE_HOME"
  printf '{"name":"flowise-exp","version":"1.0.0","license":"ISC","dependencies":{"flowise":"^%s"}}\n' "$VERSION" >package.json
  lock=""
  for shared in "${AGENTLOOM_SHARED_DATA:-}" "$repo/../shared" /work/shared; do
    if [ -n "$shared" ] && [ -f "$shared/flowise/live-3.1.2/flowise-3.1.2-package-lock.json" ]; then
      lock="$shared/flowise/live-3.1.2/flowise-3.1.2-package-lock.json"; break
    fi
  done
  export PUPPETEER_SKIP_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
  echo "flowise: installing $VERSION into $FLOWISE_HOME (about 10 min the first time)" >&2
  # npm install, not npm ci: the lock was written by another npm, which ci refuses as out of sync
  # (optional platform packages); install keeps the lock's versions.
  [ -z "$lock" ] || cp "$lock" package-lock.json
  npm install "flowise@$VERSION" --ignore-scripts --no-audit --no-fund --loglevel=error >&2
  npm rebuild sqlite3 better-sqlite3 --foreground-scripts --loglevel=error >/dev/null 2>&1 \
    || npm rebuild sqlite3 better-sqlite3 --foreground-scripts >&2
  [ -x node_modules/.bin/flowise ] || { echo "flowise: install finished without node_modules/.bin/flowise" >&2; exit 1; }
  touch .installed
}

case "${1:-}" in
  install) [ $# -eq 1 ] || usage; install ;;
  start)
    [ $# -ge 2 ] && [ $# -le 3 ] || usage
    install
    dir="$(mkdir -p "$2" && cd "$2" && pwd)"
    mkdir -p "$dir/home" "$dir/blob" "$dir/logs"
    export PORT="${3:-3000}" HOST=127.0.0.1 DATABASE_TYPE=sqlite DATABASE_PATH="$dir" \
      SECRETKEY_PATH="$dir" BLOB_STORAGE_PATH="$dir/blob" LOG_PATH="$dir/logs" HOME="$dir/home" \
      DISABLE_FLOWISE_TELEMETRY=true
    exec "$FLOWISE_HOME/node_modules/.bin/flowise" start
    ;;
  *) usage ;;
esac
