#!/usr/bin/env bash
# Start N kwok-simulated member clusters, each with M fake nodes (`make testenv-members
# MEMBERS=N NODES=M`). Member i (1..N, named member<i>) has its own kube-apiserver (one
# shared etcd, prefix /member<i>), kube-controller-manager, kube-scheduler and kwok, which
# keeps its nodes Ready and its pods Running. The apiserver listens on the node's address
# (https://<node-ip>:<KO_MEMBER_PORT_BASE+i>) so pods on the host node reach it.
# Kubeconfigs: $KO_STATE/members/member<i>/kubeconfig, and in the host cluster as Secret
# $KO_MEMBER_SECRET_NAMESPACE/member<i>-kubeconfig (key `kubeconfig`).
#
#   hack/testenv/members.sh 2 3      # members 1..2 with 3 nodes each (idempotent)
#   hack/testenv/members.sh --down   # stop all members and delete their state and Secrets
#   hack/testenv/members.sh --list   # print member names
#
# KO_MEMBERS_LIGHT=1 starts members for join benchmarks at 50 members: no kube-scheduler, and a
# kube-controller-manager running only the controllers a join and an unjoin use (service-account
# tokens, namespaces, garbage collection); Deployments on such a member get no pods.
set -euo pipefail
# shellcheck source=hack/testenv/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# shellcheck source=hack/testenv/pki.sh
. "$TESTENV_HACK/pki.sh"

MEMBERS_DIR=$KO_STATE/members
host_up() { [ -f "$KO_KUBECONFIG" ] && kc get --raw /readyz >/dev/null 2>&1; }

members_down() {
  local m
  stop_members
  if host_up && [ -d "$MEMBERS_DIR" ]; then
    for m in "$MEMBERS_DIR"/member*/; do
      [ -d "$m" ] || continue
      kc -n "$KO_MEMBER_SECRET_NAMESPACE" delete secret "$(basename "$m")-kubeconfig" --ignore-not-found >/dev/null
    done
  fi
  rm -rf "$MEMBERS_DIR"
  log "member clusters down"
}

case "${1:-}" in
  --down) need_root; members_down; exit 0 ;;
  --list) for m in "$MEMBERS_DIR"/member*/; do [ -d "$m" ] && basename "$m"; done; exit 0 ;;
  -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
esac

N=${1:-${MEMBERS:-2}}
M=${2:-${NODES:-3}}
[[ $N =~ ^[0-9]+$ && $M =~ ^[0-9]+$ ]] || die "usage: members.sh N M | --down | --list"
# Ports: KO_MEMBER_PORT_BASE + i, +100+i, +200+i, +300+i for member i's processes: 100 at most.
((N <= 100)) || die "at most 100 members (each takes the ports KO_MEMBER_PORT_BASE + i, +100, +200, +300)"

# Member i's service range and its kwok nodes' pod range (fake addresses, never routed): a /16
# each up to member 50 (as they always were), a /24 each from 51 on (10.150.x.0/24, 10.151.x.0/24).
service_cidr() { if (($1 <= 50)); then echo "10.$((200 + $1)).0.0/16"; else echo "10.150.$(($1 - 51)).0/24"; fi; }
service_ip() { if (($1 <= 50)); then echo "10.$((200 + $1)).0.1"; else echo "10.150.$(($1 - 51)).1"; fi; }
pod_cidr() { if (($1 <= 50)); then echo "10.$((100 + $1)).0.1/16"; else echo "10.151.$(($1 - 51)).1/24"; fi; }
need_root
need_bin etcd etcdctl kube-apiserver kube-controller-manager kube-scheduler kwok kubectl
host_up || die "the host cluster is not running: hack/testenv/up.sh first"
started=$(date +%s)
mkdir -p "$MEMBERS_DIR" "$KO_RUN/pids" "$KO_LOGS"

start_bg member-etcd etcd --name members --data-dir "$MEMBERS_DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$KO_MEMBER_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$KO_MEMBER_ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$KO_MEMBER_ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$KO_MEMBER_ETCD_PEER_PORT" \
  --initial-cluster "members=http://127.0.0.1:$KO_MEMBER_ETCD_PEER_PORT" --listen-metrics-urls "" \
  --quota-backend-bytes 8589934592 --unsafe-no-fsync --log-level warn
wait_for "members' etcd" 30 etcdctl --endpoints "http://127.0.0.1:$KO_MEMBER_ETCD_PORT" endpoint health

