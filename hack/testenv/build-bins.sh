#!/usr/bin/env bash
# Build the test bed's programs from pinned Go module versions (hack/versions.env) into a
# cache outside the work tree. Skips what is already built; prints each component and
# how long it took.
#
#   hack/testenv/build-bins.sh                 # the default set (what `make test` needs)
#   hack/testenv/build-bins.sh etcd kube-apiserver karmadactl
#   KO_PREBUILT_BIN=/opt/bin hack/testenv/build-bins.sh   # use prebuilt binaries instead
#   KO_KARMADA_VERSION=previous hack/testenv/build-bins.sh karmada-scheduler ...
#       # Karmada's programs of KARMADA_PREVIOUS_VERSION (upgrade tests), next to the pinned
#       # ones: $KO_CACHE/bin/<name>-<that version>; the links keep pointing at the pin.
#
# Output: $KO_CACHE/bin/<name>-<version> and a link $KO_CACHE/links/<name> to it, so
# PATH=$KO_CACHE/links:$PATH picks the pinned build. Go's module and build caches are kept
# (GOMODCACHE, GOCACHE) so a rebuild after a version bump is incremental.
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

DEFAULT_COMPONENTS="etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet
kube-proxy kwok coredns ansible-operator pause karmada-aggregated-apiserver
karmada-controller-manager karmada-scheduler karmada-webhook karmada-agent karmada-descheduler
karmada-search karmada-metrics-adapter versitygw karmada-operator kube-router kms-plugin"
# Built only on request (benchmarks, bundle validation, OLM on the test bed).
ON_DEMAND="operator-sdk karmadactl bundle-validate olm olm-catalog olm-package-server
olm-copy-content olm-cpb opm grpc-health-probe"

log() { printf '[testenv-bin] %s\n' "$*" >&2; }

version_of() {
  case "$1" in
    etcd | etcdctl | etcdutl) echo "$ETCD_VERSION" ;;
    kube-router) echo "$KUBE_ROUTER_VERSION" ;;
    kube-* | kubectl | kubelet) echo "$KUBERNETES_VERSION" ;;
    kwok) echo "$KWOK_VERSION" ;;
    coredns) echo "$COREDNS_VERSION" ;;
    ansible-operator) echo "$ANSIBLE_OPERATOR_VERSION" ;;
    operator-sdk) echo "$OPERATOR_SDK_VERSION" ;;
    # Our source is part of the name: an edit of main.go builds afresh.
    bundle-validate) echo "$OPERATOR_FRAMEWORK_API_VERSION-$(sha256sum "$here/../bundle/validator/main.go" | cut -c1-8)" ;;
    karmada* ) if [ "${KO_KARMADA_VERSION:-}" = previous ]; then echo "$KARMADA_PREVIOUS_VERSION"
               else echo "$KARMADA_VERSION"; fi ;;
    olm*) echo "$OLM_VERSION" ;;
    # grpc-health-probe: the version operator-registry requires (its catalog images carry it).
    opm | grpc-health-probe) echo "$OPERATOR_REGISTRY_VERSION" ;;
    pause) echo "$PAUSE_VERSION" ;;
    # the bed's KMS v2 plugin (hack/testenv/kms-plugin): its k8s.io/kms is at KUBERNETES_VERSION
    kms-plugin) echo "$KUBERNETES_VERSION-$(cat "$here/kms-plugin/main.go" "$here/kms-plugin/go.mod" | sha256sum | cut -c1-8)" ;;
    versitygw) echo "$VERSITYGW_VERSION" ;;
    *) log "unknown component: $1 (known: $DEFAULT_COMPONENTS $ON_DEMAND)"; exit 2 ;;
  esac
}

# Download MODULE@VERSION without the checksum database (it does not answer for
# operator-framework modules from here) and check its hash against the pinned one.
check_module_sum() { # module version pinned-sum
  local sum
  sum=$(cd "$SRC" && GONOSUMDB=github.com/operator-framework go mod download -json "$1@$2" |
    awk -F'"' '/"Sum"/{print $4}')
  [ "$sum" = "$3" ] || { log "$1@$2 hash $sum != pinned $3"; exit 1; }
}

