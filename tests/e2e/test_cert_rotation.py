"""Issue 15, done-when 4: leaf certificates roll on schedule on a live Karmada, with no spec
change and no outage, on the real host cluster with the real ansible-operator.

One Karmada (``certrot`` in karmada-system: 1 etcd member, 2 karmada-apiserver replicas, ECDSA
keys, leaves valid 20 minutes and renewed 15 minutes before they expire, i.e. 5 minutes after
they were issued) with member1 joined (Push). The test shortens only the reconcile period, with
the ansible-operator's own per-object annotation (``ansible.sdk.operatorframework.io/reconcile-period``),
so the periodic reconcile comes often enough to see a renewal inside the test's 10 minutes.

From the moment the Karmada is Ready, with nothing edited:

- within 10 minutes every leaf in status.certificates has a later notAfter (the CAs and the
  service-account keys stay), and the Secrets hold exactly what status says;
- karmada-apiserver's /readyz, polled every second through its Service, never failed;
- the pods that restarted are exactly the components whose kubeconfig or certificates changed,
  one component at a time (no restart began before the previous component's old pods were being
  deleted); karmada-apiserver and etcd, which reload renewed pairs from disk, did not restart,
  and both serve the renewed certificate (read from each pod's TLS handshake);
- member1 stayed Ready throughout, and a PropagationPolicy made afterwards propagates.

Issue 15, done-when 5 (``test_ca_rotation_keeps_members_working``, on the same Karmada, with
member2 joined in Pull mode): ``spec.certificates.caRotation: {ca: karmada}`` goes through
Trusting, Reissuing and Dropping to Done; afterwards every leaf and kubeconfig client
certificate in the Secrets is signed by the new CA (checked by signature), the old CA is in no
bundle (the PKI and kubeconfig Secrets, the Pull agent's kubeconfig, the webhook, APIService and
CRD conversion caBundles in karmada-apiserver), both members stayed Ready, and a
PropagationPolicy made afterwards puts a Deployment on both members.
"""

from __future__ import annotations

import base64
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

from support import karmada_e2e
from support.karmada_crds_server import serve
from support.karmada_e2e import Deployment, operator_kubeconfig
from support.operator_runtime import OperatorProcess
from support.pki_fixtures import signed_by
from support.readyz import ReadyzPoller
from support.testenv import HostCluster, MemberCluster
from support.waiting import condition, crds_established

pytestmark = [pytest.mark.e2e, pytest.mark.extended, pytest.mark.timeout(3600)]

NS = "karmada-system"
NAME = "certrot"
MEMBER = "member1"  # Push
PULL = "member2"  # Pull, its agent on the host
CAS = {"ca", "etcd/ca", "front-proxy-ca"}
RECONCILE_PERIOD = "1m"  # test only: the default is watches.yaml's reconcilePeriod (10m)
RENEW_BEFORE = timedelta(minutes=15)
ROTATION_BUDGET = 600  # seconds: done-when 4 says within 10 minutes


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