# fake_node NAME: a Node object kwok manages (annotation kwok.x-k8s.io/node=fake).
fake_node() {
  cat <<NODE
---
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {kubernetes.io/hostname: $1, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
NODE
}

# ensure_nodes MEMBER COUNT KUBECONFIG: create the missing ones of MEMBER-node-0..COUNT-1,
# in files of 100 created by 4 parallel kubectl calls (2000 nodes take seconds, not minutes).
ensure_nodes() {
  local member=$1 count=$2 kcfg=$3 tmp existing j
  tmp=$(mktemp -d)
  existing=$(kubectl --kubeconfig "$kcfg" get nodes -l type=kwok -o name)
  for ((j = 0; j < count; j++)); do
    grep -qxF "node/$member-node-$j" <<<"$existing" || fake_node "$member-node-$j" >>"$tmp/nodes-$((j / 100)).yaml"
  done
  find "$tmp" -name '*.yaml' -print0 |
    xargs -0 -r -P 4 -n 1 kubectl --kubeconfig "$kcfg" create -o name -f >/dev/null
  rm -rf "$tmp"
}

# nodes_ready KUBECONFIG COUNT: at least COUNT kwok nodes are Ready.
nodes_ready() {
  local ready
  ready=$(kubectl --kubeconfig "$1" get nodes -l type=kwok --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l)
  [ "$ready" -ge "$2" ]
}

# Light members (benchmarks at scale): no scheduler, only the controllers a join uses, and Go's
# collector kept closer to the live heap (GOGC=50, a soft limit): measured on an empty member,
# kube-apiserver's PSS 194 MiB by default, 161 MiB with GOGC=50, 123 MiB with the limit too.
light=${KO_MEMBERS_LIGHT:-0}
go_light=() api_light=()
[ "$light" = 1 ] && go_light=(env GOGC=50 GOMEMLIMIT=150MiB)
# and past 50 members no watch cache: with 100 of them on one etcd (a prefix each) the caches
# lagged behind the shared revision ("Too large resource version") and member57 never turned
# ready (2026-12-06); up to 50 the caches keep etcd's load down, as in every recorded run
[ "$light" = 1 ] && ((N > 50)) && api_light=(--watch-cache=false)
for ((i = 1; i <= N; i++)); do
  name=member$i dir=$MEMBERS_DIR/member$i port=$((KO_MEMBER_PORT_BASE + i))
  pki=$dir/pki
  mkdir -p "$pki"
  pki_ca "$pki" ca "$name-ca"
  pki_sa_key "$pki"
  pki_cert "$pki" ca apiserver "$name-apiserver" "" server kubernetes kubernetes.default \
    kubernetes.default.svc "kubernetes.default.svc.$KO_CLUSTER_DOMAIN" localhost 127.0.0.1 "$KO_NODE_IP" "$(service_ip "$i")"
  pki_cert "$pki" ca admin "$name-admin" system:masters client
  # The kubeconfig users get (node address) and the one the member's own controllers use.
  [ -f "$dir/kubeconfig" ] ||
    write_kubeconfig "$dir/kubeconfig" "https://$KO_NODE_IP:$port" "$pki/ca.crt" "$pki/admin.crt" "$pki/admin.key" "$name"
  [ -f "$dir/local.kubeconfig" ] ||
    write_kubeconfig "$dir/local.kubeconfig" "https://127.0.0.1:$port" "$pki/ca.crt" "$pki/admin.crt" "$pki/admin.key" "$name"

  start_bg "$name-apiserver" "${go_light[@]}" kube-apiserver \
    --etcd-servers "http://127.0.0.1:$KO_MEMBER_ETCD_PORT" --etcd-prefix "/$name" \
    --bind-address 0.0.0.0 --secure-port "$port" --advertise-address "$KO_NODE_IP" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --service-account-issuer "https://kubernetes.default.svc.$KO_CLUSTER_DOMAIN" \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range "$(service_cidr "$i")" \
    --authorization-mode Node,RBAC --allow-privileged=true --profiling=false --v=1 \
    --shutdown-watch-termination-grace-period 5s "${api_light[@]}"
done

controllers='*,-nodeipam'
[ "$light" = 1 ] && controllers='serviceaccount-token-controller,serviceaccount-controller,namespace-controller,garbage-collector-controller,root-ca-certificate-publisher-controller'
for ((i = 1; i <= N; i++)); do
  name=member$i dir=$MEMBERS_DIR/member$i port=$((KO_MEMBER_PORT_BASE + i))
  wait_for "$name apiserver" 90 kubectl --kubeconfig "$dir/local.kubeconfig" get --raw /readyz
  start_bg "$name-controller-manager" "${go_light[@]}" kube-controller-manager \
    --kubeconfig "$dir/local.kubeconfig" --authentication-kubeconfig "$dir/local.kubeconfig" \
    --authorization-kubeconfig "$dir/local.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port $((KO_MEMBER_PORT_BASE + 100 + i)) --leader-elect=false \
    --root-ca-file "$dir/pki/ca.crt" --service-account-private-key-file "$dir/pki/sa.key" \
    --use-service-account-credentials=true --controllers "$controllers" \
    --service-cluster-ip-range "$(service_cidr "$i")" --profiling=false --v=1
  [ "$light" = 1 ] || start_bg "$name-scheduler" kube-scheduler \
    --kubeconfig "$dir/local.kubeconfig" --authentication-kubeconfig "$dir/local.kubeconfig" \
    --authorization-kubeconfig "$dir/local.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port $((KO_MEMBER_PORT_BASE + 200 + i)) --leader-elect=false --profiling=false
  cat >"$dir/kwok.yaml" <<KWOK
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodeLeaseDurationSeconds: 40
KWOK
  start_bg "$name-kwok" kwok --kubeconfig "$dir/local.kubeconfig" -c "$dir/kwok.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --cidr "$(pod_cidr "$i")" --node-ip "$KO_NODE_IP" \
    --server-address "127.0.0.1:$((KO_MEMBER_PORT_BASE + 300 + i))"

  ensure_nodes "$name" "$M" "$dir/local.kubeconfig"
  kc -n "$KO_MEMBER_SECRET_NAMESPACE" create secret generic "$name-kubeconfig" \
    --from-file "kubeconfig=$dir/kubeconfig" --dry-run=client -o yaml | kc apply -f - >/dev/null
done

for ((i = 1; i <= N; i++)); do
  wait_for "member$i: $M nodes Ready" $((120 + M / 5)) nodes_ready "$MEMBERS_DIR/member$i/local.kubeconfig" "$M"
  log "member$i: https://$KO_NODE_IP:$((KO_MEMBER_PORT_BASE + i)), $M nodes Ready, kubeconfig $MEMBERS_DIR/member$i/kubeconfig"
done
log "$N member clusters up in $(($(date +%s) - started))s"
