"""Typed decoding reads every Workload and Node exactly as the located-field walker does.

As for Pods (``test_typed_decoding.py``): a plain Workload or Node is converted by msgspec
and checked without the walker; anything the typed reader is not sure about, including a
reference the catalog does not resolve, goes to the walker. Every variant below is read
both ways: the records are equal, and an object the walker finds a problem in is never
taken by the typed reader, so every located problem is the walker's.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.backends.files import load_files, parse_text
from preemptd.framework.model import Flavor, LocalQueue, PriorityClass
from preemptd.framework.objects import parse_objects
from preemptd.framework.objects.fields import Catalog, Entry
from preemptd.framework.objects.nodes import parse_node
from preemptd.framework.objects.typed import RawItems, RawObject
from preemptd.framework.objects.typed_nodes import fast_node, read_node
from preemptd.framework.objects.typed_pods import ITEM
from preemptd.framework.objects.typed_workloads import (
    fast_workload,
    read_workload,
    text_entry,
)
from preemptd.framework.objects.workloads import parse_workload

from benchmarks import generate

CATALOG = Catalog(
    flavors={"a100": Flavor("a100"), "h100": Flavor("h100")},
    invalid_flavors=frozenset({"broken"}),
    priority_classes={"high": PriorityClass("high", 100)},
    invalid_priority_classes=frozenset({"bad-class"}),
    default_priority=7,
    workload_priority_classes={"urgent": PriorityClass("urgent", 500)},
    invalid_workload_priority_classes=frozenset({"bad-wpc"}),
    local_queues={"ns/lq": LocalQueue("ns", "lq", "q2")},
    invalid_local_queues=frozenset({"ns/broken-lq"}),
)
WPC = "preemptd.io/workloadpriorityclass"

WORKLOAD: dict[str, Any] = {
    "apiVersion": "preemptd.io/v1alpha1",
    "kind": "Workload",
    "metadata": {
        "name": "w",
        "namespace": "ns",
        "uid": "u-1",
        "creationTimestamp": "2025-12-28T16:00:40.159Z",
    },
    "spec": {
        "queueName": "q",
        "owner": {"apiVersion": "batch/v1", "kind": "Job", "name": "j"},
        "podSets": [
            {"name": "main", "count": 4, "requests": {"cpu": "1", "memory": "4Gi", "x": "0"}},
            {"name": "aux", "minCount": 1, "requests": {"nvidia.com/gpu": 1}},
        ],
        "priorityClassName": "high",
    },
    "status": {
        "admission": {
            "queue": "q",
            "podSets": [
                {"name": "main", "count": 4, "flavors": {"cpu": "a100", "memory": "a100"}},
                {"name": "aux", "flavors": {"nvidia.com/gpu": "h100"}},
            ],
        },
        "admittedAt": "2025-12-28T16:21:42.854Z",
    },
}

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"zone": "a", "preemptd.io/gpu-model": "a100"}},
    "spec": {},
    "status": {"allocatable": {"cpu": "128", "memory": "1024Gi", "nvidia.com/gpu": "0"}},
}

DELETE = object()


def variant(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``base`` with the field at dotted ``path`` set to ``value`` (``DELETE`` removes it)."""
    found = copy.deepcopy(base)
    *parents, last = path.split(".")
    target: Any = found
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is DELETE:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return found


def w(path: str, value: Any) -> dict[str, Any]:
    return variant(WORKLOAD, path, value)


