"""Encryption at rest: the key and EncryptionConfiguration the certificates step keeps
(pki/encryption.py) and the rewrite of the encrypted resources (controlplane/encryption_rewrite.py)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from karmada_operator.controlplane import encryption_rewrite as er
from karmada_operator.kube.client import KubeError
from karmada_operator.pki import encryption
from karmada_operator.plan.plan import PlanError, build_plan

ON = {"enabled": True, "resources": ["secrets"]}


def providers(text):
    return json.loads(text)["resources"][0]["providers"]


def test_a_missing_key_is_made_once_and_kept_as_long_as_it_is_stored():
    text, reasons = encryption.ensure(None, ON, random=lambda n: b"k" * n)
    assert reasons == ["missing"]
    doc = json.loads(text)
    assert (doc["apiVersion"], doc["kind"]) == ("apiserver.config.k8s.io/v1", "EncryptionConfiguration")
    assert doc["resources"][0]["resources"] == ["secrets"]
    box, identity = providers(text)
    assert identity == {"identity": {}}
    assert box == {"secretbox": {"keys": [{"name": "key-1", "secret": base64.b64encode(b"k" * 32).decode()}]}}
    again, reasons = encryption.ensure(text, ON, random=lambda n: pytest.fail("no new key"))
    assert (again, reasons) == (text, [])
    assert encryption.write_key(text) == "key-1"


def test_switched_off_identity_writes_and_the_key_still_reads():
    text, _ = encryption.ensure(None, ON)
    off, reasons = encryption.ensure(text, {"enabled": False, "resources": ["secrets"]})
    assert reasons == ["settings"]
    first, second = providers(off)
    assert first == {"identity": {}} and second["secretbox"]["keys"] == encryption.stored_keys(text)
    assert encryption.write_key(off) == ""
    more, _ = encryption.ensure(text, {"enabled": True, "resources": ["secrets", "configmaps"]})
    assert json.loads(more)["resources"][0]["resources"] == ["secrets", "configmaps"]
    assert encryption.stored_keys(more) == encryption.stored_keys(text)


@pytest.mark.parametrize("stored", ["not json", json.dumps({"resources": [{"providers": [
    {"secretbox": {"keys": [{"name": "key-1", "secret": base64.b64encode(b"short").decode()}]}}]}]})])
def test_an_unreadable_or_weak_configuration_gets_a_new_key(stored):
    text, reasons = encryption.ensure(stored, ON, random=lambda n: b"n" * n)
    assert reasons == ["unreadable"] and encryption.stored_keys(text)[0]["name"] == "key-1"


def test_new_keys_are_numbered_after_the_highest():
    keys = [{"name": "key-3", "secret": ""}, {"name": "key-1", "secret": ""}]
    assert encryption.new_key(keys, random=lambda n: b"x" * n)["name"] == "key-4"


def test_the_plan_points_karmada_apiserver_at_the_file_and_refuses_to_leave_secrets_out():
    cr = {"metadata": {"name": "k", "namespace": "ns"}, "spec": {}}
    plan = build_plan(cr)
    args = plan["apiserver"]["args"]
    assert "--encryption-provider-config=/etc/kubernetes/pki/encryption-config.json" in args
    assert "encryption-config.json" in plan["apiserver"]["pkiFiles"]
    assert "encryption-config.json" in plan["apiserver"]["restartMounts"]["pki"]
    assert plan["pki"]["api_server"]["encryption"] == {**ON, "rotation": "", "provider": "Secretbox", "kms": None}
    assert "kmsPlugin" not in plan["apiserver"]
    cr["spec"] = {"apiServer": {"encryption": {"resources": ["configmaps"]}}}
    with pytest.raises(PlanError) as err:
        build_plan(cr)
    assert err.value.field == "spec.apiServer.encryption"


def test_read_says_what_a_stored_configuration_does_without_its_keys():
    text, _ = encryption.ensure(None, {"enabled": True, "resources": ["secrets", "configmaps"]})
    b64 = base64.b64encode(text.encode()).decode()
    assert encryption.read(b64) == {"enabled": True, "writeKey": "key-1", "keys": ["key-1"], "provider": "secretbox",
                                    "kms": "", "resources": ["secrets", "configmaps"]}
    assert encryption.read(None) is None and encryption.read("bm90IGpzb24=") is None


# ------------------------------------------------------------------ a KMS v2 plugin

KMS = {"name": "vault", "image": "registry.example/vault-kms:v1", "args": ["--listen=/var/run/kmsplugin/kms.sock"],
       "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "kms-token", "key": "token"}}}]}


def kms_spec(provider="KMSv2", **extra):
    return {"metadata": {"name": "k", "namespace": "ns"},
            "spec": {"apiServer": {"encryption": {"provider": provider, "kms": {**KMS, **extra}}}}}


def test_kms_writes_first_and_the_secretbox_key_stays_a_reader_of_what_was_stored_before():
    before, _ = encryption.ensure(None, ON, random=lambda n: b"k" * n)
    spec = encryption.settings(kms_spec()["spec"]["apiServer"])
    assert (spec["provider"], spec["kms"]) == ("KMSv2", {"name": "vault", "timeout": "3s"})
    text, reasons = encryption.ensure(before, spec, random=lambda n: pytest.fail("no new key"))
    assert reasons == ["settings"]
    kms, box, identity = providers(text)
    assert kms == {"kms": {"apiVersion": "v2", "name": "vault", "endpoint": "unix:///var/run/kmsplugin/kms.sock",
                           "timeout": "3s"}}
    assert box == providers(before)[0] and identity == {"identity": {}}
    said = encryption.read(base64.b64encode(text.encode()).decode())
    assert said == {"enabled": True, "writeKey": "kms:vault", "provider": "kms", "keys": ["key-1"], "kms": "vault",
                    "resources": ["secrets"]}
    assert encryption.write_key(text) == "kms:vault"
    # back to Secretbox with the plugin still set: the key writes again, the plugin reads
    back, reasons = encryption.ensure(text, encryption.settings(kms_spec("Secretbox")["spec"]["apiServer"]))
    assert reasons == ["settings"]
    assert [next(iter(p)) for p in providers(back)] == ["secretbox", "kms", "identity"]
    assert encryption.write_key(back) == "key-1"
    # switched off: identity writes, both still read
    off = encryption.settings({"encryption": {"enabled": False, "provider": "KMSv2", "kms": KMS}})
    assert [next(iter(p)) for p in providers(encryption.ensure(text, off)[0])] == ["identity", "kms", "secretbox"]


def test_kms_without_its_plugin_or_with_the_operators_key_rotation_is_refused_naming_the_field():
    with pytest.raises(PlanError) as err:
        build_plan({"metadata": {"name": "k", "namespace": "ns"},
                    "spec": {"apiServer": {"encryption": {"provider": "KMSv2"}}}})
    assert err.value.field == "spec.apiServer.encryption" and "needs kms" in str(err.value)
    rotating = {"encryption": {"provider": "KMSv2", "kms": KMS, "rotation": {"requestedAt": "2026-12-06T10:00:00Z"}}}
    with pytest.raises(encryption.EncryptionError, match="rotate it there"):
        encryption.settings(rotating)
    # a rotation under way when the provider changed finishes (its phases move the secretbox keys)
    record = {"rotation": {"requestedAt": "2026-12-06T10:00:00Z", "phase": "Dropping"}}
    assert encryption.settings(rotating, record)["rotation"] == "Dropping"


def test_the_plugin_cannot_go_while_values_may_still_be_stored_through_it():
    """kms removed from the spec while status.encryption says the running configuration has the
    plugin and not every object has been rewritten under a secretbox key since: the plan refuses,
    naming the field, before anything changes. Once the rewrite for the secretbox key is done
    (or before any KMS was there) it may go."""
    plain = {"encryption": {"provider": "Secretbox"}}
    rewritten_kms = {"enabled": True, "writeKey": "kms:vault", "resources": ["secrets"]}
    under_kms = {"enabled": True, "writeKey": "kms:vault", "provider": "kms", "kms": "vault",
                 "resources": ["secrets"], "rewritten": rewritten_kms}
    switched_back = {**under_kms, "writeKey": "key-1", "provider": "secretbox"}  # rolled, rewrite still to do
    moved = {**switched_back, "rewritten": {"enabled": True, "writeKey": "key-1", "resources": ["secrets"]}}
    for record in (under_kms, switched_back, {**moved, "resources": ["secrets", "configmaps"]}):
        assert encryption.kms_still_holding(record) == "vault", record
        with pytest.raises(encryption.EncryptionError, match="kms: values may still be stored through the KMS "
                                                             "v2 plugin vault") as err:
            encryption.settings(plain, record)
        assert err.value.field == "spec.apiServer.encryption"
        # kept in the spec, nothing is refused
        assert encryption.settings({"encryption": {"provider": "Secretbox", "kms": KMS}}, record)["kms"]
    cr = {"metadata": {"name": "k", "namespace": "ns"}, "spec": {"apiServer": plain},
          "status": {"encryption": switched_back}}
    with pytest.raises(PlanError) as err:
        build_plan(cr)
    assert err.value.field == "spec.apiServer.encryption" and "Put kms back" in str(err.value)
    # every object rewritten under key-1: the plugin may go; switched off and rewritten in plain text too
    assert encryption.kms_still_holding(moved) == ""
    assert encryption.settings(plain, moved)["kms"] is None
    off = {**moved, "enabled": False, "rewritten": {"enabled": False, "writeKey": "", "resources": ["secrets"]}}
    assert encryption.kms_still_holding(off) == ""
    # never had a plugin, or no status at all: nothing to hold
    assert encryption.kms_still_holding({**moved, "kms": ""}) == ""
    assert encryption.settings(plain, {})["provider"] == "Secretbox"


def test_the_plugin_runs_as_a_restricted_native_sidecar_sharing_the_socket_with_kube_apiserver():
    api = build_plan(kms_spec(timeout="5s", resources={"requests": {"cpu": "20m"}}))["apiserver"]
    plugin = api["kmsPlugin"]
    assert (plugin["name"], plugin["image"], plugin["restartPolicy"]) == ("kms-plugin", KMS["image"], "Always")
    assert (plugin["args"], plugin["env"]) == (KMS["args"], KMS["env"])
    assert plugin["resources"] == {"requests": {"cpu": "20m"}}
    context = plugin["securityContext"]
    assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
    assert context["readOnlyRootFilesystem"] is True
    socket = {"name": "kms-socket", "mountPath": "/var/run/kmsplugin"}
    assert socket in plugin["volumeMounts"] and socket in api["extraMounts"]
    assert {"name": "kms-socket", "emptyDir": {}} in api["extraVolumes"]
    plan = build_plan(kms_spec(timeout="5s"))
    assert plan["pki"]["api_server"]["encryption"]["kms"] == {"name": "vault", "timeout": "5s"}
    assert plan["apiserver"]["kmsPlugin"]["resources"] == {"requests": {"cpu": "10m", "memory": "32Mi"}}
    # without a plugin: no sidecar, no socket volume
    plain = build_plan({"metadata": {"name": "k", "namespace": "ns"}, "spec": {}})["apiserver"]
    assert "kmsPlugin" not in plain and all(v["name"] != "kms-socket" for v in plain["extraVolumes"])


# ------------------------------------------------------------------ the rewrite


class Karmada:
    """karmada-apiserver as the rewrite sees it: discovery, list and replace."""

    def __init__(self, objects, conflict=(), fail=None):
        self.objects, self.conflict, self.fail, self.replaced = objects, set(conflict), fail, []
        served = [SimpleNamespace(name="secrets", group="", group_version="v1", kind="Secret", preferred=True),
                  SimpleNamespace(name="configmaps", group="", group_version="v1", kind="ConfigMap", preferred=True)]

        def search(name, group):
            return [r for r in served if r.name == name and r.group == group]

        self._dynamic = SimpleNamespace(resources=SimpleNamespace(search=search))

    def dynamic(self):
        return self._dynamic

    def list(self, api_version, kind):
        return [dict(o) for o in self.objects.get(kind, [])]

    def replace(self, obj):
        name = obj["metadata"]["name"]
        if self.fail:
            raise KubeError(500, "InternalError", self.fail)
        if name in self.conflict:
            raise KubeError(409, "Conflict", "changed meanwhile")
        self.replaced.append((obj["kind"], name))
        return obj


SETTLED = {"metadata": {"generation": 3}, "spec": {"replicas": 2},
           "status": {"observedGeneration": 3, "updatedReplicas": 2, "replicas": 2}}


def apiserver_pods(*leaving):
    return [{"metadata": {"name": f"k-apiserver-{i}"}} for i in range(2)] + [
        {"metadata": {"name": name, "deletionTimestamp": "2026-12-05T12:00:00Z"}} for name in leaving]


def context(config_text, karmada, status=None, pods=None):
    events = []
    secret = {"data": {encryption.FILE: base64.b64encode(config_text.encode()).decode()}}
    live = SimpleNamespace(get=lambda api_version, kind, *a: secret if kind == "Secret" else SETTLED,
                           list=lambda *a, **k: pods if pods is not None else apiserver_pods())
    ctx = SimpleNamespace(plan={"name": "k", "names": {"pkiSecret": "k-pki", "apiserver": "k-apiserver"},
                                "namespace": "ns", "pki": {"api_server": {"encryption": {**ON, "rotation": ""}}}},
                          owner={"status": status or {}}, live=live, karmada=karmada, event=events.append,
                          now=lambda: datetime(2026, 12, 5, 12, 0, tzinfo=UTC), timeout=0, poll=0)
    return ctx, events


def test_nothing_is_rewritten_while_an_old_karmada_apiserver_pod_still_serves():
    """An old pod answers until it is gone, with the key it started with: a rewrite through it
    would store objects under the key a later phase drops. The rewrite waits; past the step's
    timeout the pass reports it and the next one tries again."""
    text, _ = encryption.ensure(None, {"enabled": True, "resources": ["secrets"]})
    karmada = Karmada({"Secret": [{"metadata": {"name": "s"}}]})
    ctx, events = context(text, karmada, pods=apiserver_pods("k-apiserver-old"))
    record = er.EncryptionRewrite().run(ctx)["fields"]["encryption"]
    assert karmada.replaced == [] and record["phase"] == "Failed"
    assert "old karmada-apiserver pods still terminating: k-apiserver-old" in record["message"]
    assert events[-1]["reason"] == "EncryptionRewriteFailed"
    ctx, _ = context(text, karmada, status={"encryption": record})
    assert er.EncryptionRewrite().run(ctx)["fields"]["encryption"]["phase"] == "Current"
    assert karmada.replaced == [("Secret", "s")]
    rolling = {**SETTLED, "status": {"observedGeneration": 3, "updatedReplicas": 1, "replicas": 3}}
    assert er.apiservers_moving(SimpleNamespace(get=lambda *a: rolling, list=lambda *a, **k: []),
                                ctx.plan) == "Deployment k-apiserver: 1 of 2 replicas updated, 3 in all"


def test_a_new_configuration_rewrites_every_object_once_and_the_next_pass_reads_one_secret():
    text, _ = encryption.ensure(None, {"enabled": True, "resources": ["secrets", "configmaps"]})
    karmada = Karmada({"Secret": [{"metadata": {"name": f"s{i}"}} for i in range(3)],
                       "ConfigMap": [{"metadata": {"name": "c"}}, {"metadata": {"name": "busy"}}]}, conflict=["busy"])
    ctx, events = context(text, karmada)
    out = er.EncryptionRewrite().run(ctx)
    record = out["fields"]["encryption"]
    assert out["changed"] and karmada.replaced == [("Secret", "s0"), ("Secret", "s1"), ("Secret", "s2"),
                                                   ("ConfigMap", "c")]
    assert record["rewritten"] == {"enabled": True, "writeKey": "key-1", "resources": ["secrets", "configmaps"],
                                   "objects": 4, "at": "2026-12-05T12:00:00Z"}
    assert record["phase"] == "Current" and record["keys"] == ["key-1"]
    assert out["conditions"][0]["status"] == "True" and out["conditions"][0]["reason"] == "Encrypted"
    assert [e["reason"] for e in events] == ["EncryptionRewritten"]
    # the next pass: the same configuration, nothing written
    again, _ = context(text, Karmada({"Secret": [{"metadata": {"name": "s0"}}]}), {"encryption": record})
    out2 = er.EncryptionRewrite().run(again)
    assert not out2["changed"] and again.karmada.replaced == [] and out2["fields"]["encryption"] == record
    # no key material in status or Events
    key = json.loads(text)["resources"][0]["providers"][0]["secretbox"]["keys"][0]["secret"]
    assert key not in json.dumps(out) and key not in json.dumps(events)


def test_switching_off_rewrites_into_plain_text_and_a_failure_is_reported_not_raised():
    on, _ = encryption.ensure(None, ON)
    off, _ = encryption.ensure(on, {"enabled": False, "resources": ["secrets"]})
    done = er.EncryptionRewrite().run(context(on, Karmada({"Secret": []}))[0])["fields"]["encryption"]
    ctx, events = context(off, Karmada({"Secret": [{"metadata": {"name": "s"}}]}), {"encryption": done})
    out = er.EncryptionRewrite().run(ctx)
    assert out["fields"]["encryption"]["rewritten"]["writeKey"] == "" and out["conditions"][0]["reason"] == "Disabled"
    ctx, events = context(on, Karmada({"Secret": [{"metadata": {"name": "s"}}]}, fail="etcd timeout"),
                          {"encryption": out["fields"]["encryption"]})
    failed = er.EncryptionRewrite().run(ctx)
    assert failed["fields"]["encryption"]["phase"] == "Failed" and "etcd timeout" in failed["fields"]["encryption"][
        "message"]
    assert (failed["conditions"][0]["status"], failed["conditions"][0]["reason"]) == ("False", "RewriteFailed")
    assert [e["reason"] for e in events] == ["EncryptionRewriteFailed"]


# ------------------------------------------------------------------ key rotation


def rotate(cr_status, requested="2026-12-05T10:00:00Z"):
    enc = {"rotation": {"requestedAt": requested}} if requested else {}
    return encryption.rotation_phase(enc, cr_status)


def test_a_rotation_adds_a_readable_key_then_makes_it_write_then_drops_the_old_one():
    one, _ = encryption.ensure(None, ON, random=lambda n: b"1" * n)
    assert rotate({}) == "Adding"
    added, reasons = encryption.ensure(one, {**ON, "rotation": "Adding"}, random=lambda n: b"2" * n)
    assert reasons == ["rotation-adding"]
    assert [k["name"] for k in encryption.stored_keys(added)] == ["key-1", "key-2"]  # key-1 still writes
    # a phase done again (the pass failed after the certificates step) gives the same file
    assert encryption.ensure(added, {**ON, "rotation": "Adding"}, random=lambda n: pytest.fail("no key"))[0] == added
    writing, _ = encryption.ensure(added, {**ON, "rotation": "Writing"})
    assert [k["name"] for k in encryption.stored_keys(writing)] == ["key-2", "key-1"]
    assert encryption.ensure(writing, {**ON, "rotation": "Writing"})[0] == writing
    dropped, _ = encryption.ensure(writing, {**ON, "rotation": "Dropping"})
    assert [k["name"] for k in encryption.stored_keys(dropped)] == ["key-2"]
    assert encryption.stored_keys(dropped)[0]["secret"] == base64.b64encode(b"2" * 32).decode()
    # after it, nothing moves; a new request starts over with key-3
    assert encryption.ensure(dropped, {**ON, "rotation": ""})[0] == dropped
    assert encryption.rotated_keys(encryption.stored_keys(dropped), "Adding", lambda n: b"3" * n)[1]["name"] == "key-3"


def test_the_phase_comes_from_status_and_a_new_request_waits_for_the_one_under_way():
    record = {"rotation": {"requestedAt": "2026-12-05T10:00:00Z", "phase": "Writing"}}
    assert rotate(record) == "Writing"
    assert rotate(record, "2026-12-05T11:00:00Z") == "Writing"  # the new request waits
    record["rotation"]["phase"] = "Dropping"
    assert rotate(record) == "Dropping"
    record["rotation"]["phase"] = "Done"
    assert rotate(record) == "" and rotate(record, None) == ""
    assert rotate(record, "2026-12-05T11:00:00Z") == "Adding"


def test_the_operation_moves_a_rotation_on_after_each_phase_and_rewrites_in_the_writing_one():
    one, _ = encryption.ensure(None, ON, random=lambda n: b"1" * n)
    op = er.EncryptionRewrite()
    op.etcd_left = lambda ctx, resources, key: []  # etcd holds nothing under the old key
    base = op.run(context(one, Karmada({"Secret": []}))[0])["fields"]["encryption"]
    spec = {"apiServer": {"encryption": {"rotation": {"requestedAt": "2026-12-05T10:00:00Z"}}}}

    def pass_(config_text, record, phase, objects=()):
        ctx, events = context(config_text, Karmada({"Secret": [{"metadata": {"name": n}} for n in objects]}),
                              {"encryption": record})
        ctx.owner["spec"] = spec
        ctx.plan["pki"] = {"api_server": {"encryption": {**ON, "rotation": phase}}}
        return op.run(ctx), ctx, events

    cr = {"spec": spec, "status": {"encryption": base}}
    assert op.under_way(cr) == "encryption key rotation under way (next: Adding)"
    added, _ = encryption.ensure(one, {**ON, "rotation": "Adding"})
    out, ctx, events = pass_(added, base, "Adding", ["s"])
    record = out["fields"]["encryption"]
    rotation = record["rotation"]
    assert (rotation["phase"], rotation["oldKey"], rotation["newKey"]) == ("Writing", "key-1", "key-2")
    assert ctx.karmada.replaced == []  # key-1 still writes: nothing to rewrite
    assert [e["reason"] for e in events] == ["EncryptionKeyRotationAdding"]
    assert out["conditions"][0]["reason"] == "KeyRotation"
    assert op.under_way({"spec": spec, "status": {"encryption": record}}).endswith("(next: Writing)")

    writing, _ = encryption.ensure(added, {**ON, "rotation": "Writing"})
    out, ctx, events = pass_(writing, record, "Writing", ["s", "t"])
    record = out["fields"]["encryption"]
    assert ctx.karmada.replaced == [("Secret", "s"), ("Secret", "t")]
    assert record["rewritten"]["writeKey"] == "key-2" and record["rotation"]["phase"] == "Dropping"
    assert [e["reason"] for e in events] == ["EncryptionRewritten", "EncryptionKeyRotationWriting"]

    dropped, _ = encryption.ensure(writing, {**ON, "rotation": "Dropping"})
    out, ctx, events = pass_(dropped, record, "Dropping", ["s"])
    record = out["fields"]["encryption"]
    assert ctx.karmada.replaced == [] and record["keys"] == ["key-2"]
    assert record["rotation"]["phase"] == "Done" and record["rotation"]["finishedAt"]
    assert out["conditions"][0]["reason"] == "Encrypted"
    assert op.under_way({"spec": spec, "status": {"encryption": record}}) == ""



def test_the_old_key_stays_while_etcd_holds_an_object_under_it():
    """Before Dropping may come, etcd itself is read: an object still under the old key (written
    through a replica that had it first) is rewritten once more; still there, the rotation stays
    in Writing, the pass says which keys and the next pass rewrites and checks again."""
    one, _ = encryption.ensure(None, ON, random=lambda n: b"1" * n)
    added, _ = encryption.ensure(one, {**ON, "rotation": "Adding"})
    writing, _ = encryption.ensure(added, {**ON, "rotation": "Writing"})
    spec = {"apiServer": {"encryption": {"rotation": {"requestedAt": "2026-12-05T10:00:00Z"}}}}
    record = {"enabled": True, "writeKey": "key-1", "keys": ["key-1", "key-2"], "resources": ["secrets"],
              "rewritten": {"enabled": True, "writeKey": "key-1", "resources": ["secrets"], "objects": 1},
              "rotation": {"phase": "Writing", "oldKey": "key-1", "newKey": "key-2",
                           "requestedAt": "2026-12-05T10:00:00Z"}}

    def pass_(left_per_read):
        reads = iter(left_per_read)
        op = er.EncryptionRewrite()
        asked = []
        op.etcd_left = lambda ctx, resources, key: asked.append((tuple(resources), key)) or next(reads)
        ctx, events = context(writing, Karmada({"Secret": [{"metadata": {"name": "s"}}]}), {"encryption": record})
        ctx.owner["spec"] = spec
        ctx.plan["pki"] = {"api_server": {"encryption": {**ON, "rotation": "Writing"}}}
        return op.run(ctx), ctx, events, asked

    # left after the rewrite, gone after the second one: the rotation moves on
    out, ctx, events, asked = pass_([["/registry/secrets/default/s"], []])
    assert asked == [(("secrets",), "key-1")] * 2
    assert ctx.karmada.replaced == [("Secret", "s")] * 2
    assert out["fields"]["encryption"]["rotation"]["phase"] == "Dropping"

    # still there: no Dropping, the keys named, the next pass rewrites again
    out, ctx, events, asked = pass_([["/registry/secrets/default/s"], ["/registry/secrets/default/s"]])
    got = out["fields"]["encryption"]
    assert got["rotation"]["phase"] == "Writing" and got["phase"] == "Failed" and "rewritten" not in got
    assert "/registry/secrets/default/s" in got["message"] and "key-1 stays" in got["message"]
    assert out["conditions"][0]["reason"] == "RewriteFailed"
    assert events[-1]["reason"] == "EncryptionRewriteFailed"
    assert not er.done(got, encryption.read(base64.b64encode(writing.encode()).decode()))


class Etcd:
    """etcd's keys and values as the check reads them (iter_prefix)."""

    def __init__(self, data):
        self.data, self.prefixes = data, []

    def iter_prefix(self, prefix, page=5000):
        self.prefixes.append(prefix)
        return [SimpleNamespace(key=k.encode(), value=v) for k, v in sorted(self.data.items()) if k.startswith(prefix)]


