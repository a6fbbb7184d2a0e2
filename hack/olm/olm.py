#!/usr/bin/env python3
"""OLM on the test bed's host cluster, from pinned sources, with no registry.

    hack/olm/olm.py up      # images, OLM (quickstart CRDs and deployments), our catalog
    hack/olm/olm.py down    # remove all of it (OLM, its CRDs, what it installed)
    hack/olm/olm.py images  # only build the images and import them into the node's containerd

`up` builds OLM (olm, catalog, package-server, copy-content, cpb) and opm with
hack/testenv/build-bins.sh (versions: hack/versions.env), assembles the images OLM needs with
hack/testenv/oci_image.py and imports them into the node's containerd: OLM's own image, opm's
(bundle unpacking), our operator image (hack/testenv/operator-image.sh, tagged with the bundle
version), a bundle image of bundle/ and a file-based catalog image (`opm serve`) holding it.
OLM's quickstart manifests (deploy/upstream/quickstart of the pinned module) are applied with
those local image names, then a CatalogSource for our catalog in namespace olm.

OLM forces imagePullPolicy Always on catalog and bundle images named by tag, so those two are
named by digest (REPO@sha256:...), which the node resolves locally. The rest have a non-latest
tag and IfNotPresent. The tests (tests/e2e/test_olm.py) use the same functions.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
TESTENV = ROOT / "hack" / "testenv"
sys.path.insert(0, str(ROOT / "hack" / "bundle"))
import generate as bundle_generate  # noqa: E402

OLM_MODULE = "github.com/operator-framework/operator-lifecycle-manager"
# Local image names (no registry answers for them: they exist only in the node's containerd).
REGISTRY = "ko-testenv.local"
BUNDLE_REPO = f"{REGISTRY}/karmada-operator-bundle"
CATALOG_REPO = f"{REGISTRY}/karmada-operator-catalog"
OPERATOR_REPO = f"{REGISTRY}/karmada-ansible-operator"
# What hack/testenv/operator-image.sh names the operator image by default; bundles get it
# tagged with their version.
OPERATOR_DEV_IMAGE = f"{OPERATOR_REPO}:dev"
PACKAGE = bundle_generate.PACKAGE
OLM_NAMESPACE = "olm"
CATALOG_SOURCE = "karmada-operator-catalog"
# Where opm serves the catalog from inside its image (the index.configs label says so).
CONFIGS = "/configs"
OLM_BINARIES = {"olm": "olm", "olm-catalog": "catalog", "olm-package-server": "package-server",
                "olm-copy-content": "copy-content", "olm-cpb": "cpb"}
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def log(msg: str) -> None:
    print(f"[olm] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Settings


@cache
def versions() -> dict[str, str]:
    """hack/versions.env as a dict (plain KEY=value lines)."""
    out = {}
    for line in (ROOT / "hack" / "versions.env").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


@cache
def testenv() -> dict[str, str]:
    """The test bed's paths as hack/testenv/env.sh computes them."""
    names = ["KO_LINKS", "KO_IMAGE_DIR", "KO_CONTAINERD_SOCK", "KO_KUBECONFIG", "KO_VENV"]
    script = f'. "{TESTENV}/env.sh" >/dev/null; ' + "; ".join(f'echo "{n}=${{{n}}}"' for n in names)
    out = subprocess.run(["bash", "-c", script], check=True, capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def olm_image() -> str:
    return f"{REGISTRY}/olm:{versions()['OLM_VERSION']}"


def opm_image() -> str:
    return f"{REGISTRY}/opm:{versions()['OPERATOR_REGISTRY_VERSION']}"


def operator_image(version: str) -> str:
    return f"{OPERATOR_REPO}:{version}"


def link(name: str) -> Path:
    return Path(testenv()["KO_LINKS"]) / name


def image_dir() -> Path:
    path = Path(testenv()["KO_IMAGE_DIR"]) / "olm"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run(*argv: str, input: str | None = None, check: bool = True, timeout: float = 600,
        env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), input=input, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... failed ({proc.returncode}):\n{proc.stdout[-2000:]}"
                           f"\n{proc.stderr[-4000:]}")
    return proc