WORKLOADS: dict[str, dict[str, Any]] = {
    "plain": WORKLOAD,
    "pending": w("status", DELETE),
    "null status": w("status", None),
    "status a list": w("status", []),
    "no metadata fields": w("metadata", {"name": "w", "namespace": "ns"}),
    "uid empty": w("metadata.uid", ""),
    "uid a number": w("metadata.uid", 5),
    "bad timestamp": w("metadata.creationTimestamp", "yesterday"),
    "no queue": w("spec.queueName", DELETE),
    "empty queue": w("spec.queueName", ""),
    "queue a number": w("spec.queueName", 3),
    "priority given": w("spec.priority", 12),
    "priority given, class not text": w("spec", WORKLOAD["spec"] | {"priority": 1, "priorityClassName": 5}),
    "priority true": w("spec.priority", True),
    "priority float": w("spec.priority", 1.0),
    "priority beyond 64 bits": w("spec.priority", 2**70),
    "default priority": w("spec.priorityClassName", DELETE),
    "empty class": w("spec.priorityClassName", ""),
    "unknown class": w("spec.priorityClassName", "nope"),
    "invalid class": w("spec.priorityClassName", "bad-class"),
    "no owner": w("spec.owner", DELETE),
    "empty owner": w("spec.owner", {}),
    "owner not a mapping": w("spec.owner", "Job/j"),
    "owner references": variant(
        w("spec.owner", DELETE),
        "metadata.ownerReferences",
        [{"kind": "ReplicaSet", "name": "r"}, {"kind": "Deployment", "name": "d", "controller": True}],
    ),
    "bad owner reference": variant(w("spec.owner", DELETE), "metadata.ownerReferences", [{"kind": "X"}]),
    "owner references a mapping": variant(w("spec.owner", DELETE), "metadata.ownerReferences", {"a": 1}),
    "no pod sets": w("spec.podSets", DELETE),
    "empty pod sets": w("spec.podSets", []),
    "pod set not a mapping": w("spec.podSets.1", "aux"),
    "pod set without name": w("spec.podSets.1.name", DELETE),
    "duplicate pod set": w("spec.podSets.1.name", "main"),
    "count zero": w("spec.podSets.0.count", 0),
    "count text": w("spec.podSets.0.count", "4"),
    "min count above count": w("spec.podSets.0.minCount", 5),
    "min count zero": w("spec.podSets.0.minCount", 0),
    "bad quantity": w("spec.podSets.0.requests.cpu", "lots"),
    "requests a list": w("spec.podSets.0.requests", ["cpu"]),
    "quantity a list": w("spec.podSets.0.requests.cpu", ["1"]),
    "quantity a mapping": w("spec.podSets.0.requests.memory", {"a": 1}),
    "empty resource name": w("spec.podSets.1.requests", {"": "1"}),
    "node selector": w("spec.podSets.0.nodeSelector", {"zone": "a", "disk": "ssd"}),
    "node selector not text": w("spec.podSets.0.nodeSelector", {"zone": 1}),
    "tolerations": w("spec.podSets.0.tolerations", [{"key": "k", "operator": "Exists"}]),
    "bad toleration": w("spec.podSets.0.tolerations", [{"operator": "Sometimes"}]),
    "admission to another queue": w("status.admission.queue", "other"),
    "admission without queue": w("status.admission.queue", DELETE),
    "admission not a mapping": w("status.admission", "yes"),
    "admission without pod sets": w("status.admission.podSets", []),
    "admitted pod set unknown": w("status.admission.podSets.1.name", "ghost"),
    "admitted pod set twice": w("status.admission.podSets.1.name", "main"),
    "admitted count above spec": w("status.admission.podSets.0.count", 5),
    "admitted count below spec": w("status.admission.podSets.0.count", 2),
    "admitted with unknown flavor": w("status.admission.podSets.1.flavors", {"nvidia.com/gpu": "x"}),
    "admitted with invalid flavor": w("status.admission.podSets.1.flavors", {"nvidia.com/gpu": "broken"}),
    "admitted without a flavor": w("status.admission.podSets.0.flavors", {"cpu": "a100"}),
    "admitted flavor not text": w("status.admission.podSets.0.flavors.cpu", 1),
    "bad admitted at": w("status.admittedAt", "soon"),
    "evicted": w("status.conditions", [{"type": "Evicted", "status": "True"}]),
    "evicted, boolean": w("status.conditions", [{"type": "Evicted", "status": True}]),
    "other condition": w("status.conditions", [{"type": "Admitted", "status": "True"}]),
    "condition not a mapping": w("status.conditions", ["Evicted"]),
    "flavor scan": w("status.flavorScan", {"main": {"cpu": 1, "memory": -1}}),
    "bad flavor scan": w("status.flavorScan", {"main": {"cpu": "one"}}),
    "unknown fields": w("spec.suspend", {"anything": [1, 2]}),
    "labels and annotations": variant(
        w("metadata.labels", {"team": "ml", "preemptd.io/never-preempt": "true"}),
        "metadata.annotations",
        {"note": "x"},
    ),
    "label not text": w("metadata.labels", {"team": 1}),
    "empty annotation key": w("metadata.annotations", {"": "x"}),
    "labels a list": w("metadata.labels", ["team"]),
    "through a LocalQueue": w("spec.queueName", "lq"),
    "through a LocalQueue, admission without queue": variant(
        w("spec.queueName", "lq"), "status.admission.queue", DELETE
    ),
    "through an invalid LocalQueue": w("spec.queueName", "broken-lq"),
    "workload priority class": w("spec", WORKLOAD["spec"] | {"priorityClassSource": WPC, "priorityClassName": "urgent"}),
    "kueue's workload priority class": w(
        "spec",
        WORKLOAD["spec"] | {"priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass", "priorityClassName": "urgent"},
    ),
    "core source": w("spec.priorityClassSource", "scheduling.k8s.io/priorityclass"),
    "empty source": w("spec.priorityClassSource", ""),
    "unknown source": w("spec.priorityClassSource", "example.com/classes"),
    "unknown workload priority class": w("spec", WORKLOAD["spec"] | {"priorityClassSource": WPC, "priorityClassName": "x"}),
    "invalid workload priority class": w(
        "spec", WORKLOAD["spec"] | {"priorityClassSource": WPC, "priorityClassName": "bad-wpc"}
    ),
    "workload class source without a name": variant(
        w("spec.priorityClassSource", WPC), "spec.priorityClassName", DELETE
    ),
    "workload class named with a priority given": w(
        "spec", WORKLOAD["spec"] | {"priorityClassSource": WPC, "priorityClassName": "x", "priority": 3}
    ),
}