def test_the_check_reads_each_resources_prefixes_and_finds_values_under_the_key():
    etcd = Etcd({"/registry/secrets/a/s1": b"k8s:enc:secretbox:v1:key-1:xx",
                 "/registry/secrets/a/s2": b"k8s:enc:secretbox:v1:key-2:xx",
                 "/registry/configmaps/a/c": b"k8s:enc:secretbox:v1:key-1:yy",
                 "/registry/policy.karmada.io/propagationpolicies/a/p": b"k8s:enc:secretbox:v1:key-1:zz",
                 "/registry/pods/a/p": b"k8s:enc:secretbox:v1:key-1:not-listed"})
    left = er.stored_under(etcd, ["secrets", "propagationpolicies.policy.karmada.io"], "key-1")
    assert left == ["/registry/secrets/a/s1", "/registry/policy.karmada.io/propagationpolicies/a/p"]
    assert etcd.prefixes == ["/registry/secrets/", "/registry/propagationpolicies/",
                             "/registry/policy.karmada.io/propagationpolicies/"]
    assert er.stored_under(etcd, ["secrets"], "key-2") == ["/registry/secrets/a/s2"]
    assert er.etcd_root({"apiserver": {"args": ["--etcd-prefix=/karmada/", "--x=y"]}}) == "/karmada"
    assert er.etcd_root({"apiserver": {"args": []}}) == "/registry"


