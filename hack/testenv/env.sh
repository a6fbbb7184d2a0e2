# Shared settings of the test bed (sourced by hack/testenv/*.sh; not executable).
# Every value can be overridden from the environment.
# shellcheck shell=bash disable=SC2034  # variables for the scripts that source this

TESTENV_HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TESTENV_ROOT=$(cd "$TESTENV_HACK/../.." && pwd)
# shellcheck source=hack/versions.env
. "$TESTENV_HACK/../versions.env"

KO_CACHE=${KO_CACHE:-$HOME/.cache/karmada-operator}
KO_LINKS=${KO_PREBUILT_BIN:-$KO_CACHE/links}
# Built OCI image tarballs (a cache: reused while their inputs are unchanged).
KO_IMAGE_DIR=${KO_IMAGE_DIR:-$KO_CACHE/images}
# containerd's content store and snapshots: also a cache kept across down/up so a warm
# up does not re-import images. Containers are removed by down.sh.
KO_CONTAINERD_ROOT=${KO_CONTAINERD_ROOT:-$KO_CACHE/containerd}
# Everything else the running environment owns; down.sh removes these two.
KO_STATE=${KO_TESTENV_STATE:-/var/lib/karmada-operator-testenv}
KO_RUN=${KO_TESTENV_RUN:-/run/karmada-operator-testenv}
# All logs in one directory (kept after down for post-mortems; cleared by the next fresh up).
KO_LOGS=${KO_TESTENV_LOGS:-$KO_CACHE/testenv/logs}
KO_VENV=${KO_VENV:-$KO_CACHE/venv}

KO_PKI=$KO_STATE/pki
KO_KUBECONFIG=$KO_STATE/admin.kubeconfig
KO_CONTAINERD_SOCK=$KO_RUN/containerd/containerd.sock
KO_CNI_BIN=${KO_CNI_BIN:-/usr/lib/cni}
KO_CNI_CONF=$KO_STATE/cni/net.d
KO_CNI_BRIDGE=${KO_CNI_BRIDGE:-kocni0}
KO_KUBELET_ROOT=$KO_STATE/kubelet
# The kubelet's in-tree hostPath provisioner (kube-controller-manager
# --enable-hostpath-provisioner) always creates volumes under /tmp/hostpath_pv.
KO_HOSTPATH_PV_DIR=/tmp/hostpath_pv

KO_NODE_NAME=${KO_NODE_NAME:-ko-node}
# The node's own address: the source address of the default route (else the first
# global IPv4 address).
if [ -z "${KO_NODE_IP:-}" ]; then
  KO_NODE_IP=$(ip -4 route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}')
  [ -n "$KO_NODE_IP" ] || KO_NODE_IP=$(ip -4 -o addr show scope global | awk '{split($4, a, "/"); print a[1]; exit}')
fi

# Address ranges (checked against `ip route` by up.sh).
KO_POD_CIDR=${KO_POD_CIDR:-10.244.0.0/16}
KO_NODE_POD_CIDR=${KO_NODE_POD_CIDR:-10.244.0.0/24}
KO_SERVICE_CIDR=${KO_SERVICE_CIDR:-10.96.0.0/16}
KO_APISERVER_SVC_IP=${KO_APISERVER_SVC_IP:-10.96.0.1}
KO_DNS_IP=${KO_DNS_IP:-10.96.0.10}
KO_CLUSTER_DOMAIN=cluster.local

# Ports (host processes; the apiservers listen on all the node's addresses, the rest on
# loopback only).
KO_ETCD_PORT=${KO_ETCD_PORT:-12379}
KO_ETCD_PEER_PORT=${KO_ETCD_PEER_PORT:-12380}
KO_APISERVER_PORT=${KO_APISERVER_PORT:-6443}
KO_KCM_PORT=${KO_KCM_PORT:-10257}
KO_SCHED_PORT=${KO_SCHED_PORT:-10259}
# Member clusters: a shared etcd and, for member i (1..N), apiserver on
# KO_MEMBER_PORT_BASE+i, its controller-manager/scheduler/kwok on loopback ports
# KO_MEMBER_PORT_BASE + 100*k + i.
KO_MEMBER_ETCD_PORT=${KO_MEMBER_ETCD_PORT:-12479}
KO_MEMBER_ETCD_PEER_PORT=${KO_MEMBER_ETCD_PEER_PORT:-12480}
KO_MEMBER_PORT_BASE=${KO_MEMBER_PORT_BASE:-16440}
KO_MEMBER_SECRET_NAMESPACE=${KO_MEMBER_SECRET_NAMESPACE:-karmada-system}

export PATH="$KO_LINKS:$PATH"

log() { printf '[testenv] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (it starts a kubelet, containerd and iptables rules)"; }

need_bin() {
  local b
  for b in "$@"; do
    [ -x "$KO_LINKS/$b" ] || die "$b not built: run hack/testenv/build-bins.sh (make testenv-bin)"
  done
}

kc() { kubectl --kubeconfig "$KO_KUBECONFIG" "$@"; }

# start_bg NAME CMD...: start a host process in its own session, output to
# $KO_LOGS/NAME.log, pid in $KO_RUN/pids/NAME.pid. No-op when it is already running.
start_bg() {
  local name=$1
  shift
  mkdir -p "$KO_RUN/pids" "$KO_LOGS"
  if is_running "$name"; then return 0; fi
  setsid "$@" </dev/null >>"$KO_LOGS/$name.log" 2>&1 &
  echo $! >"$KO_RUN/pids/$name.pid"
}

is_running() {
  local pidf=$KO_RUN/pids/$1.pid
  [ -f "$pidf" ] && pid_alive "$(cat "$pidf")"
}

# pid_alive PID: true while PID exists and is not a zombie (our daemons are reparented to
# init, which may be slow to reap them).
pid_alive() {
  [ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# stop_bg NAME [TIMEOUT]: SIGTERM, wait, then SIGKILL the process in NAME.pid.
stop_bg() {
  local name=$1 timeout=${2:-20} pidf=$KO_RUN/pids/$1.pid pid i
  [ -f "$pidf" ] || return 0
  pid=$(cat "$pidf")
  if pid_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
      pid_alive "$pid" || break
      sleep 0.1
    done
    if pid_alive "$pid"; then
      log "$name (pid $pid) did not stop; killing"
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.2
    fi
  fi
  rm -f "$pidf"
}

# wait_for DESCRIPTION TIMEOUT CMD...: retry CMD every second until it succeeds.
wait_for() {
  local what=$1 timeout=$2 i
  shift 2
  for ((i = 0; i < timeout; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  die "timed out after ${timeout}s waiting for $what (logs: $KO_LOGS)"
}

# stop_members: stop every member cluster's processes (clients first, etcd last).
stop_members() {
  local suffix pidf
  for suffix in kwok scheduler controller-manager apiserver; do
    for pidf in "$KO_RUN"/pids/member*-"$suffix".pid; do
      [ -e "$pidf" ] && stop_bg "$(basename "$pidf" .pid)" 30
    done
  done
  stop_bg member-etcd
}
