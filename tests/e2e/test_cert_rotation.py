"""Leaf certificates roll on schedule on a live Karmada, in time, at the default reconcile period,
with no spec change and no outage (issues 15 and 32), on the real host cluster with the real
ansible-operator. (The CA rotation is proven on the upgraded plane of
test_karmada_member_clusters.py.)

One Karmada (``certrot`` in karmada-system: 1 etcd member, 2 karmada-apiserver and 2 aggregated
apiserver replicas, ECDSA keys) with member1 (Push) and member2 (Pull, its agent on the host). Its
leaves live 10 minutes and are renewed 8 minutes before they expire, i.e. 2 minutes after they
were issued; the reconcile period is the default, 10 minutes (watches.yaml, no annotation), so a
renewal that waited for the periodic reconcile would come after the leaves expired. The operator
asks the runtime to come back when the next certificate is due (requeue_after).

First, with nothing edited:

- before the first leaf expires, every leaf in status.certificates has a later notAfter (the CAs
  and the service-account keys stay), and the Secrets hold exactly what status says;
- karmada-apiserver's /readyz, polled every second through its Service, never failed;
- the pods that restarted are exactly the components whose kubeconfig or certificates changed,
  one component at a time (no restart began before the previous component's old pods were being
  deleted); karmada-apiserver and etcd, which reload renewed pairs from disk, did not restart,
  and both serve the renewed certificate (read from each pod's TLS handshake);
- member1 (Push) and member2 (Pull) were Ready at every check, and a PropagationPolicy made
  afterwards propagates;
- none of its private keys is in the operator's log or in the runtime's records of its runs.

Then, with the renewal window narrowed to the leaves' last minute (so no renewal rolls the
components in the middle of them), an encryption key rotation and the switch to a KMS v2
plugin, each with both karmada-apiserver replicas and /readyz polled every second
(docs/security.md).
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

from support import karmada_e2e, pod_security
from support.karmada_crds_server import serve
from support.karmada_e2e import Deployment, operator_kubeconfig
from support.operator_runtime import OperatorProcess
from support.readyz import ReadyzPoller
from support.testenv import HostCluster, MemberCluster
from support.waiting import condition, crds_established

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

NS = "karmada-system"
NAME = "certrot"
MEMBER = "member1"  # Push
PULL = "member2"  # Pull, its agent on the host
CAS = {"ca", "etcd/ca", "front-proxy-ca"}
LEAF_VALIDITY = timedelta(minutes=10)  # shorter than the default reconcile period (10m, watches.yaml)
RENEW_BEFORE = timedelta(minutes=8)


def ready_at_generation(fleet: Deployment) -> bool:
    obj = fleet.get()
    ready = condition(obj, "Ready")
    return ready.get("status") == "True" and ready.get("observedGeneration") == obj["metadata"]["generation"]


def not_after(fleet: Deployment) -> dict[str, str]:
    return {c["name"]: c["notAfter"] for c in fleet.get().get("status", {}).get("certificates", [])}


API_ERRORS: list[str] = []  # why cluster_ready found cluster.karmada.io not answering


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class PodLog:
    """Watches the control plane's pods: when each pod was created and when its deletion began
    (server timestamps), to tell which components restarted and whether two overlapped."""

    def __init__(self, host: HostCluster):
        self.api = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=str(host.kubeconfig)))
        self.pods: dict[str, dict] = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _record(self, pod) -> None:
        """Times are when this watch saw the pod appear and its deletion begin (this machine's clock,
        sub-second; the API server's timestamps have whole seconds, too coarse to order two
        components that roll within a second of each other)."""
        meta, seen = pod.metadata, datetime.now(UTC)
        with self.lock:
            entry = self.pods.setdefault(meta.uid, {"app": (meta.labels or {}).get("app.kubernetes.io/name", "?"),
                                                    "name": meta.name, "created": seen, "deleting": None,
                                                    "server": (meta.creation_timestamp, None)})
            if meta.deletion_timestamp and entry["deleting"] is None:
                entry["deleting"] = seen
                # deletionTimestamp is when the grace period ends; the deletion began that much earlier
                entry["server"] = (entry["server"][0], meta.deletion_timestamp
                                   - timedelta(seconds=meta.deletion_grace_period_seconds or 0))

    def _run(self) -> None:
        selector = f"app.kubernetes.io/instance={NAME}"
        while not self.stop.is_set():
            listed = self.api.list_namespaced_pod(NS, label_selector=selector)
            for pod in listed.items:
                self._record(pod)
            try:
                for event in k8s_watch.Watch().stream(self.api.list_namespaced_pod, NS, label_selector=selector,
                                                      resource_version=listed.metadata.resource_version,
                                                      timeout_seconds=600):
                    self._record(event["object"])
                    if self.stop.is_set():
                        break
            except Exception:  # noqa: BLE001 - a dropped watch is listed and watched again
                time.sleep(1)

    def snapshot(self) -> dict[str, dict]:
        with self.lock:
            return {uid: dict(p) for uid, p in self.pods.items()}

    def finish(self) -> dict[str, dict]:
        self.stop.set()
        self.thread.join(timeout=40)
        return self.snapshot()


def restarts(before: set[str], pods: dict[str, dict]) -> dict[str, tuple[datetime, datetime]]:
    """app -> (when its first new pod was created, when its last old pod began terminating),
    for the apps whose pods present at the start were replaced."""
    out: dict[str, tuple[datetime, datetime]] = {}
    for app in {p["app"] for p in pods.values()}:
        old = [p for uid, p in pods.items() if p["app"] == app and uid in before and p["deleting"]]
        new = [p for uid, p in pods.items() if p["app"] == app and uid not in before]
        if old or new:
            start = min([p["created"] for p in new] or [min(p["deleting"] for p in old)])
            end = max([p["deleting"] for p in old] or [start])
            out[app] = (start, end)
    return out


PKI_TASK = "Generate, check, rotate and store the certificates"  # roles/karmada_deployment/tasks/pki.yml


def pki_steps(fleet: Deployment) -> list[tuple[datetime, datetime, datetime]]:
    """(start, certificate step, end) of every finished reconcile run still in the runtime's
    artifacts, from their Ansible events. The runtime keeps the newest 20 runs of a resource
    and deletes older ones (earlier modules' runs of the same name among them) at any time: a
    run deleted while it is read is skipped."""
    out = []
    for run in fleet.runs():
        try:
            events = [json.loads(f.read_text()) for f in (run / "job_events").glob("*.json")]
        except FileNotFoundError:
            continue
        times = sorted(parse_time(e["created"]) for e in events if e.get("created"))
        pki = sorted(parse_time(e["created"]) for e in events if e.get("created")
                     and (e.get("event_data") or {}).get("task") == PKI_TASK)
        if times and pki:
            out.append((times[0], pki[0], times[-1]))
    return sorted(out)


def served_certificate(ip: str, port: int, server_name: str, client: tuple[str, str] | None = None) -> x509.Certificate:
    """The certificate a TLS server presents (no verification: the test compares it with the Secret)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if client:
        ctx.load_cert_chain(*client)
    with socket.create_connection((ip, port), timeout=5) as sock, \
            ctx.wrap_socket(sock, server_hostname=server_name) as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))


