#!/usr/bin/env bash
# Assemble the operator image -- what the Dockerfile builds from
# quay.io/operator-framework/ansible-operator -- as an OCI image archive, without a
# registry or a container engine (neither is available on the test machines), so the test
# bed can `ctr images import` it and run the operator in-cluster from config/default.
#
#   hack/testenv/operator-image.sh [--verify] [--rebuild-base] [IMAGE]
#
# IMAGE (else $IMG, else ko-testenv.local/karmada-ansible-operator:dev) is the name the
# archive carries. The archive path is printed on stdout (logs go to stderr); default
# ~/.cache/karmada-operator/operator-image/operator.tar, its digest in operator.tar.stamp.
#
# Two layers, like the upstream image plus our Dockerfile's COPYs:
#   1. base (cached): a Debian rootfs made by mmdebstrap from this machine's Debian mirror
#      and suite (python3, python3-venv, ca-certificates, tini), a virtualenv /opt/venv with
#      requirements.txt, user 1001 with HOME /opt/ansible. Rebuilt only when one of its
#      inputs changes: requirements.txt, the suite or apt sources, the package list, or the
#      functions below that build it (build_rootfs, customize_rootfs). --rebuild-base (or
#      KO_OPERATOR_IMAGE_REBUILD=1) forces it, e.g. to pick up Debian security updates.
#   2. app (cheap, rebuilt when anything in it changes): the pinned ansible-operator binary,
#      etcdctl and etcdutl (for the backup and restore Jobs),
#      watches.yaml, ansible.cfg, requirements.txt, playbooks/, roles/, plugins/.
# Two layers also let containerd keep the ~0.5 GB base snapshot when only the app changes.
#
# --verify unpacks the written archive (not the cached rootfs) into a scratch directory and
# runs the operator's tools in it with chroot as uid 1001, with the image config's env and
# working directory. Needs root (mmdebstrap's root mode, chroot, mounts in a private mount
# namespace); touches no container runtime.
#
# Settings (environment): KO_OPERATOR_IMAGE_DIR (cache, default
# ~/.cache/karmada-operator/operator-image), KO_OPERATOR_IMAGE_OUT (archive),
# KO_ANSIBLE_OPERATOR_BIN (default: the pinned build in ~/.cache/karmada-operator/links),
# KO_DEBIAN_SUITE and KO_DEBIAN_SOURCES (one-line apt sources; default: this machine's),
# KO_OPERATOR_IMAGE_SLIM=1 (only the Ansible collections we use), KO_HOST_CA_BUNDLE.
set -euo pipefail
self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
# shellcheck source=hack/testenv/env.sh
. "$(dirname "$self")/env.sh"
root=$TESTENV_ROOT
log() { printf '[operator-image] %s\n' "$*" >&2; }

