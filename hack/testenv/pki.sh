# Certificate and kubeconfig helpers for the test bed (sourced; openssl CLI only).
# shellcheck shell=bash

# pki_ca DIR NAME CN: a self-signed CA DIR/NAME.{crt,key} (kept when present).
pki_ca() {
  local dir=$1 name=$2 cn=$3
  [ -f "$dir/$name.crt" ] && return 0
  mkdir -p "$dir"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj "/CN=$cn" -keyout "$dir/$name.key" -out "$dir/$name.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    2>/dev/null
  chmod 600 "$dir/$name.key"
}

# pki_cert DIR CA NAME CN ORG KIND [SAN...]: DIR/NAME.{crt,key} signed by DIR/CA.
# KIND is client, server or both; ORG may be empty; SAN entries are IPs or DNS names.
pki_cert() {
  local dir=$1 ca=$2 name=$3 cn=$4 org=$5 kind=$6 subj eku sans="" s
  shift 6
  [ -f "$dir/$name.crt" ] && return 0
  subj="/CN=$cn"
  [ -n "$org" ] && subj="/O=$org$subj"
  case "$kind" in
    client) eku=clientAuth ;;
    server) eku=serverAuth ;;
    *) eku=serverAuth,clientAuth ;;
  esac
  for s in "$@"; do
    if [[ $s =~ ^[0-9.]+$ || $s == *:* ]]; then sans+=",IP:$s"; else sans+=",DNS:$s"; fi
  done
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subj" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [ -n "$sans" ] && echo "subjectAltName=${sans#,}"
  } >"$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.crt" -CAkey "$dir/$ca.key" -CAcreateserial \
    -days 3650 -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
  chmod 600 "$dir/$name.key"
}

# pki_sa_key DIR: the service-account signing key pair DIR/sa.{key,pub}.
pki_sa_key() {
  local dir=$1
  [ -f "$dir/sa.key" ] && return 0
  mkdir -p "$dir"
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  chmod 600 "$dir/sa.key"
}

# write_kubeconfig FILE SERVER CA_CRT CRT KEY [CLUSTER_NAME]: a kubeconfig with embedded data.
# A subshell body: its umask 077 must not leak into the caller, which starts containerd and
# the kubelet afterwards (with 077 every container's root directory was 0700, so only
# containers running as root could start).
write_kubeconfig() (
  local file=$1 server=$2 ca=$3 crt=$4 key=$5 name=${6:-testenv}
  umask 077
  cat >"$file.tmp" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: $name
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 "$ca")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$crt")
    client-key-data: $(base64 -w0 "$key")
contexts:
- name: $name
  context: {cluster: $name, user: $name}
current-context: $name
KCFG
  mv "$file.tmp" "$file"
)