def secret_files(fleet: Deployment, name: str) -> dict[str, bytes]:
    data = fleet.host.get("secret", name, "-n", NS)["data"]
    return {k: base64.b64decode(v) for k, v in data.items()}


def cluster_ready(fleet: Deployment, kubeconfig: Path, member: str = MEMBER) -> str:
    """The member's Ready status in Karmada ("True", "False", "Unknown"), or "" when the
    cluster.karmada.io API (served by karmada-aggregated-apiserver) did not answer."""
    proc = fleet.karmadactl("get", "cluster", member, "-o", "json", kubeconfig=kubeconfig, check=False)
    if proc.returncode != 0:
        API_ERRORS.append(f"{time.strftime('%H:%M:%S')} {member}: {proc.stderr.strip()[-300:]}")
        return ""
    return condition(json.loads(proc.stdout), "Ready").get("status") or "Unknown"


@pytest.fixture(scope="module")
def fleet(host_cluster: HostCluster, member_clusters: list[MemberCluster], bin_path, tmp_path_factory):
    members = [m for name in (MEMBER, PULL) for m in member_clusters if m.name == name]
    assert len(members) == 2, f"{MEMBER} and {PULL} are needed (KO_TESTENV_MEMBERS >= 2)"
    work = tmp_path_factory.mktemp("certrot")
    crds = serve()
    host_cluster.kubectl("apply", "-k", str(karmada_e2e.ROOT / "config/crd"))
    crds_established(host_cluster.kubectl, ["karmadadeployments.operator.karmada.io"])
    host_cluster.kubectl("create", "namespace", NS, check=False)
    operator = OperatorProcess(bin_path("ansible-operator"), operator_kubeconfig(host_cluster, work), work)
    fleet = Deployment(host_cluster, operator, work, NAME, NS)
    try:
        operator.wait_healthy()
        cr = karmada_e2e.sample_for_test_bed(NAME, crds.url, crds.sha256, members)
        # member2 is a Pull member; its karmada-agent runs on the host (kwok nodes run no pods)
        cr["spec"]["members"][1].update({"syncMode": "Pull", "agentPlacement": "Host"})
        cr["spec"]["apiServer"]["replicas"] = 2  # /readyz must never fail
        # cluster.karmada.io (how the test reads the member's Ready) stays served while it restarts
        cr["spec"].setdefault("components", {}).setdefault("aggregatedAPIServer", {})["replicas"] = 2
        cr["spec"]["certificates"].update({"leafValidity": f"{LEAF_VALIDITY.seconds // 60}m",
                                           "renewBefore": f"{RENEW_BEFORE.seconds // 60}m"})
        start = time.monotonic()
        host_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(cr))
        fleet.wait_for(lambda: ready_at_generation(fleet), 1500, "Ready")
        fleet.wait_for(lambda: cluster_ready(fleet, fleet.kubeconfig()) == "True", 600, f"{MEMBER} Ready in Karmada")
        fleet.wait_for(lambda: cluster_ready(fleet, fleet.kubeconfig(), PULL) == "True", 600,
                       f"{PULL} Ready in Karmada")
        print(f"\napply-to-Ready with {MEMBER} (Push) and {PULL} (Pull): {time.monotonic() - start:.0f}s")
        yield fleet
    finally:
        # the deletion unjoins the member first: longer than kubectl's own 120-second limit here
        host_cluster.kubectl("delete", "karmadadeployment", NAME, "-n", NS, "--wait=false", check=False)
        try:
            fleet.wait_for(lambda: host_cluster.kubectl("get", "karmadadeployment", NAME, "-n", NS,
                                                        check=False).returncode != 0, 900, "the deletion")
        finally:
            operator.stop()
            crds.stop()


