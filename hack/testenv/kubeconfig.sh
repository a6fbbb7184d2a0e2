#!/usr/bin/env bash
# Print the host cluster's admin kubeconfig path (`make -s testenv-kubeconfig`).
#   hack/testenv/kubeconfig.sh            # host cluster
#   hack/testenv/kubeconfig.sh member1    # a member cluster started by members.sh
set -euo pipefail
# shellcheck source=hack/testenv/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"
if [ $# -gt 0 ]; then
  f=$KO_STATE/members/$1/kubeconfig
else
  f=$KO_KUBECONFIG
fi
[ -f "$f" ] || { log "no kubeconfig at $f (is the test bed up? make testenv-up)"; }
echo "$f"
