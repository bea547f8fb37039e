"""The manifests in config/kubernetes: schemas that reject bad objects, columns, least privilege."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml
from preemptd.daemon import cli
from preemptd.daemon.backends.kubernetes import client as resources
from preemptd.daemon.backends.kubernetes.backend import WATCHED
from preemptd.daemon.backends.kubernetes.client import FLAVORS, QUEUES, WORKLOADS, ApiError, Kube
from preemptd.daemon.backends.kubernetes.integrations.registry import (
    BUILTIN_INTEGRATIONS,
    resolve_integrations,
)
from preemptd.daemon.config import Config, load_config

from .cluster import MANIFESTS, REPO, manifest_documents, role_rules

CODE = REPO / "daemon" / "backends" / "kubernetes"
SOURCES = sorted(CODE.glob("*.py"))  # lease.py (leader election) included
WRITES = {"create", "patch", "delete", "replace"}
RBAC_VERB = {"replace": "update"}  # Kube.replace is a PUT, which RBAC calls update


def used_verbs() -> dict[tuple[str, str], set[str]]:
    """The verbs the backend's and the leader election's code use, read from their source,
    and the rules each default integration declares for its owner kind.

    Every ``<...>writer.create|patch|delete(RESOURCE, ...)`` and ``<...>kube.<verb>(RESOURCE, ...)``
    call, with ``subresource="status"`` where given; a write through the Writer may re-read
    the object (a conflict), so it needs ``get`` too; every watched resource is listed and watched.
    """
    names = {name: value for name, value in vars(resources).items() if isinstance(value, resources.Resource)}
    used: dict[tuple[str, str], set[str]] = {}
    for resource in WATCHED:
        used.setdefault((resource.group, resource.plural), set()).update({"list", "watch"})
    for integration in resolve_integrations(Config())[0].enabled:
        for rule in integration.rules():
            for plural in rule.resources:
                used.setdefault((rule.group, plural), set()).update(rule.verbs)
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            verb = node.func.attr
            target = ast.unparse(node.func.value)
            if not (target.endswith("writer") or target.endswith("kube")) or not node.args:
                continue
            first = node.args[0]
            if not (isinstance(first, ast.Name) and first.id in names) or verb not in {*WRITES, "get"}:
                continue
            resource = names[first.id]
            plural = resource.plural
            if any(k.arg == "subresource" and ast.literal_eval(k.value) == "status" for k in node.keywords):
                plural += "/status"
            used.setdefault((resource.group, plural), set()).add(RBAC_VERB.get(verb, verb))
            if target.endswith("writer") and verb in ("create", "patch") and resource.plural != "events":
                used.setdefault((resource.group, resource.plural), set()).add("get")
    return used


def test_rbac_grants_exactly_the_verbs_the_code_uses() -> None:
    """Least privilege: the ClusterRole is what the code needs, no more, no less."""
    assert used_verbs() == role_rules()


def test_the_shipped_cluster_role_is_what_preemptd_manifests_prints_for_the_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """config/kubernetes's ClusterRole is generated from the default integrations, word for word."""
    assert 0 == cli.main(["manifests"])
    printed = capsys.readouterr().out
    (shipped,) = [d for d in manifest_documents() if d["kind"] == "ClusterRole"]
    assert yaml.safe_load(printed) == shipped
    assert printed in (MANIFESTS / "20-rbac.yaml").read_text()


def test_the_shipped_configuration_enables_every_built_in_integration() -> None:
    """config/preemptd.toml spells out the default integrations: same set, same order."""
    shipped, problems = resolve_integrations(load_config(REPO / "config" / "preemptd.toml"))
    assert [] == problems
    assert BUILTIN_INTEGRATIONS == shipped.names == resolve_integrations(Config())[0].names


def test_preemptd_manifests_leaves_out_the_rules_of_a_disabled_integration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Turning an integration off takes its kind out of the role; the others stay."""
    config = tmp_path / "preemptd.toml"
    config.write_text("[integrations.jobset]\nenabled = false\n[integrations.job]\nenabled = false\n")
    assert 0 == cli.main(["manifests", "--config", str(config)])
    role = yaml.safe_load(capsys.readouterr().out)
    resources = {(rule["apiGroups"][0], rule["resources"][0]) for rule in role["rules"]}
    assert ("jobset.x-k8s.io", "jobsets") not in resources
    assert ("batch", "jobs") not in resources and ("batch", "jobs/status") not in resources
    assert {("apps", "deployments"), ("apps", "statefulsets"), ("", "pods")} <= resources


def test_preemptd_manifests_names_an_unknown_integration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A table for an integration nobody installed is a located configuration error."""
    config = tmp_path / "preemptd.toml"
    config.write_text("[integrations.nope]\nenabled = true\n")
    assert 78 == cli.main(["manifests", "--config", str(config)])
    assert f"{config}:1: integrations.nope: unknown integration (not installed)" in capsys.readouterr().err