def test_the_rendered_karmada_apiserver_pod_carries_the_plugin_and_the_socket_volume():
    from karmada_operator.runtime import templates as role_templates

    plan = build_plan(kms_spec())
    objects = role_templates.render_objects(
        "karmada_deployment", ["apiserver.yaml.j2"],
        {"karmada_deployment_plan": plan, "karmada_deployment_apiserver_pki_hash": "h",
         "karmada_deployment_pki": {"hashes": {"apiserverSpec": "s"}}}, {})
    pod = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    (plugin,) = pod["initContainers"]
    assert (plugin["name"], plugin["restartPolicy"], plugin["imagePullPolicy"]) == ("kms-plugin", "Always",
                                                                                    "IfNotPresent")
    (apiserver,) = pod["containers"]
    assert {"name": "kms-socket", "mountPath": "/var/run/kmsplugin"} in apiserver["volumeMounts"]
    assert {"name": "kms-socket", "emptyDir": {}} in pod["volumes"]


def test_the_certificates_step_renders_the_kms_provider_the_plan_asks_for():
    """What the karmada_pki module receives (the plan's pki input) and writes: the KMS first
    (a second reading of the input once dropped provider and kms, so the configuration stayed
    secretbox while the plan added the sidecar)."""
    from karmada_operator.pki import pki

    def pki_input(plan):
        return {"namespace": "ns", "name": "k", "apiServer": plan["pki"]["api_server"], "etcd": plan["pki"]["etcd"]}

    result = pki.reconcile_pki(pki_input(build_plan(kms_spec(timeout="4s"))), existing={})
    kms, box, identity = providers(result.files[encryption.FILE])
    assert kms["kms"]["name"] == "vault" and kms["kms"]["timeout"] == "4s" and "secretbox" in box
    plain = pki.reconcile_pki(pki_input(build_plan({"metadata": {"name": "k", "namespace": "ns"}, "spec": {}})),
                              existing={})
    assert [next(iter(p)) for p in providers(plain.files[encryption.FILE])] == ["secretbox", "identity"]