# --- settings -------------------------------------------------------------------------
WORK=${KO_OPERATOR_IMAGE_DIR:-$KO_CACHE/operator-image}
OUT=${KO_OPERATOR_IMAGE_OUT:-$WORK/operator.tar}
ANSIBLE_OPERATOR_BIN=${KO_ANSIBLE_OPERATOR_BIN:-$KO_LINKS/ansible-operator}
# The machine's own Debian release (bookworm here: Python 3.11, like the local virtualenv).
# shellcheck disable=SC1091  # a system file
SUITE=${KO_DEBIAN_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}
DEB_PACKAGES=python3,python3-venv,ca-certificates,tini
PIP_VERSION=25.3 # the pip hack/setup.sh puts in the local virtualenv
OP_HOME=/opt/ansible
OP_UID=1001
VENV=/opt/venv
# The collections our roles and plugins use (of the ~50 that PyPI's `ansible` brings). Their
# byte code is compiled into the image; with KO_OPERATOR_IMAGE_SLIM=1 the other collections
# are left out entirely (~0.45 GB less; the image then differs from the Dockerfile's).
COLLECTIONS="kubernetes.core community.crypto"
SLIM=${KO_OPERATOR_IMAGE_SLIM:-0}
ENTRYPOINT=(/tini -- /usr/local/bin/ansible-operator run --watches-file=./watches.yaml)
# The pip run inside the rootfs trusts the host's CA bundle (it holds the CA of this
# network's TLS-intercepting egress proxy); the bundle is removed again before packing.
HOST_CA=${KO_HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
PY=python3
[ -x "$KO_VENV/bin/python" ] && PY=$KO_VENV/bin/python

# debian_sources: one-line apt sources for mmdebstrap: KO_DEBIAN_SOURCES if set, else the
# Debian entries this machine's apt uses for SUITE (SUITE, -updates, -security; other
# repositories such as vendor ones are left out), so the rootfs comes from the same mirror.
debian_sources() {
  if [ -n "${KO_DEBIAN_SOURCES:-}" ]; then
    printf '%s\n' "$KO_DEBIAN_SOURCES"
    return
  fi
  local lines
  # shellcheck disable=SC2016  # $(...) are apt's format fields, not shell
  lines=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Created-By: Packages' 2>/dev/null |
    awk -v s="$SUITE" '$2 == s || $2 == s "-updates" || $2 == s "-security" {print "deb " $1 " " $2 " " $3}' |
    sort -u)
  if [ -z "$lines" ]; then
    lines=$(printf 'deb http://deb.debian.org/debian %s main\ndeb http://deb.debian.org/debian %s-updates main\ndeb http://deb.debian.org/debian-security %s-security main' \
      "$SUITE" "$SUITE" "$SUITE")
  fi
  printf '%s\n' "$lines"
}

# --- base rootfs (layer 1) ------------------------------------------------------------
# build_rootfs DIR: a minimal Debian (minbase: no init, no docs) with our packages, then
# customize_rootfs as mmdebstrap's customize hook, which runs while /proc, /sys and /dev
# are mounted in the chroot and the host's resolv.conf is in place.
build_rootfs() {
  local target=$1 hook sources=()
  mapfile -t sources < <(debian_sources)
  # shellcheck disable=SC2016  # "$1" is for the hook's sh: the rootfs path
  printf -v hook '%q __customize "$1"' "$self"
  mmdebstrap --mode=root --variant=minbase --format=directory \
    --include="$DEB_PACKAGES" \
    --aptopt='Acquire::Retries "3"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook="$hook" \
    "$SUITE" "$target" "${sources[@]}"
}

