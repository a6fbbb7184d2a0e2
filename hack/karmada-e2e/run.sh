#!/usr/bin/env bash
# Run Karmada's own end-to-end suite (built by hack/karmada-e2e/build.sh) against a running
# Karmada, on the spec groups listed in hack/karmada-e2e/groups.txt (the ones the test bed can
# run; docs/testing.md says why the others cannot). tests/support/karmada_suite.py runs it
# against a Karmada our operator installs (test_karmada_member_clusters.py, before and after its upgrade); by hand:
#
#   KUBECONFIG=<file with contexts karmada-host and karmada-apiserver> \
#   PULL_BASED_CLUSTERS=member3:<kubeconfig with a context member3> \
#     hack/karmada-e2e/run.sh <report dir> [extra ginkgo flags, e.g. --focus=... --procs=1]
#
# Writes <report dir>/report.json (ginkgo's JSON report), junit.xml and suite.log; exits with
# ginkgo's exit code. KARMADA_E2E_PROCS sets the parallel processes (default 3: the specs mostly
# wait on controllers), KARMADA_E2E_GROUPS another groups file, KARMADA_E2E_TIMEOUT the suite's
# time limit (default 20m), KARMADA_E2E_POLL_TIMEOUT how long a spec waits for one state
# (the suite's --poll-timeout, default 300s as upstream).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KO_CACHE=${KO_CACHE:-$HOME/.cache/karmada-operator}
LINKS=${KO_PREBUILT_BIN:-$KO_CACHE/links}
suite=$LINKS/karmada-e2e-base.test
ginkgo=$LINKS/ginkgo
groups=${KARMADA_E2E_GROUPS:-$here/groups.txt}

[ $# -ge 1 ] || { echo "usage: $0 <report dir> [ginkgo flags]" >&2; exit 2; }
report_dir=$(mkdir -p "$1" && cd "$1" && pwd)
shift
for f in "$suite" "$ginkgo" "$LINKS/karmadactl"; do
  [ -x "$f" ] || { echo "$f missing: run hack/karmada-e2e/build.sh" >&2; exit 2; }
done
[ -n "${KUBECONFIG:-}" ] || { echo "KUBECONFIG must name the contexts karmada-host and karmada-apiserver" >&2; exit 2; }
command -v go >/dev/null || { echo "go must be on PATH (the suite asks \`go env GOPATH\` for karmadactl)" >&2; exit 2; }

# The suite runs $(go env GOPATH)/bin/karmadactl: a GOPATH of our own whose bin/ holds the pinned
# build (the suite only asks for the path; nothing is built or downloaded there).
gopath=$KO_CACHE/karmada-e2e/gopath
mkdir -p "$gopath/bin"
ln -sfn "$(readlink -f "$LINKS/karmadactl")" "$gopath/bin/karmadactl"
export GOPATH=$gopath

# One focus per group: ginkgo matches focus against "<suite description> <spec text>", and a
# spec's text starts with its top-level Describe, so each group's text (regexp-quoted) follows
# Karmada's suite description "E2E Suite". "skip <regexp>" lines name single specs of a listed
# group that cannot run here.
# shellcheck disable=SC2016  # the sed expression is meant literally
quote() { printf '%s' "$1" | sed -e 's/[][\.*^$(){}?+|]/\\&/g'; }
focus=() skip=()
while IFS= read -r line; do
  case "$line" in
    '' | '#'*) continue ;;
    'skip '*) skip+=("--skip=${line#skip }") ;;
    *) focus+=("--focus=^E2E Suite $(quote "$line")( |\$)") ;;
  esac
done <"$groups"
[ ${#focus[@]} -gt 0 ] || { echo "$groups lists no spec group" >&2; exit 2; }

cd "$report_dir"
set +e
"$ginkgo" run --procs="${KARMADA_E2E_PROCS:-3}" --timeout="${KARMADA_E2E_TIMEOUT:-20m}" --no-color -v \
  --label-filter='!needCreateCluster' "${focus[@]}" "${skip[@]}" \
  --json-report=report.json --junit-report=junit.xml --output-dir="$report_dir" "$@" \
  "$suite" -- --karmada-context=karmada-apiserver --host-context=karmada-host \
  --poll-timeout="${KARMADA_E2E_POLL_TIMEOUT:-300s}" 2>&1 | tee suite.log
rc=${PIPESTATUS[0]}
exit "$rc"