def test_every_manifest_is_a_known_kubernetes_object() -> None:
    """Each document names its apiVersion, kind and name, and namespaced ones their namespace."""
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
    for document in manifest_documents():
        assert {"apiVersion", "kind", "metadata"} <= set(document), document
        assert document["metadata"]["name"]
        if document["kind"] not in cluster_scoped:
            assert "preemptd-system" == document["metadata"]["namespace"], document["metadata"]["name"]
    daemon = next(d for d in manifest_documents() if d["kind"] == "Deployment")
    assert "preemptd" == daemon["spec"]["template"]["spec"]["serviceAccountName"]
    config = next(d for d in manifest_documents() if d["kind"] == "ConfigMap")
    assert 'kind = "kubernetes"' in config["data"]["preemptd.toml"]


def _schema_has(schema: dict, json_path: str) -> bool:
    node = schema
    for part in json_path.strip(".").split("."):
        properties = node.get("properties") or {}
        if part not in properties:
            return False
        node = properties[part]
    return True


def test_printer_columns_point_at_fields_of_the_schema() -> None:
    """kubectl get queues / workloads show fields that exist (nominal, usage, pending; queue,
    priority, flavor, state)."""
    crds = {d["spec"]["names"]["kind"]: d for d in manifest_documents() if d["kind"] == "CustomResourceDefinition"}
    expected = {
        "Queue": {"Nominal", "Usage", "Pending", "Admitted"},
        "Workload": {"Queue", "Priority", "Flavor", "State"},
    }
    for kind, columns in expected.items():
        version = crds[kind]["spec"]["versions"][0]
        found = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
        assert columns <= set(found)
        schema = version["schema"]["openAPIV3Schema"]
        for column in found.values():
            assert column.startswith(".metadata") or _schema_has(schema, column), column


VALID_QUEUE = {
    "apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": "team-a"},
    "spec": {
        "parent": "research",
        "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": "a100", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": 8, "lendingLimit": "4"},
            {"name": "cpu", "nominalQuota": "500m"}]}]}],
        "preemption": {"withinQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                       "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "queueingStrategy": "StrictFIFO", "preemptMinRuntime": "5m", "reclaimMinRuntime": "1h30m",
    },
}
VALID_WORKLOAD = {
    "apiVersion": "preemptd.io/v1alpha1", "kind": "Workload", "metadata": {"name": "train", "namespace": "ml"},
    "spec": {"queueName": "team-a", "priority": 100, "owner": {"apiVersion": "batch/v1", "kind": "Job", "name": "t"},
             "podSets": [{"name": "main", "count": 4, "minCount": 2, "requests": {"cpu": "2", "memory": "8Gi"},
                          "nodeSelector": {"a": "b"}, "tolerations": [{"key": "k", "operator": "Exists"}]}]},
}


def _with(obj: dict, path: str, value: object) -> dict:
    import copy

    changed = copy.deepcopy(obj)
    *parents, last = path.split(".")
    node = changed
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return changed


MALFORMED = [
    (QUEUES, None, _with(VALID_QUEUE, "spec.preemption.withinQueue", "Sometimes"), "withinQueue"),
    (QUEUES, None, _with(VALID_QUEUE, "spec.resourceGroups.0.flavors.0.resources.1.nominalQuota", "lots"), "nominalQuota"),
    (QUEUES, None, _with(VALID_QUEUE, "spec.preemptMinRuntime", "300"), "preemptMinRuntime"),
    (QUEUES, None, _with(VALID_QUEUE, "spec.resourceGroups.0.coveredResources", []), "coveredResources"),
    (WORKLOADS, "ml", _with(VALID_WORKLOAD, "spec.podSets", []), "podSets"),
    (WORKLOADS, "ml", _with(VALID_WORKLOAD, "spec.podSets.0.count", 0), "count"),
    (WORKLOADS, "ml", _with(VALID_WORKLOAD, "spec.priority", "high"), "priority"),
    (WORKLOADS, "ml", _with(VALID_WORKLOAD, "spec.queueName", ""), "queueName"),
    (FLAVORS, None, {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "f"},
                     "spec": {"nodeTaints": [{"key": "k", "effect": "Sometimes"}]}}, "effect"),
]


