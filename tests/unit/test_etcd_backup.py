"""EtcdBackup logic without a cluster: the plan, the schedule (time zones, DST, macros, missed
ticks), the lease, the status, member choice, the streaming revision reader and the Job CLI."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import struct
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml

from karmada_operator.backup import job
from karmada_operator.backup import plan as eb_plan
from karmada_operator.backup import runner as eb_runner
from karmada_operator.backup import status as eb_status
from karmada_operator.etcd import lease as eb_lease
from karmada_operator.etcd.gateway import EtcdUnreachableError, Status
from karmada_operator.etcd.snapshots import EtcdSnapshotError, RevisionReader, _bolt_last_revision
from karmada_operator.kube import schedule as eb_schedule

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 3, 10, 12, 0, 30, tzinfo=UTC)


def karmada(**spec):
    cr = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())
    cr["metadata"]["uid"] = "kd-uid"
    cr["spec"].update(spec)
    return cr


def backup(**spec):
    cr = yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_etcdbackup.yaml").read_text())
    cr["metadata"].update({"uid": "bk-uid", "generation": 3})
    cr["spec"].update(spec)
    return cr


def utc(*args):
    return datetime(*args, tzinfo=UTC)


# --------------------------------------------------------------------------- plan


def test_plan_for_local_etcd_dials_each_member_with_the_etcd_healthcheck_client():
    kd = karmada()
    plan = eb_plan.backup_plan(backup(), kd, scheduled_time=utc(2026, 1, 1, 2, 0))
    name, ns = kd["metadata"]["name"], kd["metadata"]["namespace"]
    etcd = plan["etcd"]
    assert etcd["mode"] == "local"
    assert etcd["endpoints"] == [f"https://{name}-etcd-{i}.{name}-etcd.{ns}.svc.cluster.local:2379"
                                 for i in range(3)]
    assert etcd["tls"]["secretName"] == f"{name}-etcd-pki"
    assert {i["key"]: i["path"] for i in etcd["tls"]["items"]} == {
        "ca.crt": "ca.crt", "healthcheck-client.crt": "tls.crt", "healthcheck-client.key": "tls.key"}
    assert etcd["tls"]["cert"].startswith(etcd["tls"]["mountPath"])
    assert plan["snapshot"]["name"] == "nightly-20260101T020000Z.db"
    assert plan["snapshot"]["scheduledTime"] == "2026-01-01T02:00:00Z"
    assert plan["source"] == {"namespace": ns, "name": name, "uid": "kd-uid",
                              "karmadaVersion": kd["spec"].get("karmadaVersion") or "v1.18.2"}
    assert plan["retention"] == {"maxBackups": 7}
    assert plan["storage"] == {"type": "pvc", "spec": {"pvc": {"claimName": "etcd-backups", "subPath": "karmada"}},
                               "claimName": "etcd-backups", "mountPath": eb_plan.VOLUME_MOUNT}
    assert plan["lock"] == {"namespace": ns, "name": f"{name}-etcd-backup"}
    assert plan["jobName"] == "nightly-202601010200"
    json.dumps(plan)  # handed to the Job as JSON


def test_plan_reports_the_running_karmada_version_and_external_etcd_tls_secret():
    kd = karmada(etcd={"external": {"endpoints": ["https://etcd-a.example:2379", "https://etcd-b.example:2379"],
                                    "tlsSecretRef": {"name": "ext-etcd-tls"}}})
    kd["status"] = {"karmadaVersion": "v1.17.0"}
    plan = eb_plan.backup_plan(backup(), kd, now=NOW)
    assert plan["etcd"]["endpoints"] == ["https://etcd-a.example:2379", "https://etcd-b.example:2379"]
    assert plan["etcd"]["tls"]["secretName"] == "ext-etcd-tls"
    assert [i["key"] for i in plan["etcd"]["tls"]["items"]] == ["ca.crt", "tls.crt", "tls.key"]
    assert plan["source"]["karmadaVersion"] == "v1.17.0"
    assert plan["lock"]["name"].startswith(eb_lease.LEASE_PREFIX)
    # the same etcd, its endpoints in another order: the same lock
    kd2 = karmada(etcd={"external": {"endpoints": ["https://etcd-b.example:2379/", "https://ETCD-A.example:2379"],
                                     "tlsSecretRef": {"name": "x"}}})
    assert eb_plan.backup_plan(backup(), kd2, now=NOW)["lock"] == plan["lock"]


def test_plan_for_s3_names_the_secrets_to_mount_and_never_their_values():
    s3 = {"endpoint": "https://s3.example", "bucket": "bkt", "prefix": "karmada", "region": "eu-1",
          "credentialsSecretRef": {"name": "s3-creds"}, "caSecretRef": {"name": "s3-ca", "key": "bundle.pem"}}
    plan = eb_plan.backup_plan(backup(storage={"s3": s3}), karmada(), now=NOW)
    st = plan["storage"]
    assert st["type"] == "s3"
    assert st["spec"] == {"s3": {"endpoint": "https://s3.example", "bucket": "bkt", "prefix": "karmada",
                                 "region": "eu-1"}}
    assert st["credentials"]["secretName"] == "s3-creds"
    assert st["caBundle"] == {"secretName": "s3-ca", "items": [{"key": "bundle.pem", "path": "ca.crt"}],
                              "mountPath": eb_plan.S3_CA_DIR, "file": f"{eb_plan.S3_CA_DIR}/ca.crt"}


@pytest.mark.parametrize("change,field,reason", [
    ({"karmadaDeploymentRef": {"name": "other"}}, "spec.karmadaDeploymentRef.name", "KarmadaDeploymentNotFound"),
    ({"retention": {"maxBackups": 0}}, "spec.retention.maxBackups", "InvalidSpec"),
    ({"schedule": "61 * * * *"}, "spec.schedule", "InvalidSchedule"),
    ({"schedule": "@daily", "timeZone": "Mars/Olympus_Mons"}, "spec.timeZone", "InvalidTimeZone"),
    ({"storage": {"pvc": {"claimName": "c", "subPath": "../x"}}}, "spec.storage.pvc.subPath", "InvalidStoreConfig"),
    ({"storage": {}}, "spec.storage", "InvalidSpec"),
    ({"storage": {"s3": {"endpoint": "https://s3", "bucket": "b"}}}, "spec.storage.s3.credentialsSecretRef.name",
     "InvalidSpec"),
])
def test_plan_refuses_bad_input_naming_the_field_and_reason(change, field, reason):
    with pytest.raises(eb_plan.BackupPlanError) as err:
        eb_plan.backup_plan(backup(**change), karmada(), now=NOW)
    assert err.value.field == field
    assert err.value.reason == reason


def test_plan_without_the_karmada_deployment_or_while_it_is_deleted():
    with pytest.raises(eb_plan.BackupPlanError) as err:
        eb_plan.backup_plan(backup(), None, now=NOW)
    assert err.value.reason == "KarmadaDeploymentNotFound"
    assert "karmada-system/karmada not found" in str(err.value)
    kd = karmada()
    kd["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    with pytest.raises(eb_plan.BackupPlanError) as err:
        eb_plan.backup_plan(backup(), kd, now=NOW)
    assert err.value.reason == "KarmadaDeploymentDeleting"


def test_plan_surfaces_a_broken_karmada_deployment_as_its_own_reason():
    kd = karmada(etcd={"local": {"replicas": 2}})
    with pytest.raises(eb_plan.BackupPlanError) as err:
        eb_plan.backup_plan(backup(), kd, now=NOW)
    assert err.value.reason == "InvalidKarmadaDeployment"
    assert "spec.etcd.local.replicas" in err.value.field


def test_job_names_are_per_minute_and_fit_a_label():
    assert eb_plan.job_name("nightly", utc(2026, 5, 1, 3, 4, 59)) == "nightly-202605010304"
    # on demand: a retry within the same minute gets its own Job
    assert eb_plan.job_name("nightly", utc(2026, 5, 1, 3, 4, 59), seconds=True) == "nightly-20260501030459"
    assert len(eb_plan.job_name("b" * 63, utc(2026, 5, 1, 3, 4), seconds=True)) <= 63
    long = eb_plan.job_name("b" * 63, utc(2026, 5, 1, 3, 4))
    assert len(long) <= 63 and long.endswith("-202605010304")
    assert long != eb_plan.job_name("b" * 62 + "c", utc(2026, 5, 1, 3, 4))


# --------------------------------------------------------------------------- schedule


@pytest.mark.parametrize("cron,after,expected", [
    ("0 2 * * *", utc(2026, 1, 1, 1, 59), utc(2026, 1, 1, 2, 0)),
    ("0 2 * * *", utc(2026, 1, 1, 2, 0), utc(2026, 1, 2, 2, 0)),  # strictly after
    ("*/15 * * * *", utc(2026, 1, 1, 0, 14, 59), utc(2026, 1, 1, 0, 15)),
    ("5/20 * * * *", utc(2026, 1, 1, 0, 46), utc(2026, 1, 1, 1, 5)),  # 5,25,45
    ("0 0 1 */3 *", utc(2026, 2, 1), utc(2026, 4, 1)),  # quarterly
    ("0 9 * JAN-MAR mon-fri", utc(2026, 3, 31, 9, 0), utc(2027, 1, 1, 9, 0)),  # 2027-01-01 is a Friday
    ("0 0 13 * 5", utc(2026, 1, 1), utc(2026, 1, 2)),  # dom and dow both restricted: either (Fri 2 Jan)
    ("0 0 */2 * 5", utc(2026, 1, 1, 1), utc(2026, 1, 2)),  # a stepped * is restricted (robfig): OR
    ("0 0 * * 0", utc(2026, 1, 1), utc(2026, 1, 4)),  # Sunday only (dom is *: AND)
    ("0 0 29 2 *", utc(2026, 3, 1), utc(2028, 2, 29)),
    ("59 23 31 12 6", utc(2026, 1, 1), utc(2026, 12, 5, 23, 59)),  # in December: the 31st or a Saturday
    ("@hourly", utc(2026, 1, 1, 0, 30), utc(2026, 1, 1, 1)),
    ("@daily", utc(2026, 1, 1, 0, 30), utc(2026, 1, 2)),
    ("@midnight", utc(2026, 1, 1, 0, 30), utc(2026, 1, 2)),
    ("@weekly", utc(2026, 1, 1), utc(2026, 1, 4)),
    ("@monthly", utc(2026, 1, 15), utc(2026, 2, 1)),
    ("@yearly", utc(2026, 1, 15), utc(2027, 1, 1)),
    ("@annually", utc(2026, 1, 15), utc(2027, 1, 1)),
])
def test_next_run_in_utc(cron, after, expected):
    assert eb_schedule.next_run(cron, None, after) == expected


def test_next_run_of_a_schedule_that_never_fires_is_none():
    assert eb_schedule.next_run("0 0 30 2 *", "UTC", utc(2026, 1, 1)) is None


@pytest.mark.parametrize("bad", ["", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *",
                                 "* * * 13 *", "* * * * 7", "*/0 * * * *", "5-1 * * * *", "@every 1h",
                                 "a b c d e", "0 0 * JANUARY *"])
def test_parse_schedule_refuses_what_the_crd_refuses(bad):
    with pytest.raises(ValueError):
        eb_schedule.parse_schedule(bad)


def test_time_zone_wall_clock():
    # 02:00 in Berlin in winter is 01:00 UTC, in summer 00:00 UTC
    assert eb_schedule.next_run("0 2 * * *", "Europe/Berlin", utc(2026, 1, 10)) == utc(2026, 1, 10, 1)
    assert eb_schedule.next_run("0 2 * * *", "Europe/Berlin", utc(2026, 7, 10)) == utc(2026, 7, 11, 0)
    assert eb_schedule.next_run("30 9 * * *", "Asia/Kolkata", utc(2026, 1, 1)) == utc(2026, 1, 1, 4, 0)


def test_spring_forward_skips_the_missing_wall_time():
    # Europe/Berlin 2026-03-29: 02:00 -> 03:00; 02:30 does not exist that day
    assert eb_schedule.next_run("30 2 * * *", "Europe/Berlin", utc(2026, 3, 28, 12)) == utc(2026, 3, 30, 0, 30)
    # an hourly schedule goes from 01:00 CET straight to 03:00 CEST
    assert eb_schedule.next_run("0 * * * *", "Europe/Berlin", utc(2026, 3, 29, 0, 0)) == utc(2026, 3, 29, 1, 0)


def test_fall_back_runs_the_repeated_wall_time_once():
    # Europe/Berlin 2026-10-25: 03:00 CEST -> 02:00 CET; 02:30 happens twice
    first = eb_schedule.next_run("30 2 * * *", "Europe/Berlin", utc(2026, 10, 24, 12))
    assert first == utc(2026, 10, 25, 0, 30)  # 02:30 CEST
    assert eb_schedule.next_run("30 2 * * *", "Europe/Berlin", first) == utc(2026, 10, 26, 1, 30)  # not 02:30 CET
    # every 30 minutes across the change: the repeated hour is not run twice
    ticks, t = [], utc(2026, 10, 24, 23, 59)
    for _ in range(5):
        t = eb_schedule.next_run("*/30 * * * *", "Europe/Berlin", t)
        ticks.append(t.astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M%z"))
    assert ticks == ["02:00+0200", "02:30+0200", "03:00+0100", "03:30+0100", "04:00+0100"]
    # asked from inside the second 02:xx, the next tick is still after it
    second = datetime(2026, 10, 25, 2, 40, tzinfo=ZoneInfo("Europe/Berlin"), fold=1)
    assert eb_schedule.next_run("*/30 * * * *", "Europe/Berlin", second) == utc(2026, 10, 25, 2, 0)


CRONS = ["0 2 * * *", "*/15 0-6,22-23/2 1,15 JAN-MAR mon-fri", "59 23 31 12 6", "5/10 * * * SUN", "@weekly",
         "@annually", "0 0 1 */3 *", "60 * * * *", "0 24 * * *", "0 0 0 * *", "0 0 32 * *", "0 0 1 13 *",
         "0 0 * * 7", "0 0 * JANUARY *", "*/0 * * * *", "0 0 * * * *", "@every 1h", "a b c d e", "@reboot"]


@pytest.mark.parametrize("cron", CRONS)
def test_the_evaluator_accepts_exactly_what_the_crd_accepts(cron):
    crd_accepts = bool(re.fullmatch(crd_schema().CRON, cron))
    try:
        eb_schedule.parse_schedule(cron)
        ours = True
    except ValueError:
        ours = False
    assert ours == crd_accepts


def test_time_zone_pattern_is_the_crds():
    assert f"^{eb_schedule.TIME_ZONE_PATTERN}$" == crd_schema().TIME_ZONE


def test_zone_names():
    assert eb_schedule.zone("") == ZoneInfo("UTC")
    assert eb_schedule.zone("America/Argentina/Buenos_Aires") == ZoneInfo("America/Argentina/Buenos_Aires")
    for bad in ("Local/../../etc/passwd", "/etc/localtime", "Nowhere/City"):
        with pytest.raises(ValueError):
            eb_schedule.zone(bad)


def test_a_new_schedule_waits_for_its_first_tick():
    created = utc(2026, 1, 1, 1, 30)
    d = eb_schedule.due("0 2 * * *", None, None, utc(2026, 1, 1, 1, 45), created=created)
    assert not d.run and d.next_time == utc(2026, 1, 1, 2)
    d = eb_schedule.due("0 2 * * *", None, None, utc(2026, 1, 1, 2, 0, 5), created=created)
    assert d.run and d.scheduled_time == utc(2026, 1, 1, 2) and d.missed == 0
    assert d.next_time == utc(2026, 1, 2, 2)


def test_missed_ticks_run_once_for_the_latest():
    last = utc(2026, 1, 1, 2)
    now = utc(2026, 1, 4, 9)  # the operator was down for three days
    d = eb_schedule.due("0 2 * * *", None, last, now)
    assert d.run and d.scheduled_time == utc(2026, 1, 4, 2) and d.missed == 2
    assert d.next_time == utc(2026, 1, 5, 2)
    # after that run lastScheduleTime is the tick: nothing more is due
    assert not eb_schedule.due("0 2 * * *", None, d.scheduled_time, now).run


def test_every_minute_after_a_week_down_is_cheap_and_runs_once():
    started = time.monotonic()
    d = eb_schedule.due("* * * * *", None, utc(2026, 1, 1), utc(2026, 1, 8, 0, 0, 30))
    assert time.monotonic() - started < 2
    assert d.run and d.scheduled_time == utc(2026, 1, 8) and d.missed == 1000  # counted up to 1000


def test_suspend_and_starting_deadline():
    last, now = utc(2026, 1, 1, 2), utc(2026, 1, 2, 5)
    d = eb_schedule.due("0 2 * * *", None, last, now, suspend=True)
    assert not d.run and d.next_time == utc(2026, 1, 3, 2)
    d = eb_schedule.due("0 2 * * *", None, last, now, starting_deadline=timedelta(hours=1))
    assert not d.run and d.too_late and d.scheduled_time == utc(2026, 1, 2, 2)
    assert eb_schedule.due("0 2 * * *", None, last, now, starting_deadline=timedelta(hours=4)).run


def test_due_in_a_time_zone_across_spring_forward():
    # 02:30 Berlin is skipped on 2026-03-29: no run that day, the next is 30 March
    last = utc(2026, 3, 28, 1, 30)
    assert not eb_schedule.due("30 2 * * *", "Europe/Berlin", last, utc(2026, 3, 29, 12)).run
    d = eb_schedule.due("30 2 * * *", "Europe/Berlin", last, utc(2026, 3, 30, 0, 31))
    assert d.run and d.scheduled_time == utc(2026, 3, 30, 0, 30)


# --------------------------------------------------------------------------- lease


def test_lease_decisions():
    holder = "karmada-system/nightly/nightly-202601010200"
    now = utc(2026, 1, 1, 2)
    assert eb_lease.lease_decision(None, holder, now).action == "create"
    assert eb_lease.lease_decision({"spec": {}}, holder, now).action == "take"
    mine = {"spec": eb_lease.lease_spec(holder, now, 600)}
    assert eb_lease.lease_decision(mine, holder, now).action == "renew"
    other = {"spec": eb_lease.lease_spec("karmada-system/hourly/hourly-202601010200", now, 600)}
    d = eb_lease.lease_decision(other, holder, now + timedelta(seconds=599))
    assert d.action == "wait" and not d.acquired and d.expires == now + timedelta(seconds=600)
    assert eb_lease.lease_decision(other, holder, now + timedelta(seconds=600)).action == "take"


def test_lease_spec_counts_transitions_and_release_only_frees_our_own():
    holder, other = "ns/a/job-1", "ns/b/job-2"
    t0 = utc(2026, 1, 1)
    first = {"spec": eb_lease.lease_spec(holder, t0)}
    assert first["spec"]["leaseTransitions"] == 0 and first["spec"]["leaseDurationSeconds"] == 3600
    assert first["spec"]["renewTime"] == "2026-01-01T00:00:00.000000Z"
    renewed = {"spec": eb_lease.lease_spec(holder, t0 + timedelta(minutes=5), previous=first)}
    assert renewed["spec"]["acquireTime"] == first["spec"]["acquireTime"]
    assert renewed["spec"]["leaseTransitions"] == 0
    taken = eb_lease.lease_spec(other, t0 + timedelta(hours=2), previous=renewed)
    assert taken["leaseTransitions"] == 1 and taken["holderIdentity"] == other
    assert eb_lease.lease_release(renewed, other) is None
    assert eb_lease.lease_release(renewed, holder)["holderIdentity"] is None


def test_lease_holder_names_the_backup_and_the_job():
    plan = eb_plan.backup_plan(backup(), karmada(), scheduled_time=utc(2026, 1, 1, 2))
    assert eb_lease.lease_holder(plan) == "karmada-system/nightly/nightly-202601010200"


# --------------------------------------------------------------------------- member choice


def status(endpoint, member, applied, leader=1, learner=False, errors=()):
    return Status(endpoint, 7, member, "3.6.6", 0, 0, leader, applied, 2, applied, 100, learner, tuple(errors))


def test_choose_member_prefers_the_most_recent_healthy_voter_and_spares_the_leader():
    a = status("https://a:2379", 1, 100)  # leader
    b = status("https://b:2379", 2, 100)
    c = status("https://c:2379", 3, 99)
    assert eb_runner.choose_member([a, b, c]).endpoint == "https://b:2379"
    assert eb_runner.choose_member([a, c]).endpoint == "https://a:2379"
    learner = status("https://d:2379", 4, 200, learner=True)
    alarmed = status("https://e:2379", 5, 300, errors=["memberID:5 alarm:NOSPACE"])
    assert eb_runner.choose_member([learner, alarmed, c]).endpoint == "https://c:2379"


def test_choose_member_without_a_healthy_one_says_why():
    with pytest.raises(eb_runner.BackupFailed) as err:
        eb_runner.choose_member([EtcdUnreachableError("cannot connect to etcd at https://a:2379"),
                          status("https://b:2379", 2, 5, leader=0, errors=["etcdserver: no leader"])])
    assert err.value.reason == "EtcdUnavailable"
    assert "https://a:2379" in str(err.value) and "no leader" in str(err.value)


# --------------------------------------------------------------------------- status


def result_line(name="nightly-20260101T020000Z.db", kept=None, deleted=(), retention_error=""):
    snap = {"name": name, "location": f"pvc://etcd-backups/karmada/{name}", "sizeBytes": 20512,
            "sha256": "a" * 64, "revision": 42, "etcdVersion": "3.6.6", "karmadaVersion": "v1.18.2",
            "takenAt": "2026-01-01T02:00:01Z", "durationSeconds": 1.5, "endpoint": "https://m-1:2379"}
    older = {**snap, "name": "nightly-20251231T020000Z.db", "takenAt": "2025-12-31T02:00:01Z", "revision": 40}
    del older["durationSeconds"], older["endpoint"]
    kept = kept if kept is not None else [older, {k: v for k, v in snap.items()
                                                  if k not in ("durationSeconds", "endpoint")}]
    return {"ok": True, "snapshot": snap, "kept": kept, "deleted": list(deleted),
            "retentionError": retention_error, "retentionReason": "StoreAccessDenied" if retention_error else ""}


def test_status_after_success():
    now = utc(2026, 1, 1, 2, 0, 3)
    st = eb_status.status_after({"phase": "Running"}, result_line(deleted=["nightly-20251230T020000Z.db"]), now,
                         generation=3, schedule="0 2 * * *", scheduled_time=utc(2026, 1, 1, 2))
    assert st["phase"] == "Succeeded"
    assert st["lastScheduleTime"] == "2026-01-01T02:00:00Z"
    assert st["nextScheduleTime"] == "2026-01-02T02:00:00Z"
    assert st["lastSuccessfulTime"] == "2026-01-01T02:00:03Z"
    last = st["lastSuccessfulBackup"]
    assert last["name"] == "nightly-20260101T020000Z.db" and last["revision"] == 42 and last["sizeBytes"] == 20512
    assert last["durationSeconds"] == 1.5 and last["endpoint"] == "https://m-1:2379"
    assert [s["name"] for s in st["snapshots"]] == ["nightly-20260101T020000Z.db", "nightly-20251231T020000Z.db"]
    assert st["snapshots"][0]["durationSeconds"] == 1.5 and "durationSeconds" not in st["snapshots"][1]
    ready = {c["type"]: c for c in st["conditions"]}
    assert ready["Ready"]["status"] == "True" and ready["Ready"]["reason"] == "BackupSucceeded"
    assert "retention deleted nightly-20251230T020000Z.db" in ready["Ready"]["message"]
    assert ready["RetentionApplied"]["status"] == "True"
    assert st["observedGeneration"] == 3


def test_status_after_a_retention_error_keeps_the_backup_good():
    st = eb_status.status_after({}, result_line(retention_error="s3://b: deleting: AccessDenied"), NOW)
    conds = {c["type"]: c for c in st["conditions"]}
    assert st["phase"] == "Succeeded" and conds["Ready"]["status"] == "True"
    assert conds["RetentionApplied"]["status"] == "False"
    assert conds["RetentionApplied"]["reason"] == "StoreAccessDenied"


def test_status_after_failure_keeps_the_last_success_and_names_the_reason():
    before = eb_status.status_after({}, result_line(), NOW)
    failed = eb_status.status_after(before, None, NOW + timedelta(days=1), generation=4,
                             error=eb_runner.BackupFailed("no healthy etcd member", "EtcdUnavailable"))
    assert failed["phase"] == "Failed"
    assert failed["lastSuccessfulBackup"] == before["lastSuccessfulBackup"]
    assert failed["snapshots"] == before["snapshots"]
    ready = next(c for c in failed["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "EtcdUnavailable"
    assert ready["message"] == "no healthy etcd member"
    # a Job's failure line works the same
    job_failed = eb_status.status_after(before, None, NOW, error={"ok": False, "reason": "StoreUnreachable",
                                                         "message": "s3://b at https://x: unreachable"})
    assert next(c for c in job_failed["conditions"] if c["type"] == "Ready")["reason"] == "StoreUnreachable"
    plan_failed = eb_status.status_after(
        {}, None, NOW, error=eb_plan.BackupPlanError("spec.x", "bad", "KarmadaDeploymentNotFound"))
    assert next(c for c in plan_failed["conditions"] if c["type"] == "Ready")["reason"] == "KarmadaDeploymentNotFound"


def test_status_while_running_and_next_schedule_time_rules():
    st = eb_status.status_after({"nextScheduleTime": "x"}, None, NOW, running=True, schedule="@hourly",
                         time_zone="Europe/Berlin", scheduled_time=utc(2026, 3, 10, 12))
    assert st["phase"] == "Running" and st["nextScheduleTime"] == "2026-03-10T13:00:00Z"
    assert next(c for c in st["conditions"] if c["type"] == "Ready")["status"] == "Unknown"
    assert "nextScheduleTime" not in eb_status.status_after(st, None, NOW, schedule="@hourly", suspend=True)
    assert "nextScheduleTime" not in eb_status.status_after(st, None, NOW)  # on-demand


def crd_schema():
    spec = importlib.util.spec_from_file_location("crdgen_schema", ROOT / "hack/crdgen/schema.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_status_items_match_the_crd_schema():
    import jsonschema

    st = eb_status.status_after({}, result_line(), NOW, generation=1, schedule="@daily", scheduled_time=NOW)
    jsonschema.validate(st, crd_schema().etcd_backup_status())


# --------------------------------------------------------------------------- streaming revision

PS = 4096


def _page(pgid, flags, elements, overflow=0, kind="leaf"):
    """A bbolt page: header, element headers, then keys/values (positions relative to each element)."""
    count = len(elements)
    head = struct.pack("<QHHI", pgid, flags, count, overflow)
    data_start = 16 + 16 * count
    body, elems = b"", b""
    for i, el in enumerate(elements):
        pos = data_start + len(body) - (16 + 16 * i)
        if kind == "leaf":
            eflags, key, value = el
            elems += struct.pack("<IIII", eflags, pos, len(key), len(value))
            body += key + value
        else:
            key, child = el
            elems += struct.pack("<IIQ", pos, len(key), child)
            body += key
    raw = head + elems + body
    size = PS * (overflow + 1)
    assert len(raw) <= size, (len(raw), size)
    return raw + b"\0" * (size - len(raw))


def _meta(pgid, root, txid):
    body = struct.pack("<IIII5Q", 0xED0CDAED, 2, PS, 0, root, 0, 2, 20, txid)
    raw = struct.pack("<QHHI", pgid, 0x04, 0, 0) + body
    return raw + b"\0" * (PS - len(raw))


def rev_key(main, sub=0):
    return struct.pack(">Q", main) + b"_" + struct.pack(">Q", sub)


def _bucket(root, inline=b""):
    return struct.pack("<QQ", root, 0) + inline


def synthetic_db():
    """Pages: 0/1 meta (1 is older, pointing at a stale root), 2 freelist, 3 root bucket leaf,
    4 a stale leaf whose header claims an overflow over live page 5, 5 the key bucket's
    branch, 6 a leaf, 7+8 a leaf with overflow (big values), 9 a stale leaf with revision 999,
    10 a stale root leaf whose key bucket points at 9."""
    pages = [
        _meta(0, 3, 7),
        _meta(1, 10, 6),
        struct.pack("<QHHI", 2, 0x10, 0, 0) + b"\0" * (PS - 16),
        _page(3, 0x02, [(1, b"alarm", _bucket(0, _page(0, 0x02, [])[:16])), (1, b"key", _bucket(5)),
                        (1, b"meta", _bucket(0, _page(0, 0x02, [])[:16]))]),
        _page(4, 0x02, [(1, b"key", _bucket(9))], overflow=1)[:PS],  # stale: its "overflow" page is live
        _page(5, 0x01, [(rev_key(1), 6), (rev_key(50), 7)], kind="branch"),
        _page(6, 0x02, [(0, rev_key(i), b"v" * 40) for i in range(1, 11)]),
        _page(7, 0x02, [(0, rev_key(50 + i), b"x" * 2500) for i in range(3)], overflow=1),
        _page(9, 0x02, [(0, rev_key(999), b"old")]),
        _page(10, 0x02, [(1, b"key", _bucket(9))]),
    ]
    return b"".join(pages)


def test_revision_reader_agrees_with_the_file_reader_in_any_chunking():
    db = synthetic_db()
    assert len(db) == 11 * PS
    assert _bolt_last_revision(db) == 52
    for chunk in (1, 7, 31, 512, 4095, 4096, 10000, len(db)):
        reader = RevisionReader()
        for i in range(0, len(db), chunk):
            reader.feed(db[i:i + chunk])
        assert reader.revision() == 52, chunk


def test_revision_reader_with_an_inline_key_bucket_and_an_empty_one():
    inline = _page(0, 0x02, [(0, rev_key(i), b"v") for i in (1, 2, 3)])[:16 + 16 * 3 + 3 * 18]
    db = _meta(0, 2, 3) + _meta(1, 2, 2) + _page(2, 0x02, [(1, b"key", _bucket(0, inline))])
    reader = RevisionReader()
    reader.feed(db)
    assert reader.revision() == 3 == _bolt_last_revision(db)
    empty = _meta(0, 2, 3) + _meta(1, 2, 2) + _page(2, 0x02, [(1, b"key", _bucket(3))]) + _page(3, 0x02, [])
    reader = RevisionReader()
    reader.feed(empty)
    assert reader.revision() == 0


def test_revision_reader_refuses_what_is_not_an_etcd_database():
    reader = RevisionReader()
    reader.feed(b"not a database" * 1000)
    with pytest.raises(EtcdSnapshotError, match="not a bbolt database"):
        reader.revision()
    no_key = _meta(0, 2, 3) + _meta(1, 2, 2) + _page(2, 0x02, [(1, b"meta", _bucket(3))])
    reader = RevisionReader()
    reader.feed(no_key)
    with pytest.raises(EtcdSnapshotError, match="no 'key' bucket"):
        reader.revision()
    cut = synthetic_db()[: 6 * PS]  # the key bucket's leaves never arrived
    reader = RevisionReader()
    reader.feed(cut)
    with pytest.raises(EtcdSnapshotError, match="was not in the stream"):
        reader.revision()


# --------------------------------------------------------------------------- the Job's CLI


def run_cli(argv, env):
    out = io.StringIO()
    code = job.main(argv, env, out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    return code, json.loads(lines[0])


def test_cli_without_a_plan_says_so(tmp_path):
    code, doc = run_cli([], {})
    assert code == job.EXIT_INVALID and doc == {"ok": False, "reason": "InvalidPlan",
                                                "message": doc["message"]}
    assert "ETCD_BACKUP_PLAN" in doc["message"]
    code, doc = run_cli([], {"ETCD_BACKUP_PLAN": json.dumps({"format": 99})})
    assert code == job.EXIT_INVALID and doc["reason"] == "InvalidPlan"


def test_cli_with_missing_tls_files_and_missing_s3_credentials(tmp_path):
    plan = eb_plan.backup_plan(backup(), karmada(), now=NOW)
    plan["storage"]["mountPath"] = str(tmp_path)
    code, doc = run_cli([], {"ETCD_BACKUP_PLAN": json.dumps(plan)})
    assert code == job.EXIT_INVALID and doc["reason"] == "InvalidEtcdClientConfig"
    s3 = {"endpoint": "https://s3.example", "bucket": "bkt", "credentialsSecretRef": {"name": "s3-creds"}}
    plan = eb_plan.backup_plan(backup(storage={"s3": s3}), karmada(), now=NOW)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    code, doc = run_cli(["--plan", str(path)], {})
    assert code == job.EXIT_INVALID and doc["reason"] == "InvalidStoreConfig"
    assert "AWS_ACCESS_KEY_ID" in doc["message"]


def test_cli_reads_s3_credentials_from_mounted_files_before_the_environment(tmp_path):
    (tmp_path / "accessKeyID").write_text("AKFILE\n")
    (tmp_path / "secretAccessKey").write_text("secret-from-file\n")
    plan = {"storage": {"credentials": {"mountPath": str(tmp_path)}}}
    creds = job.credentials(plan, {"AWS_ACCESS_KEY_ID": "AKENV", "AWS_SECRET_ACCESS_KEY": "s"})
    assert creds.access_key_id == "AKFILE" and creds.secret_access_key == "secret-from-file"
    creds = job.credentials({"storage": {"credentials": {"mountPath": str(tmp_path / "no")}}},
                            {"AWS_ACCESS_KEY_ID": "AKENV", "AWS_SECRET_ACCESS_KEY": "s"})
    assert creds.access_key_id == "AKENV"
    assert "AKENV" not in repr(creds) and "secret-from-file" not in repr(job.credentials(plan, {}))


def slow_writer(tmp_path: Path, pieces: int, pause: float, rc: int = 0) -> str:
    """Stands in for etcdctl: writes ``<path>.part`` in pieces with pauses, then renames it."""
    script = tmp_path / "slow-etcdctl"
    script.write_text(f"""#!/bin/sh
