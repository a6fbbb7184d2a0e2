#!/usr/bin/env bash
# Stop the whole test bed (member clusters and host cluster) and remove its state: pods are
# torn down through the kubelet, leftover containers through containerd, then every process
# started by up.sh/members.sh is stopped by its pid file, pod mounts are unmounted, the
# CNI bridge, netns and iptables chains are deleted and the sysctls up.sh changed are
# restored. Safe to repeat. Kept: logs ($KO_LOGS), image archives and containerd's image
# store (caches), so the next up is warm.
set -euo pipefail
# shellcheck source=hack/testenv/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
need_root
started=$(date +%s)

ctr_() { ctr --address "$KO_CONTAINERD_SOCK" -n k8s.io "$@"; }
api_up() { [ -f "$KO_KUBECONFIG" ] && is_running kube-apiserver && kc get --raw /readyz >/dev/null 2>&1; }

# 1. Members first (they store Secrets in the host cluster but need nothing from it).
stop_members

# 2. Let the kubelet tear the pods down properly (CNI DEL, volume unmounts) while the
#    controllers are stopped so nothing gets recreated.
stop_bg kube-controller-manager
stop_bg kube-scheduler
if api_up && is_running kubelet; then
  kc delete pods --all --all-namespaces --grace-period=2 --wait=true --timeout=90s >/dev/null 2>&1 ||
    log "some pods did not terminate in time; removing their containers directly"
  # Give the kubelet a moment to remove the sandboxes of the deleted pods.
  for _ in $(seq 1 30); do
    [ -z "$(ctr_ tasks ls -q 2>/dev/null)" ] && break
    sleep 1
  done
fi
stop_bg kubelet
stop_bg kube-proxy
kube-proxy --cleanup >/dev/null 2>&1 || true

# 3. Whatever containers are left, then containerd and any shim it started.
if is_running containerd; then
  for t in $(ctr_ tasks ls -q 2>/dev/null); do
    ctr_ tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
  done
  sleep 1
  for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$t" >/dev/null 2>&1 || true; done
  for c in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$c" >/dev/null 2>&1 || true; done
fi
stop_bg containerd
for pid in $(pgrep -f -- "-address $KO_CONTAINERD_SOCK" || true); do
  kill -KILL "$pid" 2>/dev/null || true
done

# 4. The control plane and anything else with a pid file.
stop_bg kube-apiserver 30
stop_bg etcd
for pidf in "$KO_RUN"/pids/*.pid; do
  [ -e "$pidf" ] || continue
  stop_bg "$(basename "$pidf" .pid)"
done

# 5. Mounts under our directories (deepest first).
for root in "$KO_KUBELET_ROOT" "$KO_RUN" "$KO_STATE" "$KO_CONTAINERD_ROOT"; do
  awk -v r="$root" '$5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"; done
done

# 6. Network: netns and CNI state left by sandboxes, the bridge, iptables chains.
for ns in /run/netns/cni-*; do
  [ -e "$ns" ] || continue
  ip netns delete "$(basename "$ns")" 2>/dev/null || { umount "$ns" 2>/dev/null; rm -f "$ns"; }
done
ip link show "$KO_CNI_BRIDGE" >/dev/null 2>&1 && ip link delete "$KO_CNI_BRIDGE"
rm -rf /var/lib/cni/results/testenv-* 2>/dev/null || true
rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true
# Chains made by the CNI bridge/portmap plugins and the kubelet's canaries.
for ipt in iptables ip6tables; do
  command -v "$ipt" >/dev/null || continue
  for table in filter nat mangle; do
    chains=$("$ipt"-save -t "$table" 2>/dev/null | awk '/^:(CNI-|KUBE-)/ {print substr($1, 2)}')
    [ -n "$chains" ] || continue
    # Rules that jump to those chains, then the chains themselves.
    "$ipt"-save -t "$table" | awk '/^-A / && / -j (CNI-|KUBE-)/' | while read -r rule; do
      read -r -a words <<<"${rule/#-A/-D}"
      "$ipt" -t "$table" "${words[@]}" 2>/dev/null || true
    done
    for ch in $chains; do "$ipt" -t "$table" -F "$ch" 2>/dev/null || true; done
    for ch in $chains; do "$ipt" -t "$table" -X "$ch" 2>/dev/null || true; done
  done
done
# ipsets of kube-router's firewall (tests/support/network_policy.py), once no rule uses them.
if command -v ipset >/dev/null; then
  for set in $(ipset list -n 2>/dev/null); do
    case "$set" in
      KUBE-* | kube-router-* | inet6:KUBE-* | inet6:kube-router-*) ipset destroy "$set" 2>/dev/null || true ;;
    esac
  done
fi

# containerd 1.6 keeps shim sockets and fifos under /run/containerd whatever its config
# says; remove them unless Debian's own containerd is running there.
if [ ! -S /run/containerd/containerd.sock ]; then
  rm -rf /run/containerd/s /run/containerd/fifo /run/containerd/runc
  rmdir /run/containerd 2>/dev/null || true
fi

# 7. Pod cgroups the kubelet made (cgroupfs driver), and containerd's for `ctr run`.
for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/k8s.io; do
  [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
done

# 8. Sysctls back to what they were, then the state itself.
if [ -f "$KO_STATE/sysctl.orig" ]; then
  while IFS= read -r kv; do sysctl -qw "$kv" || true; done <"$KO_STATE/sysctl.orig"
fi
rm -rf "$KO_STATE" "$KO_RUN" "$KO_HOSTPATH_PV_DIR"
log "test bed down in $(($(date +%s) - started))s"