link() { # the links are the pinned set: another Karmada release is only built
  [ "${KO_KARMADA_VERSION:-}" = previous ] && [[ $1 == karmada* ]] && return 0
  ln -sfn "$BIN/$1-$2" "$LINKS/$1"
}

# A wrapper module whose go.mod requires k8s.io/kubernetes and points every staging
# module (replaced with ./staging/... upstream) at its published v0.Y.Z twin.
kubernetes_wrapper() {
  local dir=$SRC/kubernetes-$KUBERNETES_VERSION staging=v0${KUBERNETES_VERSION#v1}
  if [ ! -f "$dir/go.mod" ]; then
    mkdir -p "$dir"
    (cd "$dir" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" >/dev/null)
    local upstream
    upstream=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$KUBERNETES_VERSION.mod
    {
      echo "module karmada-operator.local/testenv/kubernetes"
      echo "go $(awk '/^go /{print $2; exit}' "$upstream")"
      echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
      echo "replace ("
      awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print "\t" $1 " => " $1 " '"$staging"'"}' "$upstream"
      echo ")"
    } >"$dir/go.mod.tmp"
    mv "$dir/go.mod.tmp" "$dir/go.mod"
  fi
  echo "$dir"
}

# etcd's modules replace each other with local paths too; a wrapper requiring all three
# at one version builds their published main packages.
etcd_wrapper() {
  local dir=$SRC/etcd-$ETCD_VERSION
  if [ ! -f "$dir/go.mod" ]; then
    mkdir -p "$dir"
    cat >"$dir/go.mod.tmp" <<EOF
module karmada-operator.local/testenv/etcd
go 1.24
require (
	go.etcd.io/etcd/server/v3 $ETCD_VERSION
	go.etcd.io/etcd/etcdctl/v3 $ETCD_VERSION
	go.etcd.io/etcd/etcdutl/v3 $ETCD_VERSION
)
EOF
    mv "$dir/go.mod.tmp" "$dir/go.mod"
  fi
  echo "$dir"
}

# A one-line wrapper module requiring MODULE@VERSION, for modules whose version list the
# proxy refuses (go install pkg@version asks for it).
module_wrapper() { # name module version
  local dir=$SRC/$1-$3
  if [ ! -f "$dir/go.mod" ]; then
    mkdir -p "$dir"
    printf 'module karmada-operator.local/testenv/%s\ngo 1.24\nrequire %s %s\n' "$1" "$2" "$3" >"$dir/go.mod"
  fi
  echo "$dir"
}

# A wrapper module requiring MODULE@VERSION (check its hash first) that carries
# over the module's own replace directives to other modules (a dependency's replaces do
# not apply in the main module), for modules that build only with them.
replacing_wrapper() { # name module version
  local dir=$SRC/$1-$3
  if [ ! -f "$dir/go.mod" ]; then
    mkdir -p "$dir"
    local upstream
    upstream=$(go env GOMODCACHE)/cache/download/$2/@v/$3.mod
    {
      printf 'module karmada-operator.local/testenv/%s\ngo %s\nrequire %s %s\n' \
        "$1" "$(awk '/^go /{print $2; exit}' "$upstream")" "$2" "$3"
      # Single-line and block replaces; local-path targets (./, ../) are left out.
      awk '
        /^replace \($/ {block = 1; next}
        block && /^\)/ {block = 0; next}
        { line = $0; sub(/\/\/.*/, "", line) }
        block && line ~ /=>/ {print "replace " line; next}
        /^replace / && line ~ /=>/ {print line}
      ' "$upstream" | awk '$0 !~ /=> *\.\.?\//'
    } >"$dir/go.mod.tmp"
    mv "$dir/go.mod.tmp" "$dir/go.mod"
  fi
  echo "$dir"
}

build_in() { # dir name version pkg [ldflags] [tags]
  local dir=$1 name=$2 version=$3 pkg=$4 ldflags=${5:-} tags=${6:-}
  (cd "$dir" && go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$BIN/$name-$version.tmp" "$pkg")
  mv "$BIN/$name-$version.tmp" "$BIN/$name-$version"
}

install_at() { # name version module-path/pkg@version [ldflags]
  local name=$1 version=$2 pkgver=$3 ldflags=${4:-} tmp
  tmp=$(mktemp -d "$SRC/gobin.XXXXXX")
  GOBIN=$tmp go install -trimpath -ldflags "-s -w $ldflags" "$pkgver"
  mv "$tmp/$(basename "${pkgver%@*}")" "$BIN/$name-$version"
  rm -rf "$tmp"
}

build_one() {
  local name=$1 version
  version=$(version_of "$name")
  case "$name" in
    etcd) build_in "$(etcd_wrapper)" etcd "$version" go.etcd.io/etcd/server/v3 ;;
    etcdctl) build_in "$(etcd_wrapper)" etcdctl "$version" go.etcd.io/etcd/etcdctl/v3 ;;
    etcdutl) build_in "$(etcd_wrapper)" etcdutl "$version" go.etcd.io/etcd/etcdutl/v3 ;;
    kube-router) install_at kube-router "$version" \
      "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$version" \
      "-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$version" ;;
    kube-* | kubectl | kubelet)
      local minor=${KUBERNETES_VERSION#v1.}
      minor=${minor%%.*}
      local ld="-X k8s.io/component-base/version.gitVersion=$version"
      ld="$ld -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
      ld="$ld -X k8s.io/component-base/version.gitTreeState=clean"
      ld="$ld -X k8s.io/client-go/pkg/version.gitVersion=$version"
      build_in "$(kubernetes_wrapper)" "$name" "$version" "k8s.io/kubernetes/cmd/$name" "$ld" ;;
    kwok) install_at kwok "$version" "sigs.k8s.io/kwok/cmd/kwok@$version" \
      "-X sigs.k8s.io/kwok/pkg/consts.Version=$version" ;;
    coredns) install_at coredns "$version" "github.com/coredns/coredns@$version" ;;
    ansible-operator)
      check_module_sum github.com/operator-framework/ansible-operator-plugins "$version" "$ANSIBLE_OPERATOR_MODULE_SUM"
      GONOSUMDB=github.com/operator-framework build_in \
        "$(module_wrapper ansible-operator github.com/operator-framework/ansible-operator-plugins "$version")" \
        ansible-operator "$version" github.com/operator-framework/ansible-operator-plugins/cmd/ansible-operator ;;
    bundle-validate)
      # Our main (hack/bundle/validator) in a wrapper module requiring operator-framework/api.
      local api=$OPERATOR_FRAMEWORK_API_VERSION dir
      check_module_sum github.com/operator-framework/api "$api" "$OPERATOR_FRAMEWORK_API_MODULE_SUM"
      dir=$(module_wrapper bundle-validate github.com/operator-framework/api "$api")
      cp "$here/../bundle/validator/main.go" "$dir/main.go"
      GONOSUMDB=github.com/operator-framework build_in "$dir" bundle-validate "$version" . ;;
    olm*)
      # olm, olm-catalog, olm-package-server, olm-copy-content: OLM's cmd/<name without olm->;
      # olm-cpb: util/cpb (the bundle-unpack Job copies bundle content with it).
      local pkg=cmd/${name#olm-} vp=github.com/operator-framework/operator-lifecycle-manager/pkg/version
      [ "$name" = olm ] && pkg=cmd/olm
      [ "$name" = olm-cpb ] && pkg=util/cpb
      check_module_sum github.com/operator-framework/operator-lifecycle-manager "$version" "$OLM_MODULE_SUM"
      GONOSUMDB=github.com/operator-framework build_in \
        "$(replacing_wrapper olm github.com/operator-framework/operator-lifecycle-manager "$version")" \
        "$name" "$version" "github.com/operator-framework/operator-lifecycle-manager/$pkg" \
        "-X $vp.OLMVersion=${version#v}" json1 ;;
    opm)
      # The upstream Makefile's tags: containers_image_openpgp avoids gpgme (cgo).
      check_module_sum github.com/operator-framework/operator-registry "$version" "$OPERATOR_REGISTRY_MODULE_SUM"
      GONOSUMDB=github.com/operator-framework build_in \
        "$(replacing_wrapper opm github.com/operator-framework/operator-registry "$version")" \
        opm "$version" github.com/operator-framework/operator-registry/cmd/opm \
        "-X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$version" \
        json1,containers_image_openpgp ;;
    grpc-health-probe)
      # The catalog pods' probes run it (OLM's registry reconciler).
      check_module_sum github.com/operator-framework/operator-registry "$version" "$OPERATOR_REGISTRY_MODULE_SUM"
      GONOSUMDB=github.com/operator-framework build_in \
        "$(replacing_wrapper opm github.com/operator-framework/operator-registry "$version")" \
        grpc-health-probe "$version" github.com/grpc-ecosystem/grpc-health-probe ;;
    operator-sdk) install_at operator-sdk "$version" \
      "github.com/operator-framework/operator-sdk/cmd/operator-sdk@$version" ;;
    pause) build_in "$here/pause" pause "$version" . ;;
    kms-plugin)
      # built in a copy: the build may write go.mod, and the work tree stays as committed
      local dir=$SRC/kms-plugin-$version
      mkdir -p "$dir" && cp "$here/kms-plugin/main.go" "$here/kms-plugin/go.mod" "$here/kms-plugin/go.sum" "$dir/"
      build_in "$dir" kms-plugin "$version" . ;;
    versitygw) install_at versitygw "$version" "github.com/versity/versitygw/cmd/versitygw@$version" \
      "-X main.Version=$version -X main.Build=$version" ;;
    karmadactl | karmada-*)
      local pkg=github.com/karmada-io/karmada/cmd/${name#karmada-}
      [ "$name" = karmadactl ] && pkg=github.com/karmada-io/karmada/cmd/karmadactl
      [ "$name" = karmada-search ] && pkg=github.com/karmada-io/karmada/cmd/karmada-search
      [ "$name" = karmada-operator ] && pkg=github.com/karmada-io/karmada/operator/cmd/operator
      build_in "$(module_wrapper karmada github.com/karmada-io/karmada "$version")" "$name" "$version" \
        "$pkg" "-X github.com/karmada-io/karmada/pkg/version.gitVersion=$version" ;;
  esac
}