def kubectl(*args: str, input: str | None = None, check: bool = True, timeout: float = 300
            ) -> subprocess.CompletedProcess:
    return run(str(link("kubectl")), "--kubeconfig", testenv()["KO_KUBECONFIG"], *args, input=input,
               check=check, timeout=timeout)


def build_bins() -> None:
    """OLM's programs and opm, built once from the pinned modules (niced: the machine is shared)."""
    names = [*OLM_BINARIES, "opm", "grpc-health-probe"]
    run("nice", "-n", "19", str(TESTENV / "build-bins.sh"), *names, timeout=7200)


# ---------------------------------------------------------------------------------------------
# OLM's quickstart manifests, with our image names


def module_dir(module: str, version: str, pinned_sum: str) -> Path:
    """The pinned module's source in Go's module cache (downloaded if needed, hash checked)."""
    proc = run("go", "mod", "download", "-json", f"{module}@{version}",
               env={"GONOSUMDB": "github.com/operator-framework", "GOFLAGS": "-mod=mod"})
    info = json.loads(proc.stdout)
    if info.get("Sum") != pinned_sum:
        raise RuntimeError(f"{module}@{version}: hash {info.get('Sum')} != pinned {pinned_sum}")
    return Path(info["Dir"])


# The object olm-operator reads its settings from (deploy/chart/templates/*-olmconfig.yaml).
OLM_CONFIG = {"apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig", "metadata": {"name": "cluster"}}


def quickstart() -> tuple[list[dict], list[dict]]:
    """(CRDs, the rest) of OLM's deploy/upstream/quickstart at the pinned version.

    v0.33.0's quickstart crds.yaml is stale (generated by controller-gen v0.4.1: no
    CatalogSource ``grpcPodConfig``, no OLMConfig CRD, without which olm-operator waits for its
    informers forever). The CRDs of the module's Helm chart (deploy/chart/crds, generated with
    the code of this version) are used, and the quickstart's only for a CRD the chart lacks;
    plus the OLMConfig object the chart makes."""
    v = versions()
    module = module_dir(OLM_MODULE, v["OLM_VERSION"], v["OLM_MODULE_SUM"])
    base = module / "deploy" / "upstream" / "quickstart"
    load = lambda path: [d for d in yaml.safe_load_all(path.read_text()) if d]  # noqa: E731
    crds = load(base / "crds.yaml")
    chart = [d for path in sorted((module / "deploy" / "chart" / "crds").glob("*.yaml")) for d in load(path)]
    return merge_crds(chart, crds), [*load(base / "olm.yaml"), OLM_CONFIG]


def merge_crds(crds: list[dict], more: list[dict]) -> list[dict]:
    """``crds`` plus those of ``more`` it does not name (``crds`` win)."""
    names = {c["metadata"]["name"] for c in crds}
    return crds + [c for c in more
                   if c.get("kind") == "CustomResourceDefinition" and c["metadata"]["name"] not in names]


def _containers(doc: dict) -> list[dict]:
    if doc.get("kind") == "Deployment":
        return doc["spec"]["template"]["spec"]["containers"]
    if doc.get("kind") == "ClusterServiceVersion":  # packageserver
        return [c for d in doc["spec"]["install"]["spec"]["deployments"]
                for c in d["spec"]["template"]["spec"]["containers"]]
    return []


