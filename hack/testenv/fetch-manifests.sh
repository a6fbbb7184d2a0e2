#!/usr/bin/env bash
# Files from pinned Go modules that tests read (not programs): the Prometheus Operator's
# ServiceMonitor CRD. Downloaded into Go's module cache (kept between runs) and linked as
# $KO_CACHE/manifests/<file>; prints what it linked.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/versions.env
. "$here/../versions.env"
KO_CACHE=${KO_CACHE:-$HOME/.cache/karmada-operator}
out=$KO_CACHE/manifests
mkdir -p "$out" "$KO_CACHE/src"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
export GOPROXY=${GOPROXY:-https://proxy.golang.org,direct}

module=github.com/prometheus-operator/prometheus-operator
dir=$(cd "$KO_CACHE/src" && go mod download -json "$module@$PROMETHEUS_OPERATOR_VERSION" |
  awk -F'"' '/"Dir"/{print $4}')
file=$dir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
[ -f "$file" ] || { echo "[fetch-manifests] $file missing" >&2; exit 1; }
ln -sfn "$file" "$out/monitoring.coreos.com_servicemonitors.yaml"
echo "[fetch-manifests] $out/monitoring.coreos.com_servicemonitors.yaml -> $module@$PROMETHEUS_OPERATOR_VERSION" >&2
