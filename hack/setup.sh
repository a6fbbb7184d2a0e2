#!/usr/bin/env bash
# Install what a fresh machine lacks: Debian packages, the pinned Python virtualenv
# (kept in the cache, keyed by the requirements' hash so a warm machine skips it), and
# the Ansible collections we use (from PyPI's `ansible` package; Galaxy is unreachable).
# Idempotent and quick when everything is present. Prints the virtualenv path last.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
KO_CACHE=${KO_CACHE:-$HOME/.cache/karmada-operator}
log() { printf '[setup] %s\n' "$*" >&2; }

# --- Debian packages ---------------------------------------------------------------
mapfile -t pkgs < <(grep -Ev '^\s*(#|$)' "$root/hack/debian-packages.txt")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    log "missing Debian packages: ${missing[*]} (run as root or install them yourself)"; exit 1
  fi
  log "installing Debian packages: ${missing[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The Debian containerd service must not grab the test bed's socket; we start our own.
  systemctl disable --now containerd >/dev/null 2>&1 || true
fi

# --- Python virtualenv -------------------------------------------------------------
hash=$(cat "$root/requirements.txt" "$root/requirements-dev.txt" | sha256sum | cut -c1-12)
venv=$KO_CACHE/venv-$hash
if [ ! -x "$venv/bin/ansible-operator-ready" ]; then
  log "creating virtualenv $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip==25.3 >/dev/null
  "$venv/bin/pip" install -q -r "$root/requirements-dev.txt"
  # marker: the venv finished installing (a half-made venv is rebuilt next time)
  printf '#!/bin/sh\nexit 0\n' >"$venv/bin/ansible-operator-ready"
  chmod +x "$venv/bin/ansible-operator-ready"
fi
ln -sfn "$venv" "$KO_CACHE/venv"
echo "$venv"