def rewrite_olm(docs: Iterable[dict], olm: str, opm: str) -> list[dict]:
    """OLM's quickstart olm.yaml for this test bed.

    Every OLM container runs ``olm`` with imagePullPolicy IfNotPresent; the catalog operator
    unpacks bundles with ``opm`` (--opmImage), copies its tools from ``olm`` (--util-image) and
    serves ConfigMap catalogs with ``opm`` (no :latest image); the operatorhub.io
    CatalogSource, which needs the internet, is left out. The quickstart's single-dash long
    flags (``-namespace``) are written with two dashes: the programs parse flags with pflag,
    which reads ``-namespace`` as the shorthands n, a, m... and exits.
    """
    out = []
    for doc in docs:
        doc = copy.deepcopy(doc)
        if doc.get("kind") == "CatalogSource":
            continue
        for container in _containers(doc):
            container["image"] = olm
            container["imagePullPolicy"] = "IfNotPresent"
            for key in ("command", "args"):
                if container.get(key):
                    container[key] = [long_flag(a) for a in container[key]]
            if container.get("command", [None])[0] == "/bin/catalog":
                kept: list[str] = []
                skip = False
                for arg in container.get("args") or []:
                    if skip:
                        skip = False
                        continue
                    name = arg.split("=", 1)[0].lstrip("-")
                    if name in ("util-image", "opmImage", "configmapServerImage"):
                        skip = "=" not in arg  # the value is the next argument
                        continue
                    kept.append(arg)
                container["args"] = kept + [f"--util-image={olm}", f"--opmImage={opm}",
                                            f"--configmapServerImage={opm}"]
        out.append(doc)
    return out


def long_flag(arg: str) -> str:
    """``-name[=v]`` as ``--name[=v]``; one-letter flags (``-v=4``), ``--x`` and values stay."""
    if arg.startswith("-") and not arg.startswith("--") and len(arg.split("=", 1)[0]) > 2:
        return "-" + arg
    return arg


def olm_deployments(docs: Iterable[dict]) -> list[str]:
    return [d["metadata"]["name"] for d in docs if d.get("kind") == "Deployment"]


# ---------------------------------------------------------------------------------------------
# Images


def _stamp_inputs(args: list[str]) -> str:
    """A digest of oci_image.py's arguments and every host input they name."""
    h = hashlib.sha256((TESTENV / "oci_image.py").read_bytes())
    h.update(json.dumps(args).encode())
    for arg in args:
        src = Path(arg.split(":", 1)[0])
        if not src.is_absolute() or not src.exists():
            continue
        paths = sorted(p for p in src.rglob("*") if p.is_file()) if src.is_dir() else [src]
        for p in paths:
            h.update(f"{p.relative_to(src) if src.is_dir() else p}\0".encode())
            h.update(p.read_bytes() if p.stat().st_size < (1 << 20) else f"{p.stat().st_size} {p.stat().st_mtime_ns}"
                     .encode())
    return h.hexdigest()


def build_image(name: str, args: list[str]) -> tuple[Path, str]:
    """Write image archive <name>.tar with oci_image.py unless it is up to date: (path, digest)."""
    out = image_dir() / f"{name}.tar"
    stamp_file = out.with_suffix(".tar.stamp")
    stamp = _stamp_inputs(args)
    if out.exists() and stamp_file.exists():
        old = stamp_file.read_text().split()
        if old and old[0] == stamp:
            return out, old[1]
    py = Path(testenv()["KO_VENV"]) / "bin" / "python"
    digest = run(str(py if py.exists() else sys.executable), str(TESTENV / "oci_image.py"), "--out", str(out),
                 *args).stdout.strip()
    stamp_file.write_text(f"{stamp}\n{digest}\n")
    log(f"built image {name} ({digest})")
    return out, digest


