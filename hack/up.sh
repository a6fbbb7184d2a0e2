#!/usr/bin/env bash
# `make up`: on the local host cluster (hack/testenv, already started by make), install the
# CRDs, start the operator (ansible-operator with our watches.yaml, as `make run` does) in
# the background, apply the sample KarmadaDeployment and show its status until it settles.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KO_CACHE=${KO_CACHE:-$HOME/.cache/karmada-operator}
run_dir=$KO_CACHE/operator
mkdir -p "$run_dir"
KUBECONFIG=$("$root/hack/testenv/kubeconfig.sh")
export KUBECONFIG PATH=$KO_CACHE/venv/bin:$KO_CACHE/links:$PATH ANSIBLE_CONFIG=$root/ansible.cfg
timeout_s=${KO_UP_TIMEOUT:-900}

kubectl apply -k "$root/config/crd" >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd -l '!nonexistent' >/dev/null 2>&1 || true
kubectl create namespace karmada-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null

if [ -f "$run_dir/pid" ] && kill -0 "$(cat "$run_dir/pid")" 2>/dev/null; then
  echo "operator already running (pid $(cat "$run_dir/pid")), log: $run_dir/operator.log"
else
  (cd "$root" && nohup ansible-operator run --watches-file=./watches.yaml --ansible-roles-path="$root/roles" \
    --leader-elect=false --health-probe-bind-address=127.0.0.1:6789 --metrics-bind-address=0 \
    >"$run_dir/operator.log" 2>&1 & echo $! >"$run_dir/pid")
  echo "operator started (pid $(cat "$run_dir/pid")), log: $run_dir/operator.log"
fi

kubectl apply -f "$root/config/samples/operator_v1alpha1_karmadadeployment.yaml"
deadline=$(( $(date +%s) + timeout_s ))
last=""
while [ "$(date +%s)" -lt "$deadline" ]; do
  line=$(kubectl -n karmada-system get karmadadeployment karmada \
    -o jsonpath='{.status.phase}{" "}{range .status.conditions[?(@.type=="Ready")]}{.status}{" "}{.reason}{": "}{.message}{end}' \
    2>/dev/null || true)
  if [ -n "$line" ] && [ "$line" != "$last" ]; then echo "karmada: $line"; last=$line; fi
  case "$line" in
    Running\ True*) break ;;
    *" False "*NotImplemented*) break ;;
  esac
  sleep 5
done
kubectl -n karmada-system get karmadadeployments
cat <<TXT

Host cluster kubeconfig: $KUBECONFIG
Operator log:            $run_dir/operator.log
When the control plane is Ready, its admin kubeconfig is in Secret
karmada-system/$(kubectl -n karmada-system get karmadadeployment karmada -o jsonpath='{.status.adminKubeconfigSecret}' 2>/dev/null || true)
Undo with: make down
TXT
