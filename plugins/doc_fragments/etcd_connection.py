"""Documentation of the connection options every etcd_* module takes (etcd_gateway.CONNECTION_ARGS)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  endpoints:
    description: Client URLs of members (V(https://host:2379)); a call goes to the first that accepts a connection.
    type: list
    elements: str
    required: true
  cert:
    description: Client certificate signed by the etcd CA (e.g. C(etcd/healthcheck-client.crt)).
    type: path
  key:
    description: Key of O(cert).
    type: path
  ca:
    description: CA bundle that signed the etcd server certificates (C(etcd/ca.crt)).
    type: path
  timeout:
    description: Seconds to wait for each etcd answer.
    type: float
    default: 5.0
  tls_server_name:
    description:
      - Check the servers' certificates against this name instead of the URL's host (e.g. when
        dialling pod addresses).
    type: str
  resolve:
    description:
      - Host name to address overrides, like curl's C(--resolve), for members whose advertised
        DNS names only resolve inside their cluster. The certificate is still checked against
        the host name.
    type: dict
"""