@pytest.mark.asyncio
async def test_crds_accept_the_contract_examples(server, kube: Kube) -> None:
    """The CONTRACT's Queue and Workload are accepted as written."""
    await kube.create(QUEUES, VALID_QUEUE)
    created = await kube.create(WORKLOADS, VALID_WORKLOAD, "ml")
    assert VALID_WORKLOAD["spec"] == created["spec"]


@pytest.mark.asyncio
@pytest.mark.parametrize(("resource", "namespace", "body", "field"), MALFORMED, ids=[m[3] for m in MALFORMED])
async def test_crds_reject_malformed_objects(server, kube: Kube, resource, namespace, body, field) -> None:
    """The API server refuses a malformed object with 422, naming the field."""
    with pytest.raises(ApiError) as refused:
        await kube.create(resource, body, namespace)
    assert 422 == refused.value.status
    assert field in refused.value.message


def test_manifest_folder_is_what_kubectl_applies_in_order() -> None:
    """Namespace, then CRDs, then RBAC, then the daemon: file names sort in apply order."""
    kinds = [d["kind"] for d in manifest_documents()]
    assert kinds.index("Namespace") < kinds.index("CustomResourceDefinition") < kinds.index("ClusterRole")
    assert kinds.index("ClusterRole") < kinds.index("Deployment")
    assert all(path.suffix == ".yaml" for path in Path(MANIFESTS).iterdir())


# --- from laptop to cluster (issue 20, point 9) ------------------------------------------

KUEUE_SHORT_NAMES = {"wl", "rf", "q", "cq", "lq", "queue", "queues", "workload", "workloads", "wpc"}


def crds() -> dict[str, dict]:
    return {d["spec"]["names"]["kind"]: d for d in manifest_documents() if d["kind"] == "CustomResourceDefinition"}


def test_crd_short_names_do_not_collide_with_kueues() -> None:
    """Both can be installed: no short name of ours is one of Kueue's, and `kubectl get
    preemptd` lists all of our kinds."""
    names = {kind: crd["spec"]["names"] for kind, crd in crds().items()}
    assert {"ResourceFlavor", "Queue", "Workload", "LocalQueue", "WorkloadPriorityClass"} == set(names)
    short = [s for n in names.values() for s in n.get("shortNames", [])]
    assert len(short) == 5 and len(set(short)) == 5
    assert set() == set(short) & KUEUE_SHORT_NAMES
    assert all(["preemptd"] == n.get("categories") for n in names.values())


def undescribed(schema: dict, path: str) -> list[str]:
    """Every schema node below ``path`` that `kubectl explain` would show without a description."""
    missing = [] if schema.get("description") else [path]
    for name, child in (schema.get("properties") or {}).items():
        missing += undescribed(child, f"{path}.{name}")
    items = schema.get("items")
    if isinstance(items, dict) and items.get("type") == "object":
        missing += [m for m in undescribed(items, f"{path}[]") if m != f"{path}[]" or "properties" in items]
    return missing


def test_every_crd_field_has_a_description_for_kubectl_explain() -> None:
    for kind, crd in crds().items():
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert [] == undescribed(schema, kind), kind


