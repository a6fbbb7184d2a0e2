"""Turn what the host cluster reports into the KarmadaDeployment's status fields."""

from __future__ import annotations

from typing import Any

from karmada_operator.kube import pod_security


def image_tag(image: str) -> str:
    """The tag of an image reference, or its digest when it is pinned by one (as the plan pins it)."""
    if "@" in image:
        return image.split("@", 1)[1]
    tail = image.rsplit("/", 1)[-1]
    return tail.split(":", 1)[1] if ":" in tail else ""


def observed_version(pods: list[dict[str, Any]], container: str) -> str:
    """The version the ready pods of a component run, read from their container statuses (what
    the runtime started, not the spec): one tag, or the tags joined with "," while pods of two
    versions serve (mid-rollout); "" when no pod is ready. Pods being deleted do not count."""
    tags: set[str] = set()
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            if cs.get("name") == container and cs.get("ready"):
                tags.add(image_tag(str(cs.get("image") or "")))
    return ",".join(sorted(tags))


def component_status(deployments: list[dict[str, Any]], plan: dict[str, Any],
                     pods: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """status.components: one entry per workload the plan names, with the version its ready
    pods run (``pods``: the control plane's pods; without them, the Deployment's template)."""
    by_name = {d["metadata"]["name"]: d for d in deployments}
    wanted = [(plan["apiserver"]["name"], plan["apiserver"]["version"], "karmada-apiserver", "kube-apiserver")]
    wanted += [(c["name"], c["version"], c["component"], c["component"]) for c in plan["components"] if c["enabled"]]
    out = []
    for name, desired, component, container in wanted:
        dep = by_name.get(name) or {}
        containers = (((dep.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        status = dep.get("status") or {}
        if pods is not None:
            mine = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(
                "app.kubernetes.io/name") == component]
            version = observed_version(mine, container)
        else:
            version = image_tag(containers[0]["image"]) if containers else ""
        out.append({
            "name": component,
            "version": version,
            "desiredVersion": desired,
            "replicas": int((dep.get("spec") or {}).get("replicas") or 0),
            "readyReplicas": int(status.get("readyReplicas") or 0),
        })
    return out


def _pod_ready(pod: dict[str, Any]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def etcd_status(pods: list[dict[str, Any]], plan: dict[str, Any],
                health: dict[str, Any] | None = None) -> dict[str, Any]:
    """status.etcd: endpoints and members (those etcd reports when ``health`` lists them, else the
    plan's); member details from etcd_health when given. Their database sizes come from the
    defragmentation step's report (etcd/defragmentation.py: sizes), written only when they moved
    enough: a full pass that changes nothing writes nothing.
    """
    etcd = plan["etcd"]
    members_health = {m.get("name"): m for m in (health or {}).get("members") or []}
    members = []
    pods_by_name = {p["metadata"]["name"]: p for p in pods}
    # the members etcd reports (a scale in progress has more or fewer than the plan's); the plan's
    # when etcd could not be asked
    names = sorted((n for n in members_health if n), key=lambda n: (len(n), n)) or list(etcd.get("members") or [])
    for name in names:
        h = members_health.get(name) or {}
        entry: dict[str, Any] = {
            "name": name,
            "healthy": bool(h.get("healthy", _pod_ready(pods_by_name.get(name) or {}))),
            "leader": bool(h.get("leader", False)),
            "learner": bool(h.get("learner", False)),
        }
        if h.get("id"):
            entry["id"] = h["id"]
        if h.get("version"):
            entry["version"] = h["version"]
        members.append(entry)
    out: dict[str, Any] = {"endpoints": list(etcd.get("endpoints") or []), "members": members}
    if etcd.get("mode") == "local":
        etcd_pods = [p for p in pods if (p.get("metadata") or {}).get("name") in set(names)
                     and not (p.get("metadata") or {}).get("deletionTimestamp")]
        observed_user = pod_security.run_as_observed(etcd_pods)
        if observed_user:
            out["runAs"] = observed_user
    return out


def certificates_condition(certificates: list[dict[str, Any]]) -> dict[str, Any]:
    """The CertificatesValid condition after the PKI step: how many, and which expires first.

    ``certificates``: the PKI step's metadata (name, notAfter as RFC 3339 UTC, which sorts).
    Every one is valid here (the step renews what is inside its window and fails otherwise).
    """
    if not certificates:
        return {"type": "CertificatesValid", "status": "True", "reason": "Issued", "message": "no certificates"}
    soonest = min(certificates, key=lambda c: (str(c.get("notAfter")), str(c.get("name"))))
    return {"type": "CertificatesValid", "status": "True", "reason": "Issued",
            "message": f"{len(certificates)} certificates valid; the soonest to expire is {soonest.get('name')} "
                       f"at {soonest.get('notAfter')}"}


def merge_reports(status: dict[str, Any], reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The Running status with the day-2 operations' reports of this pass merged in
    (plan/operations.py): their fields (a list of named entries merged entry by entry, e.g. the
    etcd members' sizes read after a defragmentation) and their conditions."""

    def merge(base: Any, extra: Any) -> Any:
        if isinstance(base, dict) and isinstance(extra, dict):
            return {**base, **{k: merge(base.get(k), v) for k, v in extra.items()}}
        if (isinstance(base, list) and isinstance(extra, list)
                and all(isinstance(e, dict) and e.get("name") for e in base + extra)):
            fresh = {e["name"]: e for e in extra}
            return [merge(e, fresh[e["name"]]) if e["name"] in fresh else e for e in base]
        return extra

    out = {**status, "fields": dict(status["fields"]), "conditions": list(status["conditions"])}
    for report in reports:
        out["fields"] = merge(out["fields"], report.get("fields") or {})
        out["conditions"][-1:-1] = list(report.get("conditions") or [])  # Ready stays last
    return out


def running_status(deployments: list[dict[str, Any]], pods: list[dict[str, Any]], plan: dict[str, Any],
                   certificates: list[dict[str, Any]], etcd_health: dict[str, Any] | None = None,
                   reports: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What the status step writes once every gate passed: phase Running, the fields (the version
    its pods run per component, etcd's members, endpoints, certificate expiry) and the
    conditions, as the status writer takes them (``{phase, fields, conditions, event}``).

    ``deployments``/``pods``: the control plane's, read back now; ``certificates``: the
    certificates step's metadata; ``etcd_health``: the quorum gate's report; ``reports``: the
    day-2 operations' reports of this pass (:func:`merge_reports`; the EtcdReady message names the
    last member replacement etcd scaling's reports, status.etcdScaling.lastReplacement)."""
    etcd = plan["etcd"]
    last_replacement = next((str(r["fields"]["etcdScaling"].get("lastReplacement") or "")
                             for r in reports or [] if "etcdScaling" in (r.get("fields") or {})), "")
    serving = f"Karmada {plan['karmadaVersion']} is serving"
    if etcd["mode"] == "local":
        etcd_message = f"{etcd['replicas']}/{etcd['replicas']} members ready" + (
            f"; last replacement: {last_replacement}" if last_replacement else "")
    else:
        etcd_message = "using " + ",".join(etcd["endpoints"])
    return merge_reports({
        "phase": "Running",
        "event": {"reason": "Running", "message": serving},
        "fields": {
            "karmadaVersion": plan["karmadaVersion"],
            "components": component_status(deployments, plan, pods),
            "etcd": etcd_status(pods, plan, etcd_health or {}),
            "apiServerEndpoints": list(plan["endpoints"]["external"]) + [plan["endpoints"]["inCluster"]],
            "adminKubeconfigSecret": plan["names"]["adminKubeconfigSecret"],
            "controlPlaneHash": plan["controlPlaneHash"],
            "certificates": [pick(c, ["name", "notAfter"]) for c in certificates],
        },
        "conditions": [
            certificates_condition(certificates),
            {"type": "EtcdReady", "status": "True",
             "reason": "QuorumReady" if etcd["mode"] == "local" else "ExternalEtcd", "message": etcd_message},
            {"type": "ControlPlaneReady", "status": "True", "reason": "AllComponentsReady",
             "message": f"karmada-apiserver and {len(plan['enabledComponents'])} components ready"},
            {"type": "Ready", "status": "True", "reason": "Running", "message": serving},
        ],
    }, reports or [])


def pick(data: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    return {k: data[k] for k in keys if k in data}


def _item_name(result: dict[str, Any]) -> str:
    item = result.get(result.get("ansible_loop_var") or "item")
    if isinstance(item, dict):
        return str(item.get("name") or item.get("key") or item)
    return str(item)


def _item_detail(result: dict[str, Any]) -> str:
    """Why one loop item failed: its message, or what a wait last saw of its object."""
    resources = result.get("resources")
    if resources:
        status = resources[0].get("status") or {}
        spec = resources[0].get("spec") or {}
        if "replicas" in spec:
            return (f"{int(status.get('readyReplicas') or 0)}/{int(spec.get('replicas') or 0)} replicas ready "
                    f"after {result.get('attempts', 1)} checks")
    if resources == []:
        return "not found"
    msg = str(result.get("msg") or "").strip()
    return msg.splitlines()[-1] if msg else "failed"


# Container states that do not clear up by waiting: a step that times out names them.
STUCK_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CrashLoopBackOff",
                 "CreateContainerConfigError", "CreateContainerError", "RunContainerError")


def _owner(pod: dict[str, Any]) -> str:
    """The workload a pod belongs to: its app.kubernetes.io/name label, else its name."""
    meta = pod.get("metadata") or {}
    return str((meta.get("labels") or {}).get("app.kubernetes.io/name") or meta.get("name") or "?")


def pod_problems(pods: list[dict[str, Any]], limit: int = 5) -> list[str]:
    """Why pods of the control plane do not become ready, one line per workload, worst first.

    "karmada-controller-manager: ImagePullBackOff pulling docker.io/karmada/x:v0 (pod x-5d9-abc)";
    an unschedulable pod says why the scheduler refused it. Pods being deleted are skipped.
    """
    seen: dict[str, str] = {}
    for pod in sorted(pods or [], key=lambda p: str((p.get("metadata") or {}).get("name"))):
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        if meta.get("deletionTimestamp") or _owner(pod) in seen:
            continue
        problem = ""
        containers = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
        for c in containers:
            waiting = (c.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in STUCK_REASONS:
                what = f"pulling {c.get('image')}" if "Image" in waiting["reason"] else f"container {c.get('name')}"
                last = ((c.get("lastState") or {}).get("terminated") or {})
                detail = waiting.get("message") or (f"last exit {last.get('exitCode')} ({last.get('reason')})"
                                                    if last else "")
                problem = f"{waiting['reason']} {what}" + (f": {detail[:300]}" if detail else "")
                break
        if not problem:
            for cond in status.get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                    problem = f"unschedulable: {str(cond.get('message') or cond.get('reason'))[:300]}"
        if problem:
            seen[_owner(pod)] = f"{_owner(pod)}: {problem} (pod {meta.get('name')})"
    return list(seen.values())[:limit]


def failure_message(task: str, result: dict[str, Any], limit: int = 2000,
                    pods: list[dict[str, Any]] | None = None) -> str:
    """The Ready condition's message for a failed step: the task and what failed in it.

    A failed loop names its failed items ("karmada-search: 0/1 replicas ready after 120
    checks") instead of Ansible's "One or more items failed". ``pods``: the control plane's
    pods; those stuck (image pull, crash loop, unschedulable) are named with the cause.
    """
    failed = [r for r in result.get("results") or [] if isinstance(r, dict) and r.get("failed")]
    if failed:
        detail = "; ".join(f"{_item_name(r)}: {_item_detail(r)}" for r in failed)
    else:
        msg = result.get("msg") or ""
        if not msg and result.get("exception"):
            lines = [line for line in str(result["exception"]).splitlines() if line.strip()]
            msg = lines[-1] if lines else ""
        detail = str(msg or "failed")
    text = f"{task or 'a step'}: {detail}"
    problems = pod_problems(pods or [])
    if problems:
        text += "; " + "; ".join(problems)
    return text if len(text) <= limit else text[: limit - 3] + "..."
