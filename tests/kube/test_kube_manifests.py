"""The manifests in config/kubernetes: schemas that reject bad objects, columns, least privilege."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from preemptd.daemon.backends.kubernetes import client as resources
from preemptd.daemon.backends.kubernetes.backend import WATCHED
from preemptd.daemon.backends.kubernetes.client import FLAVORS, QUEUES, WORKLOADS, ApiError, Kube

from .cluster import MANIFESTS, REPO, manifest_documents, role_rules

CODE = REPO / "daemon" / "backends" / "kubernetes"
SOURCES = sorted(CODE.glob("*.py"))  # lease.py (leader election) included
WRITES = {"create", "patch", "delete", "replace"}
RBAC_VERB = {"replace": "update"}  # Kube.replace is a PUT, which RBAC calls update


def used_verbs() -> dict[tuple[str, str], set[str]]:
    """The verbs the backend's and the leader election's code use, read from their source.

    Every ``<...>writer.create|patch|delete(RESOURCE, ...)`` and ``<...>kube.<verb>(RESOURCE, ...)``
    call, with ``subresource="status"`` where given; a write through the Writer may re-read
    the object (a conflict), so it needs ``get`` too; every watched resource is listed and watched.
    """
    names = {name: value for name, value in vars(resources).items() if isinstance(value, resources.Resource)}
    used: dict[tuple[str, str], set[str]] = {}
    for resource in WATCHED:
        used.setdefault((resource.group, resource.plural), set()).update({"list", "watch"})
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