def test_crd_schema_keeps_the_contracts_queue_fields() -> None:
    """Fields CONTRACT §1 documents are in the schema, so the API server does not prune them."""
    spec = crds()["Queue"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert {"parent", "resourceGroups", "preemption", "flavorFungibility", "queueingStrategy",
            "preemptMinRuntime", "reclaimMinRuntime", "fairSharing"} <= set(spec)
    assert "weight" in spec["fairSharing"]["properties"]


def daemon_pod() -> dict:
    deployment = next(d for d in manifest_documents() if d["kind"] == "Deployment")
    return deployment["spec"]["template"]


def test_the_namespace_enforces_the_restricted_pod_security_standard_and_the_pod_meets_it() -> None:
    (namespace,) = [d for d in manifest_documents() if d["kind"] == "Namespace"]
    labels = namespace["metadata"]["labels"]
    for mode in ("enforce", "audit", "warn"):
        assert "restricted" == labels[f"pod-security.kubernetes.io/{mode}"]
    spec = daemon_pod()["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] > 0
    assert "RuntimeDefault" == spec["securityContext"]["seccompProfile"]["type"]
    for container in spec["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert ["ALL"] == context["capabilities"]["drop"]
        assert context["readOnlyRootFilesystem"] is True
    assert all(set(volume) <= {"name", "configMap"} for volume in spec["volumes"])


def test_a_disruption_budget_keeps_one_replica_of_the_daemon() -> None:
    (budget,) = [d for d in manifest_documents() if d["kind"] == "PodDisruptionBudget"]
    deployment = next(d for d in manifest_documents() if d["kind"] == "Deployment")
    assert budget["spec"]["selector"]["matchLabels"].items() <= daemon_pod()["metadata"]["labels"].items()
    assert 1 == budget["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_the_kustomization_lists_every_manifest_in_apply_order() -> None:
    import yaml

    kustomization = yaml.safe_load((Path(MANIFESTS) / "kustomization.yaml").read_text())
    files = sorted(p.name for p in Path(MANIFESTS).glob("*.yaml") if p.name != "kustomization.yaml")
    assert files == kustomization["resources"]


def kustomize(path: Path) -> list[dict]:
    import shutil
    import subprocess

    import yaml

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    result = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert 0 == result.returncode, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def test_kustomize_builds_the_base_and_the_overlay_with_a_service_monitor() -> None:
    base = kustomize(Path(MANIFESTS))
    assert sorted((d["kind"], d["metadata"]["name"]) for d in base) == sorted(
        (d["kind"], d["metadata"]["name"]) for d in manifest_documents()
    )
    monitoring = kustomize(REPO / "deploy" / "monitoring")
    (monitor,) = [d for d in monitoring if d["kind"] == "ServiceMonitor"]
    (service,) = [d for d in monitoring if d["kind"] == "Service"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    ports = {port["name"] for port in service["spec"]["ports"]}
    assert {endpoint["port"] for endpoint in monitor["spec"]["endpoints"]} <= ports
    assert "/metrics" == monitor["spec"]["endpoints"][0]["path"]


def test_the_deployment_runs_the_image_the_readme_builds() -> None:
    import re

    from preemptd import __version__

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    built = re.findall(r"docker build -t (\S+) -f Containerfile \.", readme)
    assert built, "README has no build command"
    (image,) = set(built)
    assert f"preemptd:{__version__}" == image
    assert [image] == [c["image"] for c in daemon_pod()["spec"]["containers"]]
    assert "kubectl apply -k config/kubernetes" in readme


def containerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Containerfile, continuation lines joined."""
    text = (REPO / "Containerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_the_containerfile_makes_a_small_non_root_image_of_the_package() -> None:
    import json

    steps = containerfile()
    assert all(args.split()[0] == "python:3.11-slim" for op, args in steps if op == "FROM")
    (user,) = [args for op, args in steps if op == "USER"]
    uid = int(user.split(":")[0])
    assert uid != 0 and uid == daemon_pod()["spec"]["securityContext"]["runAsUser"]
    (entrypoint,) = [args for op, args in steps if op == "ENTRYPOINT"]
    assert ["preemptd"] == json.loads(entrypoint)
    (command,) = [args for op, args in steps if op == "CMD"]
    container = daemon_pod()["spec"]["containers"][0]
    assert json.loads(command) == container["args"]


def test_the_files_the_containerfile_copies_build_the_package(tmp_path: Path) -> None:
    """What the image's build stage installs from: the COPY'd files make a complete wheel
    with the `preemptd` entry point and every built-in plugin."""
    import shutil
    import subprocess
    import sys
    import zipfile

    context = tmp_path / "context"
    context.mkdir()
    for op, args in containerfile():
        if op != "COPY" or args.startswith("--from"):
            continue
        *sources, _ = args.split()
        for source in sources:
            origin = REPO / source
            if origin.is_dir():
                shutil.copytree(origin, context / source, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(origin, context / source)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "wheel"), "."],
        cwd=context, capture_output=True, text=True, timeout=300, check=False,
    )
    assert 0 == result.returncode, result.stderr
    (wheel,) = (tmp_path / "wheel").glob("preemptd-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "preemptd/daemon/cli.py" in names and "preemptd/plugins/priority.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "preemptd = preemptd.daemon.cli:entry" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_in_cluster_configuration_starts_the_daemon(tmp_path: Path) -> None:
    """The ConfigMap's preemptd.toml passes `preemptd run`'s checks (no exit 78)."""
    from preemptd.daemon.service import check_configuration

    config = next(d for d in manifest_documents() if d["kind"] == "ConfigMap")
    path = tmp_path / "preemptd.toml"
    path.write_text(config["data"]["preemptd.toml"], encoding="utf-8")
    loaded, _, problems = check_configuration(path)
    assert [] == problems
    assert "kubernetes" == loaded.backend.kind
