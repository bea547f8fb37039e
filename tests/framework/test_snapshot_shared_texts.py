"""What a large snapshot keeps once where it kept a copy per object.

A generated cluster (``benchmarks/generate.py``, size S: 100 nodes, 1,000 workloads),
read as ``preemptd cycle`` reads its JSON file. Workloads of one shape charge the same
usage and hold it as one map (``snapshot.py``); a Workload's key is the one text its
Pods name it by, its owner's name the text of its own name when they are equal, and
pod set names and the priorities of consecutive Pods are one object each
(``objects/typed_*.py``). Each is checked against the values worked out without the
sharing: the usage against :func:`admitted_usage` of the workload, the texts against
the fields they equal.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from itertools import pairwise
from typing import Any

import pytest
from preemptd.daemon.backends.files import parse_text
from preemptd.framework.model import FrozenDict, PodFacts, PodSet
from preemptd.framework.objects import parse_objects
from preemptd.framework.objects.fields import Catalog, Entry
from preemptd.framework.objects.workloads import parse_workload
from preemptd.framework.quantity import parse_timestamp
from preemptd.framework.snapshot import Snapshot, admitted_usage

from benchmarks.generate import NOW_MS, generate


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return generate("S", 1)


@pytest.fixture(scope="module")
def snapshot(objects: list[dict[str, Any]]) -> Snapshot:
    text = json.dumps(objects, separators=(",", ":")).encode()
    documents = parse_text(text, json_only=True, typed=True)
    return Snapshot.build(parse_objects([("s.json", document) for document in documents]), now=NOW_MS)


def test_each_admitted_workload_charges_its_own_usage_from_one_map_per_distinct_usage(snapshot: Snapshot) -> None:
    assert snapshot.admitted
    distinct: dict[tuple[Any, ...], int] = {}
    for workload in snapshot.admitted:
        usage = snapshot.usage[workload.key]
        assert dict(usage) == admitted_usage(workload)
        assert list(usage.items()) == list(admitted_usage(workload).items())
        assert distinct.setdefault(tuple(usage.items()), id(usage)) == id(usage)
    assert len(distinct) < len(snapshot.admitted) / 2  # the sharing is real here
    with pytest.raises(TypeError):
        snapshot.usage[snapshot.admitted[0].key][("x", "cpu")] = 1  # type: ignore[index]


def test_a_workloads_key_is_the_text_its_pods_name_it_by(snapshot: Snapshot) -> None:
    named = 0
    for pod in snapshot.pods.values():
        workload = snapshot.workloads.get(pod.workload or "")
        if workload is not None:
            assert pod.workload is workload.key
            named += 1
    assert named > 1_000
    for key, workload in snapshot.workloads.items():
        assert key is workload.key == f"{workload.namespace}/{workload.name}"
        assert workload.key is sys.intern(workload.key)


def test_owner_and_pod_set_names_are_one_text_each(snapshot: Snapshot, objects: list[dict[str, Any]]) -> None:
    owners = {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": (o["spec"]["owner"]["kind"], o["spec"]["owner"]["name"])
        for o in objects
        if o["kind"] == "Workload"
    }
    for workload in snapshot.workloads.values():
        assert (workload.owner_kind, workload.owner_name) == owners[workload.key]
        assert workload.owner_kind is sys.intern("Job")
        if workload.owner_name == workload.name:
            assert workload.owner_name is workload.name
        for pod_set in workload.pod_sets:
            assert pod_set.name is sys.intern(pod_set.name)
        for admitted in workload.admission.pod_sets if workload.admission is not None else ():
            assert admitted.name is sys.intern(admitted.name)


def test_consecutive_pods_of_one_priority_hold_one_int(snapshot: Snapshot, objects: list[dict[str, Any]]) -> None:
    in_file = [o for o in objects if o["kind"] == "Pod"]
    pods = [snapshot.pods[f"{o['metadata']['namespace']}/{o['metadata']['name']}"] for o in in_file]
    assert [p.priority for p in pods] == [o["spec"].get("priority") for o in in_file]
    assert any(p.priority is not None and p.priority > 256 for p in pods)  # not cached by Python
    for before, after in pairwise(pods):
        if before.priority == after.priority:
            assert before.priority is after.priority


def test_admissions_of_one_shape_share_their_pod_sets_records(snapshot: Snapshot, objects: list[dict[str, Any]]) -> None:
    """The admitted pod sets read as the objects say, and two admissions that admit the
    same pod sets (names, counts, flavors) hold one tuple of records."""
    admitted = {
        f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["status"]["admission"]
        for o in objects
        if o["kind"] == "Workload" and "status" in o
    }
    by_shape: dict[tuple[Any, ...], int] = {}
    for workload in snapshot.admitted:
        assert workload.admission is not None
        doc = admitted[workload.key]
        assert workload.admission.queue == doc["queue"]
        shape = tuple((ps.name, ps.count, tuple(sorted(ps.flavors.items()))) for ps in workload.admission.pod_sets)
        assert shape == tuple(
            (ps["name"], ps["count"], tuple(sorted(ps["flavors"].items()))) for ps in doc["podSets"]
        )
        pod_sets = workload.admission.pod_sets
        assert by_shape.setdefault(shape, id(pod_sets)) == id(pod_sets)
    assert len(by_shape) < len(snapshot.admitted) / 2


def test_workloads_of_one_shape_share_their_pod_set_records(snapshot: Snapshot, objects: list[dict[str, Any]]) -> None:
    """Each Workload's pod sets read as the walker reads its object, and equal pod sets
    (and equal tuples of them) are one record held by every workload of that shape."""
    docs = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objects if o["kind"] == "Workload"}
    catalog = Catalog(flavors=dict(snapshot.flavors))
    records: dict[PodSet, int] = {}
    tuples: dict[tuple[PodSet, ...], int] = {}
    for workload in snapshot.workloads.values():
        entry = Entry("s.json", "Workload", workload.namespace, workload.name, docs[workload.key])
        assert workload.pod_sets == parse_workload(entry, catalog)[0].pod_sets
        assert tuples.setdefault(workload.pod_sets, id(workload.pod_sets)) == id(workload.pod_sets)
        for pod_set in workload.pod_sets:
            assert records.setdefault(pod_set, id(pod_set)) == id(pod_set)
    assert len(records) < len(snapshot.workloads) / 10  # the sharing is real here


def test_pods_that_say_the_same_share_one_record_of_it(snapshot: Snapshot, objects: list[dict[str, Any]]) -> None:
    """A Pod's force-delete, deletion cost, phase and source read as the object says (the
    generated Pods have no annotations, so neither is set), and the Pods that say the same
    (with their workload and the start of their names) hold one record of them."""
    records: dict[PodFacts, int] = {}
    said = set()
    for item in (o for o in objects if o["kind"] == "Pod"):
        pod = snapshot.pods[f"{item['metadata']['namespace']}/{item['metadata']['name']}"]
        phase = item.get("status", {}).get("phase") or ("Running" if item["spec"].get("nodeName") else "Pending")
        assert (pod.force_delete, pod.deletion_cost, pod.phase, pod.source) == (False, 0, phase, "s.json")
        assert records.setdefault(pod.facts, id(pod.facts)) == id(pod.facts)
        said.add((pod.workload, item["metadata"]["name"].rsplit("-", 1)[0], phase))
    assert len(records) == len(said)


def test_pods_share_their_facts_when_they_are_not_consecutive(objects: list[dict[str, Any]]) -> None:
    pod = next(o for o in objects if o["kind"] == "Pod" and o["spec"].get("nodeName"))
    said = [
        ("Running", {}),
        ("Succeeded", {}),
        ("Running", {"preemptd.io/force-delete": "true"}),
        ("Running", {"controller.kubernetes.io/pod-deletion-cost": "7"}),
        ("Failed", {"controller.kubernetes.io/pod-deletion-cost": "7"}),
    ]
    items = []
    for i in range(30):
        phase, annotations = said[i * 7 % len(said)]
        metadata = {**pod["metadata"], "name": f"p-{i:02}", "annotations": annotations}
        items.append({**pod, "metadata": metadata, "status": {"phase": phase}})
    documents = parse_text(json.dumps(items).encode(), json_only=True, typed=True)
    pods = parse_objects([("f.json", document) for document in documents]).pods
    records: dict[PodFacts, int] = {}
    for i, item in enumerate(items):
        read = pods[f"{item['metadata']['namespace']}/p-{i:02}"]
        annotations = item["metadata"]["annotations"]
        metadata = item["metadata"]
        expected = PodFacts(
            metadata["namespace"],
            f"{metadata['namespace']}/{metadata['labels']['preemptd.io/workload']}",
            item["spec"].get("priority"),
            parse_timestamp(metadata["creationTimestamp"]) or 0,
            FrozenDict(metadata["labels"]),
            "preemptd.io/force-delete" in annotations,
            int(annotations.get("controller.kubernetes.io/pod-deletion-cost", 0)),
            item["status"]["phase"],
            "f.json",
            False,
            "p-",
        )
        assert read.facts == expected
        expected_four = dataclasses.astuple(expected)[5:9]
        assert (read.force_delete, read.deletion_cost, read.phase, read.source) == expected_four
        assert records.setdefault(read.facts, id(read.facts)) == id(read.facts)
    assert len(records) == len(said)
