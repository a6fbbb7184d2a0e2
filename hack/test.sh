#!/usr/bin/env bash
# make test's pytest run. The end-to-end tier (tests/e2e, on the hack/testenv bed) is mostly
# waiting: pods starting, reconcile passes, Karmada's own suite; on this 2-core machine the
# load stays near one core. The process tiers (tests/unit, tests/integration: their own etcd,
# kube-apiserver and ansible-operator processes, never the bed) run beside it at a lower CPU
# priority, so the bed gets the cores first, and in a network namespace of their own (loopback
# only, `unshare -n`): ansible-operator's API proxy port (8888) can be held by one operator per
# network namespace (tests/support/operator_runtime.py), and the end-to-end tier's operators
# hold the host's. Where no network namespace can be made (not root), test_operator_runtime.py
# runs in the end-to-end tier instead. Both runs write their module -> seconds table; the side
# run's output is shown whole after the end-to-end tier, then both tables, every FAILED/ERROR
# line of both, and one line with each exit code and the wall time. Any failure fails the run.
#
#   hack/test.sh [pytest args...]        (make test: PYTEST_ARGS)
#   KO_TEST_SERIAL=1 hack/test.sh        one tier after the other
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit
PY=${PY:-python}
start=$(date +%s)

if [[ "${KO_TEST_SERIAL:-}" == 1 ]]; then
    "$PY" -m pytest tests "$@"
    exit $?
fi

side_log=$(mktemp /tmp/ko-test-side.XXXXXX.log)
e2e_log=$(mktemp /tmp/ko-test-e2e.XXXXXX.log)
side_table=$(mktemp /tmp/ko-test-side.XXXXXX.md)
e2e_table=$(mktemp /tmp/ko-test-e2e.XXXXXX.md)

ONE_OPERATOR=tests/integration/test_operator_runtime.py
if unshare -n ip link set lo up 2>/dev/null; then
    own_network=(unshare -n bash -c 'ip link set lo up && exec "$@"' side)
    side_args=()
    e2e_args=()
    where="in a network namespace of their own"
else
    own_network=()
    side_args=(--ignore="$ONE_OPERATOR")
    e2e_args=("$ONE_OPERATOR")
    where="without $ONE_OPERATOR, which ran in the e2e tier: no network namespace here"
fi
KO_MODULE_SECONDS_FILE="$side_table" setsid "${own_network[@]}" nice -n 10 "$PY" -m pytest tests/unit \
    tests/integration "${side_args[@]}" -p no:cacheprovider "$@" >"$side_log" 2>&1 &
side=$!
# Stopped with the run (Ctrl-C, a CI timeout): the side tier goes too, with the processes it
# started (its own process group).
trap 'kill -- -"$side" 2>/dev/null; rm -f "$side_log" "$e2e_log" "$side_table" "$e2e_table"' EXIT

KO_MODULE_SECONDS_FILE="$e2e_table" "$PY" -m pytest tests/e2e "${e2e_args[@]}" "$@" 2>&1 | tee "$e2e_log"
e2e_rc=${PIPESTATUS[0]}
e2e_end=$(date +%s)
wait "$side"
side_rc=$?

echo
echo "================ tests/unit and tests/integration (ran beside tests/e2e, nice 10, $where) ================"
cat "$side_log"
echo
echo "================ module -> seconds: tests/e2e ================"
cat "$e2e_table" 2>/dev/null
echo "================ module -> seconds: tests/unit and tests/integration, beside it ================"
cat "$side_table" 2>/dev/null
echo
echo "================ what failed, from both runs ================"
grep -h -E '^(FAILED|ERROR) ' "$e2e_log" "$side_log" || echo "nothing"
echo
echo "hack/test.sh: e2e exit $e2e_rc ($(( e2e_end - start ))s), unit+integration exit $side_rc," \
     "wall $(( $(date +%s) - start ))s"
(( e2e_rc == 0 && side_rc == 0 ))
