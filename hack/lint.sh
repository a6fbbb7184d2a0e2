#!/usr/bin/env bash
# The lint matrix from the source documents: ansible-lint (production profile), yamllint, the
# ShellCheck linter, ruff (PEP 8), ansible-playbook --syntax-check on every playbook, generated
# CRDs up to date, samples valid against their CRD schemas (and broken ones not), the OLM
# bundle up to date with config/ and valid (the validators `operator-sdk bundle validate
# --select-optional suite=operatorframework` runs: 0 errors and 0 warnings).
# Runs every check, then fails if any failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export ANSIBLE_CONFIG=$PWD/ansible.cfg PYTHONPATH=$PWD/plugins/module_utils
failed=()
step() {
  local name=$1
  shift
  printf '== %s\n' "$name"
  if ! "$@"; then failed+=("$name"); fi
}

# bundle/ and bundle.Dockerfile equal what `make bundle` makes from config/ now.
bundle_in_sync() {
  local tmp rc=0
  tmp=$(mktemp -d)
  if ! python hack/bundle/generate.py --root "$tmp" >/dev/null ||
    ! diff -r bundle "$tmp/bundle" || ! diff bundle.Dockerfile "$tmp/bundle.Dockerfile"; then
    rc=1
  fi
  rm -rf "$tmp"
  [ $rc -eq 0 ] || echo "bundle/ is stale: run \`make bundle\`" >&2
  return $rc
}

# bundle/ passes OLM's validators (hack/bundle/validator, built from the pinned
# operator-framework/api by build-bins.sh; a no-op once built). Any warning fails it too.
bundle_valid() {
  # shellcheck source=hack/versions.env
  . hack/versions.env
  local k8s=${KUBERNETES_VERSION#v}
  hack/testenv/build-bins.sh bundle-validate >/dev/null &&
    "${KO_CACHE:-$HOME/.cache/karmada-operator}/links/bundle-validate" -k8s-version "${k8s%.*}" ./bundle
}

mapfile -t shells < <(git ls-files -co --exclude-standard -- '*.sh' .ci/run | sort -u)
mapfile -t playbooks < <(ls playbooks/*.yml)

step "ruff" ruff check .
step "yamllint" yamllint -s .
step "shellcheck" shellcheck -x "${shells[@]}"
for pb in "${playbooks[@]}"; do
  step "syntax-check $pb" ansible-playbook --syntax-check -i localhost, "$pb"
done
step "ansible-lint" ansible-lint --profile production -q playbooks roles
step "crds generated" python hack/crdgen/generate.py --check
step "samples vs CRD schemas" python hack/check_samples.py
step "bundle generated" bundle_in_sync
step "bundle valid" bundle_valid

if [ ${#failed[@]} -gt 0 ]; then
  printf 'lint FAILED: %s\n' "${failed[*]}" >&2
  exit 1
fi
echo "lint: all checks passed"
