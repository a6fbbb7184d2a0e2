"""The install plan derived from a KarmadaDeployment."""

from pathlib import Path

import pytest
import yaml

from karmada_operator.plan import plan as kp

ROOT = Path(__file__).resolve().parents[2]


def sample():
    return yaml.safe_load((ROOT / "config/samples/operator_v1alpha1_karmadadeployment.yaml").read_text())


def comp(plan, key):
    return next(c for c in plan["components"] if c["key"] == key)


def test_sample_plan_names_images_and_etcd_topology():
    plan = kp.build_plan(sample())
    assert plan["names"]["apiserver"] == "karmada-apiserver"
    assert plan["etcd"]["members"] == ["karmada-etcd-0", "karmada-etcd-1", "karmada-etcd-2"]
    assert plan["etcd"]["initialCluster"].split(",")[1] == (
        "karmada-etcd-1=https://karmada-etcd-1.karmada-etcd.karmada-system.svc.cluster.local:2380")
    assert plan["apiserver"]["image"] == "registry.k8s.io/kube-apiserver:v1.34.12"
    assert comp(plan, "scheduler")["image"] == "docker.io/karmada/karmada-scheduler:v1.18.2"
    assert comp(plan, "kubeControllerManager")["image"] == "registry.k8s.io/kube-controller-manager:v1.34.12"
    assert plan["endpoints"]["kubeconfigServer"] == "https://karmada.example.com:443"
    assert plan["endpoints"]["inCluster"] == "https://karmada-apiserver.karmada-system.svc.cluster.local:5443"
    # Optional components are off unless enabled.
    assert plan["enabledComponents"] == ["karmada-aggregated-apiserver", "karmada-kube-controller-manager",
                                         "karmada-controller-manager", "karmada-scheduler", "karmada-webhook"]


def test_flags_feature_gates_and_extra_args_win():
    cr = sample()
    cr["spec"]["globals"]["featureGates"] = {"Failover": False, "GracefulEviction": True}
    cr["spec"]["components"]["controllerManager"]["extraArgs"] = {"v": "4", "concurrent-work-syncs": "10"}
    cm = comp(kp.build_plan(cr), "controllerManager")
    assert "--feature-gates=Failover=true,GracefulEviction=true" in cm["args"]  # component wins over globals
    assert "--v=4" in cm["args"] and "--v=2" not in cm["args"]
    assert "--concurrent-work-syncs=10" in cm["args"]
    assert cm["args"] == sorted(cm["args"])


def test_global_feature_gates_reach_karmada_binaries_only():
    cr = sample()
    cr["spec"]["globals"]["featureGates"] = {"Failover": True}
    cr["spec"]["apiServer"]["featureGates"] = {"APIServerTracing": True}
    plan = kp.build_plan(cr)
    for key in ("scheduler", "webhook", "aggregatedAPIServer", "controllerManager"):
        assert any(a.startswith("--feature-gates=") and "Failover=true" in a for a in comp(plan, key)["args"]), key
    # kube-apiserver and kube-controller-manager would refuse to start on a Karmada gate
    assert "--feature-gates=APIServerTracing=true" in plan["apiserver"]["args"]
    assert not any("Failover" in a for a in plan["apiserver"]["args"])
    assert not any(a.startswith("--feature-gates") for a in comp(plan, "kubeControllerManager")["args"])