def encryption_keys(fleet: Deployment) -> dict[str, str]:
    """The encryption keys in the PKI Secret (name -> base64 value), in the configuration's order."""
    data = fleet.host.get("secret", f"{NAME}-pki", "-n", NS)["data"]["encryption-config.json"]
    doc = json.loads(base64.b64decode(data))
    box = next(p["secretbox"] for p in doc["resources"][0]["providers"] if "secretbox" in p)
    return {k["name"]: k["secret"] for k in box["keys"]}


def stored_secrets(fleet: Deployment) -> dict[str, bytes]:
    return karmada_e2e.etcd_values(fleet.host, NS, f"{NAME}-etcd-0", "/registry/secrets/")


def test_leaves_roll_on_schedule_without_outage(fleet: Deployment, member_clusters):
    member = next(m for m in member_clusters if m.name == MEMBER)
    generation = fleet.get()["metadata"]["generation"]
    before = not_after(fleet)
    leaves = sorted(set(before) - CAS)
    assert len(leaves) >= 10, before
    kubeconfig = fleet.kubeconfig()  # its admin certificate has 14 minutes or more left: the renewal budget
    pods = PodLog(fleet.host)
    time.sleep(2)
    present = set(pods.snapshot())
    poller = ReadyzPoller(kubeconfig, str(Path(fleet.host.settings["KO_LINKS"]) / "kubectl"))
    member_not_ready: list[str] = []
    cluster_api_down: list[str] = []
    started = time.monotonic()

    def renewed():
        for name in (MEMBER, PULL):
            ready = cluster_ready(fleet, kubeconfig, name)
            if ready != "True":
                (member_not_ready if ready else cluster_api_down).append(f"{time.strftime('%H:%M:%S')} {name} {ready}")
        now = not_after(fleet)
        late = [n for n in leaves if parse_time(now.get(n, before[n])) <= parse_time(before[n])]
        return not late and ready_at_generation(fleet) and now

    # In time: before the first leaf expires (a renewal left to the 10-minute period would not be).
    expires = min(parse_time(before[n]) for n in leaves)
    budget = (expires - datetime.now(UTC)).total_seconds()
    print(f"\nfirst leaf expires at {expires:%H:%M:%S}, {budget:.0f}s from now; reconcile period: the default")
    try:
        after = fleet.wait_for(renewed, budget, "every leaf in status.certificates with a later notAfter")
        took = time.monotonic() - started
        # let the pass that renewed them finish its rollouts and write status (it has: status is its last step)
    finally:
        polls, failures = poller.finish()
        log = pods.finish()
    print(f"every leaf renewed {took:.0f}s after Ready; /readyz polled {polls} times, {len(failures)} failures; "
          f"{MEMBER} not Ready at {member_not_ready or 'no check'}; cluster.karmada.io not answering at "
          f"{cluster_api_down or 'no check'}")
    assert fleet.get()["metadata"]["generation"] == generation, "nothing may edit the spec"
    # How late the periodic reconcile came: the first leaf entered its renewal window at `due`;
    # the certificate step of the first pass after it renewed it.
    due = min(parse_time(before[n]) for n in leaves) - RENEW_BEFORE
    # The pass that renewed them wrote status before its last play (the members, the fast path's
    # record) ended: its run is listed once it has ended, a few seconds after status shows it.
    with contextlib.suppress(AssertionError):  # the assertion below says which runs there were
        fleet.wait_for(lambda: [p for p in pki_steps(fleet) if p[1] >= due], 120,
                       f"the run whose certificate step ran after {due:%H:%M:%S} to end")
    passes = pki_steps(fleet)
    print("passes (start, certificate step, end): " + "; ".join(
        f"{a:%H:%M:%S} {b:%H:%M:%S} {c:%H:%M:%S}" for a, b, c in passes))
    renewing = [p for p in passes if p[1] >= due]
    assert renewing, f"no pass ran its certificate step ({PKI_TASK!r}) after {due:%H:%M:%S}: {passes}"
    if renewing:
        print(f"first leaf due {due:%H:%M:%S}; renewed by the pass whose certificate step ran "
              f"{(renewing[0][1] - due).total_seconds():.0f}s later (default reconcile period, requeued for it); "
              f"that pass took {(renewing[0][2] - renewing[0][0]).total_seconds():.0f}s")

    # Status: every leaf later, the CAs unchanged; the Secrets hold what status says.
    assert {n: after[n] for n in CAS} == {n: before[n] for n in CAS}
    pki = secret_files(fleet, f"{NAME}-pki")
    etcd_files = secret_files(fleet, f"{NAME}-etcd-pki")
    for name in leaves:
        data = etcd_files[f"{name[5:]}.crt"] if name.startswith("etcd/") else pki[f"{name}.crt"]
        stored = x509.load_pem_x509_certificate(data).not_valid_after_utc
        assert stored >= parse_time(after[name]), (name, stored, after[name])
    obj = fleet.get()
    assert condition(obj, "CertificatesValid")["status"] == "True", condition(obj, "CertificatesValid")
    print(f"CertificatesValid: {condition(obj, 'CertificatesValid')['message']}")

    # No outage: /readyz every second (a probe may take longer than its second: at least one
    # every two seconds of the wait), the member Ready at every check.
    assert polls >= max(20, took / 2) and not failures, (polls, took, failures[:5])
    assert not member_not_ready and not cluster_api_down, (member_not_ready, cluster_api_down)

    # Restarts: one component at a time; karmada-apiserver and etcd not at all.
    moved = restarts(present, log)
    order = sorted(moved.items(), key=lambda kv: kv[1][0])
    print("restarted, in order: " + ", ".join(f"{app} {s:%H:%M:%S.%f}-{e:%H:%M:%S.%f}" for app, (s, e) in order))
    for p in sorted(log.values(), key=lambda p: p["created"]):
        print(f"  {p['name']}: seen {p['created']:%H:%M:%S.%f}, deleting seen "
              f"{p['deleting'] and format(p['deleting'], '%H:%M:%S.%f')}; server {p['server']}")
    assert "karmada-apiserver" not in moved and "etcd" not in moved, moved
    for (app, (_, end)), (nxt, (start, _)) in zip(order, order[1:], strict=False):
        assert end <= start, f"{nxt} began restarting at {start} before {app}'s old pods went ({end})"
    expected = {"karmada-aggregated-apiserver", "karmada-controller-manager", "karmada-scheduler",
                "karmada-webhook", "kube-controller-manager"}
    assert expected <= set(moved), moved

    # karmada-apiserver (both replicas) and etcd serve the renewed certificates they reloaded.
    api_pods = [p for p in fleet.host.get("pods", "-n", NS, "-l",
                                          f"app.kubernetes.io/instance={NAME},app.kubernetes.io/name=karmada-apiserver")
                ["items"] if not p["metadata"].get("deletionTimestamp")]
    assert len(api_pods) == 2

    def apiserver_reloaded():
        return all(served_certificate(p["status"]["podIP"], 5443, "localhost").not_valid_after_utc
                   >= parse_time(after["apiserver"]) for p in api_pods)
    # kube-apiserver re-reads its pair on the file event of the kubelet's Secret-volume update,
    # which the certificates step asked for at once (pki/volume_refresh.py) and waited for: no
    # wait here (the kubelet's own sync would have taken up to a minute and a half).
    assert apiserver_reloaded(), "a karmada-apiserver pod still serves the certificate it had before the renewal"

    client = (fleet.work / "etcd-client.crt", fleet.work / "etcd-client.key")
    client[0].write_bytes(etcd_files["healthcheck-client.crt"])
    client[1].write_bytes(etcd_files["healthcheck-client.key"])
    client[1].chmod(0o600)
    etcd_pod = fleet.host.get("pods", "-n", NS, "-l",
                              f"app.kubernetes.io/instance={NAME},app.kubernetes.io/name=etcd")["items"][0]
    # etcd reads its pair at each handshake: its volume synced when the step annotated its pod
    served = served_certificate(etcd_pod["status"]["podIP"], 2379, "localhost", (str(client[0]), str(client[1])))
    assert served.not_valid_after_utc >= parse_time(after["etcd/server"]), "etcd serves the old certificate"

    # Karmada still works for the member: a policy made now propagates.
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after-rotation", "namespace": "default"},
          "data": {"k": "v"}}
    pp = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
          "metadata": {"name": "after-rotation", "namespace": "default"},
          "spec": {"resourceSelectors": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "after-rotation"}],
                   "placement": {"clusterAffinity": {"clusterNames": [MEMBER]}}}}
    fleet.karmadactl("apply", "-f", "-", input=yaml.safe_dump_all([cm, pp]))  # the renewed admin.conf
    fleet.wait_for(lambda: member.kubectl("get", "configmap", "after-rotation", "-n", "default",
                                          check=False).returncode == 0, 180,
                   f"the ConfigMap on {MEMBER} through a PropagationPolicy made after the rotation")

    # The tests after this one edit the spec and roll karmada-apiserver (a key rotation, the KMS):
    # leaves renewed every two minutes rolled every component in the middle of them (under CI load
    # a renewal came in each phase and the rotation took 11.5 minutes instead of 3). The renewal
    # window narrowed to the last minute: the leaves renewed just now live 10 minutes, so the next
    # renewal is due about 9 minutes from now, after the rotation and the KMS switch (under 4
    # minutes on the bed). A renewal already due by the old window may still come first.
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p",
                       json.dumps({"spec": {"certificates": {"renewBefore": "1m"}}}))
    fleet.wait_for(lambda: ready_at_generation(fleet), 300, "the pass for the narrower renewal window")
    due = min(parse_time(v) for n, v in not_after(fleet).items() if n in leaves) - timedelta(minutes=1)
    quiet = (due - datetime.now(UTC)).total_seconds()
    print(f"next leaf renewal due at {due:%H:%M:%S}, {quiet:.0f}s from now")
    assert quiet >= 240, f"the next renewal is due in {quiet:.0f}s: it would roll the components under the next tests"