def n(path: str, value: Any) -> dict[str, Any]:
    return variant(NODE, path, value)


NODES: dict[str, dict[str, Any]] = {
    "plain": NODE,
    "no labels": n("metadata.labels", DELETE),
    "label not text": n("metadata.labels", {"zone": 1}),
    "empty label key": n("metadata.labels", {"": "a"}),
    "no status": n("status", DELETE),
    "bad quantity": n("status.allocatable.cpu", "many"),
    "allocatable a list": n("status.allocatable", ["cpu"]),
    "unschedulable": n("spec.unschedulable", True),
    "unschedulable text": n("spec.unschedulable", "true"),
    "null spec": n("spec", None),
    "taints": n("spec.taints", [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]),
    "bad taint": n("spec.taints", [{"key": "gpu", "effect": "Sometimes"}]),
    "taints a mapping": n("spec.taints", {"key": "gpu"}),
}


def entry_of(obj: dict[str, Any], file: str = "f.json") -> Entry:
    metadata = obj["metadata"]
    namespace = (metadata.get("namespace") or "default") if obj["kind"] == "Workload" else None
    return Entry(file, obj["kind"], namespace, metadata["name"], obj)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_a_workload_read_typed_equals_the_walkers_reading_or_is_left_to_it(name: str) -> None:
    entry = entry_of(WORKLOADS[name])
    expected, problems = parse_workload(entry, CATALOG)
    found = fast_workload(entry, CATALOG)
    if problems:
        assert found is None
    else:
        assert found is None or found == expected
    assert read_workload(entry, CATALOG) == (expected, problems)
    if name in ("plain", "pending", "priority given", "node selector", "evicted", "flavor scan",
                "tolerations", "owner references", "admitted count below spec", "labels and annotations",
                "through a LocalQueue", "workload priority class", "kueue's workload priority class"):
        assert found == expected  # common cases are not left to the walker


@pytest.mark.parametrize("name", sorted(NODES))
def test_a_node_read_typed_equals_the_walkers_reading_or_is_left_to_it(name: str) -> None:
    entry = entry_of(NODES[name])
    expected, problems = parse_node(entry)
    found = fast_node(entry)
    if problems:
        assert found is None
    else:
        assert found is None or found == expected
    assert read_node(entry) == (expected, problems)
    if name in ("plain", "no labels", "unschedulable", "taints"):
        assert found == expected


def test_the_typed_readers_are_the_ones_loading_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generated cluster: every Workload and Node is taken typed, and equals the walker's."""
    objects = generate.generate_shape("grow-deep-1000", 3)
    path = tmp_path / "cluster.json"
    generate.write(objects, str(path))
    typed = parse_objects(load_files([path], typed=True))
    from preemptd.framework.objects import typed_nodes as typed_nodes_module
    from preemptd.framework.objects import typed_workloads as typed_module

    walked_calls: list[str] = []
    real_walker = typed_module.parse_workload
    real_node_walker = typed_nodes_module.parse_node

    def counting_workload(entry: Entry, catalog: Catalog) -> Any:
        walked_calls.append(entry.key)
        return real_walker(entry, catalog)

    def counting_node(entry: Entry) -> Any:
        walked_calls.append(entry.key)
        return real_node_walker(entry)

    monkeypatch.setattr(typed_module, "parse_workload", counting_workload)
    monkeypatch.setattr(typed_nodes_module, "parse_node", counting_node)
    again = parse_objects(load_files([path], typed=True))
    assert walked_calls == []
    assert again.workloads == typed.workloads and again.nodes == typed.nodes

    classes = {o["metadata"]["name"]: PriorityClass(o["metadata"]["name"], o["value"])
               for o in objects if o["kind"] == "PriorityClass"}
    catalog = Catalog(flavors=typed.flavors, priority_classes=classes)
    walked_workloads = {}
    walked_nodes = {}
    for obj in objects:
        if obj["kind"] == "Workload":
            workload, problems = real_walker(entry_of(obj, str(path)), catalog)
            assert problems == []
            walked_workloads[workload.key] = workload
        elif obj["kind"] == "Node":
            node, problems = real_node_walker(entry_of(obj, str(path)))
            assert problems == []
            walked_nodes[node.name] = node
    assert len(walked_workloads) >= 1000 and walked_nodes
    assert typed.workloads == walked_workloads
    assert typed.nodes == walked_nodes