def ctr(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run("ctr", "--address", testenv()["KO_CONTAINERD_SOCK"], "-n", "k8s.io", *args, check=check)


def import_image(archive: Path) -> None:
    ctr("images", "import", str(archive))


def tag_image(source: str, target: str) -> None:
    """Give an image in the node's containerd one more name."""
    ctr("images", "tag", "--force", source, target)


def olm_image_args() -> list[str]:
    """OLM's image as upstream's Dockerfile makes it: the five programs in /bin, and cp (the
    bundle-unpack Job copies cpb with /bin/cp) from the host's static busybox."""
    args = ["--ref", olm_image(), "--busybox", os.environ.get("KO_BUSYBOX", "/bin/busybox"),
            "--file", f"{CA_BUNDLE}:{CA_BUNDLE}:644", "--dir", "tmp:1777"]
    for component, binary in OLM_BINARIES.items():
        args += ["--file", f"{link(component)}:/bin/{binary}:755"]
    return args


def opm_files() -> list[str]:
    return ["--file", f"{link('opm')}:/bin/opm:755",
            "--file", f"{link('grpc-health-probe')}:/bin/grpc_health_probe:755",
            "--file", f"{CA_BUNDLE}:{CA_BUNDLE}:644", "--dir", "tmp:1777"]


def opm_image_args() -> list[str]:
    return ["--ref", opm_image(), *opm_files(), "--entrypoint", "/bin/opm"]


def base_images() -> None:
    """Build and import OLM's and opm's images."""
    for name, args in (("olm", olm_image_args()), ("opm", opm_image_args())):
        archive, _ = build_image(name, args)
        import_image(archive)


def bundle_labels(bundle_dir: Path) -> dict[str, str]:
    """The bundle image's labels: metadata/annotations.yaml (bundle.Dockerfile says the same)."""
    return yaml.safe_load((bundle_dir / "metadata" / "annotations.yaml").read_text())["annotations"]


def bundle_image(bundle_dir: Path, name: str) -> str:
    """Build and import the bundle image of bundle_dir (manifests/, metadata/, tests/); its
    reference by digest."""
    args = ["--ref", f"{BUNDLE_REPO}:{name}", "--digest-ref", BUNDLE_REPO]
    for sub in ("manifests", "metadata", "tests"):
        if (bundle_dir / sub).is_dir():
            args += ["--tree", f"{bundle_dir / sub}:/{sub}:0:0"]
    for key, value in bundle_labels(bundle_dir).items():
        args += ["--label", f"{key}={value}"]
    archive, digest = build_image(f"bundle-{name}", args)
    import_image(archive)
    return f"{BUNDLE_REPO}@{digest}"


def render_bundle(bundle_dir: Path, image: str) -> dict:
    """opm's olm.bundle object of a bundle directory, pointing at its image."""
    out = run(str(link("opm")), "render", str(bundle_dir), "-o", "json").stdout
    docs = [d for d in _json_stream(out) if d.get("schema") == "olm.bundle"]
    if len(docs) != 1:
        raise RuntimeError(f"opm render {bundle_dir}: expected one olm.bundle, got {len(docs)}")
    doc = docs[0]
    doc["image"] = image
    return doc


def _json_stream(text: str) -> list[dict]:
    decoder, pos, out = json.JSONDecoder(), 0, []
    text = text.strip()
    while pos < len(text):
        obj, end = decoder.raw_decode(text, pos)
        out.append(obj)
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


def fbc(bundles: list[dict], channel: str, replaces: dict[str, str | None]) -> list[dict]:
    """A file-based catalog: our package, one channel of the given bundles (olm.bundle objects),
    each entry replacing the CSV named in ``replaces`` (CSV name -> replaced CSV name)."""
    if not bundles:
        raise ValueError("a catalog needs at least one bundle")
    names = [b["name"] for b in bundles]
    if len(set(names)) != len(names):
        raise ValueError(f"bundles named twice: {names}")
    entries = []
    for name in names:
        entry: dict[str, Any] = {"name": name}
        if replaces.get(name):
            if replaces[name] not in names:
                raise ValueError(f"{name} replaces {replaces[name]}, which is not in the catalog")
            entry["replaces"] = replaces[name]
        entries.append(entry)
    package = {"schema": "olm.package", "name": PACKAGE, "defaultChannel": channel}
    chan = {"schema": "olm.channel", "package": PACKAGE, "name": channel, "entries": entries}
    return [package, chan, *(dict(b, package=PACKAGE) for b in bundles)]


def catalog_image(docs: list[dict], name: str) -> str:
    """Build and import a catalog image serving ``docs`` with `opm serve`; its reference by digest."""
    work = image_dir() / f"catalog-{name}.configs"
    configs = work / PACKAGE
    configs.mkdir(parents=True, exist_ok=True)
    (configs / "catalog.json").write_text("".join(json.dumps(d, indent=2, sort_keys=True) + "\n" for d in docs))
    run(str(link("opm")), "validate", str(work))
    args = ["--ref", f"{CATALOG_REPO}:{name}", "--digest-ref", CATALOG_REPO, *opm_files(),
            "--tree", f"{work}:{CONFIGS}:0:0", "--user", "1001",
            "--label", f"operators.operatorframework.io.index.configs.v1={CONFIGS}",
            # No --cache-dir: with one, opm serve insists on a cache built beforehand; without,
            # it builds one in $TMPDIR when it starts (a second for a catalog this small).
            "--entrypoint", "/bin/opm", "--cmd", "serve", CONFIGS]
    archive, digest = build_image(f"catalog-{name}", args)
    import_image(archive)
    return f"{CATALOG_REPO}@{digest}"


# ---------------------------------------------------------------------------------------------
# Bundles of the operator


def make_bundle(version: str, out: Path, replaces: str | None = None) -> Path:
    """bundle/ generated from config/ for ``version``, running the operator image tagged
    ``version`` (hack/bundle/generate.py, as `make bundle` does); returns the bundle directory."""
    defaults = bundle_generate.makefile_defaults()
    objs = [o for o in yaml.safe_load_all(bundle_generate.kustomize(str(link("kubectl")))) if o]
    files = bundle_generate.build(objs, version=version, channels=defaults["CHANNELS"],
                                  default_channel=defaults["DEFAULT_CHANNEL"], image=operator_image(version),
                                  replaces=replaces)
    bundle_generate.write(files, out)
    return out / "bundle"


@cache
def import_operator_image() -> None:
    """Our operator image (operator-image.sh builds it, cached) in the node's containerd; once
    per process (the archive is about a gigabyte)."""
    built = run(str(TESTENV / "operator-image.sh"), OPERATOR_DEV_IMAGE, timeout=3600)
    import_image(Path(built.stdout.strip().splitlines()[-1]))


def operator_image_for(version: str) -> None:
    """Our operator image, tagged ``version`` in the node's containerd."""
    import_operator_image()
    tag_image(OPERATOR_DEV_IMAGE, operator_image(version))


# A later release in a catalog is another build of the operator, as a real next release is: this
# tree with one file of its own (its version) under roles/, which changes the operator's build id
# (karmada_converged.build_id: roles, playbooks, plugins, watches.yaml) and nothing it makes. Its
# first pass over a Karmada is then a full one, as after any operator upgrade.
RELEASE_NOTE = Path("roles/karmada_deployment/files/release")


@cache
def later_release_image(version: str) -> None:
    """The operator image of a later ``version`` (operator-image.sh run on a copy of the tree that
    carries RELEASE_NOTE), imported into the node's containerd as operator_image(version)."""
    with tempfile.TemporaryDirectory(prefix=f"ko-release-{version}-") as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache"))
        (tree / RELEASE_NOTE).parent.mkdir(parents=True, exist_ok=True)
        (tree / RELEASE_NOTE).write_text(f"{version}\n")
        out = image_dir() / f"operator-{version}.tar"
        built = run(str(tree / "hack" / "testenv" / "operator-image.sh"), operator_image(version), timeout=3600,
                    env={"KO_OPERATOR_IMAGE_OUT": str(out)})
        import_image(Path(built.stdout.strip().splitlines()[-1]))


def release(versions_: list[str], work: Path, name: str) -> tuple[str, dict[str, str]]:
    """Bundles for ``versions_`` (each replacing the one before) and a catalog of all of them.

    Returns the catalog image (by digest) and CSV name -> bundle image."""
    rendered, replaces, images = [], {}, {}
    previous = None
    for version in versions_:
        if previous is None:
            operator_image_for(version)  # the tree as it is
        else:
            later_release_image(version)  # another build, as a next release is
        bundle_dir = make_bundle(version, work / f"bundle-{version}", replaces=previous)
        image = bundle_image(bundle_dir, version)
        doc = render_bundle(bundle_dir, image)
        rendered.append(doc)
        replaces[doc["name"]] = f"{PACKAGE}.v{previous}" if previous else None
        images[doc["name"]] = image
        previous = version
    return catalog_image(fbc(rendered, bundle_generate.makefile_defaults()["DEFAULT_CHANNEL"], replaces), name), images


def catalog_source(name: str, namespace: str, image: str) -> dict:
    return {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"sourceType": "grpc", "image": image, "displayName": "Karmada-Operator (test bed)",
                     "publisher": "karmada-operator", "grpcPodConfig": {"securityContextConfig": "restricted"}}}


