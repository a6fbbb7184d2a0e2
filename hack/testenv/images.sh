#!/usr/bin/env bash
# Assemble the test bed's OCI images from the pinned binaries (no registry, no Docker) and
# import them into containerd's k8s.io namespace under the exact names the operator's
# defaults use, so that imagePullPolicy IfNotPresent never pulls.
#
#   hack/testenv/images.sh            # build what changed; import what containerd lacks
#   hack/testenv/images.sh --list     # print the image names
#
# Archives are cached in $KO_IMAGE_DIR and rebuilt only when an input changes; an image
# already in containerd with the same digest is not imported again. When the test bed's
# containerd is not running the archives are built and the import is left to up.sh.
set -euo pipefail
# shellcheck source=hack/testenv/env.sh
. "$(dirname "${BASH_SOURCE[0]}")/env.sh"

BUSYBOX=${KO_BUSYBOX:-/bin/busybox}
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
TEST_IMAGE_TAG=$(dpkg-query -W -f '${Version}' busybox-static 2>/dev/null | sed 's/^[0-9]*://; s/[^A-Za-z0-9_.].*$//')
TEST_IMAGE="ko-testenv.local/busybox:${TEST_IMAGE_TAG:-static}"
PY=python3
[ -x "$KO_VENV/bin/python" ] && PY=$KO_VENV/bin/python

# Debian's busybox-static is linked with glibc, whose getaddrinfo loads NSS modules at run
# time (and segfaults without them): images with busybox get the host's glibc NSS files.
LIBDIR=/lib/x86_64-linux-gnu
NSS="--file $TESTENV_HACK/rootfs/etc/nsswitch.conf:/etc/nsswitch.conf:644"
for f in libc.so.6 libnss_dns.so.2 libnss_files.so.2 libresolv.so.2; do
  NSS+=" --file $LIBDIR/$f:$LIBDIR/$f:755"
done
NSS+=" --file $(readlink -f /lib64/ld-linux-x86-64.so.2):/lib64/ld-linux-x86-64.so.2:755"

# name|refs (space separated)|oci_image.py arguments (word-split; paths have no spaces)
image_specs() {
  local k=$KUBERNETES_VERSION kv=$KARMADA_VERSION b c
  echo "pause|registry.k8s.io/pause:$PAUSE_VERSION registry.k8s.io/pause:3.6|--file $KO_LINKS/pause:/pause:755 --entrypoint /pause"
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    echo "$b|registry.k8s.io/$b:$k|--file $KO_LINKS/$b:/usr/local/bin/$b:755 --file $CA_BUNDLE:$CA_BUNDLE:644 --dir tmp:1777 --entrypoint /usr/local/bin/$b"
  done
  echo "etcd|registry.k8s.io/etcd:$ETCD_IMAGE_TAG|--busybox $BUSYBOX $NSS --file $KO_LINKS/etcd:/usr/local/bin/etcd:755 --file $KO_LINKS/etcdctl:/usr/local/bin/etcdctl:755 --file $KO_LINKS/etcdutl:/usr/local/bin/etcdutl:755 --dir tmp:1777 --dir var/lib/etcd:700 --cmd /usr/local/bin/etcd"
  echo "coredns|registry.k8s.io/coredns/coredns:$COREDNS_VERSION|--file $KO_LINKS/coredns:/coredns:755 --file $CA_BUNDLE:$CA_BUNDLE:644 --dir tmp:1777 --entrypoint /coredns"
  for c in aggregated-apiserver controller-manager scheduler webhook agent descheduler search metrics-adapter; do
    echo "karmada-$c|docker.io/karmada/karmada-$c:$kv|--busybox $BUSYBOX $NSS --file $KO_LINKS/karmada-$c:/bin/karmada-$c:755 --file $CA_BUNDLE:$CA_BUNDLE:644 --dir tmp:1777 --cmd /bin/karmada-$c"
    # The previous release (upgrade tests), once build-bins.sh has built it (KO_KARMADA_VERSION=previous).
    b=$KO_CACHE/bin/karmada-$c-$KARMADA_PREVIOUS_VERSION
    if [ -x "$b" ] && [ -z "${KO_PREBUILT_BIN:-}" ]; then
      echo "karmada-$c-$KARMADA_PREVIOUS_VERSION|docker.io/karmada/karmada-$c:$KARMADA_PREVIOUS_VERSION|--busybox $BUSYBOX $NSS --file $b:/bin/karmada-$c:755 --file $CA_BUNDLE:$CA_BUNDLE:644 --dir tmp:1777 --cmd /bin/karmada-$c"
    fi
  done
  # General-purpose images for tests: sh, httpd, wget, nc ... from Debian's busybox-static,
  # and the same plus the pinned kubectl. (That busybox's wget crashes with -T: use
  # `timeout N wget` instead.)
  echo "busybox|$TEST_IMAGE|--busybox $BUSYBOX $NSS --file $CA_BUNDLE:$CA_BUNDLE:644 --dir tmp:1777 --dir root:700 --cmd sh"
  # The bed's KMS v2 plugin (hack/testenv/kms-plugin), the stand-in for a user's KMS.
  echo "kms-plugin|ko-testenv.local/kms-plugin:$k|--file $KO_LINKS/kms-plugin:/kms-plugin:755 --dir tmp:1777 --user 65532 --entrypoint /kms-plugin"
  echo "kubectl|ko-testenv.local/kubectl:$k|--busybox $BUSYBOX $NSS --file $KO_LINKS/kubectl:/usr/local/bin/kubectl:755 --file $CA_BUNDLE:$CA_BUNDLE:644 --dir tmp:1777 --dir root:700 --entrypoint /usr/local/bin/kubectl"
}