# customize_rootfs ROOTFS (inside mmdebstrap): what the upstream ansible-operator image
# and our Dockerfile add on top of the OS.
customize_rootfs() {
  local r=$1
  in_root() {
    chroot "$r" /usr/bin/env -i PATH="$VENV/bin:/usr/sbin:/usr/bin:/sbin:/bin" HOME=/root LANG=C.UTF-8 \
      PIP_CERT=/tmp/build-ca.crt PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180 "$@"
  }
  cp "$root/requirements.txt" "$r/tmp/requirements.txt"
  cp "$HOST_CA" "$r/tmp/build-ca.crt"
  # A virtualenv (Debian's python3 is "externally managed", PEP 668) from Debian's Python.
  # The operator finds ansible-runner through PATH, and ansible-runner finds
  # ansible-playbook the same way; VIRTUAL_ENV in the image env makes ansible-operator
  # point localhost's ansible_python_interpreter at $VENV/bin/python3.
  in_root /usr/bin/python3 -m venv "$VENV"
  in_root pip install -q "pip==$PIP_VERSION"
  # --no-compile: byte code is compiled once below, in a mode that survives the layer tar.
  in_root pip install -q --no-compile -r /tmp/requirements.txt
  in_root pip check >&2
  rm -f "$r/tmp/requirements.txt" "$r/tmp/build-ca.crt"
  # mmdebstrap copied the host's; the container runtime mounts its own.
  rm -f "$r/etc/resolv.conf" "$r/etc/hostname"

  local site c keep=() compile=()
  site=$(in_root python3 -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  for c in $COLLECTIONS; do keep+=("$site/ansible_collections/${c/./\/}"); done
  if [ "$SLIM" = 1 ]; then
    find "$r$site/ansible_collections" -mindepth 2 -maxdepth 2 -type d | while read -r c; do
      case " ${keep[*]} " in *" ${c#"$r"} "*) ;; *) rm -rf "$c" ;; esac
    done
    find "$r$site/ansible_collections" -mindepth 1 -maxdepth 1 -type d -empty -delete
    # The distribution's metadata and version stay: `ansible --version` still reports it.
  fi
  # Byte code. Every file in the image gets mtime 0 (reproducible layers), which makes
  # pip's timestamp-based .pyc stale: Python would recompile ansible on every
  # ansible-playbook run and could not cache it (uid 1001 cannot write there). Hash-based
  # .pyc that are not re-checked do not depend on mtimes, and the image is immutable.
  # The collections we do not use get none (~190 MB saved; only the controller side of a
  # collection, i.e. its plugins, would ever be imported from them).
  while read -r c; do compile+=("$c"); done < <(
    in_root python3 -c 'import os, sys; print(*(p for p in sys.path if p.startswith("/usr/lib/python3") and os.path.isdir(p)), sep="\n")'
    find "$r$site" -mindepth 1 -maxdepth 1 ! -name ansible_collections -printf "$site/%P\n"
  )
  in_root python3 -m compileall -q -f -j 0 --invalidation-mode unchecked-hash "${compile[@]}" "${keep[@]}" >/dev/null

  # The operator's user, as upstream: uid 1001, group 0 (OpenShift-style arbitrary uids
  # also get gid 0), HOME /opt/ansible writable by user and group, ~/.ansible/tmp for
  # ansible's local temporary files. /tmp is already 1777.
  echo "ansible:x:$OP_UID:0:ansible user:$OP_HOME:/sbin/nologin" >>"$r/etc/passwd"
  mkdir -p "$r$OP_HOME/.ansible/tmp"
  chown -R "$OP_UID:0" "$r$OP_HOME"
  chmod -R ug+rwx "$r$OP_HOME"
  # Upstream's defaults (the operator writes its own inventory per run; ANSIBLE_CONFIG
  # points at ours) and its /tini entrypoint path.
  mkdir -p "$r/etc/ansible"
  echo "localhost ansible_connection=local" >"$r/etc/ansible/hosts"
  ln -sfn usr/bin/tini "$r/tini"
  # Build leftovers that only make the layer bigger and less reproducible.
  rm -rf "$r/var/log/apt" "$r/var/log/dpkg.log" "$r/var/log/alternatives.log" "$r/var/cache/debconf/"*-old \
    "$r/root/.cache"
}

# rootfs_stamp: hash of everything the base rootfs is made from.
rootfs_stamp() {
  {
    echo "$SUITE|$DEB_PACKAGES|$PIP_VERSION|$OP_HOME|$OP_UID|$VENV|$COLLECTIONS|$SLIM"
    debian_sources
    cat "$root/requirements.txt"
    declare -f build_rootfs customize_rootfs
  } | sha256sum | cut -c1-16
}

# safe_rm DIR: rm -rf, but never across a mount point (a half-finished chroot may still
# have the host's /dev or /proc mounted in it).
safe_rm() {
  local d
  [ -e "$1" ] || return 0
  d=$(readlink -f "$1")
  if awk -v d="$d" '$5 == d || index($5, d "/") == 1 {found = 1} END {exit !found}' /proc/self/mountinfo; then
    log "ERROR: something is mounted under $d; not removing it"
    return 1
  fi
  rm -rf "$d"
}

