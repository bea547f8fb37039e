"""Typed decoding reads every Pod exactly as the located-field walker does.

A plain Pod is read without the walker (from a JSON list's text, or converted from a
parsed dict); any Pod the typed reader is not sure about goes to the walker. These
tests hold the two to the same record for every Pod the typed reader accepts, and to
the same located problems for every Pod it passes on.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.backends.files import load_files, parse_text
from preemptd.framework.model import FrozenDict, Pod, PodFacts
from preemptd.framework.objects import parse_objects
from preemptd.framework.objects.fields import Entry
from preemptd.framework.objects.nodes import parse_pod
from preemptd.framework.objects.typed import RawItems, RawObject
from preemptd.framework.objects.typed_pods import _new_pod, fast_pod, pod_item

from benchmarks import generate

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "ns",
        "labels": {"preemptd.io/workload": "w", "app": "x"},
        "creationTimestamp": "2025-12-28T16:21:47.854Z",
    },
    "spec": {
        "nodeName": "n1",
        "priority": 5,
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": 1, "nvidia.com/gpu": "0"}}},
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
    },
    "status": {"phase": "Running"},
}


def variant(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """POD with the field at dotted ``path`` set to ``value`` (``DELETE`` removes it)."""
    pod = copy.deepcopy(POD if base is None else base)
    *parents, last = path.split(".")
    target: Any = pod
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is DELETE:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return pod


DELETE = object()

VARIANTS: dict[str, dict[str, Any]] = {
    "plain": POD,
    "no namespace": variant("metadata.namespace", DELETE),
    "empty namespace": variant("metadata.namespace", ""),
    "no spec": variant("spec", DELETE),
    "null spec": variant("spec", None),
    "no status": variant("status", DELETE),
    "empty phase": variant("status.phase", ""),
    "pending unbound": variant("spec.nodeName", ""),
    "deleting": variant("metadata.deletionTimestamp", "2026-01-01T00:00:00Z"),
    "force delete": variant("metadata.annotations", {"preemptd.io/force-delete": "true"}),
    "deletion cost": variant("metadata.annotations", {"controller.kubernetes.io/pod-deletion-cost": "7"}),
    "negative deletion cost": variant(
        "metadata.annotations", {"controller.kubernetes.io/pod-deletion-cost": "-7"}
    ),
    "bad deletion cost": variant(
        "metadata.annotations", {"controller.kubernetes.io/pod-deletion-cost": "x"}
    ),
    "huge deletion cost": variant(
        "metadata.annotations", {"controller.kubernetes.io/pod-deletion-cost": "9" * 30}
    ),
    "priority true": variant("spec.priority", True),
    "priority float": variant("spec.priority", 5.0),
    "priority text": variant("spec.priority", "5"),
    "priority beyond 64 bits": variant("spec.priority", 2**70),
    "label not text": variant("metadata.labels", {"a": 1}),
    "empty label key": variant("metadata.labels", {"": "x"}),
    "labels a list": variant("metadata.labels", ["a"]),
    "bad quantity": variant("spec.containers.0.resources.requests.cpu", "lots"),
    "negative quantity": variant("spec.containers.0.resources.requests.cpu", "-1"),
    "quantity true": variant("spec.containers.0.resources.requests.cpu", True),
    "quantity a list": variant("spec.containers.0.resources.requests.cpu", [1]),
    "quantity a mapping": variant("spec.containers.0.resources.requests.memory", {"a": 1}),
    "empty resource name": variant("spec.containers.0.resources.requests", {"": "1"}),
    "container not a mapping": variant("spec.containers.0", "a"),
    "containers a mapping": variant("spec.containers", {"a": 1}),
    "null container": variant("spec.containers.0", None),
    "resources null": variant("spec.containers.0.resources", None),
    "requests null": variant("spec.containers.0.resources.requests", None),
    "bad timestamp": variant("metadata.creationTimestamp", "yesterday"),
    "timestamp a number": variant("metadata.creationTimestamp", 5),
    "node name a number": variant("spec.nodeName", 5),
    "phase a list": variant("status.phase", ["Running"]),
    "status a list": variant("status", []),
    "unknown fields": variant("spec.schedulerName", {"anything": [1, 2]}),
    "quantity float": variant("spec.containers.0.resources.requests.cpu", 0.5),
    "labels written like requests": variant(
        "spec.containers.0.resources.requests",
        {"cpu": "500m", "memory": "1Gi"},
        variant("metadata.labels", {"cpu": "500m", "memory": "1Gi"}),
    ),
}


def walker(pod: dict[str, Any], file: str = "f.json") -> tuple[Any, list[Any]]:
    metadata = pod["metadata"]
    entry = Entry(file, "Pod", metadata.get("namespace") or "default", metadata["name"], pod)
    return parse_pod(entry)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_pod_read_from_a_json_list_equals_the_walkers_reading(name: str, tmp_path: Path) -> None:
    pod = VARIANTS[name]
    path = tmp_path / "f.json"
    path.write_text(json.dumps({"kind": "List", "items": [pod]}))
    documents = load_files([path], typed=True)
    assert isinstance(documents[0][1], RawItems)  # the typed path was taken
    inventory = parse_objects([("f.json", document) for _, document in documents])
    expected, problems = walker(pod)
    assert [str(p) for p in inventory.problems] == [str(p) for p in problems]
    if problems:
        assert inventory.pods == {}
    else:
        assert inventory.pods == {expected.key: expected}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_pod_converted_from_a_dict_equals_the_walkers_reading_or_is_left_to_it(name: str) -> None:
    pod = VARIANTS[name]
    metadata = pod["metadata"]
    entry = Entry("f.json", "Pod", metadata.get("namespace") or "default", metadata["name"], pod)
    expected, problems = walker(pod)
    found = fast_pod(entry)
    if problems:
        assert found is None
    else:
        assert found is None or found == expected
    if name == "plain":
        assert found == expected  # the common case is not left to the walker


def test_plain_pods_are_taken_typed_and_keep_no_dict() -> None:
    bad = variant("spec.containers.0.resources.requests.cpu", "lots")
    (document,) = parse_text(json.dumps([POD, POD | {"kind": "Node"}, bad]), typed=True)
    assert isinstance(document, RawItems)
    assert pod_item("f.json", document.items[0]) == walker(POD)[0]
    assert pod_item("f.json", document.items[1]) is None  # a Node: the intake reads it
    entry = pod_item("f.json", document.items[2])  # a Pod, not plain: for the walker
    assert isinstance(entry, Entry) and isinstance(entry.body, RawObject)
    assert (entry.body.pod, entry.label, parse_pod(entry)[1]) == (None, "Pod/ns/p", walker(bad)[1])


def test_pods_whose_maps_have_the_same_text_share_their_records() -> None:
    """Pods of one workload repeat their labels and requests: each text is read once and
    the records share it; another namespace names another workload."""
    other = variant("metadata.name", "q")
    elsewhere = variant("metadata.namespace", "other")
    (document,) = parse_text(json.dumps([POD, other, elsewhere]), typed=True)
    first, second, third = (pod_item("f.json", raw) for raw in document.items)
    assert isinstance(first, Pod) and isinstance(second, Pod) and isinstance(third, Pod)
    assert second.labels is first.labels and second.requests is first.requests
    assert (first.workload, second.workload, third.workload) == ("ns/w", "ns/w", "other/w")
    assert third.labels is first.labels


def test_a_pod_record_built_field_by_field_equals_the_constructors() -> None:
    values = ("ns", "p-1", FrozenDict({"cpu": 1}), "n1", "ns/w", 7, 5, True, FrozenDict({"a": "b"}))
    facts = PodFacts("ns", "ns/w", 7, 5, FrozenDict({"a": "b"}), True, 3, "Pending", "f", True, "p-")
    built = _new_pod("1", values[2], "n1", facts)
    expected = Pod(*values[:8], True, 3, "Pending", values[8], "f")
    assert built == expected
    assert [getattr(built, name) for name in Pod.__slots__] == ["1", values[2], "n1", facts]
    assert (built.force_delete, built.deletion_cost, built.phase, built.source) == (True, 3, "Pending", "f")
    assert (built.namespace, built.name, built.workload, built.priority, built.created) == values[:2] + values[4:7]


def test_items_that_are_not_pods_keep_their_located_problems(tmp_path: Path) -> None:
    items = [POD, None, 5, {"kind": "Pod", "metadata": {"name": ""}}, {"kind": "Widget"}]
    for document in (items, {"kind": "List", "items": items}):
        typed_path = tmp_path / "f.json"
        typed_path.write_text(json.dumps(document))
        typed = parse_objects(load_files([typed_path], typed=True))
        plain = parse_objects(load_files([typed_path]))
        assert [str(p) for p in typed.problems] == [str(p) for p in plain.problems]
        assert [str(p) for p in typed.warnings] == [str(p) for p in plain.warnings]
        assert typed.pods == plain.pods
        assert len(typed.problems) >= 3


def test_an_item_json_reads_specially_is_decoded_the_standard_way(tmp_path: Path) -> None:
    """An integer of thousands of digits stays text (as json.loads is told), so the
    quantity holding it is the object's own problem."""
    pod = variant("spec.containers.0.resources.requests.cpu", 0)
    text = json.dumps([pod]).replace('"cpu": 0', '"cpu": ' + "9" * 5000)
    path = tmp_path / "f.json"
    path.write_text(text)
    typed = parse_objects(load_files([path], typed=True))
    plain = parse_objects(load_files([path]))
    assert [str(p) for p in typed.problems] == [str(p) for p in plain.problems]
    assert len(typed.problems) == 1 and "requests[cpu]" in typed.problems[0].path