# ---------------------------------------------------------------------------------------------
# OLM up and down


def wait(predicate, timeout: float, what: str, interval: float = 2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def get(*args: str) -> dict | None:
    proc = kubectl("get", *args, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def csv_phase(name: str, namespace: str) -> str:
    return ((get("csv", name, "-n", namespace) or {}).get("status") or {}).get("phase", "")


def crds_established(crds: list[dict], timeout: float = 120) -> None:
    def done() -> bool:
        for crd in crds:
            obj = get("crd", crd["metadata"]["name"])
            conds = ((obj or {}).get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                return False
        return True

    wait(done, timeout, "OLM's CRDs to be Established")


PACKAGES_PATH = "/apis/packages.operators.coreos.com/v1"


def packageserver_paths() -> dict[str, str]:
    """Where the packages API can be read: each packageserver pod through the API server's pod
    proxy (no Service, no kube-proxy on the way) and the Service through its proxy."""
    pods = (get("pods", "-n", OLM_NAMESPACE, "-l", "app=packageserver") or {}).get("items") or []
    paths = {f"pod {p['metadata']['name']} ({(p.get('status') or {}).get('podIP')})":
             f"/api/v1/namespaces/{OLM_NAMESPACE}/pods/https:{p['metadata']['name']}:5443/proxy{PACKAGES_PATH}"
             for p in pods}
    paths["service packageserver-service"] = (f"/api/v1/namespaces/{OLM_NAMESPACE}/services/"
                                              f"https:packageserver-service:5443/proxy{PACKAGES_PATH}")
    return paths


def kube_proxy_state(cluster_ip: str) -> str:
    """The bed's kube-proxy: alive, its healthz (last sync), and its NAT rules for one ClusterIP."""
    import urllib.request
    try:
        with urllib.request.urlopen("http://127.0.0.1:10256/healthz", timeout=3) as resp:
            health = f"{resp.status} {resp.read().decode()[:300]}"
    except Exception as exc:  # noqa: BLE001 - a diagnostic: say what happened
        health = f"unreachable: {exc}"
    rules = "(no ClusterIP)"
    if cluster_ip:
        nat = run("iptables-save", "-t", "nat", check=False)
        rules = "\n".join(line for line in nat.stdout.splitlines() if cluster_ip in line) or "(none)"
    alive = run("pgrep", "-a", "kube-proxy", check=False).stdout.strip() or "(not running)"
    return f"kube-proxy: {alive}\nhealthz: {health}\nNAT rules for {cluster_ip}:\n{rules}"


def olm_diagnostics() -> str:
    """What OLM's own bring-up looks like: the packageserver CSV's status, OLM's pods, the
    packages APIService, the API read from each packageserver pod directly and through its
    Service, the packageserver's logs, kube-proxy's state for the Service's address, and the
    namespace's latest Events."""
    parts = []
    for args in (("get", "csv", "packageserver", "-n", OLM_NAMESPACE, "-o", "jsonpath={.status}"),
                 ("get", "pods", "-n", OLM_NAMESPACE, "-o", "wide"),
                 ("get", "apiservice", "v1.packages.operators.coreos.com", "-o", "jsonpath={.status}"),
                 ("get", "endpointslices", "-n", OLM_NAMESPACE, "-o", "wide",
                  "-l", "kubernetes.io/service-name=packageserver-service"),
                 ("get", "events", "-n", OLM_NAMESPACE, "--sort-by=.lastTimestamp")):
        proc = kubectl(*args, check=False)
        parts.append(f"$ kubectl {' '.join(args)}\n{(proc.stdout + proc.stderr)[-3000:]}")
    for what, path in packageserver_paths().items():
        proc = kubectl("get", "--raw", path, check=False)
        parts.append(f"{what} answers {PACKAGES_PATH}: rc {proc.returncode} {(proc.stdout + proc.stderr)[:300]}")
    logs = kubectl("logs", "-n", OLM_NAMESPACE, "-l", "app=packageserver", "--tail=40", "--prefix", check=False)
    parts.append(f"packageserver logs:\n{(logs.stdout + logs.stderr)[-4000:]}")
    svc = get("service", "packageserver-service", "-n", OLM_NAMESPACE) or {}
    parts.append(kube_proxy_state(((svc.get("spec") or {}).get("clusterIP")) or ""))
    return "\n".join(parts)


def packageserver_succeeded(timeout: float) -> None:
    """Wait for OLM's packageserver CSV (OLM's own, not ours). Twice in a full make test (after
    45-50 minutes of other tests on the bed) it stayed short of Succeeded: the packages
    APIService was not Available, its discovery check answered 404, while a fresh bed brings it
    up in under a minute. A third of the time, then the diagnostics (printed: each pod's own
    answer and the Service's, kube-proxy's rules for its address) and a fresh start of OLM's
    side of it (the packageserver pods, its Service and olm-operator, which re-creates the
    Service and re-installs the APIService), then
    the rest; a failure carries the diagnostics."""
    first = min(timeout / 3, 150)
    try:
        wait(lambda: csv_phase("packageserver", OLM_NAMESPACE) == "Succeeded", first, "the packageserver CSV")
        return
    except RuntimeError:
        print(f"[olm] the packageserver CSV is not Succeeded after {first:.0f}s; restarting the packageserver "
              f"and olm-operator\n" + olm_diagnostics(), file=sys.stderr)
    # New pod addresses, and a new Service address: olm-operator re-creates the Service (its CSV
    # owns it) with another ClusterIP, so neither an address a pod had before nor one a Service
    # had before stands between the API server and the packageserver.
    kubectl("delete", "pods", "-n", OLM_NAMESPACE, "-l", "app=packageserver", "--wait=false", check=False)
    kubectl("delete", "service", "packageserver-service", "-n", OLM_NAMESPACE, "--wait=false", check=False)
    kubectl("rollout", "restart", "deployment/olm-operator", "-n", OLM_NAMESPACE, check=False)
    try:
        wait(lambda: csv_phase("packageserver", OLM_NAMESPACE) == "Succeeded", timeout - first,
             "the packageserver CSV (after restarting the packageserver and olm-operator)")
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}\n{olm_diagnostics()}") from None


def olm_up(timeout: float = 600) -> float:
    """Apply OLM's CRDs and deployments (our images must be in containerd); wait until
    olm-operator, catalog-operator and packageserver are available. Seconds it took."""
    start = time.monotonic()
    crds, rest = quickstart()
    # Server-side: the CSV CRD is too big for the last-applied annotation.
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(crds))
    crds_established(crds)
    docs = rewrite_olm(rest, olm_image(), opm_image())
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs))
    for name in olm_deployments(docs):
        kubectl("rollout", "status", f"deployment/{name}", "-n", OLM_NAMESPACE, f"--timeout={int(timeout)}s",
                timeout=timeout + 30)
    packageserver_succeeded(timeout)
    kubectl("rollout", "status", "deployment/packageserver", "-n", OLM_NAMESPACE, f"--timeout={int(timeout)}s",
            timeout=timeout + 30)
    wait(lambda: kubectl("get", "packagemanifests", "-n", OLM_NAMESPACE, check=False).returncode == 0, timeout,
         "the packages API (packageserver)")
    return time.monotonic() - start