for a; do out="$a"; done
i=0
while [ $i -lt {pieces} ]; do printf 'piece%03d;' $i >> "$out.part"; i=$((i+1)); sleep {pause}; done
[ {rc} -eq 0 ] || {{ echo "gave up at piece $i" >&2; rm -f "$out.part"; exit {rc}; }}
mv "$out.part" "$out"
""")
    script.chmod(0o755)
    return str(script)


def test_follow_hands_over_bytes_while_etcdctl_still_writes(tmp_path):
    from karmada_operator.etcd.snapshots import EtcdctlFollow

    follow = EtcdctlFollow(slow_writer(tmp_path, 4, 0.3), "https://127.0.0.1:2379", tmp_path / "snap.db",
                           cacert="ca", cert="c", key="k", poll=0.01)
    started, arrivals, data = time.monotonic(), [], b""
    for blob in follow:
        arrivals.append(time.monotonic() - started)
        data += blob
    assert data == b"".join(b"piece%03d;" % i for i in range(4))
    assert (tmp_path / "snap.db").read_bytes() == data and not (tmp_path / "snap.db.part").exists()
    # the first bytes came long before the writer finished (4 pieces 0.3 s apart)
    assert len(arrivals) >= 3 and arrivals[0] < follow.seconds - 0.5, (arrivals, follow.seconds)


def test_follow_raises_with_etcdctls_last_line_when_it_fails(tmp_path):
    from karmada_operator.etcd.snapshots import EtcdctlFollow

    follow = EtcdctlFollow(slow_writer(tmp_path, 2, 0.05, rc=3), "https://127.0.0.1:2379", tmp_path / "snap.db",
                           cacert="ca", cert="c", key="k", poll=0.01)
    with pytest.raises(EtcdSnapshotError, match="gave up at piece 2"):
        b"".join(follow)
    assert list(tmp_path.glob("snap.db*")) == []
