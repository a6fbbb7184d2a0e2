"""OpenAPI v3 schemas of the operator's three CRDs, written once as Python data.

`hack/crdgen/generate.py` renders them into config/crd/bases/*.yaml (as controller-gen
renders Go types for Go operators). Every field carries a description; validation that
OpenAPI cannot express is a CEL rule (x-kubernetes-validations) with a message that
names the field. `make generate` rewrites the YAML; `make lint` fails when it is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# The component registry, the default versions and the closed flags live with the operator's
# code (one home); this file runs standalone (hack/crdgen/generate.py), so it finds them by path.
_MODULE_UTILS = str(Path(__file__).resolve().parents[2] / "plugins" / "module_utils")
if _MODULE_UTILS not in sys.path:
    sys.path.insert(0, _MODULE_UTILS)
from karmada_operator import components as registry
from karmada_operator.backup import plan as eb_plan
from karmada_operator.etcd import defragmentation
from karmada_operator.etcd import space as etcd_space
from karmada_operator.kube import ownership
from karmada_operator.pki import encryption as karmada_encryption
from karmada_operator.pki import pki
from karmada_operator.plan import audit as karmada_audit
from karmada_operator.plan import plan as karmada_plan

DURATION = pki.DURATION_PATTERN

GROUP = "operator.karmada.io"
VERSION = "v1alpha1"

Schema = dict[str, Any]

SEMVER = r"^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# A DNS name for a certificate SAN: subdomain, optionally with one leading wildcard label.
SAN_DNS = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
QUANTITY = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
            r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
_IMAGE_PATH_PART = r"[a-z0-9]+([._-][a-z0-9]+)*"
# A registry (host, optional :port, optional path) and a repository: no tag, no digest.
IMAGE_REGISTRY = rf"^{_IMAGE_PATH_PART}(:[0-9]{{1,5}})?(/{_IMAGE_PATH_PART})*$"
IMAGE_REPOSITORY = rf"^{_IMAGE_PATH_PART}(/{_IMAGE_PATH_PART})*$"
TAG = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
DIGEST = r"^sha256:[a-f0-9]{64}$"

# Kubernetes label syntax (k8s.io/apimachinery validation.IsQualifiedName / IsValidLabelValue):
# key = optional DNS-subdomain prefix (at most 253) + "/" + name (at most 63); value at most 63.
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LABEL_KEY = rf"^({DNS1123_SUBDOMAIN[1:-1]}/)?{_LABEL_NAME}$"
LABEL_KEY_PREFIX_SIZE = r"^([^/]{1,253}/)?[^/]+$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
# Labels the operator sets on everything it makes and selects its objects by.
RESERVED_LABELS = [ownership.INSTANCE_LABEL, "app.kubernetes.io/name", ownership.MANAGED_BY_LABEL,
                   ownership.OWNER_UID_LABEL]

# Host directories etcd's HostPath storage may not use: the directory and everything below it...
SYSTEM_SUBTREES = ["proc", "sys", "dev", "etc", "boot", "run", "var/run", "bin", "sbin", "lib", "lib64", "usr"]
# ...and these only as such (data under /var/lib or /root/... is fine).
SYSTEM_EXACT = ["", "root", "var"]
HOSTPATH_SYSTEM = (r"^/+((" + "|".join(d.replace("/", "/+") for d in SYSTEM_SUBTREES) + r")(/.*)?"
                   r"|(" + "|".join(d for d in SYSTEM_EXACT if d) + r")/*)?$")
# A "." or ".." path segment.
DOT_SEGMENT = r"(^|/)\.\.?(/|$)"
DOTDOT_SEGMENT = r"(^|/)\.\.(/|$)"


def _cron_field(value: str, names: list[str] | None = None) -> str:
    """One cron field: *, a value, a-b, each optionally /step, comma-separated."""
    atom = f"({value}|{'|'.join(names)})" if names else f"({value})"
    item = rf"(\*|{atom}(-{atom})?)(/[1-9][0-9]?)?"
    return rf"{item}(,{item})*"


_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
CRON_FIELDS = [
    _cron_field(r"[0-5]?[0-9]"),                                     # minute 0-59
    _cron_field(r"[01]?[0-9]|2[0-3]"),                               # hour 0-23
    _cron_field(r"0?[1-9]|[12][0-9]|3[01]"),                         # day of month 1-31
    _cron_field(r"0?[1-9]|1[0-2]", _MONTHS + [m.lower() for m in _MONTHS]),  # month 1-12, JAN-DEC
    # day of week 0-6 (0: Sunday): 7 is refused by the cron parser of Kubernetes CronJobs (robfig/cron).
    _cron_field(r"[0-6]", _DAYS + [d.lower() for d in _DAYS]),
]
CRON_MACROS = ["yearly", "annually", "monthly", "weekly", "daily", "midnight", "hourly"]
# An IANA time zone name (Europe/Berlin, America/Argentina/Buenos_Aires, Etc/GMT+5, UTC).
TIME_ZONE = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$"
CRON = r"^(@(" + "|".join(CRON_MACROS) + r")|" + r"\s+".join(f"({f})" for f in CRON_FIELDS) + r")$"



def upgradable() -> list[str]:
    """What spec.upgrade.components may list: etcd, the apiserver and every registry component."""
    return ["etcd", "apiServer", *(c.key for c in registry.components())]


def s(description: str, type_: str = "string", **kw: Any) -> Schema:
    """A leaf schema with a description."""
    out: Schema = {"type": type_, "description": description}
    out.update(kw)
    return out


def obj(description: str, properties: Schema, required: list[str] | None = None, **kw: Any) -> Schema:
    out: Schema = {"type": "object", "description": description, "properties": properties}
    if required:
        out["required"] = required
    out.update(kw)
    return out


def arr(description: str, items: Schema, **kw: Any) -> Schema:
    out: Schema = {"type": "array", "description": description, "items": items}
    out.update(kw)
    return out


def string_map(description: str, max_props: int = 64) -> Schema:
    return {
        "type": "object",
        "description": description,
        "maxProperties": max_props,
        "additionalProperties": {"type": "string", "maxLength": 4096},
    }


def cel(rule: str, message: str, **kw: Any) -> Schema:
    out: Schema = {"rule": rule, "message": message}
    out.update(kw)
    return out


def local_ref(what: str) -> Schema:
    return obj(
        f"Reference to {what} in the same namespace.",
        {"name": s("Name of the object.", minLength=1, maxLength=253, pattern=DNS1123_SUBDOMAIN)},
        required=["name"],
    )


def secret_key_ref(what: str, default_key: str) -> Schema:
    return obj(
        f"Secret (same namespace) holding {what}.",
        {
            "name": s("Name of the Secret.", minLength=1, maxLength=253, pattern=DNS1123_SUBDOMAIN),
            "key": s(f"Key inside the Secret (default {default_key}).", default=default_key,
                     minLength=1, maxLength=253, pattern=r"^[-._a-zA-Z0-9]+$"),
        },
        required=["name"],
    )


def quantity_or_int(description: str) -> Schema:
    return {
        "description": description,
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY,
        "maxLength": 64,  # bounds the cost estimate of the rule below
        "x-kubernetes-validations": [
            cel("!isQuantity(string(self)) || sign(quantity(string(self))) >= 0",
                "a quantity must not be negative"),
        ],
    }


def describe_resources(res: dict[str, dict[str, str]]) -> str:
    """A resources default in words: "requests cpu 100m, memory 100Mi, no limits"."""
    parts = [f"{kind} " + ", ".join(f"{k} {v}" for k, v in amounts.items()) for kind, amounts in res.items()]
    return "; ".join(parts + ([] if "limits" in res else ["no limits"]))


def resources() -> Schema:
    qmap = {
        "type": "object",
        "maxProperties": 16,
        "additionalProperties": quantity_or_int("Amount, as a Kubernetes quantity (e.g. 500m, 1Gi)."),
    }

    def q(field: str) -> str:
        return f"quantity(string(self.{field}[k]))"

    return obj(
        "Compute resources (requests and limits), as in a container spec.",
        {
            "requests": {**qmap, "description": "Minimum resources guaranteed to the container."},
            "limits": {**qmap, "description": "Maximum resources the container may use."},
        },
        **{"x-kubernetes-validations": [
            cel("!has(self.limits) || !has(self.requests) || self.requests.all(k, !(k in self.limits) || "
                "!isQuantity(string(self.requests[k])) || !isQuantity(string(self.limits[k])) || "
                f"{q('requests')}.compareTo({q('limits')}) <= 0)",
                "resources.requests must not exceed resources.limits of the same resource",
                fieldPath=".requests"),
        ]},
    )


def tolerations(description: str) -> Schema:
    return arr(
        description,
        obj(
            "A toleration, as in a pod spec.",
            {
                "key": s("Taint key the toleration applies to; empty matches all keys.", maxLength=316),
                "operator": s("Exists or Equal (default Equal).", enum=["Exists", "Equal"]),
                "value": s("Taint value to match with operator Equal.", maxLength=63),
                "effect": s("Taint effect to match; empty matches all.",
                            enum=["NoSchedule", "PreferNoSchedule", "NoExecute"]),
                "tolerationSeconds": s("How long a NoExecute taint is tolerated.", "integer", minimum=0),
            },
        ),
        maxItems=32,
    )


def affinity() -> Schema:
    term = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    return obj(
        "Pod affinity rules, as in a pod spec (validated by the API server when the operator "
        "applies the workload).",
        {
            "nodeAffinity": {**term, "description": "Node affinity, as in a pod spec."},
            "podAffinity": {**term, "description": "Pod affinity, as in a pod spec."},
            "podAntiAffinity": {**term, "description": "Pod anti-affinity, as in a pod spec."},
        },
    )


def image_registry(description: str, field: str, **kw: Any) -> Schema:
    """A registry (host[:port][/path]); a tag or digest in it is refused with a message naming the field."""
    return s(description, maxLength=255, pattern=IMAGE_REGISTRY, **kw, **{"x-kubernetes-validations": [
        cel(r"!self.contains('@') && !self.matches(r'/.*:|:([0-9]*[^0-9/]|/|$)')",
            f"{field} must not contain a tag or digest (':' only before a port number, no '@'); "
            "set image.tag or image.digest instead"),
    ]})


def image_override() -> Schema:
    return obj(
        "Image override; unset parts come from spec.images and the component's default.",
        {
            "registry": image_registry("Registry and path prefix, e.g. registry.example.com/karmada.",
                                       "image.registry"),
            "repository": s("Repository name under the registry, e.g. karmada-scheduler.",
                            maxLength=255, pattern=IMAGE_REPOSITORY, **{"x-kubernetes-validations": [
                                cel("!self.contains(':') && !self.contains('@')",
                                    "image.repository must not contain ':' or '@'; "
                                    "set image.tag or image.digest instead"),
                            ]}),
            "tag": s(f"Image tag, e.g. {registry.DEFAULT_KARMADA_VERSION}.", pattern=TAG),
            "digest": s("Image digest (sha256:<64 hex digits>); when set the image is pulled by digest "
                        "and tag is ignored.", pattern=DIGEST),
        },
    )


def feature_gates(description: str) -> Schema:
    return {
        "type": "object",
        "description": description,
        "maxProperties": 64,
        "additionalProperties": {"type": "boolean"},
        "x-kubernetes-validations": [
            cel("self.all(k, k.matches('^[A-Z][A-Za-z0-9]*$'))",
                "feature gate names are CamelCase, e.g. Failover"),
        ],
    }


def extra_args() -> Schema:
    out = string_map("Extra command-line flags, name (without leading dashes) to value; they win over "
                     "the operator's defaults.")
    out["x-kubernetes-validations"] = [
        cel("self.all(k, k.matches('^[a-z0-9][a-z0-9-]*$'))",
            "extraArgs keys are flag names without leading dashes, e.g. v or kube-api-qps"),
    ]
    return out


def close_args(props: Schema, field: str, closed: dict[str, str]) -> None:
    """Refuse the flags in ``closed`` (karmada_components.closed_args()) in props' extraArgs."""
    flags = sorted(closed)
    listed = "[" + ", ".join(f"'{f}'" for f in flags) + "]"
    tail = ": the operator sets these itself (see docs/karmadadeployment.md, extraArgs the operator refuses)"
    props["extraArgs"]["x-kubernetes-validations"].append(cel(
        f"!self.exists(k, k in {listed})", f"{field}.extraArgs must not set {', '.join(flags)}{tail}"))


