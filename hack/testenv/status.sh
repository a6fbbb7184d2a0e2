#!/usr/bin/env bash
# Show what of the test bed runs: each host process with its resident memory, the pods'
# memory (the kubelet's kubepods cgroup), and the total.
set -euo pipefail
# shellcheck source=hack/testenv/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

total=0
printf '%-32s %8s %10s\n' PROCESS PID RSS_MiB
for pidf in "$KO_RUN"/pids/*.pid; do
  [ -e "$pidf" ] || continue
  name=$(basename "$pidf" .pid) pid=$(cat "$pidf")
  if pid_alive "$pid"; then
    kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
    total=$((total + kb))
    printf '%-32s %8s %10d\n' "$name" "$pid" $((kb / 1024))
  else
    printf '%-32s %8s %10s\n' "$name" "$pid" dead
  fi
done
# containerd shims (one per pod).
shims=0
for pid in $(pgrep -f -- "-address $KO_CONTAINERD_SOCK" || true); do
  kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
  shims=$((shims + kb))
done
total=$((total + shims))
printf '%-32s %8s %10d\n' "containerd-shims" - $((shims / 1024))
pods=0
f=/sys/fs/cgroup/memory/kubepods/memory.usage_in_bytes
[ -r "$f" ] || f=/sys/fs/cgroup/kubepods/memory.current
[ -r "$f" ] && pods=$(($(cat "$f") / 1024))
total=$((total + pods))
printf '%-32s %8s %10d\n' "pods (kubepods cgroup)" - $((pods / 1024))
printf '%-32s %8s %10d\n' TOTAL - $((total / 1024))