def pki_steps(fleet: Deployment) -> list[tuple[datetime, datetime, datetime]]:
    """(start, certificate step, end) of every finished reconcile run still in the runtime's
    artifacts, from their Ansible events."""
    out = []
    for run in fleet.runs():
        events = [json.loads(f.read_text()) for f in (run / "job_events").glob("*.json")]
        times = sorted(parse_time(e["created"]) for e in events if e.get("created"))
        pki = sorted(parse_time(e["created"]) for e in events if e.get("created")
                     and (e.get("event_data") or {}).get("task") == "Generate, check and rotate certificates")
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
        cr["metadata"].setdefault("annotations", {})["ansible.sdk.operatorframework.io/reconcile-period"] = \
            RECONCILE_PERIOD
        cr["spec"]["apiServer"]["replicas"] = 2  # /readyz must never fail
        # cluster.karmada.io (how the test reads the member's Ready) stays served while it restarts
        cr["spec"].setdefault("components", {}).setdefault("aggregatedAPIServer", {})["replicas"] = 2
        cr["spec"]["certificates"].update({"leafValidity": "20m", "renewBefore": f"{RENEW_BEFORE.seconds // 60}m"})
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
        ready = cluster_ready(fleet, kubeconfig)
        if ready != "True":
            (member_not_ready if ready else cluster_api_down).append(f"{time.strftime('%H:%M:%S')} {ready}")
        now = not_after(fleet)
        late = [n for n in leaves if parse_time(now.get(n, before[n])) <= parse_time(before[n])]
        return not late and ready_at_generation(fleet) and now

    try:
        after = fleet.wait_for(renewed, ROTATION_BUDGET, "every leaf in status.certificates with a later notAfter")
        took = time.monotonic() - started
        # let the pass that renewed them finish its rollouts and write status (it has: status is its last step)
    finally:
        polls, failures = poller.finish()
        log = pods.finish()
    print(f"\nevery leaf renewed {took:.0f}s after Ready; /readyz polled {polls} times, {len(failures)} failures; "
          f"{MEMBER} not Ready at {member_not_ready or 'no check'}; cluster.karmada.io not answering at "
          f"{cluster_api_down or 'no check'}")
    assert fleet.get()["metadata"]["generation"] == generation, "nothing may edit the spec"
    # How late the periodic reconcile came: the first leaf entered its renewal window at `due`;
    # the certificate step of the first pass after it renewed it.
    due = min(parse_time(before[n]) for n in leaves) - RENEW_BEFORE
    passes = pki_steps(fleet)
    print("passes (start, certificate step, end): " + "; ".join(
        f"{a:%H:%M:%S} {b:%H:%M:%S} {c:%H:%M:%S}" for a, b, c in passes))
    renewing = [p for p in passes if p[1] >= due]
    if renewing:
        print(f"first leaf due {due:%H:%M:%S}; renewed by the pass whose certificate step ran "
              f"{(renewing[0][1] - due).total_seconds():.0f}s later (reconcile period {RECONCILE_PERIOD}); "
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

    # No outage: /readyz every second, the member Ready at every check.
    assert polls > 60 and not failures, failures[:5]
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
    # which comes within about a minute of the Secret's change.
    fleet.wait_for(apiserver_reloaded, 180, "both karmada-apiserver pods serving the renewed certificate")
    client = (fleet.work / "etcd-client.crt", fleet.work / "etcd-client.key")
    client[0].write_bytes(etcd_files["healthcheck-client.crt"])
    client[1].write_bytes(etcd_files["healthcheck-client.key"])
    client[1].chmod(0o600)
    etcd_pod = fleet.host.get("pods", "-n", NS, "-l",
                              f"app.kubernetes.io/instance={NAME},app.kubernetes.io/name=etcd")["items"][0]
    fleet.wait_for(lambda: served_certificate(etcd_pod["status"]["podIP"], 2379, "localhost",
                                              (str(client[0]), str(client[1]))).not_valid_after_utc
                   >= parse_time(after["etcd/server"]), 180, "etcd serving the renewed certificate")

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


# --------------------------------------------------------------------------- CA rotation (done-when 5)


def pem_certs(data: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        return []



def kubeconfig_parts(data: bytes) -> tuple[list[x509.Certificate], x509.Certificate | None] | None:
    """(the CAs it trusts, its client certificate) of a kubeconfig, None when ``data`` is none."""
    try:
        conf = yaml.safe_load(data)
        cluster = conf["clusters"][0]["cluster"]
    except (yaml.YAMLError, KeyError, IndexError, TypeError):
        return None
    trusted = pem_certs(base64.b64decode(cluster.get("certificate-authority-data") or ""))
    user = (conf.get("users") or [{}])[0].get("user") or {}
    crt = user.get("client-certificate-data")
    return trusted, (x509.load_pem_x509_certificate(base64.b64decode(crt)) if crt else None)


def test_ca_rotation_keeps_members_working(fleet: Deployment, member_clusters):
    members = {m.name: m for m in member_clusters if m.name in (MEMBER, PULL)}
    pki_before = secret_files(fleet, f"{NAME}-pki")
    (old_ca,) = pem_certs(pki_before["ca.crt"])
    agent_secret = f"{NAME}-agent-{PULL}-kubeconfig"
    agent_before = kubeconfig_parts(secret_files(fleet, agent_secret)["karmada-kubeconfig"])
    assert agent_before and agent_before[0] == [old_ca] and signed_by(agent_before[1], old_ca)
    agent_deployment = f"{NAME}-agent-{PULL}"
    agent_generation = fleet.host.get("deployment", agent_deployment, "-n", NS)["metadata"]["generation"]
    pods = PodLog(fleet.host)
    time.sleep(2)
    present = set(pods.snapshot())
    requested = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    started = time.monotonic()
    fleet.host.kubectl("patch", "karmadadeployment", NAME, "-n", NS, "--type=merge", "-p", json.dumps(
        {"spec": {"certificates": {"caRotation": {"ca": "karmada", "requestedAt": requested}}}}))
    phases: dict[str, float] = {}  # phase -> seconds after the request when status first showed it
    not_ready: list[str] = []
    api_down: list[str] = []

    checks = [0]

    def done():
        checks[0] += 2
        for name in (MEMBER, PULL):
            ready = cluster_ready(fleet, fleet.kubeconfig(), name)  # a fresh admin kubeconfig each time
            if ready != "True":
                (not_ready if ready else api_down).append(f"{time.strftime('%H:%M:%S')} {name} {ready}")
        rotation = fleet.get().get("status", {}).get("caRotation") or {}
        if rotation.get("requestedAt") == requested:
            phases.setdefault(rotation["phase"], time.monotonic() - started)
        return rotation.get("requestedAt") == requested and rotation.get("phase") == "Done" \
            and ready_at_generation(fleet) and rotation

    try:
        rotation = fleet.wait_for(done, 2400, "status.caRotation Done")
        took = time.monotonic() - started
    finally:
        log = pods.finish()
    obj = fleet.get()
    print(f"\nCA rotation of the karmada CA: Done {took:.0f}s after the request; status: {rotation}")
    marks = sorted(phases.items(), key=lambda kv: kv[1])
    print("phase first seen in status (s after the request): " + ", ".join(f"{p} {s:.0f}" for p, s in marks))
    for (phase, at), (_, nxt) in zip(marks, marks[1:], strict=False):
        print(f"  {phase}: {nxt - at:.0f}s")
    moved: dict[str, int] = {}
    for uid, p in log.items():
        if uid not in present:
            moved[p["app"]] = moved.get(p["app"], 0) + 1
    print("new pods per app during the rotation: " + ", ".join(f"{a} {n}" for a, n in sorted(moved.items())))
    agent_rolls = fleet.host.get("deployment", agent_deployment, "-n", NS)["metadata"]["generation"] - agent_generation
    print(f"the Pull agent's Deployment ({agent_deployment}) changed {agent_rolls} times")
    print(f"member checks not Ready: {not_ready or 'none'}; cluster.karmada.io not answering: {api_down or 'none'} "
          f"(of {checks[0]} checks)")
    for error in API_ERRORS[-len(api_down):] if api_down else []:
        print(f"  {error}")
    print(f"conditions: CARotated {condition(obj, 'CARotated')}; CertificatesValid "
          f"{condition(obj, 'CertificatesValid').get('message')}")

    # The new CA, alone, is the one status names.
    pki = secret_files(fleet, f"{NAME}-pki")
    (new_ca,) = pem_certs(pki["ca.crt"])
    assert new_ca != old_ca and format(new_ca.serial_number, "x") == rotation["newSerial"]
    assert rotation["oldSerial"] == format(old_ca.serial_number, "x")
    assert condition(obj, "CARotated")["status"] == "True"
    status_cas = [c for c in obj["status"]["certificates"] if c["name"].startswith("ca")]
    assert [c["name"] for c in status_cas] == ["ca"], status_cas
    assert not any(k.endswith(("-next.key", "-previous.key")) for k in pki)
    assert pem_certs(pki["ca-signer.crt"]) == [new_ca]
    # each phase was a pass of its own, seen in status (the first may pass before the first poll)
    assert {"Reissuing", "Dropping", "Done"} <= set(phases), phases

    # Every Secret of this Karmada on the host: no old CA anywhere; every certificate the Karmada
    # CA signs (leaves, kubeconfig client certificates) is signed by the new one.
    secrets = fleet.host.get("secrets", "-n", NS, "-l", f"app.kubernetes.io/instance={NAME}")["items"]
    names = {s["metadata"]["name"] for s in secrets}
    assert {f"{NAME}-pki", f"{NAME}-etcd-pki", f"{NAME}-kubeconfigs", f"{NAME}-admin-kubeconfig", agent_secret} <= names
    karmada_leaves = 0
    for secret in secrets:
        for key, value in (secret.get("data") or {}).items():
            data = base64.b64decode(value)
            where = f"{secret['metadata']['name']}/{key}"
            certs = pem_certs(data)
            parts = kubeconfig_parts(data) if not certs else None
            if parts:
                trusted, client = parts
                certs = trusted + ([client] if client else [])
                if new_ca in trusted or old_ca in trusted:  # a kubeconfig for karmada-apiserver
                    assert trusted == [new_ca], where
                    assert client is not None and signed_by(client, new_ca), where
                    karmada_leaves += 1
            assert old_ca not in certs, f"the old CA is still in {where}"
            for cert in certs:
                if cert.issuer == old_ca.subject and cert != new_ca:
                    assert signed_by(cert, new_ca) and not signed_by(cert, old_ca), where
                    karmada_leaves += 1
    print(f"{karmada_leaves} certificates of the Karmada CA in {len(secrets)} Secrets, all signed by the new CA")
    assert karmada_leaves >= 15
    agent_after = kubeconfig_parts(secret_files(fleet, agent_secret)["karmada-kubeconfig"])
    assert agent_after and agent_after[0] == [new_ca] and signed_by(agent_after[1], new_ca)
    assert agent_rolls >= 1  # it restarted with its new credentials

    # Inside karmada-apiserver: webhook, APIService and CRD conversion caBundles hold the new CA only.
    bundles = 0
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations", "apiservices",
                 "customresourcedefinitions"):
        for item in json.loads(fleet.karmadactl("get", kind, "-o", "json").stdout)["items"]:
            configs = [w.get("clientConfig") or {} for w in item.get("webhooks") or []]
            configs.append(item.get("spec") or {})
            configs.append((((item.get("spec") or {}).get("conversion") or {}).get("webhook") or {})
                           .get("clientConfig") or {})
            for config in configs:
                if config.get("caBundle"):
                    trusted = pem_certs(base64.b64decode(config["caBundle"]))
                    assert trusted == [new_ca], f"{kind} {item['metadata']['name']}"
                    bundles += 1
    print(f"{bundles} caBundles in karmada-apiserver, each the new CA alone")
    assert bundles >= 3

    # Both members Ready throughout and after; the Pull agent restarted for its new credentials.
    assert not not_ready, not_ready
    for name in (MEMBER, PULL):
        assert cluster_ready(fleet, fleet.kubeconfig(), name) == "True", name
    assert {m["name"]: m["ready"] for m in obj["status"]["members"]} == {MEMBER: True, PULL: True}

    # Karmada still works for both members: a Deployment propagated by a policy made now.
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "after-ca-rotation", "namespace": "default"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "after-ca-rotation"}},
                    "template": {"metadata": {"labels": {"app": "after-ca-rotation"}},
                                 "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}
    pp = {"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy",
          "metadata": {"name": "after-ca-rotation", "namespace": "default"},
          "spec": {"resourceSelectors": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                          "name": "after-ca-rotation"}],
                   "placement": {"clusterAffinity": {"clusterNames": [MEMBER, PULL]},
                                 "replicaScheduling": {"replicaSchedulingType": "Duplicated"}}}}
    fleet.karmadactl("apply", "-f", "-", input=yaml.safe_dump_all([dep, pp]))
    for name, member in members.items():
        fleet.wait_for(lambda m=member: m.kubectl("get", "deployment", "after-ca-rotation", "-n", "default",
                                                  check=False).returncode == 0, 300,
                       f"the Deployment on {name} through a PropagationPolicy made after the CA rotation")
    print(f"a Deployment propagated to {MEMBER} (Push) and {PULL} (Pull) after the rotation")