def positive_size(schema: Schema, field: str) -> Schema:
    """A volume size (quantity_or_int) that must be above zero."""
    rule = cel("!isQuantity(string(self)) || sign(quantity(string(self))) > 0",
               f"{field} must be greater than zero: a volume of size 0 holds no data")
    return {**schema, "x-kubernetes-validations": [*schema["x-kubernetes-validations"], rule]}


def bucket_name_rule(field: str) -> Schema:
    """What S3's bucket naming rules refuse beyond the pattern: '..', '.-', '-.' and an IP address."""
    return cel("!self.contains('..') && !self.contains('.-') && !self.contains('-.') && "
               "!self.matches('^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$')",
               f"{field} must be an S3 bucket name: no '..', '.-' or '-.', and not an IP address")


def label_map(description: str, field: str, reserved: list[str] | None = None) -> Schema:
    """Kubernetes labels: keys and values checked as the API server checks them on objects."""
    out = string_map(description)
    out["additionalProperties"] = {"type": "string", "maxLength": 63, "pattern": LABEL_VALUE}
    rules = [cel(f"self.all(k, k.matches(r'{LABEL_KEY}') && k.matches(r'{LABEL_KEY_PREFIX_SIZE}'))",
                 f"{field} keys must be label keys: an optional DNS subdomain prefix (at most 253 "
                 "characters) and '/', then a name of at most 63 letters, digits, '-', '_' or '.' "
                 "that starts and ends with a letter or digit")]
    if reserved:
        rules.append(cel(
            "!self.exists(k, k in [" + ", ".join(f"'{r}'" for r in reserved) + "])",
            f"{field} must not set {', '.join(reserved)}: the operator sets them and selects its objects by them"))
    out["x-kubernetes-validations"] = rules
    return out


def common_component_props(requests: dict[str, str], max_replicas: int = 100) -> Schema:
    return {
        "replicas": s("Number of pods.", "integer", minimum=0, maximum=max_replicas),
        "image": image_override(),
        "resources": {**resources(), "description": (
            "Compute resources of its container (default: "
            f"{describe_resources({'requests': requests})}, what it used on the operator's test bed: "
            "docs/performance.md#sizing). Set, it replaces the default whole.")},
        "nodeSelector": string_map("Node labels the pods must match."),
        "tolerations": tolerations("Taints the pods tolerate."),
        "affinity": affinity(),
        "priorityClassName": s("PriorityClass of the pods.", maxLength=253, pattern=DNS1123_SUBDOMAIN),
        "extraArgs": extra_args(),
        "featureGates": feature_gates("Feature gates for this component, winning over spec.globals.featureGates (which "
                                      "karmada-apiserver and kube-controller-manager do not get)."),
    }


def component(comp: registry.Component) -> Schema:
    props = common_component_props(comp.requests)
    if comp.optional:
        props = {"enabled": s(f"Deploy {comp.description} (off by default).", "boolean", default=False), **props}
    out = obj(f"Settings of {comp.description}.", props)
    if not comp.installable:
        # Kept in the API for the work that will run it; refused until then rather than ignored.
        out["x-kubernetes-validations"] = [cel(
            "!has(self.enabled) || !self.enabled",
            f"{comp.description} is not installed by this operator version yet; leave enabled false",
            fieldPath=".enabled")]
    return out


def defragmentation_schema() -> Schema:
    d = defragmentation.DEFAULTS
    field = defragmentation.FIELD
    return obj(
        "Automatic defragmentation of the etcd members (docs/etcd.md): a member whose database is at least "
        "minDbSize with at least fragmentationPercent of it free pages is defragmented, one member per pass, "
        "followers first and the leader last, never while a member is unhealthy, a scale, an upgrade or a CA "
        "rotation is under way, or a backup of this etcd is running. Checked at every full pass (at least "
        "hourly), and on an optional schedule. status.etcdDefragmentation and the EtcdDefragmented condition "
        "report it.",
        {
            "policy": s("Auto (the default) defragments when due; Off never does.",
                        enum=list(defragmentation.POLICIES), default=d["policy"]),
            "fragmentationPercent": s("Percent of a member's database that must be free pages "
                                      "((dbSize - dbSizeInUse) / dbSize) for it to be due.", "integer",
                                      minimum=1, maximum=99, default=d["fragmentationPercent"]),
            "minDbSize": {**positive_size(quantity_or_int("Smallest database (bytes, or a quantity such as 100Mi) "
                                                          "worth defragmenting."), f"{field}.minDbSize"),
                          "default": d["minDbSize"]},
            "schedule": s("Also defragment every member on this cron schedule (5 fields, in timeZone, default "
                          "UTC; or @daily, @weekly...), whatever its fragmentation, in the same order and with "
                          "the same holds, one member per pass; whatever policy says. A tick missed while the "
                          "operator was down runs once; the first tick counts from when the schedule was set.",
                          maxLength=128,
                          pattern=r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|(\S+\s+){4}\S+)$",
                          **{"x-kubernetes-validations": [
                              cel(f"self.matches(r'{CRON}')",
                                  f"{field}.schedule must be @hourly, @daily, @midnight, @weekly, @monthly, "
                                  "@yearly, @annually or 5 cron fields: minute 0-59, hour 0-23, day of month 1-31, "
                                  "month 1-12 or JAN-DEC, day of week 0-6 or SUN-SAT; each *, a value, a-b, "
                                  "optionally /step, or a comma-separated list of those"),
                          ]}),
            "timeZone": s("IANA time zone the schedule is read in, e.g. Europe/Berlin (default UTC).",
                          minLength=1, maxLength=64, pattern=TIME_ZONE),
        },
        default={},
    )


def quota_schema() -> Schema:
    field = etcd_space.FIELD
    base = quantity_or_int(
        "etcd's space quota (--quota-backend-bytes; bytes, or a quantity such as 4Gi), 16Mi to 8Gi, at most half "
        "of storage.size on a claim (a defragmentation writes a copy of the data beside the file). Default: half "
        f"the claim, at most {etcd_space.DEFAULT_QUOTA}; {etcd_space.ETCD_DEFAULT_QUOTA} (etcd's own) on an "
        f"emptyDir or host path. At {etcd_space.LOW_PERCENT} % the EtcdSpaceLow condition turns True; when etcd "
        "raises NOSPACE the operator compacts, defragments every member and disarms the alarm (docs/etcd.md). "
        "A change rolls etcd one member at a time.")
    rule = cel("!isQuantity(string(self)) || (quantity(string(self)).compareTo(quantity('16Mi')) >= 0 && "
               "quantity(string(self)).compareTo(quantity('8Gi')) <= 0)",
               f"{field} must be between 16Mi and 8Gi")
    return {**base, "x-kubernetes-validations": [*base["x-kubernetes-validations"], rule]}