def test_an_encryption_key_rotation_stores_every_secret_under_the_new_key_without_an_outage(fleet: Deployment):
    """spec.apiServer.encryption.rotation asked for once, with ConfigMaps added to the encrypted
    resources: three full passes, each rolling both karmada-apiserver replicas once (the new key
    readable everywhere, then writing with every object rewritten, then the old key gone), with
    /readyz answering every second through the Service; afterwards every Secret etcd holds
    (member1's token, the Pull agent's, one made before) and every ConfigMap (one stored in plain
    text before) is ciphertext under the new key alone and reads back; the old key is in no Secret."""
    name = "before-rotation"
    fleet.karmadactl("create", "secret", "generic", name, "-n", "default", "--from-literal=token=kept-across")
    fleet.karmadactl("create", "configmap", name, "-n", "default", "--from-literal=setting=plain-before")
    configmap = f"/registry/configmaps/default/{name}"
    assert b"plain-before" in karmada_e2e.etcd_values(fleet.host, NS, f"{NAME}-etcd-0", configmap)[configmap]
    before = stored_secrets(fleet)
    old = encryption_keys(fleet)
    assert list(old) == ["key-1"], list(old)
    assert len(before) >= 2 and all(v.startswith(b"k8s:enc:secretbox:v1:key-1:") for v in before.values()), \
        {k: v[:30] for k, v in before.items()}
    kubeconfig = fleet.kubeconfig()
    apiserver = "app.kubernetes.io/name=karmada-apiserver,app.kubernetes.io/instance=" + NAME
    uids = {p["metadata"]["uid"] for p in fleet.host.get("pods", "-n", NS, "-l", apiserver)["items"]}
    poller = ReadyzPoller(kubeconfig, str(Path(fleet.host.settings["KO_LINKS"]) / "kubectl"))
    requested = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    started = time.monotonic()
    # with the rotation, ConfigMaps join the encrypted resources (the first pass rewrites them)
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", json.dumps(
        {"spec": {"apiServer": {"encryption": {"resources": ["secrets", "configmaps"],
                                               "rotation": {"requestedAt": requested}}}}}))

    def done():
        obj = fleet.get()
        rotation = ((obj.get("status") or {}).get("encryption") or {}).get("rotation") or {}
        return obj if (rotation.get("requestedAt") == requested and rotation.get("phase") == "Done"
                       and ready_at_generation(fleet)) else None

    try:
        obj = fleet.wait_for(done, 900, "the key rotation Done")
    finally:
        polls, failures = poller.finish()
    took = time.monotonic() - started
    status = obj["status"]["encryption"]
    print(f"\nkey rotation in {took:.0f}s: {status['rotation']['message']}; /readyz polled {polls} times, "
          f"{len(failures)} failures")
    # one Event per phase, in order (resourceVersion order: the order they were written)
    seen = sorted((e for phase in ("Adding", "Writing", "Dropping")
                   for e in karmada_e2e.events(fleet, f"EncryptionKeyRotation{phase}")),
                  key=lambda e: int(e["metadata"]["resourceVersion"]))
    for e in seen:
        print(f"  {e['reason']}: {e['message']}")
    assert [e["reason"] for e in seen] == ["EncryptionKeyRotationAdding", "EncryptionKeyRotationWriting",
                                           "EncryptionKeyRotationDropping"], seen
    assert (status["writeKey"], status["keys"], status["rotation"]["oldKey"], status["rotation"]["newKey"]) == \
        ("key-2", ["key-2"], "key-1", "key-2")
    new = encryption_keys(fleet)
    assert list(new) == ["key-2"] and new["key-2"] != old["key-1"]
    fleet.extra["encryption_keys"] = {**old, **new}  # for the key-leak test below
    after = stored_secrets(fleet)
    assert set(before) <= set(after)
    assert all(v.startswith(b"k8s:enc:secretbox:v1:key-2:") for v in after.values()), \
        {k: v[:30] for k, v in after.items() if not v.startswith(b"k8s:enc:secretbox:v1:key-2:")}
    read = json.loads(fleet.karmadactl("get", "secret", name, "-n", "default", "-o", "json").stdout)
    assert base64.b64decode(read["data"]["token"]) == b"kept-across"
    # the ConfigMap stored in plain text before is ciphertext under key-2 now, and reads back
    configmaps = karmada_e2e.etcd_values(fleet.host, NS, f"{NAME}-etcd-0", "/registry/configmaps/")
    assert all(v.startswith(b"k8s:enc:secretbox:v1:key-2:") for v in configmaps.values()), \
        {k: v[:30] for k, v in configmaps.items() if not v.startswith(b"k8s:enc:secretbox:v1:key-2:")}
    assert b"plain-before" not in configmaps[configmap]
    read = json.loads(fleet.karmadactl("get", "configmap", name, "-n", "default", "-o", "json").stdout)
    assert read["data"] == {"setting": "plain-before"}
    assert status["resources"] == ["secrets", "configmaps"]
    assert status["rewritten"]["writeKey"] == "key-2" and status["rewritten"]["objects"] >= len(before)
    # both replicas rolled (three times), /readyz never failed, the members stayed Ready
    # (the old pods gone, so the leaves test after this one starts from a quiet plane)
    pods = fleet.wait_for(lambda: (lambda items: items if len(items) == 2 and not any(
        p["metadata"].get("deletionTimestamp") for p in items) else None)(
        fleet.host.get("pods", "-n", NS, "-l", apiserver)["items"]), 120, "the old karmada-apiserver pods gone")
    now = {p["metadata"]["uid"] for p in pods}
    assert not now & uids, (uids, now)
    assert polls > 30 and not failures, failures[:5]
    for member in (MEMBER, PULL):
        assert cluster_ready(fleet, kubeconfig, member) == "True", member
    fleet.karmadactl("delete", "secret,configmap", name, "-n", "default")