def olm_down(timeout: float = 300) -> None:
    """Remove OLM: every CSV first (the packageserver's APIService with it), then OLM's
    objects and CRDs, and the cluster roles OLM made for operators. Idempotent."""
    crds, rest = quickstart()
    docs = rewrite_olm(rest, olm_image(), opm_image())
    if get("crd", "clusterserviceversions.operators.coreos.com"):
        kubectl("delete", "subscriptions.operators.coreos.com,clusterserviceversions.operators.coreos.com,"
                "catalogsources.operators.coreos.com,installplans.operators.coreos.com", "--all", "-A",
                "--ignore-not-found", "--wait=false", check=False)
    kubectl("delete", "apiservice", "v1.packages.operators.coreos.com", "--ignore-not-found", check=False)
    kubectl("delete", "-f", "-", "--ignore-not-found", f"--timeout={int(timeout)}s", input=yaml.safe_dump_all(docs),
            check=False, timeout=timeout + 30)
    kubectl("delete", "-f", "-", "--ignore-not-found", f"--timeout={int(timeout)}s", input=yaml.safe_dump_all(crds),
            check=False, timeout=timeout + 30)
    # Roles OLM generated for installed operators and operator groups.
    for kind in ("clusterrolebinding", "clusterrole"):
        kubectl("delete", kind, "-l", "olm.owner.kind", "--ignore-not-found", check=False)
        names = kubectl("get", kind, "-o", "name", check=False).stdout.split()
        olm_made = [n for n in names if n.split("/", 1)[1].startswith("olm.og.")]
        if olm_made:
            kubectl("delete", *olm_made, "--ignore-not-found", check=False)