def etcd_schema() -> Schema:
    storage = obj(
        "Where each etcd member keeps its data.",
        {
            "type": s("EmptyDir (lost with the pod; tests only), HostPath, or PersistentVolumeClaim. "
                      "Fixed at creation.",
                      enum=["EmptyDir", "HostPath", "PersistentVolumeClaim"], default="PersistentVolumeClaim",
                      **{"x-kubernetes-validations": [
                          cel("self == oldSelf", "spec.etcd.local.storage.type cannot change after creation: "
                              "the members' data would not move to the new storage"),
                      ]}),
            "size": {**positive_size(quantity_or_int("Volume size for PersistentVolumeClaim, e.g. 8Gi."),
                                     "spec.etcd.local.storage.size"), "default": "8Gi"},
            "storageClassName": s("StorageClass of the claims; empty uses the cluster default.",
                                  maxLength=253, pattern=DNS1123_SUBDOMAIN),
            "hostPath": s("Directory on the node for HostPath storage (one subdirectory per member); not "
                          "/ or a system directory.", maxLength=4096, pattern=r"^/.*$",
                          **{"x-kubernetes-validations": [
                              cel(f"!self.matches(r'{DOT_SEGMENT}')",
                                  "spec.etcd.local.storage.hostPath must not contain '.' or '..' segments"),
                              cel(f"!self.matches(r'{HOSTPATH_SYSTEM}')",
                                  "spec.etcd.local.storage.hostPath must not be / or a system directory ("
                                  + ", ".join(f"/{d}" for d in SYSTEM_EXACT if d) + ", or anything under "
                                  + ", ".join(f"/{d}" for d in SYSTEM_SUBTREES) + ")"),
                          ]}),
        },
        **{"x-kubernetes-validations": [
            cel("!has(self.type) || self.type != 'HostPath' || has(self.hostPath)",
                "storage.hostPath is required when storage.type is HostPath", fieldPath=".hostPath"),
        ]},
    )
    local = obj(
        "An etcd cluster run by the operator as a StatefulSet.",
        {
            "replicas": s("Members: 1, 3, 5 or 7 (odd, to keep a quorum). May change on a running install: the "
                          "operator adds members one at a time as learners, promoting each once caught up, and "
                          "removes them from the highest ordinal, refusing (EtcdReady False, reason "
                          "EtcdScaleRefused) when a removal would put the quorum at risk. Not with "
                          "storage.type HostPath.", "integer", enum=[1, 3, 5, 7], default=3),
            "version": s(f"etcd image tag, e.g. {registry.DEFAULT_ETCD_TAG}.", pattern=TAG),
            "image": image_override(),
            "storage": {**storage, "default": {}},
            "resources": {**resources(), "description": (
                "Compute resources of each etcd member (default: "
                f"{describe_resources(karmada_plan.DEFAULT_ETCD_RESOURCES)}, as kubeadm gives its etcd; an etcd "
                "with no request has the lowest CPU weight on its node).")},
            "nodeSelector": string_map("Node labels the etcd pods must match."),
            "tolerations": tolerations("Taints the etcd pods tolerate."),
            "affinity": affinity(),
            "priorityClassName": s("PriorityClass of the etcd pods.", maxLength=253, pattern=DNS1123_SUBDOMAIN),
            "extraArgs": extra_args(),
            "defragmentation": defragmentation_schema(),
            "quotaBackendBytes": quota_schema(),
            "runAs": s("The user etcd runs as. Auto (the default): 65532 (Pod Security \"restricted\") where its "
                       "volumes take fsGroup (an emptyDir; a CSI driver whose fsGroupPolicy is File, or "
                       "ReadWriteOnceWithFSType with a file system type), root where they cannot (host directories: "
                       "storage.type HostPath, the host-path and local-path provisioners); the choice and its reason "
                       "are in status.etcd.runAs. NonRoot or Root say it outright (NonRoot for volumes that take "
                       "fsGroup but are not seen so, e.g. static local PersistentVolumes). A change rolls etcd one "
                       "member at a time; the kubelet gives existing data to group 65532 (docs/security.md).",
                       enum=["Auto", "NonRoot", "Root"], default="Auto"),
        },
        **{"x-kubernetes-validations": [
            cel("!has(self.quotaBackendBytes) || !has(self.storage) || !has(self.storage.size) || "
                "!has(self.storage.type) || self.storage.type != 'PersistentVolumeClaim' || "
                "!isQuantity(string(self.quotaBackendBytes)) || !isQuantity(string(self.storage.size)) || "
                "quantity(string(self.storage.size)).sub(quantity(string(self.quotaBackendBytes)))"
                ".compareTo(quantity(string(self.quotaBackendBytes))) >= 0",
                f"{etcd_space.FIELD} must be at most half of spec.etcd.local.storage.size: a defragmentation "
                "writes a copy of the data beside the database file", fieldPath=".quotaBackendBytes"),
        ]},
    )
    close_args(local["properties"], "spec.etcd.local", registry.closed_args()["etcd"])
    external = obj(
        "An etcd cluster the operator does not run.",
        {
            "endpoints": arr("Client URLs, e.g. https://etcd-0.example:2379.",
                             s("Client URL.", maxLength=512, pattern=r"^https?://[^\s/]+(:[0-9]+)?/?$"),
                             minItems=1, maxItems=16),
            "tlsSecretRef": obj(
                "Secret with the client TLS material: keys ca.crt, tls.crt and tls.key.",
                {"name": s("Name of the Secret.", minLength=1, maxLength=253, pattern=DNS1123_SUBDOMAIN)},
                required=["name"],
            ),
        },
        required=["endpoints", "tlsSecretRef"],
    )
    return obj(
        "etcd for karmada-apiserver: exactly one of local or external.",
        {"local": local, "external": external},
        default={"local": {}},
        **{"x-kubernetes-validations": [
            cel("has(self.local) != has(self.external)",
                "exactly one of etcd.local or etcd.external must be set"),
            cel("has(self.local) == has(oldSelf.local) && has(self.external) == has(oldSelf.external)",
                "spec.etcd.local and spec.etcd.external cannot be switched after creation: the data would "
                "not move; restore a backup into a new KarmadaDeployment instead"),
        ]},
    )


def audit_schema() -> Schema:
    d = karmada_audit.DEFAULTS
    log = d["log"]
    rule = {
        "type": "object",
        "description": "An audit.k8s.io/v1 PolicyRule (level, users, userGroups, verbs, resources, namespaces, "
                       "nonResourceURLs, omitStages, omitManagedFields).",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"level": s("Level of the events this rule matches.", enum=list(karmada_audit.LEVELS))},
        "required": ["level"],
    }
    return obj(
        "The audit log of karmada-apiserver and karmada-aggregated-apiserver (docs/security.md#audit): on by "
        "default, the operator's policy (metadata of every request, the request body of every change to Karmada's "
        "policies and clusters, never a Secret's, ConfigMap's or token's body, no probes, Leases or Events), one "
        "JSON event per line on the container's stdout.",
        {
            "enabled": s("Write an audit log (the default).", "boolean", default=d["enabled"]),
            "policy": obj(
                "Your own audit policy in place of the operator's: its omitStages and rules, as in an "
                "audit.k8s.io/v1 Policy (the operator adds apiVersion and kind). A change rolls both pods.",
                {
                    "omitStages": arr("Stages no event is written for.", s("Stage.", enum=list(karmada_audit.STAGES)),
                                      maxItems=4),
                    "omitManagedFields": s("Leave managedFields out of request and response bodies.", "boolean"),
                    "rules": arr("Rules, the first match wins; a request no rule matches is not logged.", rule,
                                 minItems=1, maxItems=256),
                },
                required=["rules"],
            ),
            "log": obj(
                "Where the events are written.",
                {
                    "target": s("Stdout (the default: the container's log, for the node's log collector), File (a "
                                "rotated file in an emptyDir at /var/log/kubernetes/audit, for a sidecar or a node "
                                "agent) or Off (the webhook alone).", enum=list(karmada_audit.TARGETS),
                                default=log["target"]),
                    "maxSizeMB": s(f"File: rotate the file at this size (default {log['maxSizeMB']}).", "integer",
                                   minimum=1, maximum=1024),
                    "maxBackups": s(f"File: rotated files kept (default {log['maxBackups']}; the emptyDir is sized "
                                    "for them).", "integer", minimum=1, maximum=100),
                    "maxAgeDays": s(f"File: days a rotated file is kept (default {log['maxAgeDays']}; 0: no limit "
                                    "beyond maxBackups).", "integer", minimum=0, maximum=366),
                },
                default={},
                **{"x-kubernetes-validations": [
                    cel("self.target == 'File' || (!has(self.maxSizeMB) && !has(self.maxBackups) && "
                        "!has(self.maxAgeDays))",
                        "spec.apiServer.audit.log.maxSizeMB, maxBackups and maxAgeDays apply to target File only"),
                ]},
            ),
            "webhook": obj(
                "Also send the events to a webhook (a kubeconfig naming the receiver, in a Secret of yours).",
                {
                    "kubeconfigSecretRef": secret_key_ref("the webhook's kubeconfig", "kubeconfig"),
                    "mode": s("batch (the default: buffered, sent in the background), blocking or blocking-strict "
                              "(a request waits for its event to be sent; -strict fails it if sending fails).",
                              enum=list(karmada_audit.WEBHOOK_MODES), default=d["webhook"]["mode"]),
                },
                required=["kubeconfigSecretRef"],
            ),
        },
        default={},
        **{"x-kubernetes-validations": [
            cel("!has(self.log) || self.log.target != 'Off' || has(self.webhook) || "
                "(has(self.enabled) && !self.enabled)",
                "spec.apiServer.audit.log.target Off needs spec.apiServer.audit.webhook: the events would go nowhere"),
        ]},
    )


