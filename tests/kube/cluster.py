"""Builders for cluster objects, and the few controllers a test cluster needs.

The test API server stores objects; nothing acts on them. :class:`Controllers`
plays the parts of the cluster that the daemon relies on, one explicit
:meth:`~Controllers.step` at a time so tests stay deterministic:

* the Job controller: an unsuspended Job gets ``parallelism`` running pods,
  a suspended one has its pods deleted (with their grace period: they
  terminate until :meth:`~Controllers.finish_terminating`), ``status.active``
  is kept up to date, and ``status.startTime`` is set when the Job runs (and,
  as the real controller, never cleared: a suspended Job keeps it);
* the Deployment controller (its ReplicaSet, really): ``replicas`` running
  pods; on a scale-down the pod with the lowest pod-deletion-cost goes first
  (then the newest), as the ReplicaSet controller does;
* the scheduler: a new pod is bound to the first node (by name) that matches
  its node selector and has room for its requests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from preemptd.daemon.backends.kubernetes.backend import KubernetesBackend
from preemptd.framework.quantity import parse_quantity

from .apiserver import ApiServer

Obj = dict[str, Any]

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "config" / "kubernetes"
QUEUE_LABEL = "preemptd.io/queue-name"
WORKLOAD_LABEL = "preemptd.io/workload"
COST = "controller.kubernetes.io/pod-deletion-cost"


def install_crds(server: ApiServer) -> None:
    """Register preemptd's CRDs, exactly as shipped in config/kubernetes."""
    for document in yaml.safe_load_all((MANIFESTS / "10-crds.yaml").read_text()):
        server.put("apiextensions.k8s.io", "customresourcedefinitions", document)


def manifest_documents() -> list[dict]:
    """Every document of config/kubernetes, in apply order (kustomization.yaml lists them)."""
    files = [path for path in sorted(MANIFESTS.glob("*.yaml")) if path.name != "kustomization.yaml"]
    return [d for path in files for d in yaml.safe_load_all(path.read_text()) if d]


def role_rules() -> dict[tuple[str, str], set[str]]:
    """(API group, resource) -> verbs granted by the ClusterRole and the leader-election Role."""
    (role,) = [d for d in manifest_documents() if d["kind"] == "ClusterRole"]
    roles = [role, *(d for d in manifest_documents() if d["kind"] == "Role")]
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in (rule for role in roles for rule in role["rules"]):
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    return granted


def assert_least_privilege(server: ApiServer) -> None:
    """Every request the daemon made is one its ClusterRole allows."""
    granted = role_rules()
    denied = sorted((g, r, v) for g, r, v in server.verbs() if v not in granted.get((g, r), set()))
    assert [] == denied


# --- builders ------------------------------------------------------------------------------


def flavor(name: str, labels: Mapping[str, str] | None = None, tolerations: list[Obj] | None = None) -> Obj:
    spec: Obj = {"nodeLabels": dict(labels or {"flavor": name})}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def queue(
    name: str,
    quotas: Mapping[str, str],
    *,
    flavor_name: str = "default",
    parent: str | None = None,
    preemption: Obj | None = None,
) -> Obj:
    spec: Obj = {
        "resourceGroups": [
            {
                "coveredResources": list(quotas),
                "flavors": [
                    {
                        "name": flavor_name,
                        "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()],
                    }
                ],
            }
        ]
    }
    if parent:
        spec["parent"] = parent
    if preemption:
        spec["preemption"] = preemption
    return {"apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def priority_class(name: str, value: int) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}


def node(name: str, allocatable: Mapping[str, str], labels: Mapping[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "status": {"allocatable": dict(allocatable)},
    }


def _template(requests: Mapping[str, str], priority_class_name: str | None, node_selector: Mapping[str, str] | None) -> Obj:
    spec: Obj = {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": dict(requests)}}]}
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {"metadata": {"labels": {"app": "test"}}, "spec": spec}


def job(
    name: str,
    queue_name: str,
    requests: Mapping[str, str],
    *,
    namespace: str = "default",
    parallelism: int = 1,
    priority_class_name: str | None = None,
    min_parallelism: int | None = None,
    suspend: bool = True,
    node_selector: Mapping[str, str] | None = None,
) -> Obj:
    metadata: Obj = {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue_name}}
    if min_parallelism is not None:
        metadata["annotations"] = {"preemptd.io/min-parallelism": str(min_parallelism)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "suspend": suspend,
            "parallelism": parallelism,
            "completions": parallelism,
            "template": _template(requests, priority_class_name, node_selector),
        },
    }


def deployment(
    name: str,
    queue_name: str,
    requests: Mapping[str, str],
    *,
    namespace: str = "default",
    replicas: int = 1,
    priority_class_name: str | None = None,
) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue_name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": _template(requests, priority_class_name, None),
        },
    }


# --- controllers ---------------------------------------------------------------------------