# ensure_base: print the directory of the current base (rootfs/ and layer.tar), building
# what is missing or stale.
ensure_base() {
  local stamp dir t0 layer_stamp digest
  stamp=$(rootfs_stamp)
  dir=$WORK/base-$stamp
  if [ "${KO_OPERATOR_IMAGE_REBUILD:-0}" = 1 ] || [ ! -f "$dir/rootfs.done" ]; then
    command -v mmdebstrap >/dev/null || die "mmdebstrap missing: make setup (or apt-get install mmdebstrap)"
    safe_rm "$dir"
    mkdir -p "$dir"
    t0=$SECONDS
    log "building base rootfs $dir/rootfs (Debian $SUITE, requirements.txt; a few minutes; log: $dir/build.log)"
    if ! build_rootfs "$dir/rootfs" >"$dir/build.log" 2>&1; then
      tail -n 30 "$dir/build.log" >&2
      die "building the base rootfs failed (log: $dir/build.log)"
    fi
    touch "$dir/rootfs.done"
    log "base rootfs built in $((SECONDS - t0))s ($(du -sh "$dir/rootfs" | cut -f1))"
  fi
  # The layer tar depends on the rootfs and on the tar writer.
  layer_stamp=$(sha256sum "$TESTENV_HACK/oci_image.py" | cut -c1-64)
  if [ ! -f "$dir/layer.tar" ] || [ "$(head -n1 "$dir/layer.tar.stamp" 2>/dev/null)" != "$layer_stamp" ]; then
    t0=$SECONDS
    digest=$("$PY" "$TESTENV_HACK/oci_image.py" --layer-out "$dir/layer.tar" --root-mode 755 --tree "$dir/rootfs:/")
    printf '%s\n%s\n' "$layer_stamp" "$digest" >"$dir/layer.tar.stamp"
    log "base layer written in $((SECONDS - t0))s ($digest, $(du -h "$dir/layer.tar" | cut -f1))"
  fi
  # Older bases are dead weight (each is ~1 GB with its layer).
  local old
  for old in "$WORK"/base-*; do
    [ "$old" = "$dir" ] || [ ! -d "$old" ] || { safe_rm "$old" && log "removed old base $old"; }
  done
  ln -sfn "base-$stamp" "$WORK/base"
  echo "$dir"
}

# json_list ARG...: the arguments as a compact JSON list.
json_list() { printf '%s\n' "$@" | jq -Rsc 'split("\n")[:-1]'; }

# --- the image ------------------------------------------------------------------------
APP_TREES=(playbooks roles plugins)
APP_FILES=(watches.yaml ansible.cfg requirements.txt)

# build_image BASE_DIR: write $OUT unless it is up to date; print its digest.
build_image() {
  local base=$1 stamp args=() f d
  args=(--out "$OUT" --ref "$IMG" --layer "$base/layer.tar" --root-mode 755
    --file "$ANSIBLE_OPERATOR_BIN:/usr/local/bin/ansible-operator:755"
    # The backup and restore Jobs run this image: etcdctl takes snapshots over gRPC and
    # etcdutl restores them, etcd replays a continuous backup's point (the pinned etcd build,
    # as the Dockerfile copies from etcd's image).
    --file "$KO_LINKS/etcdctl:/usr/local/bin/etcdctl:755" --file "$KO_LINKS/etcdutl:/usr/local/bin/etcdutl:755"
    --file "$KO_LINKS/etcd:/usr/local/bin/etcd:755"
    # The top layer re-declares HOME's directory entry: it must keep the base's owner and
    # mode, or the operator could not write to its HOME.
    --dir "${OP_HOME#/}:775:$OP_UID:0"
    --exclude __pycache__ --exclude '*.pyc'
    --env "PATH=$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    --env "VIRTUAL_ENV=$VENV" --env "HOME=$OP_HOME" --env "ANSIBLE_CONFIG=$OP_HOME/ansible.cfg" --env "PYTHONPATH=$OP_HOME/plugins/module_utils"
    --env LANG=C.UTF-8 --env USER_NAME=ansible --env "USER_UID=$OP_UID"
    --workdir "$OP_HOME" --user "$OP_UID" --entrypoint-json "$(json_list "${ENTRYPOINT[@]}")")
  # Owned by root like the Dockerfile's COPYs (readable, not writable, by the operator).
  for f in "${APP_FILES[@]}"; do args+=(--file "$root/$f:$OP_HOME/$f:644"); done
  for d in "${APP_TREES[@]}"; do args+=(--tree "$root/$d:$OP_HOME/$d:0:0"); done
  stamp=$({
    printf '%s\n' "${args[@]}"
    head -n2 "$base/layer.tar.stamp"
    sha256sum "$TESTENV_HACK/oci_image.py" "$self"
    stat -L -c '%s %Y' "$ANSIBLE_OPERATOR_BIN" "$KO_LINKS/etcdctl" "$KO_LINKS/etcdutl" "$KO_LINKS/etcd"
    cd "$root" && find "${APP_FILES[@]}" "${APP_TREES[@]}" \( -name __pycache__ -o -name '*.pyc' \) -prune -o \
      -printf '%p %y %m %l\n' -type f -exec sha256sum {} + | LC_ALL=C sort
  } | sha256sum | cut -c1-64)
  if [ -f "$OUT" ] && [ "$(head -n1 "$OUT.stamp" 2>/dev/null)" = "$stamp" ]; then
    sed -n 2p "$OUT.stamp"
    return
  fi
  local digest
  digest=$("$PY" "$TESTENV_HACK/oci_image.py" "${args[@]}")
  printf '%s\n%s\n' "$stamp" "$digest" >"$OUT.stamp"
  echo "$digest"
}