# How a private key would show if one leaked: a PEM's body (its first line of base64 DER), or the
# base64 of the PEM text (a Secret's data, a kubeconfig's client-key-data).
PEM_BEGIN_B64 = ("LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS", "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS",
                 "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVkt")


KMS_NAME = "bed-kms"
KMS_PREFIX = f"k8s:enc:kms:v2:{KMS_NAME}:".encode()


def test_a_kms_v2_plugin_takes_over_and_every_secret_moves_to_it_without_an_outage(fleet: Deployment):
    """spec.apiServer.encryption.provider KMSv2 with the bed's KMS v2 plugin (hack/testenv/kms-plugin,
    its key from a Secret through kms.env): both karmada-apiserver replicas roll once and come back
    with the plugin as a native sidecar, admitted under Pod Security "restricted"; /readyz through
    the Service answers every second throughout; afterwards every Secret and ConfigMap etcd holds
    is KMS v2 ciphertext under the plugin's name (read from etcd itself), one made under secretbox
    before reads back, one made after is stored so too, and the members stay Ready."""
    host = fleet.host
    key = base64.b64encode(bytes(range(100, 132))).decode()
    fleet.extra["kms_key"] = key  # for the key-leak test below
    # the user's Secret (the operator neither owns nor deletes it): one left by an earlier run replaced
    host.kubectl("delete", "secret", "kms-plugin-key", "-n", NS, "--ignore-not-found")
    host.kubectl("create", "secret", "generic", "kms-plugin-key", "-n", NS, f"--from-literal=key={key}")
    name = "before-kms"
    fleet.karmadactl("create", "secret", "generic", name, "-n", "default", "--from-literal=token=kept-through-kms")
    assert stored_secrets(fleet)[f"/registry/secrets/default/{name}"].startswith(b"k8s:enc:secretbox:v1:")
    kubeconfig = fleet.kubeconfig()
    apiserver = "app.kubernetes.io/name=karmada-apiserver,app.kubernetes.io/instance=" + NAME
    uids = {p["metadata"]["uid"] for p in host.get("pods", "-n", NS, "-l", apiserver)["items"]}
    poller = ReadyzPoller(kubeconfig, str(Path(host.settings["KO_LINKS"]) / "kubectl"))
    started = time.monotonic()
    # the operator's own key rotation goes with it (refused beside KMSv2: the KMS rotates its key)
    host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", json.dumps(
        {"spec": {"apiServer": {"encryption": {"rotation": None, "provider": "KMSv2", "kms": {
            "name": KMS_NAME, "image": host.kms_plugin_image,
            "env": [{"name": "KMS_KEY", "valueFrom": {"secretKeyRef": {"name": "kms-plugin-key", "key": "key"}}}]}}}}}))

    def moved():
        obj = fleet.get()
        enc = (obj.get("status") or {}).get("encryption") or {}
        return obj if ((enc.get("rewritten") or {}).get("writeKey") == f"kms:{KMS_NAME}"
                       and enc.get("phase") == "Current" and ready_at_generation(fleet)) else None

    try:
        obj = fleet.wait_for(moved, 900, "every object rewritten through the KMS plugin")
        pods = fleet.wait_for(lambda: (lambda items: items if len(items) == 2 and not any(
            p["metadata"].get("deletionTimestamp") for p in items) else None)(
            host.get("pods", "-n", NS, "-l", apiserver)["items"]), 120, "the old karmada-apiserver pods gone")
    finally:
        polls, failures = poller.finish()
    status = obj["status"]["encryption"]
    print(f"\nto the KMS in {time.monotonic() - started:.0f}s: {status['message']}; /readyz polled {polls} times, "
          f"{len(failures)} failures")
    assert (status["provider"], status["writeKey"], status["kms"]) == ("kms", f"kms:{KMS_NAME}", KMS_NAME), status
    assert [e for e in karmada_e2e.events(fleet, "EncryptionRewritten") if KMS_NAME in e["message"]]
    # etcd itself: every Secret and ConfigMap under the plugin's name, none under a secretbox key
    after = {**stored_secrets(fleet), **karmada_e2e.etcd_values(host, NS, f"{NAME}-etcd-0", "/registry/configmaps/")}
    assert len(after) >= 4 and all(v.startswith(KMS_PREFIX) for v in after.values()), \
        {k: v[:30] for k, v in after.items() if not v.startswith(KMS_PREFIX)}
    read = json.loads(fleet.karmadactl("get", "secret", name, "-n", "default", "-o", "json").stdout)
    assert base64.b64decode(read["data"]["token"]) == b"kept-through-kms"
    fleet.karmadactl("create", "secret", "generic", "after-kms", "-n", "default", "--from-literal=token=new")
    assert stored_secrets(fleet)["/registry/secrets/default/after-kms"].startswith(KMS_PREFIX)
    # both replicas rolled, each with the plugin beside kube-apiserver, under "restricted"
    assert not {p["metadata"]["uid"] for p in pods} & uids
    for pod in pods:
        sidecars = pod["spec"].get("initContainers") or []
        assert [(c["name"], c.get("restartPolicy"), c["image"]) for c in sidecars] == [
            ("kms-plugin", "Always", host.kms_plugin_image)], sidecars
        assert all(c["ready"] for c in pod["status"]["containerStatuses"] + pod["status"]["initContainerStatuses"])
    verdicts = pod_security.restricted_verdicts(host, pods)
    assert verdicts == dict.fromkeys(verdicts, ""), verdicts
    assert polls > 20 and not failures, failures[:5]
    for member in (MEMBER, PULL):
        assert cluster_ready(fleet, kubeconfig, member) == "True", member
    fleet.karmadactl("delete", "secret", name, "after-kms", "-n", "default")


