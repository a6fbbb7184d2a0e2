#!/usr/bin/env bash
# Start the test bed's host cluster on this machine: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd + runc, kubelet (one real node),
# CNI bridge, kube-proxy (iptables), CoreDNS and two storage classes. Idempotent: what
# runs already is left alone. Needs root. Logs: $KO_LOGS; kubeconfig: kubeconfig.sh.
set -euo pipefail
# The daemons started here must not inherit the caller's descriptors: under
# `flock /tmp/ko/e2e.lock hack/testenv/up.sh` etcd, containerd and the kubelet would hold the
# lock for as long as they run. (255 is bash's own handle on this script.)
for fd in "/proc/$$/fd"/*; do
  fd=${fd##*/}
  if [ "$fd" -gt 2 ] && [ "$fd" -lt 255 ]; then eval "exec $fd>&-"; fi
done
# shellcheck source=hack/testenv/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# shellcheck source=hack/testenv/pki.sh
. "$TESTENV_HACK/pki.sh"

need_root
need_bin etcd etcdctl kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
for b in containerd containerd-shim-runc-v2 ctr runc iptables; do
  command -v "$b" >/dev/null || die "$b missing: make setup (hack/debian-packages.txt)"
done
for p in bridge host-local loopback portmap; do
  [ -x "$KO_CNI_BIN/$p" ] || die "CNI plugin $KO_CNI_BIN/$p missing: apt-get install containernetworking-plugins"
done
[ -n "$KO_NODE_IP" ] || die "cannot find this node's IPv4 address (set KO_NODE_IP)"