components=("$@")
if [ ${#components[@]} -eq 0 ]; then
  read -r -d '' -a components <<<"$DEFAULT_COMPONENTS" || true
fi
# etcd brings its two tools along.
expanded=()
for c in "${components[@]}"; do
  if [ "$c" = etcd ]; then expanded+=(etcd etcdctl etcdutl); else expanded+=("$c"); fi
done

if [ -n "${KO_PREBUILT_BIN:-}" ]; then
  for c in "${expanded[@]}"; do
    [ -x "$KO_PREBUILT_BIN/$c" ] || { log "KO_PREBUILT_BIN=$KO_PREBUILT_BIN has no $c"; exit 1; }
    ln -sfn "$KO_PREBUILT_BIN/$c" "$LINKS/$c"
  done
  log "using prebuilt binaries from $KO_PREBUILT_BIN"
  exit 0
fi

total_start=$(date +%s)
for c in "${expanded[@]}"; do
  v=$(version_of "$c")
  if [ -x "$BIN/$c-$v" ]; then
    link "$c" "$v"
    continue
  fi
  start=$(date +%s)
  log "building $c $v ..."
  build_one "$c"
  link "$c" "$v"
  log "built $c $v in $(($(date +%s) - start))s"
done
log "all requested components ready in $(($(date +%s) - total_start))s: $LINKS"