if [ "${1:-}" = --list ]; then
  image_specs | cut -d'|' -f2 | tr ' ' '\n'
  exit 0
fi

"$BUSYBOX" --list >/dev/null 2>&1 || die "$BUSYBOX is not a static busybox (apt-get install busybox-static)"
mkdir -p "$KO_IMAGE_DIR"

ctr_() { ctr --address "$KO_CONTAINERD_SOCK" -n k8s.io "$@"; }
have_containerd=false
if [ -S "$KO_CONTAINERD_SOCK" ] && ctr_ version >/dev/null 2>&1; then
  have_containerd=true
  present=$(ctr_ images ls 2>/dev/null | awk 'NR > 1 {print $1, $3}')
fi

start=$(date +%s)
built=0 imported=0
while IFS='|' read -r name refs argv; do
  read -r -a args <<<"$argv"
  read -r -a ref_list <<<"$refs"
  tarball=$KO_IMAGE_DIR/$name.tar
  # The host cluster needs pause and coredns; the rest are skipped (with a warning) until
  # build-bins.sh has built them, unless KO_IMAGES_STRICT=1.
  missing_input=
  for a in "${args[@]}"; do
    case "$a" in /*:/*) [ -e "${a%%:*}" ] || missing_input=${a%%:*} ;; esac
  done
  if [ -n "$missing_input" ]; then
    case "$name:${KO_IMAGES_STRICT:-0}" in
      pause:* | coredns:* | *:1) die "$missing_input not built: run hack/testenv/build-bins.sh" ;;
    esac
    log "WARNING: skipping image $name: $missing_input not built yet (hack/testenv/build-bins.sh)"
    continue
  fi
  # The stamp covers the arguments, the assembler and every input file's size and mtime.
  stamp=$({
    echo "$refs $argv"
    sha256sum "$TESTENV_HACK/oci_image.py"
    for a in "${args[@]}"; do
      case "$a" in /*:/* | "$BUSYBOX") stat -L -c '%n %s %Y' "${a%%:*}" ;; esac
    done
  } | sha256sum | cut -c1-64)
  if [ -f "$tarball" ] && [ "$(head -n1 "$tarball.stamp" 2>/dev/null)" = "$stamp" ]; then
    digest=$(sed -n 2p "$tarball.stamp")
  else
    ref_args=()
    for r in "${ref_list[@]}"; do ref_args+=(--ref "$r"); done
    digest=$("$PY" "$TESTENV_HACK/oci_image.py" --out "$tarball" "${ref_args[@]}" "${args[@]}")
    printf '%s\n%s\n' "$stamp" "$digest" >"$tarball.stamp"
    built=$((built + 1))
    log "built image $name ($digest)"
  fi
  if $have_containerd; then
    missing=false
    for r in "${ref_list[@]}"; do
      grep -qxF "$r $digest" <<<"$present" || missing=true
    done
    if $missing; then
      ctr_ images import "$tarball" >/dev/null
      imported=$((imported + 1))
      log "imported ${ref_list[*]}"
    fi
  fi
done < <(image_specs)

if $have_containerd; then
  log "images ready in $(($(date +%s) - start))s ($built built, $imported imported)"
else
  log "images built in $(($(date +%s) - start))s ($built built); containerd not running, import left to up.sh"
fi