def up(versions_: list[str]) -> None:
    start = time.monotonic()
    log("building OLM and opm (cached) ...")
    build_bins()
    base_images()
    with tempfile.TemporaryDirectory(prefix="ko-olm-") as tmp:
        catalog, bundles = release(versions_, Path(tmp), "make-olm-up")
    log(f"images ready in {time.monotonic() - start:.0f}s: {olm_image()}, {opm_image()}, {catalog}, "
        f"{', '.join(bundles.values())}")
    took = olm_up()
    log(f"OLM {versions()['OLM_VERSION']} up in {took:.0f}s")
    kubectl("apply", "-f", "-", input=json.dumps(catalog_source(CATALOG_SOURCE, OLM_NAMESPACE, catalog)))
    log(f"CatalogSource {OLM_NAMESPACE}/{CATALOG_SOURCE} serves {', '.join(bundles)}; install with a "
        f"Subscription to package {PACKAGE} (README, 'Install from OperatorHub')")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["up", "down", "images"])
    parser.add_argument("--version", action="append", dest="versions",
                        help="bundle version in the catalog (repeatable, oldest first; default: the Makefile's)")
    args = parser.parse_args(argv)
    versions_ = args.versions or [bundle_generate.makefile_defaults()["VERSION"]]
    if args.action == "up":
        up(versions_)
    elif args.action == "down":
        olm_down()
        log("OLM removed")
    else:
        build_bins()
        base_images()
    return 0


if __name__ == "__main__":
    sys.exit(main())