def key_needles(fleet: Deployment) -> dict[str, str]:
    """Where each private key of this Karmada is -> a string only that key's text contains."""
    needles: dict[str, str] = {}
    for name in (f"{NAME}-pki", f"{NAME}-etcd-pki", f"{NAME}-kubeconfigs", f"{NAME}-admin-kubeconfig"):
        data = fleet.host.get("secret", name, "-n", NS)["data"]
        for key, encoded in data.items():
            text = base64.b64decode(encoded).decode()
            if key.endswith(".key"):
                pems = [text]
            elif key.endswith(".conf") or key == "kubeconfig":
                pems = [base64.b64decode(u["user"]["client-key-data"]).decode()
                        for u in yaml.safe_load(text)["users"] if "client-key-data" in u["user"]]
                assert pems, f"{name}/{key} holds no client key"
            else:
                continue
            for i, pem in enumerate(pems):
                body = [line for line in pem.splitlines() if line and not line.startswith("-----")]
                needles[f"{name}/{key}#{i} (PEM body)"] = body[0]
                needles[f"{name}/{key}#{i} (base64 of the PEM)"] = base64.b64encode(pem.encode()).decode()[:64]
    # the encryption keys, the current one and those rotated out (the rotation test kept them)
    for key, secret in {**fleet.extra.get("encryption_keys", {}), **encryption_keys(fleet)}.items():
        needles[f"encryption key {key}"] = secret
        needles[f"encryption key {key} (hex)"] = base64.b64decode(secret).hex()
    if "kms_key" in fleet.extra:  # the KMS plugin's key, given through a Secret (the KMS test)
        needles["the KMS plugin's key"] = fleet.extra["kms_key"]
    return needles