def test_image_overrides_and_pull_settings():
    cr = sample()
    cr["spec"]["images"] = {"karmadaRegistry": "mirror.example/karmada", "kubernetesRegistry": "mirror.example/k8s",
                            "pullPolicy": "Always", "pullSecrets": [{"name": "regcred"}]}
    cr["spec"]["components"]["webhook"] = {"image": {"tag": "v1.18.1-patched"}, "replicas": 2}
    plan = kp.build_plan(cr)
    wh = comp(plan, "webhook")
    assert wh["image"] == "mirror.example/karmada/karmada-webhook:v1.18.1-patched"
    assert wh["version"] == "v1.18.1-patched"
    assert wh["pod"]["replicas"] == 2
    assert wh["pod"]["imagePullPolicy"] == "Always"
    assert wh["pod"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert plan["etcd"]["image"] == "mirror.example/k8s/etcd:3.6.6-0"


def test_a_digest_pins_the_image_and_the_tag_is_ignored():
    digest = "sha256:" + "ab" * 32
    cr = sample()
    cr["spec"]["components"]["scheduler"] = {"image": {"registry": "reg:5000/mirror", "tag": "v1.18.1",
                                                       "digest": digest}}
    cr["spec"]["apiServer"]["image"] = {"digest": digest}
    cr["spec"]["etcd"]["local"]["image"] = {"repository": "etcd-fips", "digest": digest}
    plan = kp.build_plan(cr)
    sched = comp(plan, "scheduler")
    assert sched["image"] == f"reg:5000/mirror/karmada-scheduler@{digest}"
    assert sched["version"] == digest  # what status compares with the running image's reference
    assert plan["apiserver"]["image"] == f"registry.k8s.io/kube-apiserver@{digest}"
    assert plan["etcd"]["image"] == f"registry.k8s.io/etcd-fips@{digest}"
    # without a digest the tag still applies
    assert comp(plan, "webhook")["image"] == "docker.io/karmada/karmada-webhook:v1.18.2"


def test_globals_merge_with_component_settings():
    cr = sample()
    cr["spec"]["globals"].update({"nodeSelector": {"zone": "a", "tier": "cp"},
                                  "tolerations": [{"key": "cp", "operator": "Exists"}]})
    cr["spec"]["components"]["scheduler"] = {"nodeSelector": {"zone": "b"},
                                             "tolerations": [{"key": "x", "operator": "Exists"}]}
    pod = comp(kp.build_plan(cr), "scheduler")["pod"]
    assert pod["nodeSelector"] == {"zone": "b", "tier": "cp"}
    assert [t["key"] for t in pod["tolerations"]] == ["cp", "x"]


def test_external_etcd_points_apiserver_at_the_endpoints():
    cr = sample()
    cr["spec"]["etcd"] = {"external": {"endpoints": ["https://e1:2379", "https://e2:2379"],
                                       "tlsSecretRef": {"name": "ext-etcd"}}}
    plan = kp.build_plan(cr)
    assert plan["etcd"]["mode"] == "external" and plan["etcd"]["members"] == []
    args = plan["apiserver"]["args"]
    assert "--etcd-servers=https://e1:2379,https://e2:2379" in args
    assert "--etcd-cafile=/etc/kubernetes/pki/external-etcd/ca.crt" in args


def test_without_balancer_kubeconfigs_use_the_service():
    cr = sample()
    del cr["spec"]["apiServer"]["externalLoadBalancer"]
    plan = kp.build_plan(cr)
    assert plan["endpoints"]["kubeconfigServer"] == plan["endpoints"]["inCluster"]
    assert plan["endpoints"]["external"] == []


@pytest.mark.parametrize("change,field", [
    (lambda s: s["etcd"].update({"external": {"endpoints": ["https://e:2379"], "tlsSecretRef": {"name": "x"}}}),
     "spec.etcd"),
    (lambda s: s["etcd"]["local"].update({"replicas": 4}), "spec.etcd.local.replicas"),
    (lambda s: s["apiServer"].update({"extraArgs": {"authorization-mode": "AlwaysAllow"}}),
     "spec.apiServer.extraArgs"),
    (lambda s: s["etcd"]["local"].update({"extraArgs": {"client-cert-auth": "false"}}),
     "spec.etcd.local.extraArgs"),
    (lambda s: s["components"].update({"webhook": {"extraArgs": {"cert-dir": "/tmp"}}}),
     "spec.components.webhook.extraArgs"),
])
def test_problems_name_the_field(change, field):
    cr = sample()
    change(cr["spec"])
    with pytest.raises(kp.PlanError) as err:
        kp.build_plan(cr)
    assert err.value.field == field


def test_every_closed_arg_is_refused_and_named():
    from karmada_operator.components import closed_args

    for key, closed in closed_args().items():
        for flag in closed:
            cr = sample()
            if key == "etcd":
                target, field = cr["spec"]["etcd"]["local"], "spec.etcd.local.extraArgs"
            elif key == "apiServer":
                target, field = cr["spec"]["apiServer"], "spec.apiServer.extraArgs"
            else:
                target = cr["spec"]["components"].setdefault(key, {})
                field = f"spec.components.{key}.extraArgs"
            target["extraArgs"] = {"v": "4", flag: "x"}
            with pytest.raises(kp.PlanError) as err:
                kp.build_plan(cr)
            assert err.value.field == field and flag in err.value.message, (key, flag)


def test_config_hash_is_stable_and_sensitive():
    assert kp.config_hash({"a": 1, "b": 2}) == kp.config_hash({"b": 2, "a": 1})
    assert kp.config_hash({"a": 1}) != kp.config_hash({"a": 2})


def test_pki_input_is_accepted_by_the_pki_module():
    from karmada_operator.pki import pki as karmada_pki

    plan = kp.build_plan(sample())
    params = plan["pki"]
    spec = karmada_pki.parse_spec({
        "namespace": params["namespace"], "name": params["name"], "clusterDomain": params["cluster_domain"],
        "etcd": params["etcd"], "apiServer": params["api_server"], "certificates": params["certificates"],
        "servingServices": params["serving_services"], "components": params["components"]})
    # every member etcd can grow to, so scaling never re-issues the etcd certificates
    assert plan["etcd"]["members"] == ["karmada-etcd-0", "karmada-etcd-1", "karmada-etcd-2"]
    assert spec.etcd_members == tuple(f"karmada-etcd-{i}" for i in range(7))
    assert plan["etcd"]["allMemberEndpoints"][:3] == plan["etcd"]["memberEndpoints"]
    assert spec.admin_server_url == plan["endpoints"]["kubeconfigServer"]
    assert spec.component_server_url == plan["endpoints"]["inCluster"]
    assert "karmada-descheduler" not in spec.components


def test_search_and_metrics_adapter_serve_aggregated_apis_while_enabled():
    cr = sample()
    plan = kp.build_plan(cr)
    assert {a["name"]: a["present"] for a in plan["apiServices"]} == {
        "v1alpha1.cluster.karmada.io": True, "v1alpha1.search.karmada.io": False, "v1beta1.metrics.k8s.io": False,
        "v1beta1.custom.metrics.k8s.io": False, "v1beta2.custom.metrics.k8s.io": False}
    assert "karmada-search" not in plan["pki"]["components"]

    cr["spec"]["components"]["search"] = {"enabled": True}
    cr["spec"]["components"]["metricsAdapter"] = {"enabled": True, "replicas": 2}
    plan = kp.build_plan(cr)
    search, adapter = comp(plan, "search"), comp(plan, "metricsAdapter")
    assert {a["service"] for a in plan["apiServices"] if a["present"]} == {
        "karmada-aggregated-apiserver", "karmada-search", "karmada-metrics-adapter"}
    assert {"karmada-search", "karmada-metrics-adapter"} <= set(plan["pki"]["components"])
    assert plan["pki"]["serving_services"]["karmada-search"] == search["service"] == "karmada-search"
    # search keeps its ResourceRegistries in etcd: etcd client flags and files, like the aggregated apiserver
    assert "--etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt" in search["args"]
    assert search["mounts"]["etcd"] == ["ca.crt"]
    assert "--tls-cert-file=/etc/kubernetes/pki/karmada-search.crt" in search["args"]
    assert not [a for a in adapter["args"] if a.startswith("--etcd")]
    assert adapter["pkiFiles"] == ["ca.crt", "karmada-metrics-adapter.crt", "karmada-metrics-adapter.key"]
    assert adapter["pod"]["replicas"] == 2


def test_external_etcd_clients_mount_no_operator_etcd_files():
    cr = sample()
    cr["spec"]["etcd"] = {"external": {"endpoints": ["https://etcd.example.test:2379"],
                                       "tlsSecretRef": {"name": "ext-etcd"}}}
    plan = kp.build_plan(cr)
    agg = comp(plan, "aggregatedAPIServer")
    assert agg["mounts"]["etcd"] == [] and "apiserver-etcd-client.crt" not in agg["pkiFiles"]
    assert "apiserver-etcd-client.key" not in plan["apiserver"]["pkiFiles"]


def test_mounts_hash_follows_only_the_keys_a_pod_reads():
    groups = {"pki": {"ca.crt": "CA", "karmada-search.crt": "S1", "karmada-webhook.crt": "W"},
              "kubeconfig": {"karmada-search.conf": "K"}, "etcd": {"ca.crt": "E"}}
    mounts = {"pki": ["ca.crt", "karmada-search.crt"], "kubeconfig": ["karmada-search.conf"], "etcd": []}
    before = kp.mounts_hash(groups, mounts)
    groups["pki"]["karmada-webhook.crt"] = "W2"  # another pod's certificate
    assert kp.mounts_hash(groups, mounts) == before
    groups["pki"]["karmada-search.crt"] = "S2"  # its own
    assert kp.mounts_hash(groups, mounts) != before
    with pytest.raises(KeyError, match="karmada-search.key"):
        kp.mounts_hash(groups, {"pki": ["karmada-search.key"]})


def test_control_plane_hash_ignores_members_pause_and_deletion_policy_only():
    base = kp.build_plan(sample())["controlPlaneHash"]
    assert len(base) == 16
    for change in ({"members": []}, {"paused": True}, {"deletionPolicy": "Retain"},
                   {"members": [{"name": "m9", "kubeconfigSecretRef": {"name": "m9"}}]}):
        cr = sample()
        cr["spec"].update(change)
        assert kp.build_plan(cr)["controlPlaneHash"] == base, change
    for path, value in ((("etcd", "local", "replicas"), 5), (("karmadaVersion",), "v1.18.1"),
                        (("apiServer", "replicas"), 2)):
        cr = sample()
        node = cr["spec"]
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        assert kp.build_plan(cr)["controlPlaneHash"] != base, path


def test_etcd_gets_a_cpu_request_unless_the_spec_gives_resources():
    """An etcd with no request is BestEffort: the lowest CPU weight on the node, starved by any
    busy pod (measured: a backup Job halved its snapshot rate). The default is kubeadm's."""
    bare = sample()
    del bare["spec"]["etcd"]["local"]["resources"]  # the sample asks for some
    plan = kp.build_plan(bare)
    assert plan["etcd"]["pod"]["resources"] == {"requests": {"cpu": "100m", "memory": "100Mi"}}
    cr = sample()
    cr["spec"]["etcd"]["local"]["resources"] = {"requests": {"cpu": "2"}, "limits": {"memory": "8Gi"}}
    assert kp.build_plan(cr)["etcd"]["pod"]["resources"] == {"requests": {"cpu": "2"}, "limits": {"memory": "8Gi"}}
    # The default is a copy: a plan's change does not leak into the next plan.
    plan["etcd"]["pod"]["resources"]["requests"]["cpu"] = "9"
    assert kp.build_plan(bare)["etcd"]["pod"]["resources"]["requests"]["cpu"] == "100m"


def test_strategy_components_moves_only_the_listed_components():
    cr = sample()
    cr["spec"]["karmadaVersion"] = "v1.18.2"
    cr["status"] = {"karmadaVersion": "v1.17.1", "components": [
        {"name": "karmada-scheduler", "version": "v1.17.1"},
        {"name": "karmada-controller-manager", "version": "v1.17.1"},
        {"name": "karmada-webhook", "version": "v1.17.1,v1.18.2"},  # mid-rollout: not held
        {"name": "kube-controller-manager", "version": "v1.34.12"},
        {"name": "karmada-aggregated-apiserver", "version": "v1.17.1"}]}
    # Full (the default): everything moves
    assert comp(kp.build_plan(cr), "scheduler")["image"].endswith(":v1.18.2")
    cr["spec"]["upgrade"] = {"strategy": "Components", "components": ["scheduler"]}
    plan = kp.build_plan(cr)
    assert comp(plan, "scheduler")["image"].endswith(":v1.18.2")
    assert comp(plan, "controllerManager")["image"].endswith(":v1.17.1")
    assert comp(plan, "controllerManager")["version"] == "v1.17.1"
    assert comp(plan, "aggregatedAPIServer")["image"].endswith(":v1.17.1")
    assert comp(plan, "webhook")["image"].endswith(":v1.18.2")
    assert comp(plan, "kubeControllerManager")["image"].endswith(":v1.34.12")
    # an install (no status) takes the version for everything
    del cr["status"]
    assert comp(kp.build_plan(cr), "controllerManager")["image"].endswith(":v1.18.2")


def test_apiserver_restarts_only_for_what_it_reads_once():
    plan = kp.build_plan(sample())
    api = plan["apiserver"]
    # kube-apiserver reloads its serving pair, client CAs, front-proxy client pair and etcd client pair;
    # it reads the service-account keys and the encryption configuration once
    assert api["restartMounts"] == {"pki": ["sa.key", "sa.pub", "encryption-config.json"], "etcd": ["ca.crt"],
                                    "kubeconfig": []}
    groups = {"pki": {f: "x" for f in api["pkiFiles"]}, "etcd": {"ca.crt": "E"}, "kubeconfig": {}}
    before = kp.mounts_hash(groups, api["restartMounts"])
    for renewed in ("apiserver.crt", "apiserver-etcd-client.key", "front-proxy-client.crt", "ca.crt"):
        groups["pki"][renewed] = "renewed"
    assert kp.mounts_hash(groups, api["restartMounts"]) == before
    groups["etcd"]["ca.crt"] = "E2"
    assert kp.mounts_hash(groups, api["restartMounts"]) != before
    groups["etcd"]["ca.crt"] = "E"
    groups["pki"]["encryption-config.json"] = "a new key"
    assert kp.mounts_hash(groups, api["restartMounts"]) != before
    # etcd members restart only for a new etcd CA
    assert plan["pki"]["etcd_restart_mounts"] == {"etcd": ["ca.crt"]}


def test_force_renew_reaches_the_pki_module():
    cr = sample()
    assert kp.build_plan(cr)["pki"]["force_renew"] == []
    cr["spec"].setdefault("certificates", {})["forceRenew"] = {"issuedBefore": "2026-12-02T08:00:00Z"}
    pki = kp.build_plan(cr)["pki"]
    assert pki["force_renew"] == ["leaves"] and pki["force_renew_issued_before"] == "2026-12-02T08:00:00Z"
    assert "forceRenew" not in pki["certificates"]
    cr["spec"]["certificates"]["forceRenew"]["certificates"] = ["apiserver", "admin"]
    assert kp.build_plan(cr)["pki"]["force_renew"] == ["apiserver", "admin"]


def test_each_rolled_component_is_checked_through_karmada_apiserver():
    """The leader-election Lease the controllers take (the names Karmada uses, as seen in a
    running karmada-apiserver), the webhook's admission; none where leader election is off."""
    cr = sample()
    plan = kp.build_plan(cr)
    assert comp(plan, "controllerManager")["gate"]["lease"] == "karmada-system/karmada-controller-manager"
    assert comp(plan, "scheduler")["gate"]["lease"] == "karmada-system/karmada-scheduler"
    assert comp(plan, "kubeControllerManager")["gate"]["lease"] == "kube-system/kube-controller-manager"
    assert comp(plan, "webhook")["gate"]["admission"]["kind"] == "PropagationPolicy"
    assert comp(plan, "aggregatedAPIServer")["gate"] == {"lease": "", "admission": {}}
    cr["spec"]["components"]["scheduler"] = {"extraArgs": {"leader-elect-resource-namespace": "elsewhere"}}
    cr["spec"]["components"]["controllerManager"]["extraArgs"] = {"leader-elect": "false"}
    plan = kp.build_plan(cr)
    assert comp(plan, "scheduler")["gate"]["lease"] == "elsewhere/karmada-scheduler"
    assert comp(plan, "controllerManager")["gate"]["lease"] == ""