started=$(date +%s)
# A fresh start begins with fresh logs (the previous run's stay until then).
if ! is_running kube-apiserver && ! is_running kubelet && ! is_running containerd; then
  rm -f "$KO_LOGS"/*.log
fi
mkdir -p "$KO_STATE" "$KO_RUN/pids" "$KO_LOGS" "$KO_PKI"
stamp() { log "$* (+$(($(date +%s) - started))s)"; }

# --- preflight: our address ranges must not collide with anything routed here ---------
python3 - "$KO_POD_CIDR" "$KO_SERVICE_CIDR" "$KO_CNI_BRIDGE" <<'PY' || die "address range collision (override KO_POD_CIDR / KO_SERVICE_CIDR)"
import ipaddress, json, subprocess, sys
ours = [ipaddress.ip_network(c) for c in sys.argv[1:3]]
routes = json.loads(subprocess.run(["ip", "-4", "-j", "route", "show", "table", "all"], check=True,
                                   capture_output=True, text=True).stdout)
addrs = json.loads(subprocess.run(["ip", "-4", "-j", "addr"], check=True, capture_output=True, text=True).stdout)
nets = [(r.get("dev"), r["dst"]) for r in routes if r.get("dst") not in (None, "default")]
nets += [(a["ifname"], f'{i["local"]}/{i["prefixlen"]}') for a in addrs for i in a.get("addr_info", [])]
bad = False
for dev, dst in nets:
    if dev == sys.argv[3] or dst.startswith("127.") or "/" not in dst and dst.startswith("127."):
        continue
    try:
        net = ipaddress.ip_network(dst, strict=False)
    except ValueError:
        continue
    for o in ours:
        if net.overlaps(o) and net.prefixlen > 0:
            print(f"{o} overlaps {dst} on {dev}", file=sys.stderr)
            bad = True
with open("/etc/resolv.conf") as f:
    for line in f:
        if line.startswith("nameserver"):
            ip = ipaddress.ip_address(line.split()[1])
            if any(ip in o for o in ours):
                print(f"{o} contains the host's nameserver {ip}", file=sys.stderr)
                bad = True
sys.exit(1 if bad else 0)
PY

# --- kernel settings the node needs (original values restored by down.sh) ---------------
[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || modprobe br_netfilter 2>/dev/null ||
  die "bridge netfilter unavailable (modprobe br_netfilter)"
if [ ! -f "$KO_STATE/sysctl.orig" ]; then
  for k in net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables; do
    echo "$k=$(sysctl -n "$k")"
  done >"$KO_STATE/sysctl.orig"
fi
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1

# --- PKI and kubeconfigs ----------------------------------------------------------------
pki_ca "$KO_PKI" ca testenv-ca
pki_sa_key "$KO_PKI"
pki_cert "$KO_PKI" ca apiserver kube-apiserver "" server \
  kubernetes kubernetes.default kubernetes.default.svc "kubernetes.default.svc.$KO_CLUSTER_DOMAIN" \
  localhost "$KO_NODE_NAME" "$(hostname)" 127.0.0.1 "$KO_NODE_IP" "$KO_APISERVER_SVC_IP"
pki_cert "$KO_PKI" ca apiserver-kubelet-client kube-apiserver-kubelet-client system:masters client
pki_cert "$KO_PKI" ca admin kubernetes-admin system:masters client
pki_cert "$KO_PKI" ca controller-manager system:kube-controller-manager "" client
pki_cert "$KO_PKI" ca scheduler system:kube-scheduler "" client
pki_cert "$KO_PKI" ca kubelet "system:node:$KO_NODE_NAME" system:nodes client
pki_cert "$KO_PKI" ca kube-proxy system:kube-proxy "" client
# The aggregation layer's front proxy (as kubeadm sets it up): extension API servers such as
# OLM's packageserver trust requests the kube-apiserver forwards with this client cert.
pki_ca "$KO_PKI" front-proxy-ca front-proxy-ca
pki_cert "$KO_PKI" front-proxy-ca front-proxy-client front-proxy-client "" client
server=https://127.0.0.1:$KO_APISERVER_PORT
for c in admin controller-manager scheduler kubelet kube-proxy; do
  [ -f "$KO_STATE/$c.kubeconfig" ] ||
    write_kubeconfig "$KO_STATE/$c.kubeconfig" "$server" "$KO_PKI/ca.crt" "$KO_PKI/$c.crt" "$KO_PKI/$c.key"
done
# The same admin identity addressed by the node IP (what a pod would use).
[ -f "$KO_STATE/admin-node.kubeconfig" ] ||
  write_kubeconfig "$KO_STATE/admin-node.kubeconfig" "https://$KO_NODE_IP:$KO_APISERVER_PORT" \
    "$KO_PKI/ca.crt" "$KO_PKI/admin.crt" "$KO_PKI/admin.key"

# --- control plane ----------------------------------------------------------------------
start_bg etcd etcd --name testenv --data-dir "$KO_STATE/etcd" \
  --listen-client-urls "http://127.0.0.1:$KO_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$KO_ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$KO_ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$KO_ETCD_PEER_PORT" \
  --initial-cluster "testenv=http://127.0.0.1:$KO_ETCD_PEER_PORT" --listen-metrics-urls "" \
  --quota-backend-bytes 8589934592 --unsafe-no-fsync --log-level warn
wait_for etcd 30 etcdctl --endpoints "http://127.0.0.1:$KO_ETCD_PORT" endpoint health
stamp "etcd up"

start_bg kube-apiserver kube-apiserver \
  --etcd-servers "http://127.0.0.1:$KO_ETCD_PORT" \
  --bind-address 0.0.0.0 --secure-port "$KO_APISERVER_PORT" --advertise-address "$KO_NODE_IP" \
  --tls-cert-file "$KO_PKI/apiserver.crt" --tls-private-key-file "$KO_PKI/apiserver.key" \
  --client-ca-file "$KO_PKI/ca.crt" \
  --requestheader-client-ca-file "$KO_PKI/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --proxy-client-cert-file "$KO_PKI/front-proxy-client.crt" --proxy-client-key-file "$KO_PKI/front-proxy-client.key" \
  --kubelet-client-certificate "$KO_PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$KO_PKI/apiserver-kubelet-client.key" \
  --kubelet-preferred-address-types InternalIP,Hostname \
  --service-account-issuer "https://kubernetes.default.svc.$KO_CLUSTER_DOMAIN" \
  --service-account-key-file "$KO_PKI/sa.pub" --service-account-signing-key-file "$KO_PKI/sa.key" \
  --service-cluster-ip-range "$KO_SERVICE_CIDR" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --allow-privileged=true --profiling=false --v=1 \
  --shutdown-watch-termination-grace-period 5s
wait_for kube-apiserver 90 kubectl --kubeconfig "$KO_KUBECONFIG" get --raw /readyz
stamp "kube-apiserver ready on :$KO_APISERVER_PORT"

mkdir -p "$KO_STATE/volume-plugins"
start_bg kube-controller-manager kube-controller-manager \
  --kubeconfig "$KO_STATE/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$KO_STATE/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$KO_STATE/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$KO_KCM_PORT" --leader-elect=false \
  --root-ca-file "$KO_PKI/ca.crt" --service-account-private-key-file "$KO_PKI/sa.key" \
  --cluster-signing-cert-file "$KO_PKI/ca.crt" --cluster-signing-key-file "$KO_PKI/ca.key" \
  --use-service-account-credentials=true \
  --allocate-node-cidrs=true --cluster-cidr "$KO_POD_CIDR" --node-cidr-mask-size 24 \
  --service-cluster-ip-range "$KO_SERVICE_CIDR" \
  --enable-hostpath-provisioner=true --flex-volume-plugin-dir "$KO_STATE/volume-plugins" \
  --profiling=false --v=1
start_bg kube-scheduler kube-scheduler \
  --kubeconfig "$KO_STATE/scheduler.kubeconfig" \
  --authentication-kubeconfig "$KO_STATE/scheduler.kubeconfig" \
  --authorization-kubeconfig "$KO_STATE/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$KO_SCHED_PORT" --leader-elect=false --profiling=false --v=1

# --- containerd (its own config, socket and state; not the Debian service) -------------
mkdir -p "$KO_RUN/containerd" "$KO_CONTAINERD_ROOT" "$KO_CNI_CONF" "$KO_STATE/cni-ipam"
restrict_oom=false
sh -c 'echo -1 >/proc/self/oom_score_adj' 2>/dev/null || restrict_oom=true
cat >"$KO_STATE/containerd.toml" <<EOT
version = 2
root = "$KO_CONTAINERD_ROOT"
state = "$KO_RUN/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$KO_CONTAINERD_SOCK"
[ttrpc]
  address = "$KO_RUN/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$KO_STATE/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:$PAUSE_VERSION"
  enable_selinux = false
  # Build machines may lack CAP_SYS_RESOURCE (this one does): then nobody may lower an
  # oom_score_adj, and runc fails on the kubelet's -998 for sandboxes. Clamp to ours.
  restrict_oom_score_adj = $restrict_oom
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
        Root = "$KO_RUN/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$KO_CNI_BIN"
    conf_dir = "$KO_CNI_CONF"
    max_conf_num = 1
EOT
cat >"$KO_CNI_CONF/10-testenv.conflist" <<EOT
{
  "cniVersion": "1.0.0",
  "name": "testenv",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$KO_CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$KO_STATE/cni-ipam",
        "ranges": [[{"subnet": "$KO_NODE_POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOT
start_bg containerd containerd --config "$KO_STATE/containerd.toml" --log-level warn
wait_for containerd 30 ctr --address "$KO_CONTAINERD_SOCK" version
stamp "containerd up"

"$TESTENV_HACK/images.sh"
stamp "images imported"

# --- kubelet ---------------------------------------------------------------------------
[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] && cgv1=false || cgv1=true
mkdir -p "$KO_KUBELET_ROOT" "$KO_STATE/pod-logs"
cat >"$KO_STATE/kubelet.yaml" <<EOT
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $KO_NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $KO_PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$KO_CONTAINERD_SOCK
cgroupDriver: cgroupfs
# cgroup v1 host ($cgv1): Kubernetes 1.34 only warns; stated explicitly for later bumps.
failCgroupV1: false
failSwapOn: false
clusterDNS: [$KO_DNS_IP]
clusterDomain: $KO_CLUSTER_DOMAIN
resolvConf: /etc/resolv.conf
podCIDR: $KO_NODE_POD_CIDR
podLogsDirectory: $KO_STATE/pod-logs
volumePluginDir: $KO_STATE/volume-plugins
maxPods: 250
serializeImagePulls: false
# A shared build machine: no evictions or image GC because of other people's disk use.
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
rotateCertificates: false
serverTLSBootstrap: false
EOT
start_bg kubelet kubelet --config "$KO_STATE/kubelet.yaml" --kubeconfig "$KO_STATE/kubelet.kubeconfig" \
  --root-dir "$KO_KUBELET_ROOT" --hostname-override "$KO_NODE_NAME" --node-ip "$KO_NODE_IP" --v=1

# --- kube-proxy (iptables; never writes conntrack sysctls) ------------------------------
# kube-proxy exits when its configuration file is written to (even with the same content), and
# start_bg does not start what runs: a second up.sh on a running bed used to leave it dead (no
# Service IP routed; seen 2026-12-02 11:41). Write the file only when it changes, and then
# restart kube-proxy.
kube_proxy_conf=$(mktemp)
cat >"$kube_proxy_conf" <<EOT
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $KO_STATE/kube-proxy.kubeconfig}
hostnameOverride: $KO_NODE_NAME
mode: iptables
clusterCIDR: $KO_POD_CIDR
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [$KO_NODE_IP/32]
iptables: {localhostNodePorts: false}
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOT
if cmp -s "$kube_proxy_conf" "$KO_STATE/kube-proxy.yaml"; then
  rm -f "$kube_proxy_conf"
else
  stop_bg kube-proxy
  mv "$kube_proxy_conf" "$KO_STATE/kube-proxy.yaml"
fi
start_bg kube-proxy kube-proxy --config "$KO_STATE/kube-proxy.yaml" --v=1

wait_for "node $KO_NODE_NAME Ready" 120 kc wait --for=condition=Ready "node/$KO_NODE_NAME" --timeout=1s
stamp "node $KO_NODE_NAME Ready"

# --- cluster add-ons ---------------------------------------------------------------------
sed -e "s|@DNS_IP@|$KO_DNS_IP|g" -e "s|@COREDNS_VERSION@|$COREDNS_VERSION|g" \
  -e "s|@CLUSTER_DOMAIN@|$KO_CLUSTER_DOMAIN|g" "$TESTENV_HACK/manifests/coredns.yaml" | kc apply -f - >/dev/null
kc apply -f "$TESTENV_HACK/manifests/storage.yaml" >/dev/null
kc create namespace "$KO_MEMBER_SECRET_NAMESPACE" --dry-run=client -o yaml | kc apply -f - >/dev/null
wait_for "CoreDNS" 120 kc -n kube-system rollout status deployment/coredns --timeout=1s
stamp "CoreDNS ready"

log "host cluster up in $(($(date +%s) - started))s; KUBECONFIG=$KO_KUBECONFIG"