def test_no_private_key_reaches_the_operators_log_or_its_run_records(fleet: Deployment):
    """After install, leaf renewals and an encryption key rotation: none of this Karmada's private
    keys (the CAs', every leaf's, service-account's, every kubeconfig's client key, both
    encryption keys) is in the operator's log or in any
    record the runtime keeps of its runs (the job events and output of each run, on disk in the
    operator's pod), in PEM or base64 form; nor is any PEM private key at all."""
    needles = key_needles(fleet)
    assert len(needles) >= 20, sorted(needles)  # the CAs, the leaves, sa.key, the kubeconfigs
    assert sum(1 for n in needles if n.startswith("encryption key ")) >= 4, sorted(needles)  # key-1 and key-2
    # this operator's runs: the runtime keeps the last 20 of a name, an earlier operator's too
    records = [p for run in karmada_e2e.runs(NS, NAME) if run.stat().st_mtime >= fleet.operator.started
               for p in run.rglob("*") if p.is_file()]
    assert sum(1 for p in records if p.parent.name == "job_events") >= 100, "the runs' job events were not found"
    sources = {"the operator's log": fleet.operator.log_tail(10**9)} | {
        str(p): p.read_text(errors="replace") for p in records}
    found = sorted({f"{where} in {source}" for source, text in sources.items()
                    for where, needle in needles.items() if needle in text})
    found += sorted(f"a PEM private key in {source}" for source, text in sources.items()
                    if "PRIVATE KEY-----" in text or any(b64 in text for b64 in PEM_BEGIN_B64))
    assert found == [], found[:10]
