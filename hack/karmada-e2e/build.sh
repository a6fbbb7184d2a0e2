#!/usr/bin/env bash
# Build Karmada's own end-to-end suite (test/e2e/suites/base of the pinned Karmada module,
# KARMADA_VERSION in hack/versions.env) as a test binary, and what running it needs, into
# the cache outside the work tree, the way hack/testenv/build-bins.sh builds the test bed:
#
#   $KO_CACHE/bin/karmada-e2e-base-<version>.test  go test -c of the suite (ginkgo v2 inside;
#                                                 ginkgo's CLI runs only binaries named *.test)
#   $KO_CACHE/bin/ginkgo-<ginkgo version>          ginkgo's CLI at the version Karmada requires
#                                                 (runs the binary with parallel processes)
#   $KO_CACHE/bin/karmadactl-<version>             by build-bins.sh (the karmadactl specs run it)
#
# with links of the same names (no version) in $KO_CACHE/links. Skips what is built; prints
# how long each step took. Go's module and build caches are reused (GOMODCACHE, GOCACHE).
#
#   hack/karmada-e2e/build.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/versions.env
. "$here/../versions.env"

KO_CACHE=${KO_CACHE:-$HOME/.cache/karmada-operator}
BIN=$KO_CACHE/bin
LINKS=$KO_CACHE/links
SRC=$KO_CACHE/src
mkdir -p "$BIN" "$LINKS" "$SRC"

export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
export GOPROXY=${GOPROXY:-https://proxy.golang.org,direct}

log() { printf '[karmada-e2e-build] %s\n' "$*" >&2; }

# KO_PREBUILT_BIN (as in build-bins.sh): use the programs found there, build nothing.
if [ -n "${KO_PREBUILT_BIN:-}" ]; then
  for f in karmada-e2e-base.test ginkgo karmadactl; do
    [ -x "$KO_PREBUILT_BIN/$f" ] || { log "KO_PREBUILT_BIN=$KO_PREBUILT_BIN has no $f"; exit 1; }
  done
  log "using prebuilt programs from $KO_PREBUILT_BIN"
  exit 0
fi

version=$KARMADA_VERSION
module=github.com/karmada-io/karmada
total_start=$(date +%s)

# A wrapper module of its own (not build-bins.sh's karmada wrapper: building the suite adds
# its test-only requirements to go.sum, which the component builds need not see).
dir=$SRC/karmada-e2e-$version
if [ ! -f "$dir/go.mod" ]; then
  mkdir -p "$dir"
  (cd "$dir" && go mod download -json "$module@$version" >/dev/null)
  upstream=$(go env GOMODCACHE)/cache/download/$module/@v/$version.mod
  printf 'module karmada-operator.local/testenv/karmada-e2e\ngo %s\nrequire %s %s\n' \
    "$(awk '/^go /{print $2; exit}' "$upstream")" "$module" "$version" >"$dir/go.mod.tmp"
  mv "$dir/go.mod.tmp" "$dir/go.mod"
fi

# The suite itself.
suite=karmada-e2e-base-$version.test
if [ ! -x "$BIN/$suite" ]; then
  start=$(date +%s)
  log "building $suite (go test -c $module/test/e2e/suites/base) ..."
  (cd "$dir" && go test -c -trimpath -ldflags "-s -w" -o "$BIN/$suite.tmp" "$module/test/e2e/suites/base")
  mv "$BIN/$suite.tmp" "$BIN/$suite"
  log "built $suite in $(($(date +%s) - start))s"
fi
ln -sfn "$BIN/$suite" "$LINKS/karmada-e2e-base.test"

# ginkgo's CLI at the version of the library compiled into the suite (they must match).
ginkgo_version=$(cd "$dir" && go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)
if [ ! -x "$BIN/ginkgo-$ginkgo_version" ]; then
  start=$(date +%s)
  log "building ginkgo $ginkgo_version ..."
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$BIN/ginkgo-$ginkgo_version.tmp" \
    github.com/onsi/ginkgo/v2/ginkgo)
  mv "$BIN/ginkgo-$ginkgo_version.tmp" "$BIN/ginkgo-$ginkgo_version"
  log "built ginkgo $ginkgo_version in $(($(date +%s) - start))s"
fi
ln -sfn "$BIN/ginkgo-$ginkgo_version" "$LINKS/ginkgo"

# karmadactl of the same release (an on-demand component of build-bins.sh).
"$here/../testenv/build-bins.sh" karmadactl

log "karmada e2e suite ready in $(($(date +%s) - total_start))s: $LINKS/karmada-e2e-base.test"