# --- verification ---------------------------------------------------------------------
# verify: unpack $OUT the way a runtime would (index -> manifest -> config, layers in
# order) and run the operator's tools in it as uid 1001 with the image's env and workdir.
verify() {
  local dir oci rootfs manifest config layer user workdir env=() n=0 t0=$SECONDS
  for dir in "$WORK"/verify.*; do safe_rm "$dir"; done # left by an interrupted run
  dir=$(mktemp -d "$WORK/verify.XXXXXX")
  oci=$dir/oci rootfs=$dir/rootfs
  mkdir -p "$oci" "$rootfs"
  tar -xf "$OUT" -C "$oci"
  blob() { echo "$oci/blobs/sha256/${1#sha256:}"; }
  manifest=$(blob "$(jq -r '.manifests[0].digest' "$oci/index.json")")
  config=$(blob "$(jq -r '.config.digest' "$manifest")")
  log "index.json: $(jq -c '[.manifests[] | .annotations["io.containerd.image.name"]]' "$oci/index.json")"
  log "config: $(jq -c '.config' "$config")"
  while read -r layer; do
    # Every blob must be what its digest says.
    [ "sha256:$(sha256sum "$(blob "$layer")" | cut -c1-64)" = "$layer" ] || die "layer $layer: digest mismatch"
    tar -x --numeric-owner -p -f "$(blob "$layer")" -C "$rootfs"
    n=$((n + 1))
  done < <(jq -r '.layers[].digest' "$manifest")
  log "manifest: $n layers, $(jq '[.layers[].size] | add' "$manifest") bytes; unpacked $(du -sh "$rootfs" | cut -f1)"
  user=$(jq -r '.config.User' "$config")
  workdir=$(jq -r '.config.WorkingDir' "$config")
  mapfile -t env < <(jq -r '.config.Env[]' "$config")
  if [ "$user" != "$OP_UID" ] || [ "$workdir" != "$OP_HOME" ]; then
    die "config: User '$user', WorkingDir '$workdir'"
  fi
  [ "$(jq -c '.config.Entrypoint' "$config")" = "$(json_list "${ENTRYPOINT[@]}")" ] || die "config: unexpected Entrypoint"

  # The checks, as the shell in the image runs them. $1.. are the playbooks.
  local checks
  checks=$(
    cat <<'EOF'
set -eu
step() { printf '\n$ %s\n' "$*"; "$@"; }
echo "uid=$(id -u) gid=$(id -g) HOME=$HOME PWD=$PWD"
step ansible-operator version
# Every flag the Deployment (config/manager/manager.yaml) passes must be known to `run`.
printf '\n$ ansible-operator run --help  # flags of config/manager/manager.yaml\n'
help=$(ansible-operator run --help)
for f in $MANAGER_FLAGS; do
  case "$help" in *"$f "*) echo "known: $f" ;; *) echo "UNKNOWN: $f"; exit 1 ;; esac
