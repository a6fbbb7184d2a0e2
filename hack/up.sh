#!/usr/bin/env bash
# `make up`: on the local host cluster (hack/testenv, already started by make), install the
# CRDs, start the operator (ansible-operator with our watches.yaml, as `make run` does) in
# the background, apply the sample KarmadaDeployment and show its progress until Ready.
#
# This machine cannot reach GitHub, so Karmada's CRD tarball is built from the Karmada
# module source the test bed downloaded and given to the operator as a file:// URL
# (spec.crds.url), the way an air-gapped site points it at a mirror.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KO_CACHE=${KO_CACHE:-$HOME/.cache/karmada-operator}
run_dir=$KO_CACHE/operator
mkdir -p "$run_dir"
KUBECONFIG=$("$root/hack/testenv/kubeconfig.sh")
export KUBECONFIG PATH=$KO_CACHE/venv/bin:$KO_CACHE/links:$PATH ANSIBLE_CONFIG=$root/ansible.cfg \
  PYTHONPATH=$root/plugins/module_utils
timeout_s=${KO_UP_TIMEOUT:-1200}
ns=karmada-system

kubectl apply -k "$root/config/crd" >/dev/null
# `kubectl wait --for=condition=Established` fails at once on a CRD whose status has no
# conditions yet (right after apply), so poll.
for _ in $(seq 120); do
  [[ $(kubectl get crd karmadadeployments.operator.karmada.io \
       -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null) == True ]] && break
  sleep 0.5
done
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null

crds=$run_dir/karmada-crds.tar.gz
sha=$(python "$root/hack/serve-karmada-crds.py" --build-only --out "$crds")

if pgrep -f "ansible-operator run --watches-file=./watches.yaml" >/dev/null; then
  echo "operator already running, log: $run_dir/operator.log"
else
  # `&` on the operator alone, so the pid file holds the operator's pid (make down kills it).
  (cd "$root" || exit 1
   nohup ansible-operator run --watches-file=./watches.yaml --ansible-roles-path="$root/roles" \
     --leader-elect=false --health-probe-bind-address=127.0.0.1:6789 --metrics-bind-address=0 \
     >"$run_dir/operator.log" 2>&1 </dev/null &
   echo $! >"$run_dir/pid")
  echo "operator started (pid $(cat "$run_dir/pid")), log: $run_dir/operator.log"
fi

# The sample's two member clusters: kwok clusters from the test bed (their kubeconfig
# Secrets member1-kubeconfig and member2-kubeconfig land in karmada-system).
"$root/hack/testenv/members.sh" 2 3

# The sample as it is, with the CRD source set for this offline machine. Its Pull member's
# karmada-agent runs in the host cluster (agentPlacement Host): kwok nodes cannot run pods.
python - "$root/config/samples/operator_v1alpha1_karmadadeployment.yaml" "file://$crds" "$sha" <<'PY' | kubectl apply -f -
import sys, yaml
cr = yaml.safe_load(open(sys.argv[1]))
cr["spec"]["crds"] = {"url": sys.argv[2], "sha256": sys.argv[3]}
for member in cr["spec"].get("members", []):
    if member.get("syncMode") == "Pull":
        member["agentPlacement"] = "Host"
print(yaml.safe_dump(cr))
PY

deadline=$(( $(date +%s) + timeout_s ))
last=""
while [ "$(date +%s)" -lt "$deadline" ]; do
  line=$(kubectl -n "$ns" get karmadadeployment karmada \
    -o jsonpath='{.status.phase}{" "}{range .status.conditions[?(@.type=="Ready")]}{.status}{" "}{.reason}{": "}{.message}{end}{"; members "}{range .status.conditions[?(@.type=="MembersReady")]}{.status}{" "}{.message}{end}' \
    2>/dev/null || true)
  if [ -n "$line" ] && [ "$line" != "$last" ]; then echo "$(date +%T) karmada: $line"; last=$line; fi
  case "$line" in Running\ True*members\ True*) break ;; esac
  sleep 5
done
kubectl -n "$ns" get karmadadeployments
case "$last" in Running\ True*members\ True*) ;; *) echo "not Ready after ${timeout_s}s; see $run_dir/operator.log" >&2; exit 1 ;; esac

# A kubeconfig for this machine: the admin kubeconfig names the external balancer of the
# sample (not reachable here), so point it at the karmada-apiserver Service instead.
secret=$(kubectl -n "$ns" get karmadadeployment karmada -o jsonpath='{.status.adminKubeconfigSecret}')
ip=$(kubectl -n "$ns" get service karmada-apiserver -o jsonpath='{.spec.clusterIP}')
local_conf=$KO_CACHE/karmada.kubeconfig
kubectl -n "$ns" get secret "$secret" -o jsonpath='{.data.kubeconfig}' | base64 -d >"$local_conf.tmp"
chmod 600 "$local_conf.tmp"
kubectl --kubeconfig "$local_conf.tmp" config set-cluster "$(kubectl --kubeconfig "$local_conf.tmp" config view -o jsonpath='{.clusters[0].name}')" \
  --server "https://$ip:5443" --tls-server-name "karmada-apiserver.$ns.svc.cluster.local" >/dev/null
mv "$local_conf.tmp" "$local_conf"
cat <<TXT

Karmada is Running, with member clusters member1 (Push) and member2 (Pull) joined.
  Host cluster:      export KUBECONFIG=$KUBECONFIG
  Karmada (here):    kubectl --kubeconfig $local_conf get --raw /readyz
  Admin kubeconfig:  Secret $ns/$secret, key kubeconfig (server: the sample's external balancer)
  Operator log:      $run_dir/operator.log
Try: kubectl --kubeconfig $local_conf get clusters
     kubectl -n $ns get karmadadeployment karmada -o jsonpath='{.status.members}'
     (member kubeconfigs: $(dirname "$KUBECONFIG")/members/member<i>/kubeconfig; edit spec.members to join or unjoin)
Undo with: make down
TXT