class Controllers:
    """See the module docstring."""

    def __init__(self, server: ApiServer) -> None:
        self.server = server
        self._serial = 0

    def step(self) -> None:
        for obj in self.server.list("batch", "jobs"):
            self._job(obj)
        for obj in self.server.list("apps", "deployments"):
            self._deployment(obj)

    def finish_terminating(self) -> list[str]:
        """Remove every pod with a deletionTimestamp (their kubelets are done); their keys."""
        gone = []
        for pod in self.server.list("", "pods"):
            metadata = pod["metadata"]
            if metadata.get("deletionTimestamp"):
                self.server.remove("", "pods", metadata["name"], metadata["namespace"])
                gone.append(f"{metadata['namespace']}/{metadata['name']}")
        return gone

    def pods_of(self, owner: Obj, *, terminating: bool = False) -> list[Obj]:
        uid = owner["metadata"]["uid"]
        found = []
        for pod in self.server.list("", "pods", owner["metadata"]["namespace"]):
            if not any(ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences") or []):
                continue
            if bool(pod["metadata"].get("deletionTimestamp")) == terminating:
                found.append(pod)
        return found

    def _job(self, obj: Obj) -> None:
        spec = obj["spec"]
        pods = self.pods_of(obj)
        if spec.get("suspend"):
            for pod in pods:
                self._delete(pod)
            want = 0
        else:
            want = int(spec.get("parallelism", 1))
            for _ in range(want - len(pods)):
                self._create_pod(obj)
            for pod in sorted(pods, key=_removal_order)[: max(0, len(pods) - want)]:
                self._delete(pod)
        active = min(want, len(self.pods_of(obj)))
        status = dict(obj.get("status") or {})
        changed = status.get("active", 0) != active
        if not spec.get("suspend") and status.get("startTime") is None:
            # Set on resume and never cleared by the controller (whoever suspends clears it).
            status["startTime"] = "2026-01-01T00:00:00Z"
            changed = True
        if changed:
            current = self.server.get("batch", "jobs", obj["metadata"]["name"], obj["metadata"]["namespace"])
            assert current is not None
            status["active"] = active
            self.server.put("batch", "jobs", {**current, "status": {**(current.get("status") or {}), **status}})

    def _deployment(self, obj: Obj) -> None:
        want = int(obj["spec"].get("replicas", 1))
        pods = self.pods_of(obj)
        for _ in range(want - len(pods)):
            self._create_pod(obj)
        for pod in sorted(pods, key=_removal_order)[: max(0, len(pods) - want)]:
            self._delete(pod)

    def _create_pod(self, owner: Obj) -> None:
        self._serial += 1
        template = owner["spec"]["template"]
        metadata = owner["metadata"]
        pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{metadata['name']}-{self._serial:05d}",
                "namespace": metadata["namespace"],
                "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                "ownerReferences": [
                    {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": metadata["name"],
                     "uid": metadata["uid"], "controller": True}
                ],
            },
            "spec": dict(template["spec"]),
            "status": {"phase": "Running"},
        }
        chosen = self._schedule(pod)
        if chosen is not None:
            pod["spec"]["nodeName"] = chosen
        else:
            pod["status"]["phase"] = "Pending"
        self.server.put("", "pods", pod)

    def _schedule(self, pod: Obj) -> str | None:
        selector = pod["spec"].get("nodeSelector") or {}
        requests = _requests(pod)
        for candidate in self.server.list("", "nodes"):
            labels = candidate["metadata"].get("labels") or {}
            if any(labels.get(k) != v for k, v in selector.items()):
                continue
            free = {r: parse_quantity(q, r) for r, q in (candidate.get("status") or {}).get("allocatable", {}).items()}
            for other in self.server.list("", "pods"):
                if other["spec"].get("nodeName") == candidate["metadata"]["name"]:
                    for r, amount in _requests(other).items():
                        free[r] = free.get(r, 0) - amount
            if all(free.get(r, 0) >= amount for r, amount in requests.items()):
                return str(candidate["metadata"]["name"])
        return None

    def _delete(self, pod: Obj) -> None:
        metadata = pod["metadata"]
        if metadata.get("deletionTimestamp"):
            return
        if not pod["spec"].get("nodeName"):
            self.server.remove("", "pods", metadata["name"], metadata["namespace"])
            return
        terminating = {**pod, "metadata": {**metadata, "deletionTimestamp": "2030-01-01T00:00:00Z"}}
        self.server.put("", "pods", terminating)


def _requests(pod: Obj) -> dict[str, int]:
    total: dict[str, int] = {}
    for container in pod["spec"].get("containers") or []:
        for r, q in ((container.get("resources") or {}).get("requests") or {}).items():
            total[r] = total.get(r, 0) + parse_quantity(q, r)
    return total


def _removal_order(pod: Obj) -> tuple[int, str, str]:
    """The ReplicaSet's choice, simplified: lowest deletion cost, then newest, then name."""
    metadata = pod["metadata"]
    cost = int((metadata.get("annotations") or {}).get(COST, "0"))
    return (cost, _negated(metadata.get("creationTimestamp", "")), metadata["name"])


def _negated(stamp: str) -> str:
    return "".join(chr(0x10FFFF - ord(c)) for c in stamp)


# --- waiting ---------------------------------------------------------------------------------


async def settle(backend: KubernetesBackend, server: ApiServer, timeout: float = 5.0) -> None:
    """Wait until every informer has seen every event of its resource so far."""
    deadline = time.monotonic() + timeout
    while True:
        behind = []
        for resource, informer in backend.informers.items():
            last = server.last_versions.get((resource.group, resource.plural), 0)
            seen = int(informer.resource_version or 0)
            if seen < last:
                behind.append(str(resource))
        if not behind:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"informers behind: {behind}")
        await asyncio.sleep(0.005)


async def until(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def step(backend: KubernetesBackend, server: ApiServer, controllers: Controllers | None = None) -> Any:
    """Let the caches catch up, run one cycle, let the controllers act; the cycle's report."""
    await settle(backend, server)
    report = await backend.cycle()
    await backend.events.flush()
    await settle(backend, server)
    if controllers is not None:
        controllers.step()
        await settle(backend, server)
    return report


def conditions(obj: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def events_for(server: ApiServer, name: str, namespace: str = "default") -> list[tuple[str, str, str]]:
    """(kind of the object, reason, message) of every Event about ``name``."""
    return [
        (e["involvedObject"]["kind"], e["reason"], e["message"])
        for e in server.list("", "events", namespace)
        if e["involvedObject"]["name"] == name
    ]