def encryption_schema() -> Schema:
    return obj(
        "Encryption at rest in karmada-apiserver (docs/security.md#encryption-at-rest): on by default, Secrets are "
        "stored in etcd (and in every backup) encrypted with secretbox under a key the operator generates and keeps "
        "in the PKI Secret (key encryption-config.json; a restore needs it: docs/backup-restore.md).",
        {
            "enabled": s("Encrypt (the default). false stores new writes in plain text; what was encrypted stays "
                         "readable.", "boolean", default=True),
            "resources": arr("Resources to encrypt, as resource or resource.group (e.g. configmaps, "
                             "propagationpolicies.policy.karmada.io); secrets must be among them.",
                             s("Resource.", minLength=1, maxLength=253,
                               pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"),
                             maxItems=32, default=list(karmada_encryption.DEFAULT_RESOURCES),
                             **{"x-kubernetes-list-type": "set",
                                "x-kubernetes-validations": [
                                    cel("'secrets' in self", "spec.apiServer.encryption.resources must include "
                                                             "secrets"),
                                    cel("oldSelf.all(r, r in self)",
                                        "spec.apiServer.encryption.resources: a resource cannot be removed, its "
                                        "objects are stored encrypted (docs/security.md#encryption-at-rest)")]}),
            "rotation": obj(
                "Rotate the key: a requestedAt other than the last rotation's (status.encryption.rotation."
                "requestedAt) starts one, in three full passes each rolling karmada-apiserver once: a new key every "
                "replica can read, then it writes and every object is rewritten with it, then the old key goes. "
                "status.encryption.rotation reports each phase; a new request waits for one under way.",
                {"requestedAt": s("When the rotation was asked for (RFC 3339, e.g. the current time).",
                                  format="date-time")},
                required=["requestedAt"],
            ),
            "provider": s("What encrypts new writes: Secretbox (the default: a key the operator generates and keeps "
                          "in the PKI Secret) or KMSv2 (a key in your KMS, through the plugin in kms). A change "
                          "rewrites every object of the resources with the new provider; the other one stays a "
                          "reader.", enum=[karmada_encryption.SECRETBOX, karmada_encryption.KMS_V2],
                          default=karmada_encryption.SECRETBOX),
            "kms": kms_schema(),
        },
        default={},
        **{"x-kubernetes-validations": [
            cel(f"!has(self.provider) || self.provider != '{karmada_encryption.KMS_V2}' || has(self.kms)",
                "spec.apiServer.encryption.provider KMSv2 needs spec.apiServer.encryption.kms (the plugin)"),
            cel(f"!has(self.provider) || self.provider != '{karmada_encryption.KMS_V2}' || !has(self.rotation)",
                "spec.apiServer.encryption.rotation rotates the operator's own secretbox key: with provider KMSv2 "
                "the key is in your KMS, rotate it there (docs/security.md#a-kms-v2-plugin)"),
            # Leaving KMSv2 and dropping the plugin in one edit would leave every value it stored
            # unreadable: the plugin stays a reader until Secretbox has rewritten them (the
            # operator checks that too, from status.encryption: encryption.settings).
            cel(f"!has(oldSelf.kms) || !has(oldSelf.provider) || oldSelf.provider != '{karmada_encryption.KMS_V2}' "
                "|| has(self.kms)",
                "spec.apiServer.encryption.kms cannot be removed in the edit that leaves provider KMSv2: set provider "
                "Secretbox first, remove kms once every object is rewritten (status.encryption.writeKey no longer "
                "kms:<name>)"),
        ]},
    )


def kms_schema() -> Schema:
    socket = karmada_encryption.KMS_SOCKET
    env = {
        "type": "object",
        "description": "An environment variable, as in a container (name with value or valueFrom).",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"name": s("Its name.", minLength=1, maxLength=253)},
        "required": ["name"],
    }
    return obj(
        "A KMS v2 plugin (docs/security.md#a-kms-v2-plugin): a sidecar of kube-apiserver in every karmada-apiserver "
        f"pod, under Pod Security restricted, serving on the Unix socket {socket} in a volume the two share. Set, "
        "karmada-apiserver reads what the KMS encrypted; provider KMSv2 makes it write too. Remove it only once "
        "provider Secretbox has rewritten every object (status.encryption.writeKey no longer kms:<name>).",
        {
            "name": s("The provider's name in the EncryptionConfiguration. Every value stored through the KMS carries "
                      "it, so it cannot change.", minLength=1, maxLength=63, pattern=DNS1123_LABEL,
                      **{"x-kubernetes-validations": [
                          cel("self == oldSelf", "spec.apiServer.encryption.kms.name cannot change: every value "
                                                 "stored through the KMS carries it")]}),
            "image": s("The plugin's image (registry/repository:tag or @digest).", minLength=1, maxLength=512,
                       pattern=r"^[^\s]+$"),
            "args": arr(f"The plugin's arguments; it must serve on {socket}.", s("Argument.", maxLength=4096),
                        maxItems=64),
            "env": arr("The plugin's environment, e.g. its KMS credentials from a Secret (valueFrom.secretKeyRef, a "
                       "Secret in this namespace).", env, maxItems=64),
            "resources": {**resources(), "description": (
                f"Compute resources of the plugin (default: "
                f"{describe_resources({'requests': registry.KMS_PLUGIN_REQUESTS})}). Set, it replaces the default "
                "whole.")},
            "timeout": s(f"How long karmada-apiserver waits for one call of the plugin (default "
                         f"{karmada_encryption.KMS_DEFAULT_TIMEOUT}).", pattern=r"^([0-9]+(ms|s|m))+$",
                         maxLength=16, default=karmada_encryption.KMS_DEFAULT_TIMEOUT),
        },
        required=["name", "image"],
    )


def api_server_schema() -> Schema:
    props = common_component_props(registry.APISERVER_REQUESTS, max_replicas=10)
    props["replicas"] = s("Number of karmada-apiserver pods.", "integer", minimum=1, maximum=10, default=1)
    props["serviceType"] = s("Service type of karmada-apiserver.", enum=["ClusterIP", "NodePort", "LoadBalancer"],
                             default="ClusterIP")
    props["nodePort"] = s("Node port with serviceType NodePort (30000-32767); empty picks one.", "integer",
                          minimum=30000, maximum=32767)
    props["externalLoadBalancer"] = obj(
        "A balancer in front of karmada-apiserver that the cluster does not manage; its addresses "
        "and names go into the serving certificate and the generated kubeconfigs.",
        {
            "addresses": arr("IP addresses of the balancer.",
                             s("IPv4 or IPv6 address.", maxLength=45,
                               **{"x-kubernetes-validations": [cel("isIP(self)", "must be an IP address")]}),
                             maxItems=16),
            "dnsNames": arr("DNS names of the balancer.", s("DNS name.", maxLength=253, pattern=DNS1123_SUBDOMAIN),
                            maxItems=16),
            "port": s("Port the balancer listens on.", "integer", minimum=1, maximum=65535, default=443),
        },
        **{"x-kubernetes-validations": [
            cel("(has(self.addresses) && size(self.addresses) > 0) || (has(self.dnsNames) && size(self.dnsNames) > 0)",
                "externalLoadBalancer needs at least one address or DNS name"),
        ]},
    )
    props["audit"] = audit_schema()
    props["encryption"] = encryption_schema()
    close_args(props, "spec.apiServer", registry.closed_args()["apiServer"])
    props["certSANs"] = arr(
        "Extra subject alternative names (IPs or DNS names) for the karmada-apiserver certificate.",
        s("IP address or DNS name.", maxLength=253,
          **{"x-kubernetes-validations": [
              cel(f"isIP(self) || self.matches(r'{SAN_DNS}')",
                  "must be an IP address or a lower-case DNS name (optionally *.-prefixed)")]}),
        maxItems=64,
    )
    return obj("karmada-apiserver settings.", props, **{"x-kubernetes-validations": [
        cel("!has(self.nodePort) || self.serviceType == 'NodePort'",
            "apiServer.nodePort is only valid with serviceType NodePort", fieldPath=".nodePort"),
    ]})


def certificates_schema() -> Schema:
    return obj(
        "The PKI the operator generates, stores in Secrets (kubeadm file names) and rotates.",
        {
            "caValidityDays": s("Validity of the generated CAs, in days.", "integer", minimum=1, maximum=36500,
                                default=pki.DEFAULT_CA_DAYS),
            "leafValidityDays": s("Validity of leaf certificates, in days.", "integer", minimum=1, maximum=3650,
                                  default=pki.DEFAULT_LEAF_DAYS),
            "renewBeforeDays": s("Re-issue a certificate this many days before it expires.", "integer",
                                 minimum=1, maximum=3649, default=pki.DEFAULT_RENEW_DAYS),
            "leafValidity": s("Validity of leaf certificates as a duration (e.g. 8760h, 20m; hours, minutes, "
                              "seconds); when set it wins over leafValidityDays. At least 5m.",
                              pattern=DURATION, maxLength=32),
            "renewBefore": s("Re-issue a certificate this long before it expires, as a duration (e.g. 720h, "
                             "15m); when set it wins over renewBeforeDays. At least 1m.",
                             pattern=DURATION, maxLength=32),
            "keyAlgorithm": s("Key type of generated keys.", enum=["RSA", "ECDSA"], default="RSA"),
            "keySize": s("RSA: 2048, 3072 or 4096 bits (default 3072). ECDSA: curve size 256 or 384 "
                         "(default 256).", "integer", enum=[256, 384, 2048, 3072, 4096]),
            "caSecretRef": obj(
                "Bring your own Karmada CA: a Secret with tls.crt and tls.key (or ca.crt and ca.key). "
                "The etcd and front-proxy CAs stay generated.",
                {"name": s("Name of the Secret.", minLength=1, maxLength=253, pattern=DNS1123_SUBDOMAIN)},
                required=["name"],
            ),
            "forceRenew": obj(
                "Renew now: re-issue the listed certificates that were issued before issuedBefore (set it to "
                "the current time; later reconciles find them newer and leave them). Only the pods that mount "
                "a re-issued certificate restart, one at a time.",
                {
                    "issuedBefore": s("Re-issue what was issued before this time (RFC 3339).", format="date-time"),
                    "certificates": arr(
                        "Certificates to re-issue by name (apiserver, admin, etcd/server, "
                        "karmada-controller-manager-client, ...; status.certificates lists them). Default: "
                        "every leaf ('leaves'). Naming a CA (ca, etcd/ca, front-proxy-ca) re-issues it and "
                        "its leaves at once, without a trust transition.",
                        s("A certificate name, or 'leaves'.", minLength=1, maxLength=128,
                          pattern=r"^[a-z0-9]([-a-z0-9/]*[a-z0-9])?$"),
                        maxItems=64),
                },
                required=["issuedBefore"],
                **{"x-kubernetes-validations": [
                    cel("!has(self.certificates) || !('sa' in self.certificates)",
                        "the service-account keys (sa) have no issue time and would be replaced on every "
                        "reconcile; they are not renewed through forceRenew", fieldPath=".certificates"),
                ]},
            ),
            "caRotation": obj(
                "Rotate a CA with a trust transition (docs/certificates.md, 'Rotate the CA'): a new CA is "
                "trusted beside the old one (Trusting), signs every leaf (Reissuing), then the old one is "
                "dropped (Dropping); one reconcile pass per phase, each ending with every member Ready. "
                "A requestedAt later than the last rotation's (status.caRotation.requestedAt) starts a new "
                "rotation; the field may stay.",
                {
                    "ca": s("The CA to rotate: karmada (ca.crt, the Karmada API's CA), etcd (etcd/ca.crt) or "
                            "front-proxy (front-proxy-ca.crt).", enum=["karmada", "etcd", "front-proxy"]),
                    "requestedAt": s("When the rotation was asked for (RFC 3339, e.g. the current time).",
                                     format="date-time"),
                },
                required=["ca", "requestedAt"],
            ),
        },
        **{"x-kubernetes-validations": [
            cel("!has(self.caRotation) || self.caRotation.ca != 'karmada' || !has(self.caSecretRef)",
                "caRotation.ca: the Karmada CA is brought by caSecretRef and cannot be rotated by the operator; "
                "replace the Secret instead", fieldPath=".caRotation.ca"),
            cel("!has(self.keySize) || ((has(self.keyAlgorithm) && self.keyAlgorithm == 'ECDSA') ? "
                "self.keySize in [256, 384] : self.keySize in [2048, 3072, 4096])",
                "keySize must be 2048, 3072 or 4096 for RSA and 256 or 384 for ECDSA", fieldPath=".keySize"),
            cel("!has(self.leafValidityDays) || !has(self.caValidityDays) || "
                "self.leafValidityDays <= self.caValidityDays",
                "leafValidityDays must not exceed caValidityDays: a leaf cannot outlive its CA",
                fieldPath=".leafValidityDays"),
            cel("!has(self.renewBeforeDays) || !has(self.leafValidityDays) || has(self.leafValidity) || "
                "has(self.renewBefore) || self.renewBeforeDays < self.leafValidityDays",
                "renewBeforeDays must be less than leafValidityDays", fieldPath=".renewBeforeDays"),
            cel("!has(self.leafValidity) || duration(self.leafValidity) >= duration('5m')",
                "leafValidity must be at least 5m", fieldPath=".leafValidity"),
            cel("!has(self.renewBefore) || duration(self.renewBefore) >= duration('1m')",
                "renewBefore must be at least 1m", fieldPath=".renewBefore"),
            cel("!has(self.leafValidity) || !has(self.caValidityDays) || "
                "duration(self.leafValidity).getSeconds() <= self.caValidityDays * 86400",
                "leafValidity must not exceed caValidityDays: a leaf cannot outlive its CA",
                fieldPath=".leafValidity"),
            cel("(has(self.renewBefore) ? duration(self.renewBefore).getSeconds() : "
                f"(has(self.renewBeforeDays) ? self.renewBeforeDays : {pki.DEFAULT_RENEW_DAYS}) * 86400) < "
                "(has(self.leafValidity) ? duration(self.leafValidity).getSeconds() : "
                f"(has(self.leafValidityDays) ? self.leafValidityDays : {pki.DEFAULT_LEAF_DAYS}) * 86400)",
                "the renewal window (renewBefore or renewBeforeDays) must be shorter than the leaf lifetime "
                "(leafValidity or leafValidityDays)", fieldPath=".renewBefore"),
        ]},
    )