SURROUNDINGS: list[dict[str, Any]] = [
    {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "a100"}},
    {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "h100"}},
    {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "broken"},
     "spec": {"nodeLabels": {"a": 1}}},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100},
    {"apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"}},
    {"apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": "other"}},
]


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_a_workload_read_from_a_json_list_equals_the_walkers_reading(name: str, tmp_path: Path) -> None:
    """From a JSON list a Workload is kept as its text and decoded typed; the snapshot
    read that way equals the one read from parsed documents, problems and all."""
    path = tmp_path / "f.json"
    path.write_text(json.dumps({"kind": "List", "items": [*SURROUNDINGS, WORKLOADS[name]]}))
    typed = parse_objects(load_files([path], typed=True))
    plain = parse_objects(load_files([path]))
    assert [str(p) for p in typed.problems] == [str(p) for p in plain.problems]
    assert [str(p) for p in typed.unknown_fields] == [str(p) for p in plain.unknown_fields]
    assert typed.inadmissible == plain.inadmissible
    assert typed.workloads == plain.workloads
    if name == "plain":
        assert list(typed.workloads) == ["ns/w"]


@pytest.mark.parametrize("name", sorted(NODES))
def test_a_node_read_from_its_text_equals_the_walkers_reading_or_is_left_to_it(name: str, tmp_path: Path) -> None:
    """From a JSON list a Node is kept as its text and decoded typed: taken exactly when
    the walker finds nothing wrong, with the walker's record; the snapshot read that way
    equals the one read from parsed documents, problems and all."""
    (document,) = parse_text(json.dumps([NODES[name]]), typed=True)
    assert isinstance(document, RawItems)
    entry = text_entry("f.json", document.items[0], ITEM.decode(document.items[0]))  # as the intake does
    assert entry is not None and isinstance(entry.body, RawObject)
    expected, problems = parse_node(entry_of(NODES[name]))
    found = fast_node(entry)
    assert found is None if problems else found == expected
    again = text_entry("f.json", document.items[0], ITEM.decode(document.items[0]))
    assert again is not None and read_node(again) == (expected, problems)
    path = tmp_path / "f.json"
    path.write_text(json.dumps({"kind": "List", "items": [NODES[name]]}))
    typed = parse_objects(load_files([path], typed=True))
    plain = parse_objects(load_files([path]))
    assert [str(p) for p in typed.problems] == [str(p) for p in plain.problems]
    assert typed.nodes == plain.nodes


def test_a_workload_item_is_kept_as_its_text_until_it_is_read() -> None:
    (document,) = parse_text(json.dumps([WORKLOAD, NODE]), typed=True)
    assert isinstance(document, RawItems)
    entry = text_entry("f.json", document.items[0])
    assert entry is not None and isinstance(entry.body, RawObject)
    assert entry.key == "ns/w" and entry.body.raw is not None
    assert fast_workload(entry, CATALOG) == parse_workload(entry_of(WORKLOAD), CATALOG)[0]
    node = text_entry("f.json", document.items[1])  # a Node: kept as its text too
    assert node is not None and isinstance(node.body, RawObject) and node.namespace is None
    assert fast_node(node) == parse_node(entry_of(NODE))[0]
    assert node.body.raw is None  # read: its text let go of


def test_a_workload_items_text_goes_once_its_record_is_read_and_stays_for_the_walker() -> None:
    bad = WORKLOAD | {"spec": {**WORKLOAD["spec"], "queueName": 7}}
    (document,) = parse_text(json.dumps([WORKLOAD, bad]), typed=True)
    assert isinstance(document, RawItems)
    read, walked = (text_entry("f.json", item) for item in document.items)
    assert read is not None and walked is not None
    assert isinstance(read.body, RawObject) and isinstance(walked.body, RawObject)
    assert read_workload(read, CATALOG) == (parse_workload(entry_of(WORKLOAD), CATALOG)[0], [])
    assert read.body.raw is None  # nothing decodes it again: its memory is free for the next
    assert read_workload(walked, CATALOG) == parse_workload(entry_of(bad), CATALOG)
    assert walked.body.raw is not None and dict(walked.body) == bad
