"""``preemptd convert FILE...``: a Kueue dump -> the equivalent ``preemptd.io`` objects.

The dump is read exactly as ``cycle`` reads it (:mod:`preemptd.framework.objects.kueue`),
so the objects written mean what preemptd made of Kueue's: the policies come from the
parsed records (Kueue's defaults and old spellings such as ``Borrow`` resolved), the
quotas, node labels, taints and selectors are copied as written.

* ClusterQueue -> Queue of the same name; Cohort -> Queue named as ``cycle`` names it
  (``NAME-cohort`` when a ClusterQueue has the name); an implicit cohort stays implicit.
* LocalQueue -> ``preemptd.io/v1alpha1`` LocalQueue (namespaced, ``spec.queue``).
* ResourceFlavor -> ResourceFlavor; WorkloadPriorityClass -> ``preemptd.io/v1alpha1``
  WorkloadPriorityClass; PriorityClass and Namespace are copied (name, value, labels).
* With ``--workloads``, Workloads too, as a snapshot for ``preemptd cycle`` (not for
  ``kubectl apply``): through their converted LocalQueue, with their priority resolved.

What has no equivalent is written as a YAML comment above the object it belongs to
(admission checks, topology, stop policies, ...), never dropped silently. Input with
invalid objects is not converted (they are listed, exit 2): a migration file must not
quietly lack the objects that could not be read; a file without any Kueue object is
an error too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from preemptd.framework.model import QueueSpec, Workload
from preemptd.framework.objects import Inventory, StrayDocument, parse_objects
from preemptd.framework.objects.fields import Entry
from preemptd.framework.objects.kueue import GROUP, KueueObjects, scope
from preemptd.framework.objects.typed import RawItems
from preemptd.framework.quantity import format_quantity, format_timestamp

from .backends.files import load_files

__all__ = ["HELP", "add_arguments", "run"]

HELP = "write the preemptd.io objects equivalent to a Kueue dump (kubectl get ... -o yaml)"
EXAMPLES = (
    "kubectl get clusterqueues,cohorts,localqueues,resourceflavors,workloadpriorityclasses,"
    "priorityclasses,namespaces -A -o yaml > kueue.yaml",
    "preemptd convert kueue.yaml > preemptd-queues.yaml",
    "preemptd convert kueue.yaml --workloads > snapshot.yaml   # for preemptd cycle",
)
API = "preemptd.io/v1alpha1"
EXIT_OK = 0
EXIT_INPUT = 2

_DROPPED = {
    "ClusterQueue": {
        "admissionChecks": "admission checks are not run by preemptd",
        "admissionChecksStrategy": "admission checks are not run by preemptd",
        "admissionScope": "no equivalent",
        "concurrentAdmissionPolicy": "no equivalent",
        "stopPolicy": "no stop policy on a Queue; stop admitting by removing its quota",
    },
    "LocalQueue": {
        "stopPolicy": "no stop policy on a LocalQueue",
        "fairSharing": "no fair sharing between LocalQueues",
    },
    "ResourceFlavor": {"topologyName": "no topology-aware scheduling"},
    "Workload": {
        "maximumExecutionTimeSeconds": "no maximum execution time",
        "preemptionGates": "no preemption gates",
    },
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="Kueue dump: YAML/JSON file, directory or -")
    parser.add_argument(
        "--workloads",
        action="store_true",
        help="also convert Workloads (a snapshot for preemptd cycle, not for kubectl apply)",
    )


def run(args: argparse.Namespace) -> int:
    documents = load_files(args.files)  # a LoadError is the caller's (exit 2)
    objects = [obj for _, document in documents for obj in _objects(document)]
    inventory = parse_objects(documents)
    for warning in inventory.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if inventory.problems:
        for problem in inventory.problems:
            print(problem, file=sys.stderr)
        print(f"preemptd: error: {len(inventory.problems)} invalid objects; nothing converted", file=sys.stderr)
        return EXIT_INPUT
    kueue = [obj for obj in objects if _is_kueue(obj)]
    if not kueue:
        print("preemptd: error: no Kueue objects (kueue.x-k8s.io) in the input", file=sys.stderr)
        return EXIT_INPUT
    sys.stdout.write(convert(objects, inventory, workloads=args.workloads))
    return EXIT_OK


def convert(objects: list[Mapping[str, Any]], inventory: Inventory, *, workloads: bool) -> str:
    """The YAML stream of the converted objects (``objects`` read without problems)."""
    entries = [
        Entry("", obj["kind"], _meta(obj).get("namespace") or "default", _meta(obj)["name"], obj)
        for obj in objects
        if _is_kueue(obj)
    ]
    names = KueueObjects.build(entries).queue_names
    out: list[str] = [
        "# preemptd.io objects converted from a Kueue dump by `preemptd convert`.\n"
        "# Comments name what Kueue has and preemptd does not.\n"
    ]
    order = ("Namespace", "PriorityClass", "WorkloadPriorityClass", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")
    for kind in order:
        for obj in sorted((o for o in objects if o.get("kind") == kind), key=_sort_key):
            if _copied(obj) or _is_kueue(obj):
                out.append(_convert_one(obj, inventory, names))
    if workloads:
        for obj in sorted((o for o in objects if o.get("kind") == "Workload" and _is_kueue(o)), key=_sort_key):
            out.append(_workload(obj, inventory))
    return "".join(out)


def _convert_one(obj: Mapping[str, Any], inventory: Inventory, names: Mapping[str, str]) -> str:
    kind, meta, spec = obj["kind"], _meta(obj), _spec(obj)
    name = meta["name"]
    notes = _dropped(kind, spec)
    renamed = ""
    converted: dict[str, Any]
    if kind == "Namespace":
        labels = meta.get("labels")
        converted = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, **({"labels": labels} if labels else {})}}
    elif kind == "PriorityClass":
        converted = {key: obj[key] for key in ("apiVersion", "kind", "value", "globalDefault", "description") if key in obj}
        converted = {"apiVersion": converted.pop("apiVersion"), "kind": "PriorityClass", "metadata": {"name": name}, **converted}
    elif kind == "WorkloadPriorityClass":
        body = {key: obj[key] for key in ("value", "description") if key in obj}
        converted = {"apiVersion": API, "kind": kind, "metadata": {"name": name}, **body}
    elif kind == "ResourceFlavor":
        body = {key: spec[key] for key in ("nodeLabels", "nodeTaints", "tolerations") if spec.get(key)}
        converted = {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": body}
    elif kind == "LocalQueue":
        converted = {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": meta.get("namespace") or "default"},
            "spec": {"queue": spec["clusterQueue"]},
        }
    else:  # ClusterQueue, Cohort
        queue_name = name if kind == "ClusterQueue" else names.get(name, name)
        converted = _queue(kind, spec, inventory.queues[queue_name], notes)
        if queue_name != name:
            renamed = f"# named {queue_name}: ClusterQueue {name} has the name, and Queues share one name space\n"
    label = "/".join(part for part in (kind, meta.get("namespace") if kind in ("LocalQueue",) else None, name) if part)
    version = obj.get("apiVersion") or GROUP
    header = [f"# from {label} ({version})"] + [f"# not converted: {note}" for note in notes]
    return "---\n" + "".join(f"{line}\n" for line in header) + renamed + _dump(converted)


def _queue(kind: str, spec: Mapping[str, Any], record: QueueSpec, notes: list[str]) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if record.parent is not None:
        body["parent"] = record.parent
    if spec.get("resourceGroups"):
        body["resourceGroups"] = spec["resourceGroups"]
    if kind == "ClusterQueue":
        policy = record.preemption
        borrow: dict[str, Any] = {"policy": policy.borrow_within_cohort}
        if policy.max_priority_threshold is not None:
            borrow["maxPriorityThreshold"] = policy.max_priority_threshold
        body["preemption"] = {
            "withinQueue": policy.within_queue,
            "reclaimWithinCohort": policy.reclaim_within_cohort,
            "borrowWithinCohort": borrow,
        }
        fungibility: dict[str, Any] = {
            "whenCanBorrow": record.fungibility.when_can_borrow,
            "whenCanPreempt": record.fungibility.when_can_preempt,
        }
        if record.fungibility.preference is not None:
            fungibility["preference"] = record.fungibility.preference
        body["flavorFungibility"] = fungibility
        body["queueingStrategy"] = record.queueing_strategy
        selector = spec.get("namespaceSelector")
        if selector is None:
            # Kueue: no selector admits no namespace. This one matches none either: every
            # Namespace has the label kubernetes.io/metadata.name.
            selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}]}
            notes.append("no namespaceSelector, which in Kueue admits no namespace; kept as one matching none")
        body["namespaceSelector"] = selector
    if spec.get("fairSharing"):
        body["fairSharing"] = spec["fairSharing"]
    return {"apiVersion": API, "kind": "Queue", "metadata": {"name": record.name}, "spec": body}


def _workload(obj: Mapping[str, Any], inventory: Inventory) -> str:
    meta, spec = _meta(obj), _spec(obj)
    key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
    notes = _dropped("Workload", spec)
    status = _section(obj, "status")
    if status.get("admissionChecks"):
        notes.append("status.admissionChecks: admission checks are not run by preemptd")
    if any(isinstance(ps, Mapping) and ps.get("topologyRequest") for ps in spec.get("podSets") or ()):
        notes.append("spec.podSets[].topologyRequest: no topology-aware scheduling")
    record = inventory.workloads.get(key)
    header = f"# from Workload/{key} ({obj.get('apiVersion')})\n"
    if record is None:
        why = inventory.inadmissible.get(key, "the workload is Finished")
        return f"---\n{header}# not converted: {why}\n"
    converted = _workload_object(record, meta)
    if record.local_queue is not None:  # through the converted LocalQueue, as in Kueue
        converted["spec"]["queueName"] = record.local_queue
    return "---\n" + header + "".join(f"# not converted: {note}\n" for note in notes) + _dump(converted)


def _workload_object(record: Workload, meta: Mapping[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": record.name, "namespace": record.namespace}
    for key in ("uid", "creationTimestamp", "labels", "annotations", "ownerReferences"):
        if meta.get(key):
            metadata[key] = meta[key]
    pod_sets: list[dict[str, Any]] = []
    for ps in record.pod_sets:
        pod_set: dict[str, Any] = {"name": ps.name, "count": ps.count}
        if ps.min_count is not None:
            pod_set["minCount"] = ps.min_count
        pod_set["requests"] = {r: format_quantity(amount, r) for r, amount in ps.requests.items()}
        if ps.node_selector:
            pod_set["nodeSelector"] = dict(ps.node_selector)
        if ps.tolerations:
            pod_set["tolerations"] = [
                {k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value), ("effect", t.effect)) if v}
                for t in ps.tolerations
            ]
        pod_sets.append(pod_set)
    converted: dict[str, Any] = {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": metadata,
        "spec": {"queueName": record.queue, "priority": record.priority, "podSets": pod_sets},
    }
    status: dict[str, Any] = {}
    if record.admission is not None:
        status["admission"] = {
            "queue": record.admission.queue,
            "podSets": [{"name": a.name, "count": a.count, "flavors": dict(a.flavors)} for a in record.admission.pod_sets],
        }
        if record.admitted_at is not None:
            status["admittedAt"] = format_timestamp(record.admitted_at)
    if record.evicted:
        status["conditions"] = [{"type": "Evicted", "status": "True", "reason": "Preempted"}]
    if record.flavor_scan:
        status["flavorScan"] = {ps: dict(scan) for ps, scan in record.flavor_scan.items()}
    if status:
        converted["status"] = status
    return converted


def _dropped(kind: str, spec: Mapping[str, Any]) -> list[str]:
    notes = []
    for name, why in _DROPPED.get(kind, {}).items():
        value = spec.get(name)
        if value not in (None, [], {}, "None"):
            notes.append(f"spec.{name} {_inline(value)}: {why}")
    return notes


def _inline(value: Any) -> str:
    import yaml  # only here: the other commands build their parser from this module

    text: str = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    return text.removesuffix("\n...").strip()


def _dump(obj: Mapping[str, Any]) -> str:
    import yaml

    text: str = yaml.safe_dump(dict(obj), sort_keys=False, default_flow_style=False, allow_unicode=True)
    return text


def _objects(document: Any) -> Iterable[Mapping[str, Any]]:
    if isinstance(document, RawItems | StrayDocument):
        return  # not objects: parse_objects reports a stray document
    if isinstance(document, list):
        for item in document:
            yield from _objects(item)
    elif isinstance(document, Mapping):
        kind = document.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(document.get("items"), list):
            yield from _objects(document["items"])
        else:
            yield document


def _is_kueue(obj: Mapping[str, Any]) -> bool:
    kind = obj.get("kind")
    return isinstance(kind, str) and kind != "Namespace" and scope(kind, obj.get("apiVersion")) is not None


def _copied(obj: Mapping[str, Any]) -> bool:
    """A core object preemptd reads as it is: PriorityClass, and Namespace for selectors."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind == "Namespace":
        return api_version in (None, "v1")
    return kind == "PriorityClass" and str(api_version or "").rpartition("/")[0] == "scheduling.k8s.io"


def _section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _section(obj, "metadata")


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _section(obj, "spec")


def _sort_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = _meta(obj)
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