done
step python3 -c 'import sys, ansible, ansible_runner, ansible_runner_http, cryptography, kubernetes
from importlib.metadata import version as v
print(sys.version.split()[0], *(p + "=" + v(p) for p in ("ansible-core", "ansible", "ansible-runner", "kubernetes", "cryptography")))'
step ansible-runner --version
step ansible --version
printf '\n$ ansible-galaxy collection list | grep -E "kubernetes.core|community.crypto"\n'
ansible-galaxy collection list 2>/dev/null | grep -E '^(kubernetes\.core|community\.crypto) '
for pb in "$@"; do step ansible-playbook --syntax-check "$pb"; done
step ansible localhost -m ansible.builtin.ping -e 'ansible_python_interpreter={{ ansible_playbook_python }}'
step touch "$HOME/.ansible/tmp/probe" "$HOME/probe" /tmp/probe
rm -f "$HOME/.ansible/tmp/probe" "$HOME/probe" /tmp/probe
# Byte code from the image is used as it is (none recompiled, none written).
printf '\n$ python3 -v -c "import ansible.cli.playbook" (byte code)\n'
python3 -v -c 'import ansible.cli.playbook' 2>&1 |
  awk '/^# code object from .*\.pyc/ {ok++; next} /^# code object from |^# could not create/ {bad++}
       END {printf "%d modules from .pyc, %d compiled from source\n", ok, bad; exit bad > 0}'
EOF
  )
  local rc=0 flags
  flags=$(sed -n 's/^ *- \(--[a-z-]*\).*/\1/p' "$root/config/manager/manager.yaml" | tr '\n' ' ')
  # A private mount namespace: /proc and /dev exist only for the chroot and vanish with
  # it, whatever happens.
  # shellcheck disable=SC2016  # expanded by the inner sh
  unshare --mount --propagation private -- /bin/sh -c '
    r=$1 u=$2; shift 2
    mount -t proc proc "$r/proc" && mount --rbind /dev "$r/dev" || exit 1
    exec chroot --userspec="$u" "$r" "$@"' sh "$rootfs" "$OP_UID:0" \
    /usr/bin/env -i "${env[@]}" MANAGER_FLAGS="$flags" /bin/sh -c "cd '$workdir' && $checks" sh \
    playbooks/karmadadeployment.yml playbooks/etcdbackup.yml playbooks/etcdrestore.yml >&2 || rc=$?
  safe_rm "$dir"
  [ "$rc" = 0 ] || die "verification failed (exit $rc)"
  log "verification passed in $((SECONDS - t0))s"
}

# --- main -----------------------------------------------------------------------------
if [ "${1:-}" = __customize ]; then # mmdebstrap's customize hook (see build_rootfs)
  customize_rootfs "$2"
  exit 0
fi

do_verify=false
IMG=${IMG:-ko-testenv.local/karmada-ansible-operator:dev}
while [ $# -gt 0 ]; do
  case "$1" in
    --verify) do_verify=true ;;
    --rebuild-base) KO_OPERATOR_IMAGE_REBUILD=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) IMG=$1 ;;
  esac
  shift
done

[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap --mode=root, chroot)"
[ -x "$ANSIBLE_OPERATOR_BIN" ] || die "$ANSIBLE_OPERATOR_BIN not built: hack/testenv/build-bins.sh ansible-operator"
case "$(readlink -f "$ANSIBLE_OPERATOR_BIN")" in
  *"$ANSIBLE_OPERATOR_VERSION"*) ;;
  *) log "WARNING: $ANSIBLE_OPERATOR_BIN does not look like $ANSIBLE_OPERATOR_VERSION (hack/versions.env)" ;;
esac
mkdir -p "$WORK" "$(dirname "$OUT")"
# One build at a time (two would write the same base directory).
exec 9>"$WORK/.lock"
flock -n 9 || { log "waiting for another build to finish"; flock 9; }

start=$SECONDS
base=$(ensure_base)
digest=$(build_image "$base")
log "image $IMG: $digest, $(du -h "$OUT" | cut -f1) in $((SECONDS - start))s"
if $do_verify; then verify; fi
echo "$OUT"
