#!/usr/bin/env bash
# `make bench`: run every benchmarks/bench_*.py (each prints its figures), and append the
# output with the date and the machine description to benchmarks/results.md.
# BENCH=pki runs only benchmarks/bench_pki.py.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
{
  echo "## $(date -u +%Y-%m-%dT%H:%M:%SZ) — $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r)"
  echo '```'
} >"$out"
shopt -s nullglob
benches=(benchmarks/bench_"${BENCH:-}"*.py)
[ ${#benches[@]} -gt 0 ] || { echo "no benchmarks match benchmarks/bench_${BENCH:-}*.py" >&2; exit 1; }
for bench in "${benches[@]}"; do
  echo "== $bench" | tee -a "$out"
  python "$bench" 2>&1 | tee -a "$out"
done
echo '```' >>"$out"
cat "$out" >>benchmarks/results.md
echo "figures appended to benchmarks/results.md"
