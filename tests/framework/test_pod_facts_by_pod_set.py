"""A Pod keeps what its pod set's Pods say alike in one record (``model.PodFacts``): its
namespace, workload, priority, creation time, labels, annotations' facts, phase, source
and its name up to the last "-"; the Pod itself holds the rest of its name (``tail``),
its requests, node and deletion mark. Every value reads as the Pod's object says it,
whatever the name looks like, and whether the Pod was read by the intake, made by the
constructor or by ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from typing import Any

import pytest
from preemptd.daemon.backends.files import parse_text
from preemptd.framework.model import FrozenDict, Pod, PodFacts
from preemptd.framework.objects import parse_objects
from preemptd.framework.quantity import parse_timestamp

from benchmarks.generate import generate


def read(items: list[dict[str, Any]], file: str = "f.json") -> dict[str, Pod]:
    """The Pods of ``items`` (a JSON list) as ``preemptd cycle`` reads them, by key."""
    documents = parse_text(json.dumps(items).encode(), json_only=True, typed=True)
    return dict(parse_objects([(file, document) for document in documents]).pods)


def said(item: dict[str, Any], file: str) -> dict[str, Any]:
    """What a plain Pod object says, worked out from its fields (SEMANTICS §6 for the
    phase of a bound Pod that states none)."""
    metadata, spec = item["metadata"], item["spec"]
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    workload = labels.get("preemptd.io/workload")
    phase = (item.get("status") or {}).get("phase") or ("Running" if spec.get("nodeName") else "Pending")
    created = metadata.get("creationTimestamp")
    return {
        "namespace": metadata["namespace"],
        "name": metadata["name"],
        "key": f"{metadata['namespace']}/{metadata['name']}",
        "node_name": spec.get("nodeName"),
        "workload": f"{metadata['namespace']}/{workload}" if workload else None,
        "priority": spec.get("priority"),
        "created": parse_timestamp(created) if created else 0,
        "labels": labels,
        "force_delete": annotations.get("preemptd.io/force-delete") == "true",
        "deletion_cost": int(annotations.get("controller.kubernetes.io/pod-deletion-cost", 0)),
        "phase": phase,
        "source": file,
        "deleting": "deletionTimestamp" in metadata,
    }


def values(pod: Pod) -> dict[str, Any]:
    return {name: getattr(pod, name) for name in said_names}


said_names = (
    "namespace", "name", "key", "node_name", "workload", "priority", "created", "labels",
    "force_delete", "deletion_cost", "phase", "source", "deleting",
)  # fmt: skip


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return generate("S", 1)


def test_every_pod_of_a_generated_cluster_reads_as_its_object_says(objects: list[dict[str, Any]]) -> None:
    items = [o for o in objects if o["kind"] == "Pod"]
    pods = read(objects, "s.json")
    assert len(pods) == len(items)
    for item in items:
        pod = pods[f"{item['metadata']['namespace']}/{item['metadata']['name']}"]
        assert values(pod) == said(item, "s.json")
        assert pod.name == pod.facts.stem + pod.tail and "-" not in pod.tail


def test_the_pods_of_one_pod_set_share_one_record_and_equal_name_ends_one_text(objects: list[dict[str, Any]]) -> None:
    """The generated Pods are named ``<workload>-<pod set>-<index>``: one record per pod set
    that has Pods (the facts differ from pod set to pod set: the stem at least), and one
    text per index."""
    pods = read(objects, "s.json").values()
    records: dict[PodFacts, int] = {}
    tails: dict[str, int] = {}
    for pod in pods:
        assert records.setdefault(pod.facts, id(pod.facts)) == id(pod.facts)
        assert tails.setdefault(pod.tail, id(pod.tail)) == id(pod.tail)
    pod_sets = {(pod.workload, pod.name.rsplit("-", 1)[0]) for pod in pods}
    assert len(records) == len(pod_sets) < len(pods) / 2
    assert len(tails) == max(int(pod.name.rsplit("-", 1)[1]) for pod in pods) + 1


NAMES = ["p", "p-", "-p", "-", "a-b-c-10", "a-b-c-9", "job-x7k2p", "job-x7k2p-", "a--b", "p-0"]


def test_names_of_any_shape_read_back_whole_in_key_order(objects: list[dict[str, Any]]) -> None:
    """Names with no "-", one at either end, several, doubled: each Pod reads back its own
    name and key, and the Pods are listed in the order of their keys."""
    model = next(o for o in objects if o["kind"] == "Pod" and o["spec"].get("nodeName"))
    items = [{**model, "metadata": {**model["metadata"], "name": name}} for name in NAMES]
    pods = read(items)
    namespace = model["metadata"]["namespace"]
    assert list(pods) == sorted(f"{namespace}/{name}" for name in NAMES)
    for item in items:
        assert values(pods[f"{namespace}/{item['metadata']['name']}"]) == said(item, "f.json")


def test_pods_of_interleaved_pod_sets_share_a_record_per_pod_set(objects: list[dict[str, Any]]) -> None:
    """Pods of three pod sets, two phases, some being deleted, listed by turns (no two Pods
    of one record one after another): one record per pod set, phase and deletion mark,
    each Pod reading its own values."""
    model = next(o for o in objects if o["kind"] == "Pod" and o["spec"].get("nodeName"))
    items = []
    for i in range(24):
        labels = {"preemptd.io/workload": f"w{i % 3}"}
        metadata = {**model["metadata"], "name": f"w{i % 3}-main-{i}", "labels": labels}
        if i % 4 == 0:
            metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        items.append({**model, "metadata": metadata, "status": {"phase": ("Running", "Failed")[i // 3 % 2]}})
    pods = read(items)
    records: dict[PodFacts, int] = {}
    for item in items:
        pod = pods[f"{item['metadata']['namespace']}/{item['metadata']['name']}"]
        assert values(pod) == said(item, "f.json")
        assert records.setdefault(pod.facts, id(pod.facts)) == id(pod.facts)
    # (i % 3, i // 3 % 2) over 0..23 takes all six pairs among the Pods not deleted; the
    # deleted ones (i = 0, 4, 8, 12, 16, 20) take (0, 0), (1, 1), (2, 0) only.
    assert len(records) == 9
    assert sum(pod.deleting for pod in pods.values()) == 6


def test_the_constructor_and_replace_take_each_value_given_over_the_record() -> None:
    pod = Pod("ns", "w-main-3", {"cpu": 1}, "n1", "ns/w", 5, 7, labels={"a": "b"}, source="f")
    assert (pod.tail, pod.facts.stem, pod.name, pod.key) == ("3", "w-main-", "w-main-3", "ns/w-main-3")
    expected = {
        "namespace": "ns", "name": "w-main-3", "key": "ns/w-main-3", "node_name": "n1", "workload": "ns/w",
        "priority": 5, "created": 7, "labels": {"a": "b"}, "force_delete": False, "deletion_cost": 0,
        "phase": "Running", "source": "f", "deleting": False,
    }  # fmt: skip
    assert values(pod) == expected
    assert type(pod.labels) is FrozenDict and type(pod.requests) is FrozenDict
    assert values(dataclasses.replace(pod, deleting=True)) == {**expected, "deleting": True}
    assert values(dataclasses.replace(pod, name="solo")) == {**expected, "name": "solo", "key": "ns/solo"}
    moved = dataclasses.replace(pod, namespace="other", deletion_cost=3, phase="Failed")
    assert values(moved) == {**expected, "namespace": "other", "key": "other/w-main-3", "deletion_cost": 3, "phase": "Failed"}
    assert values(dataclasses.replace(pod, labels={})) == {**expected, "labels": {}}
    assert pod.facts == PodFacts("ns", "ns/w", 5, 7, FrozenDict({"a": "b"}), False, 0, "Running", "f", False, "w-main-")


def test_pods_of_equal_values_are_equal_however_made(objects: list[dict[str, Any]]) -> None:
    item = next(o for o in objects if o["kind"] == "Pod" and o["spec"].get("nodeName"))
    (pod,) = read([item]).values()
    v = said(item, "f.json")
    made = Pod(
        v["namespace"], v["name"], pod.requests, v["node_name"], v["workload"], v["priority"], v["created"],
        v["deleting"], v["force_delete"], v["deletion_cost"], v["phase"], v["labels"], v["source"],
    )  # fmt: skip
    assert made == pod and hash(made) == hash(pod)
    assert made != dataclasses.replace(pod, name=v["name"] + "x") != dataclasses.replace(pod, created=1)
    assert pickle.loads(pickle.dumps(pod)) == pod