def member_schema() -> Schema:
    taint = obj(
        "A taint on the Cluster object, as in a node spec.",
        {
            "key": s("Taint key.", minLength=1, maxLength=316),
            "value": s("Taint value.", maxLength=63),
            "effect": s("Taint effect.", enum=["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        },
        required=["key", "effect"],
    )
    return obj(
        "A member cluster to register with Karmada.",
        {
            "name": s("Cluster name in Karmada (DNS-1123 label, unique).", minLength=1, maxLength=48,
                      pattern=DNS1123_LABEL),
            "kubeconfigSecretRef": secret_key_ref("the member's kubeconfig", "kubeconfig"),
            "syncMode": s("Push: Karmada's controllers write to the member. Pull: karmada-agent in the "
                          "member pulls from Karmada.", enum=["Push", "Pull"], default="Push"),
            "provider": s("Cloud provider or site label, copied to the Cluster.", maxLength=63),
            "region": s("Region, copied to the Cluster.", maxLength=63),
            "zones": arr("Zones, copied to the Cluster.", s("Zone.", minLength=1, maxLength=63), maxItems=16),
            "labels": label_map("Labels put on the Cluster object.", "members[].labels"),
            "taints": arr("Taints put on the Cluster object.", taint, maxItems=16),
            "agentPlacement": s("Pull mode: where karmada-agent runs. Member (usual: only the member dials "
                                "out, so Karmada needs an address the member can reach, "
                                "spec.apiServer.externalLoadBalancer). Host: next to Karmada in the host "
                                "cluster, with credentials for the member (for members whose nodes cannot "
                                "run it, e.g. virtual or kwok clusters; the member API must be reachable "
                                "from the host).", enum=["Member", "Host"], default="Member"),
        },
        required=["name", "kubeconfigSecretRef"],
    )


def condition_schema() -> Schema:
    return obj(
        "A condition in Kubernetes convention.",
        {
            "type": s("Condition type, e.g. Ready.", maxLength=316),
            "status": s("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "reason": s("CamelCase reason.", maxLength=1024),
            "message": s("Human-readable detail.", maxLength=32768),
            "observedGeneration": s("Generation the condition was set for.", "integer", format="int64",
                                    minimum=0),
            "lastTransitionTime": s("When the status last changed.", format="date-time"),
        },
        required=["type", "status"],
    )


def conditions() -> Schema:
    return arr("Conditions (Kubernetes convention).", condition_schema(),
               **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})


def karmada_deployment_spec() -> Schema:
    components = {comp.key: component(comp) for comp in registry.components()}
    for key, closed in registry.closed_args().items():
        if key in components:
            close_args(components[key]["properties"], f"spec.components.{key}", closed)
    return obj(
        "Desired Karmada control plane.",
        {
            "karmadaVersion": s("Karmada version for the whole plane.", pattern=SEMVER,
                                default=registry.DEFAULT_KARMADA_VERSION),
            "kubernetesVersion": s("Kubernetes version of karmada-apiserver and kube-controller-manager.",
                                   pattern=SEMVER, default=registry.DEFAULT_KUBERNETES_VERSION),
            "images": obj(
                "Where images come from (air-gapped installs point these at a mirror).",
                {
                    "karmadaRegistry": image_registry("Registry for Karmada images.", "images.karmadaRegistry",
                                                      default=registry.DEFAULT_KARMADA_REGISTRY),
                    "kubernetesRegistry": image_registry("Registry for Kubernetes and etcd images.",
                                                         "images.kubernetesRegistry",
                                                         default=registry.DEFAULT_KUBERNETES_REGISTRY),
                    "pullPolicy": s("Image pull policy of every workload.",
                                    enum=["Always", "IfNotPresent", "Never"], default="IfNotPresent"),
                    "pullSecrets": arr("Image pull secrets (same namespace).", local_ref("a pull Secret"),
                                       maxItems=16),
                },
                default={},
            ),
            "clusterDomain": s("DNS domain of the host cluster.", maxLength=253, pattern=DNS1123_SUBDOMAIN,
                               default="cluster.local"),
            "etcd": etcd_schema(),
            "apiServer": {**api_server_schema(), "default": {}},
            "components": obj("Settings per control-plane component.", components, default={}),
            "globals": obj(
                "Settings applied to every component; changing one rolls every component out.",
                {
                    "labels": label_map("Labels added to every object the operator creates.", "spec.globals.labels",
                                        reserved=RESERVED_LABELS),
                    "annotations": string_map("Annotations added to every object the operator creates."),
                    "featureGates": feature_gates(
                        "Feature gates passed to every Karmada component (karmada-controller-manager, "
                        "-scheduler, -webhook, -aggregated-apiserver and the optional ones). Not to "
                        "karmada-apiserver or kube-controller-manager: they are Kubernetes binaries that "
                        "refuse Karmada's gates; set theirs in spec.apiServer.featureGates and "
                        "spec.components.kubeControllerManager.featureGates."),
                    "nodeSelector": string_map("Node labels every pod must match (a component's own wins)."),
                    "tolerations": tolerations("Taints every pod tolerates (added to a component's own)."),
                },
                default={},
            ),
            "certificates": {**certificates_schema(), "default": {}},
            "crds": obj(
                "Where Karmada's CRDs come from: the release tarball by default, a mirror when air-gapped.",
                {
                    "url": s("URL of crds.tar.gz; default: the GitHub release of karmadaVersion.",
                             maxLength=2048, pattern=r"^(https?|file)://.+$"),
                    "sha256": s("Expected sha256 of the tarball (hex); checked when set.",
                                pattern=r"^[a-f0-9]{64}$"),
                },
            ),
            "upgrade": obj(
                "How version changes roll out.",
                {
                    "strategy": s("Full: every component moves to spec.karmadaVersion, one at a time in the "
                                  "registry's order. Components: only those listed move; the other Karmada "
                                  "components stay on the version their pods run.",
                                  enum=["Full", "Components"], default="Full"),
                    "components": arr("Components that move with strategy Components.",
                                      s("Component key.", enum=upgradable()), maxItems=len(upgradable()),
                                      **{"x-kubernetes-list-type": "set"}),
                    "allowDowngrade": s("Allow spec.karmadaVersion below the running version (one minor at a "
                                        "time). Without it a downgrade is refused (UnsupportedUpgrade) unless it "
                                        "sets a running or stopped upgrade back to the version it started from (a "
                                        "rollback); after an upgrade has completed, going back needs it.",
                                        "boolean", default=False),
                    "preUpgradeBackup": s("Auto: when an EtcdBackup in this namespace backs up this Karmada (it names "
                                          "a store), a version change first takes a one-off EtcdBackup to the same "
                                          "store, <name>-pre-upgrade-<version>, and waits for it to succeed; a failed "
                                          "backup stops the upgrade before anything changes (PreUpgradeBackupFailed). "
                                          "Skip: no backup.", enum=["Auto", "Skip"], default="Auto"),
                },
                default={},
                **{"x-kubernetes-validations": [
                    cel("!has(self.strategy) || self.strategy != 'Components' || "
                        "(has(self.components) && size(self.components) > 0)",
                        "upgrade.components must list at least one component when strategy is Components"),
                ]},
            ),
            "members": arr("Member clusters to register.", member_schema(), maxItems=1000,
                           **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}),
            "paused": s("Stop reconciling (nothing is changed while true).", "boolean", default=False),
            "deletionPolicy": s("Delete: deleting the CR removes everything the operator made. Retain: keep "
                                "etcd data and Secrets.", enum=["Delete", "Retain"], default="Delete"),
        },
    )


def etcd_defragmentation_status() -> Schema:
    done = obj("A member defragmented.", {
        "name": s("Member name."),
        "leader": s("It was the leader.", "boolean"),
        "at": s("When it finished.", format="date-time"),
        "seconds": s("How long the defragmentation and its health check took.", "number"),
        "dbSizeBefore": s("Database size before, in bytes.", "integer", format="int64"),
        "dbSizeInUseBefore": s("Bytes in use before.", "integer", format="int64"),
        "dbSizeAfter": s("Database size after, in bytes.", "integer", format="int64"),
    })
    round_ = obj("A round: the members due when it started (every member, for a scheduled one), each "
                 "defragmented once.", {
        "startedAt": s("When it started.", format="date-time"),
        "trigger": s("Threshold (members due by fragmentation) or Schedule (a tick of spec...schedule).",
                     enum=["Threshold", "Schedule"]),
        "finishedAt": s("When its last member was done.", format="date-time"),
        "members": arr("The members due when it started, in the order they are done.", s("Member name.")),
        "done": arr("The members defragmented so far, in order.", done),
    })
    return obj("etcd's automatic defragmentation (spec.etcd.local.defragmentation).", {
        "phase": s("Idle (no member due), InProgress (a round with members left: one per pass), Waiting (due but "
                   "held back: message says why), Failed (the last member tried failed) or Disabled.",
                   enum=["Idle", "InProgress", "Waiting", "Failed", "Disabled"]),
        "message": s("What the last full pass found or did."),
        "round": round_,
        "lastRound": round_,
        "schedule": obj("The schedule as the operator counts its ticks (absent without one).", {
            "cron": s("spec.etcd.local.defragmentation.schedule as last seen."),
            "timeZone": s("Its time zone (UTC when empty)."),
            "since": s("When the operator first saw this schedule: ticks count from then.", format="date-time"),
            "lastTick": s("The last tick a round started for.", format="date-time"),
            "nextTick": s("The next tick.", format="date-time"),
        }),
    })


def etcd_scaling_status() -> Schema:
    return obj("etcd scaling and member replacement (spec.etcd.local.replicas), as the last full pass left them.", {
        "members": s("etcd's voting and learner members after the pass.", "integer"),
        "replicas": s("The member count spec.etcd.local.replicas asks for.", "integer"),
        "lastChange": obj("The last pass that added, promoted, removed or replaced a member.", {
            "at": s("When that pass finished its steps.", format="date-time"),
            "from": s("The StatefulSet's replicas before.", "integer"),
            "to": s("etcd's members after.", "integer"),
            "steps": arr("The steps, in order.", obj("A step.", {
                "action": s("add (a learner), promote, remove, replicas, replace or reset."),
                "member": s("The member."),
                "reason": s("Why."),
            })),
        }),
        "lastReplacement": s("The last member replaced because it lost its data: which, why, when."),
    })


def etcd_space_status() -> Schema:
    return obj("etcd's space quota and the last NOSPACE recovery (spec.etcd.local.quotaBackendBytes).", {
        "phase": s("Ok (every database below the low mark), Low (one at or above it), QuotaExceeded (the data in "
                   "use itself is: only a larger quota helps), RecoveryFailed, or Unknown (no member answered).",
                   enum=["Ok", "Low", "QuotaExceeded", "RecoveryFailed", "Unknown"]),
        "quota": s("The quota in force."),
        "percentUsed": s("The largest member's database, in percent of the quota (in steps of 5).", "integer"),
        "message": s("What the last full pass found or did."),
        "lastRecovery": obj("The last NOSPACE recovery.", {
            "at": s("When it finished.", format="date-time"),
            "seconds": s("How long it took.", "number"),
            "compactedRevision": s("The revision etcd was compacted to.", "integer", format="int64"),
            "members": arr("The members defragmented, in order.", obj("A member.", {
                "name": s("Member name."),
                "leader": s("It was the leader.", "boolean"),
                "dbSizeBefore": s("Database size before, in bytes.", "integer", format="int64"),
                "dbSizeAfter": s("Database size after, in bytes.", "integer", format="int64"),
            })),
        }),
    })


def encryption_status() -> Schema:
    target = {"enabled": s("Encryption was on.", "boolean"),
              "writeKey": s("The key the objects were stored with (empty: plain text)."),
              "resources": arr("The resources rewritten.", s("Resource."))}
    return obj("Encryption at rest in karmada-apiserver as it runs (spec.apiServer.encryption), read from its "
               "configuration in the PKI Secret; the names of the keys only, never their value.", {
                   "phase": s("Current (every object of the resources stored as the configuration says) or Failed "
                              "(the last rewrite failed: message says why; the next full pass tries again).",
                              enum=["Current", "Failed"]),
                   "message": s("What the last full pass found or did."),
                   "enabled": s("A key encrypts new writes.", "boolean"),
                   "provider": s("What encrypts new writes: secretbox (the operator's key) or kms (the KMS v2 "
                                 "plugin)."),
                   "writeKey": s("The key that encrypts new writes: a secretbox key's name, or kms:<name> for the "
                                 "KMS v2 plugin."),
                   "keys": arr("The secretbox keys karmada-apiserver can read with, in order.", s("Key name.")),
                   "kms": s("The KMS v2 plugin karmada-apiserver can read (and with provider KMSv2 write) with; "
                            "empty without one."),
                   "resources": arr("The resources encrypted.", s("Resource.")),
                   "rewritten": obj("The last rewrite of every object of the resources (after a change of key or "
                                    "settings).", {**target,
                                                   "objects": s("Objects written.", "integer"),
                                                   "at": s("When it finished.", format="date-time")}),
                   "rotation": obj("The last key rotation (spec.apiServer.encryption.rotation).", {
                       "requestedAt": s("The spec's requestedAt this rotation answers.", format="date-time"),
                       "phase": s("The phase the next full pass does (Writing, Dropping), or Done.",
                                  enum=["Writing", "Dropping", "Done"]),
                       "oldKey": s("The key rotated out."),
                       "newKey": s("The key rotated in."),
                       "startedAt": s("When its first phase was done.", format="date-time"),
                       "finishedAt": s("When the old key was dropped.", format="date-time"),
                       "message": s("What its last phase did."),
                   }),
               })


def karmada_deployment_status() -> Schema:
    return obj(
        "Observed state, written by the operator.",
        {
            "phase": s("Summary phase.", enum=["Pending", "Provisioning", "Running", "Upgrading", "Degraded",
                                               "Failed", "Paused", "Deleting"]),
            "observedGeneration": s("Generation last reconciled.", "integer", format="int64"),
            "conditions": conditions(),
            "karmadaVersion": s("Karmada version running."),
            "components": arr("Per component state.", obj("A component.", {
                "name": s("Component name."),
                "version": s("Version running."),
                "desiredVersion": s("Version asked for."),
                "replicas": s("Desired replicas.", "integer"),
                "readyReplicas": s("Ready replicas.", "integer"),
            })),
            "etcd": obj("etcd state.", {
                "endpoints": arr("Client endpoints.", s("URL.")),
                "members": arr("Members.", obj("An etcd member.", {
                    "name": s("Member name."),
                    "id": s("Member ID (hex)."),
                    "healthy": s("Answers health reads.", "boolean"),
                    "leader": s("Is the raft leader.", "boolean"),
                    "learner": s("Is a learner.", "boolean"),
                    "version": s("etcd version."),
                    "dbSize": s("Size of the member's database file in bytes (local etcd), written again when it "
                                "moved by 10 % or 8 MiB, or right after the member's defragmentation.", "integer",
                                format="int64"),
                    "dbSizeInUse": s("Bytes of that file holding data (the rest is free pages a defragmentation "
                                     "gives back), written as dbSize is.", "integer", format="int64"),
                })),
                "runAs": obj("The user etcd's pods run as, read from the pods (spec.etcd.local.runAs).", {
                    "user": s("NonRoot (65532), Root, or Mixed while a change rolls.",
                              enum=["NonRoot", "Root", "Mixed"]),
                    "reason": s("Why: the storage seen, or the spec."),
                }),
            }),
            "etcdScaling": etcd_scaling_status(),
            "etcdDefragmentation": etcd_defragmentation_status(),
            "etcdSpace": etcd_space_status(),
            "encryption": encryption_status(),
            "apiServerEndpoints": arr("URLs of karmada-apiserver.", s("URL.")),
            "adminKubeconfigSecret": s("Secret holding the admin kubeconfig (key kubeconfig)."),
            "certificates": arr("Certificate expiry.", obj("A certificate.", {
                "name": s("Certificate name (kubeadm file name without extension)."),
                "notAfter": s("Expiry.", format="date-time"),
            })),
            "members": arr("Member registration state.", obj("A member.", {
                "name": s("Member name."),
                "state": s("Join state.", enum=["Pending", "Joining", "Joined", "Unjoining", "Failed"]),
                "ready": s("Karmada reports the Cluster Ready.", "boolean"),
                "syncMode": s("Push or Pull."),
                "agentPlacement": s("Where the Pull member's karmada-agent runs (Member or Host).",
                                    enum=["Member", "Host"]),
                "reason": s("CamelCase reason."),
                "message": s("Detail."),
                "specHash": s("Hash of the spec entry this member last joined with "
                              "(karmada_member_spec_hash from the inventory).", maxLength=64),
                "kubeconfigSecretRef": obj("Secret with the member's kubeconfig when it joined, kept so the "
                                           "member side can be cleaned after it leaves spec.", {
                    "name": s("Name of the Secret."),
                    "key": s("Key inside the Secret."),
                }),
            })),
            "upgrade": obj("The last version change (spec.karmadaVersion moved) and how far it got.", {
                "fromVersion": s("Version the plane ran when the upgrade started."),
                "toVersion": s("Version asked for."),
                "phase": s("InProgress, Succeeded, or Stopped at a component (see stoppedAt, message).",
                           enum=["InProgress", "Succeeded", "Stopped"]),
                "stoppedAt": s("Component (or step) the upgrade stopped at."),
                "message": s("Why it stopped."),
                "backup": obj("The EtcdBackup taken before the version change (spec.upgrade.preUpgradeBackup).", {
                    "name": s("Name of the EtcdBackup (same namespace)."),
                    "location": s("Where its snapshot is (the store's location of the snapshot)."),
                }),
                "startTime": s("When the upgrade started.", format="date-time"),
                "endTime": s("When it finished or stopped.", format="date-time"),
                "components": arr("Components rolled out by this upgrade, in the order they finished.",
                                  obj("A component that passed its gate.", {
                                      "name": s("Component name."),
                                      "version": s("Version its ready pods ran after the rollout."),
                                      "startTime": s("Rollout start.", format="date-time"),
                                      "endTime": s("Rollout end (gate passed).", format="date-time"),
                                  })),
            }),
            "caRotation": obj("The last CA rotation (spec.certificates.caRotation) and how far it got; a "
                              "restarted operator goes on from here.", {
                "ca": s("The CA rotated: karmada, etcd or front-proxy."),
                "phase": s("The phase the next pass does (Trusting, Reissuing, Dropping), or Done.",
                           enum=["Trusting", "Reissuing", "Dropping", "Done"]),
                "requestedAt": s("The spec's requestedAt this rotation answers.", format="date-time"),
                "oldSerial": s("Serial (hex) of the CA being replaced."),
                "newSerial": s("Serial (hex) of the new CA."),
                "startedAt": s("When the first phase began.", format="date-time"),
                "finishedAt": s("When the old CA was dropped (phase Done).", format="date-time"),
                "message": s("What the phase does or waits for."),
            }),
            "readyMembers": s("Ready members / members in spec, e.g. 2/3."),
            "controlPlaneHash": s("Hash of the control-plane plan the last full reconcile converged to; a spec "
                                  "edit that keeps it goes straight to the member plays.", maxLength=64),
            "converged": obj("What the last full pass that left everything Ready converged; a reconcile that "
                             "finds all of it unchanged ends early (docs/performance.md).", {
                "fingerprint": s("Digest of the generation, spec, operator.karmada.io/ annotations, the operator's "
                                 "build and every object it owns (uid and content).", maxLength=64),
                "generation": s("Generation of that pass.", "integer", format="int64"),
                "at": s("When that pass ended.", format="date-time"),
                "renewAt": s("When the soonest certificate enters its renewal window (a full pass runs then).",
                             format="date-time"),
                "server": s("The URL the operator reached karmada-apiserver at."),
                "tlsServerName": s("The name it checked karmada-apiserver's serving certificate for."),
                "fullPass": s("The operator.karmada.io/full-pass annotation that pass saw (a new value asks for "
                              "another)."),
            }),
        },
    )


def etcd_backup_spec() -> Schema:
    return obj(
        "What to back up, when, and where.",
        {
            "karmadaDeploymentRef": local_ref("the KarmadaDeployment whose etcd is backed up"),
            "schedule": s("Cron schedule (5 fields, in timeZone, default UTC); omit for a single backup "
                          "now.", maxLength=128,
                          pattern=r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|"
                                  r"(\S+\s+){4}\S+)$",
                          **{"x-kubernetes-validations": [
                              cel(f"self.matches(r'{CRON}')",
                                  "spec.schedule must be @hourly, @daily, @midnight, @weekly, @monthly, @yearly, "
                                  "@annually or 5 cron fields: minute 0-59, hour 0-23, day of month 1-31, "
                                  "month 1-12 or JAN-DEC, day of week 0-6 or SUN-SAT; each *, a value, a-b, "
                                  "optionally /step, or a comma-separated list of those"),
                          ]}),
            "timeZone": s("IANA time zone the schedule is read in, e.g. Europe/Berlin (default UTC). A wall "
                          "time skipped by a daylight-saving change does not fire; one that repeats fires once.",
                          minLength=1, maxLength=64, pattern=TIME_ZONE),
            "suspend": s("Pause the schedule (with continuous: stop the follower).", "boolean", default=False),
            "continuous": obj(
                "Continuous backup: a full snapshot, then every change etcd makes (its watch) written as deltas "
                "next to it every deltaInterval or deltaMaxBytes, whichever comes first; a new full after "
                "fullAfterDeltas deltas or fullAfterBytes bytes, and at once when the chain would have a gap. "
                "A follower Deployment (<name>-continuous) does it; retention.maxBackups keeps whole chains. "
                "Excludes schedule.", {
                    "deltaInterval": s(
                        "Longest time a change waits before it is written: the most acknowledged writes a lost "
                        "etcd can take with it (RPO). 1s to 10m.",
                        default=eb_plan.CONTINUOUS_DEFAULTS["deltaInterval"], maxLength=16,
                        pattern=r"^([0-9]+(ms|s|m|h))+$", **{"x-kubernetes-validations": [
                            cel("duration(self) >= duration('1s') && duration(self) <= duration('10m')",
                                "spec.continuous.deltaInterval must be between 1s and 10m"),
                        ]}),
                    "deltaMaxBytes": s("A delta is written at once when it holds this many bytes of changes.",
                                       "integer", format="int64", minimum=65536, maximum=1073741824,
                                       default=eb_plan.CONTINUOUS_DEFAULTS["deltaMaxBytes"]),
                    "fullAfterDeltas": s("Take a new full snapshot after this many deltas (bounds what a restore "
                                         "replays).", "integer", minimum=1, maximum=100000,
                                         default=eb_plan.CONTINUOUS_DEFAULTS["fullAfterDeltas"]),
                    "fullAfterBytes": s("Take a new full snapshot after this many bytes of deltas.", "integer",
                                        format="int64", minimum=1048576, maximum=109951162777600,
                                        default=eb_plan.CONTINUOUS_DEFAULTS["fullAfterBytes"]),
                }),
            "jobResources": {**resources(), "description": (
                "Compute resources of the backup Job's container (default: "
                f"{describe_resources(eb_plan.DEFAULT_JOB_RESOURCES)}). Namespaces with a ResourceQuota need "
                "requests and limits here.")},
            "retention": obj("How many backups to keep.", {
                "maxBackups": s("Keep the newest N snapshots; older ones are deleted.", "integer", minimum=1,
                                maximum=1000, default=7),
            }, default={}),
            "storage": obj(
                "Where snapshots go: exactly one of pvc or s3.",
                {
                    "pvc": obj("A PersistentVolumeClaim (e.g. CephFS, ReadWriteMany).", {
                        "claimName": s("Claim name.", minLength=1, maxLength=253, pattern=DNS1123_SUBDOMAIN),
                        "subPath": s("Directory inside the volume (relative, no '..').", maxLength=1024,
                                     pattern=r"^[^/](.*[^/])?$", **{"x-kubernetes-validations": [
                                         cel("!self.startsWith('/')",
                                             "spec.storage.pvc.subPath must be relative to the volume"),
                                         cel(f"!self.matches(r'{DOTDOT_SEGMENT}')",
                                             "spec.storage.pvc.subPath must not contain '..' segments: it "
                                             "must stay inside the volume"),
                                     ]}),
                    }, required=["claimName"]),
                    "s3": obj("S3-compatible object storage.", {
                        "endpoint": s("Endpoint URL.", maxLength=2048, pattern=r"^https?://.+$"),
                        "bucket": s("Bucket.", minLength=3, maxLength=63, pattern=r"^[a-z0-9][a-z0-9.-]+[a-z0-9]$",
                                    **{"x-kubernetes-validations": [bucket_name_rule("spec.storage.s3.bucket")]}),
                        "prefix": s("Key prefix.", maxLength=1024),
                        "region": s("Region.", maxLength=63),
                        "credentialsSecretRef": obj(
                            "Secret with keys accessKeyID and secretAccessKey.",
                            {"name": s("Name of the Secret.", minLength=1, maxLength=253,
                                       pattern=DNS1123_SUBDOMAIN)},
                            required=["name"]),
                        "forcePathStyle": s("Use path-style addressing (most S3-compatible stores).",
                                            "boolean", default=True),
                        "caSecretRef": secret_key_ref(
                            "the PEM CA bundle that signed the endpoint's certificate (private CAs)", "ca.crt"),
                    }, required=["endpoint", "bucket", "credentialsSecretRef"]),
                },
                **{"x-kubernetes-validations": [
                    cel("has(self.pvc) != has(self.s3)", "exactly one of storage.pvc or storage.s3 must be set"),
                ]},
            ),
        },
        required=["karmadaDeploymentRef", "storage"],
        **{"x-kubernetes-validations": [
            cel("!has(self.continuous) || !has(self.schedule)",
                "spec.continuous takes its own full snapshots: leave spec.schedule empty"),
        ]},
    )


def snapshot_item() -> Schema:
    return obj("A stored snapshot.", {
        "name": s("Snapshot name in the store (<EtcdBackup>-<UTC time>.db).", maxLength=253),
        "location": s("pvc://claim/path or s3://bucket/key."),
        "sizeBytes": s("Size.", "integer", format="int64"),
        "sha256": s("sha256 of the file."),
        "revision": s("etcd revision at snapshot time.", "integer", format="int64"),
        "etcdVersion": s("etcd server version."),
        "karmadaVersion": s("Karmada version of the KarmadaDeployment when the snapshot was taken."),
        "takenAt": s("When it was taken.", format="date-time"),
        "durationSeconds": s("How long the backup took (snapshot, upload, verification), when known.",
                             "number"),
    })


def last_successful_backup() -> Schema:
    item = snapshot_item()
    item["description"] = "The last backup that succeeded."
    item["properties"]["endpoint"] = s("The etcd member the snapshot was taken from.")
    return item


def etcd_backup_status() -> Schema:
    return obj("Observed state.", {
        "phase": s("Phase.", enum=["Pending", "Running", "Succeeded", "Failed"]),
        "observedGeneration": s("Generation last reconciled.", "integer", format="int64"),
        "lastScheduleTime": s("Last scheduled run.", format="date-time"),
        "nextScheduleTime": s("Next scheduled run (absent without a schedule or while suspended).",
                              format="date-time"),
        "lastSuccessfulTime": s("Last successful backup.", format="date-time"),
        "lastSuccessfulBackup": last_successful_backup(),
        "snapshots": arr("Snapshots kept, newest first.", snapshot_item()),
        "activeJob": s("The backup Job running now."),
        "lastAttemptTime": s("When the last run ended.", format="date-time"),
        "continuous": obj("The continuous backup's follower, from its own report.", {
            "phase": s("Starting, Following, Failing or Suspended.",
                       enum=["Starting", "Following", "Failing", "Suspended"]),
            "pod": s("The follower's pod."),
            "full": s("The full snapshot the current chain starts from."),
            "fullRevision": s("Its etcd revision.", "integer", format="int64"),
            "fullTime": s("When it was taken.", format="date-time"),
            "deltaRevision": s("The last revision written to the store (a restore to latest reaches it).",
                               "integer", format="int64"),
            "deltaTime": s("When the follower received the last change written.", format="date-time"),
            "deltas": s("Deltas written since the follower started.", "integer", format="int64"),
            "bytes": s("Bytes of deltas written since the follower started.", "integer", format="int64"),
            "fulls": s("Full snapshots taken since the follower started.", "integer", format="int64"),
            "gaps": s("Chains cut by a gap (etcd compacted a revision the chain needed) since it started.",
                      "integer", format="int64"),
        }),
        "failedAttempts": s("Runs failed in a row (an on-demand backup retries after 30 s, doubling, at most "
                            "10 min; a spec change retries at once).", "integer", format="int64"),
        "conditions": conditions(),
    })


def etcd_restore_spec() -> Schema:
    return obj(
        "Restore a snapshot into a new etcd cluster for a KarmadaDeployment.",
        {
            "source": obj(
                "Which snapshot: a backup's (latest or a named one) or an explicit location.",
                {
                    "backupRef": local_ref("the EtcdBackup whose snapshot is restored"),
                    "snapshot": s("With backupRef: latest, or a snapshot file name from its status. Of a "
                                  "continuous EtcdBackup, latest is its newest full snapshot and every change "
                                  "after it in the store.",
                                  maxLength=253, default="latest", pattern=r"^[A-Za-z0-9._-]+$"),
                    "revision": s("With a continuous EtcdBackup: restore etcd as it was at this revision (the "
                                  "newest full snapshot at or before it, and the changes after it up to it).",
                                  "integer", format="int64", minimum=1),
                    "time": s("With a continuous EtcdBackup: restore etcd as it was at this time (every change "
                              "the backup received at or before it).", format="date-time"),
                    "backupName": s("With location: the name of the continuous EtcdBackup whose chains (full "
                                    "snapshots <name>-<time>.db and their deltas) are in the store; location is "
                                    "then their directory (pvc://claim/dir or s3://bucket/prefix), e.g. in a new "
                                    "site where that EtcdBackup does not exist. Latest, or revision, or time.",
                                    minLength=1, maxLength=253, pattern=DNS1123_SUBDOMAIN),
                    "s3": obj("Endpoint and credentials of an s3:// location (its bucket and key come from it).", {
                        "endpoint": s("Endpoint URL.", maxLength=2048, pattern=r"^https?://.+$"),
                        "region": s("Region.", maxLength=63),
                        "credentialsSecretRef": obj(
                            "Secret with keys accessKeyID and secretAccessKey.",
                            {"name": s("Name of the Secret.", minLength=1, maxLength=253,
                                       pattern=DNS1123_SUBDOMAIN)},
                            required=["name"]),
                        "forcePathStyle": s("Use path-style addressing.", "boolean", default=True),
                        "caSecretRef": secret_key_ref(
                            "the PEM CA bundle that signed the endpoint's certificate (private CAs)", "ca.crt"),
                    }, required=["endpoint", "credentialsSecretRef"]),
                    "location": s("Explicit pvc://claim/path or s3://bucket/key.", maxLength=2048,
                                  pattern=r"^(pvc|s3)://[^/]+/.+$", **{"x-kubernetes-validations": [
                                      cel(r"!self.matches(r'^[a-z0-9]+://[^/]*/(.*/)?\.\.(/.*)?$')",
                                          "spec.source.location must not contain '..' path segments: it "
                                          "must stay inside the volume or bucket"),
                                  ]}),
                },
                **{"x-kubernetes-validations": [
                    cel("has(self.backupRef) != has(self.location)",
                        "exactly one of source.backupRef or source.location must be set"),
                    cel("!(has(self.revision) && has(self.time))",
                        "source.revision and source.time are two ways to name a point: set one"),
                    cel("!(has(self.revision) || has(self.time)) || has(self.backupName) || "
                        "(has(self.backupRef) && self.snapshot == 'latest')",
                        "source.revision and source.time name a point in a continuous backup: they go with "
                        "source.backupRef and no snapshot name, or with source.location and source.backupName"),
                    cel("!has(self.backupName) || has(self.location)",
                        "source.backupName names the continuous backup whose chains are at source.location: set "
                        "location to their directory"),
                    cel("!has(self.s3) || (has(self.location) && self.location.startsWith('s3://'))",
                        "source.s3 goes with an s3:// source.location", fieldPath=".s3"),
                    cel("!has(self.location) || !self.location.startsWith('s3://') || has(self.s3)",
                        "an s3:// source.location needs source.s3 (endpoint and credentials)", fieldPath=".location"),
                ]},
            ),
            "target": obj("Where the restored etcd goes.", {
                "karmadaDeploymentRef": local_ref("the KarmadaDeployment whose new etcd is made from the snapshot"),
            }, required=["karmadaDeploymentRef"]),
            "pki": obj(
                "The source's CA and service-account key for the target, so that what the source issued stays "
                "valid: Pull agents' client certificates and service-account tokens stored in etcd.",
                {"secretRef": obj(
                    "A Secret in this namespace with ca.crt, ca.key, sa.key and sa.pub (e.g. a copy of the source's "
                    "<name>-pki Secret); written into the target's PKI Secret before it issues anything.",
                    {"name": s("Name of the Secret.", minLength=1, maxLength=253, pattern=DNS1123_SUBDOMAIN)},
                    required=["name"])},
            ),
            "bumpRevision": s("Raise the revision by this much (with mark-compacted) so watchers resync.",
                              "integer", format="int64", minimum=0, default=1000000000),
        },
        required=["source", "target"],
    )


def etcd_restore_status() -> Schema:
    return obj("Observed state.", {
        "phase": s("Phase.", enum=["Pending", "Running", "Succeeded", "Failed"]),
        "observedGeneration": s("Generation last reconciled.", "integer", format="int64"),
        "restoredFrom": s("Snapshot location restored."),
        "restoredRevision": s("Revision after the bump.", "integer", format="int64"),
        "keys": s("Live keys at the restored revision, read from each restored etcd member when verified.",
                  "integer", format="int64"),
        "snapshot": obj("The snapshot restored.", {
            "name": s("Name in the store."), "sha256": s("sha256, checked before anything was written."),
            "sizeBytes": s("Size.", "integer", format="int64"),
            "revision": s("Revision in the snapshot.", "integer", format="int64"),
        }),
        "point": obj("A restore to a point of a continuous backup: what it was prepared from.", {
            "observedGeneration": s("The spec generation it was prepared for.", "integer", format="int64"),
            "full": s("The full snapshot the chain starts from."),
            "revision": s("The source's revision restored to (the last change included).", "integer",
                          format="int64"),
            "time": s("When the backup received that change.", format="date-time"),
            "revisionsReplayed": s("Revisions replayed on the full snapshot.", "integer", format="int64"),
            "snapshot": obj("The snapshot the point was prepared as (every member is seeded from it).", {
                "name": s("Name in the store."), "sha256": s("sha256."), "location": s("Where it is."),
                "revision": s("Its own revision (the replay numbers revisions itself).", "integer",
                              format="int64"),
            }),
        }),
        "seededAt": s("When every member's volume was seeded.", format="date-time"),
        "seededMembers": arr("Each member as its restore Job reported it.", obj("A member.", {
            "member": s("Member name."),
            "restoredRevision": s("Revision, read from the restored database.", "integer", format="int64"),
        })),
        "expected": obj("What the snapshot's metadata says, for the verification.", {
            "revision": s("Revision of the snapshot.", "integer", format="int64"),
            "keys": s("Live keys at that revision (when the backup recorded them).", "integer", format="int64"),
            "bumpRevision": s("Bump applied.", "integer", format="int64"),
            "counts": {"type": "object", "description": "Objects per Karmada resource at that revision.",
                       "additionalProperties": {"type": "integer", "format": "int64"}},
        }),
        "verification": obj("The restored plane compared with the snapshot (condition Verified).", {
            "snapshotRevision": s("Revision in the snapshot.", "integer", format="int64"),
            "restoredRevision": s("Revision restored (snapshot + bump).", "integer", format="int64"),
            "restoredKeys": s("Live keys at the restored revision, read from each restored etcd member.",
                              "integer", format="int64", nullable=True),
            "liveKeysAtSnapshot": s("Live keys at the snapshot's revision.", "integer", format="int64",
                                    nullable=True),
            "objects": arr("Objects per Karmada resource.", obj("A resource.", {
                "resource": s("Resource (plural)."),
                "snapshot": s("In the snapshot.", "integer", format="int64"),
                "restored": s("Served by the restored karmada-apiserver.", "integer", format="int64"),
            })),
            "differences": arr("What differs; empty when Verified.", s("A difference.")),
        }),
        "conditions": conditions(),
    })


CRDS: list[dict[str, Any]] = [
    {
        "kind": "KarmadaDeployment",
        "plural": "karmadadeployments",
        "singular": "karmadadeployment",
        # Not "karmada": that is the singular of Karmada's own operator's kind (karmadas.operator.karmada.io),
        # and with both CRDs installed `kubectl get karmada` must keep meaning theirs.
        "shortNames": ["kd"],
        "description": "A Karmada control plane installed and cared for by the operator.",
        "spec": karmada_deployment_spec,
        "status": karmada_deployment_status,
        "columns": [
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Version", "type": "string", "jsonPath": ".status.karmadaVersion"},
            {"name": "Members", "type": "string", "jsonPath": ".status.readyMembers",
             "description": "Ready members / members in spec"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
    },
    {
        "kind": "EtcdBackup",
        "plural": "etcdbackups",
        "singular": "etcdbackup",
        "shortNames": ["etcdbk"],
        "description": "Backups of a KarmadaDeployment's etcd: once, or on a schedule with retention.",
        "spec": etcd_backup_spec,
        "status": etcd_backup_status,
        "columns": [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
            {"name": "Last Success", "type": "date", "jsonPath": ".status.lastSuccessfulTime"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
    },
    {
        "kind": "EtcdRestore",
        "plural": "etcdrestores",
        "singular": "etcdrestore",
        "shortNames": ["etcdrs"],
        "description": "Restore of an etcd snapshot into a new etcd cluster.",
        "spec": etcd_restore_spec,
        "status": etcd_restore_status,
        "columns": [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Target", "type": "string", "jsonPath": ".spec.target.karmadaDeploymentRef.name"},
            {"name": "Revision", "type": "integer", "jsonPath": ".status.restoredRevision"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
    },
]


def crd(entry: dict[str, Any]) -> dict[str, Any]:
    """The CustomResourceDefinition object for one entry of CRDS."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{entry['plural']}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": entry["kind"],
                "listKind": f"{entry['kind']}List",
                "plural": entry["plural"],
                "singular": entry["singular"],
                "shortNames": entry["shortNames"],
                "categories": ["karmada-operator"],
            },
            "scope": "Namespaced",
            "versions": [{
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": entry["columns"],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": entry["description"],
                    "properties": {
                        "apiVersion": s("API version of this object."),
                        "kind": s("Kind of this object."),
                        "metadata": {"type": "object"},
                        "spec": entry["spec"](),
                        "status": entry["status"](),
                    },
                    "required": ["spec"],
                }},
            }],
        },
    }
