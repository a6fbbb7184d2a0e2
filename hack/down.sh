#!/usr/bin/env bash
# `make down`: stop the operator started by `make up` and the local host cluster.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KO_CACHE=${KO_CACHE:-$HOME/.cache/karmada-operator}
pidfile=$KO_CACHE/operator/pid
if [ -f "$pidfile" ]; then
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
  echo "operator stopped"
fi
"$root/hack/testenv/down.sh"