def test_a_generated_cluster_reads_the_same_typed_and_walked(tmp_path: Path) -> None:
    objects = generate.generate_shape("grow-deep-1000", 3)
    path = tmp_path / "cluster.json"
    generate.write(objects, str(path))
    typed = parse_objects(load_files([path], typed=True))
    walked = {}
    for obj in objects:
        if obj["kind"] == "Pod":
            pod, problems = walker(obj, str(path))
            assert problems == []
            walked[pod.key] = pod
    assert len(walked) > 1000
    assert typed.pods == walked
    assert typed.problems == []


@pytest.mark.parametrize(
    "copies",
    [
        [POD, POD],  # two plain copies
        [POD, POD, POD],
        [POD, variant("spec.priority", True)],  # a plain copy and one the walker reads
        [variant("spec.priority", True), POD],
    ],
)
def test_a_plain_pod_defined_twice_is_reported_like_any_copy(copies: list[Any], tmp_path: Path) -> None:
    """Plain Pods are kept by key at intake, without an entry each; a key seen twice
    still makes every copy invalid, with the walker's located problems."""
    other = variant("metadata.name", "q")
    path = tmp_path / "f.json"
    path.write_text(json.dumps([*copies, other]))
    typed = parse_objects(load_files([path], typed=True))
    plain = parse_objects(load_files([path]))
    assert [str(p) for p in typed.problems] == [str(p) for p in plain.problems]
    assert any("defined" in p.message for p in typed.problems)
    assert list(typed.pods) == list(plain.pods) == ["ns/q"]
