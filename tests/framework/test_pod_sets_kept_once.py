"""The typed reader of Workloads keeps equal pod sets as one record, and equal lists of
them as one tuple (``typed_workloads._pod_set``, ``_pod_sets``): workloads whose pod
sets say the same share them, and a pod set that differs from another in any value
(name, count, requests, minCount, nodeSelector, tolerations) is its own record, holding
what its object says.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from preemptd.daemon.backends.files import parse_text
from preemptd.framework.model import PodSet, Toleration, Workload
from preemptd.framework.objects import parse_objects
from preemptd.framework.objects.typed import forget_read_memos
from preemptd.framework.quantity import parse_quantity

from benchmarks.generate import generate


def read(items: list[dict[str, Any]]) -> dict[str, Workload]:
    """The admissible Workloads of ``items`` (a JSON list), as ``preemptd cycle`` reads them."""
    documents = parse_text(json.dumps(items).encode(), json_only=True, typed=True)
    inventory = parse_objects([("f.json", document) for document in documents])
    assert not inventory.problems
    return inventory.workloads


def said(pod_set: dict[str, Any]) -> PodSet:
    """What a pod set's object says, by the constructor: requests parsed as quantities,
    zero requests left out (SEMANTICS: a pod set's requests are per pod, as the walker
    reads them)."""
    requests = {name: parse_quantity(value, name) for name, value in pod_set.get("requests", {}).items()}
    tolerations = tuple(
        Toleration(key=t.get("key", ""), operator=t.get("operator", "Equal"), value=t.get("value", ""), effect=t.get("effect", ""))
        for t in pod_set.get("tolerations", ())
    )
    return PodSet(
        name=pod_set["name"],
        count=pod_set["count"],
        requests={name: amount for name, amount in requests.items() if amount},
        min_count=pod_set.get("minCount"),
        node_selector=pod_set.get("nodeSelector", {}),
        tolerations=tolerations,
    )


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return generate("S", 1)


def test_workloads_of_a_generated_cluster_share_equal_pod_sets_and_their_tuples(objects: list[dict[str, Any]]) -> None:
    items = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objects if o["kind"] == "Workload"}
    workloads = read(objects)
    assert workloads.keys() == items.keys()
    records: dict[str, PodSet] = {}
    tuples: dict[str, tuple[PodSet, ...]] = {}
    for key, workload in workloads.items():
        stated = items[key]["spec"]["podSets"]
        assert workload.pod_sets == tuple(said(pod_set) for pod_set in stated)
        for pod_set, record in zip(stated, workload.pod_sets, strict=True):
            assert records.setdefault(json.dumps(pod_set, sort_keys=True), record) is record
        assert tuples.setdefault(json.dumps(stated, sort_keys=True), workload.pod_sets) is workload.pod_sets
    assert len({id(r) for r in records.values()}) == len(records)  # unequal ones are not shared
    assert len({id(t) for t in tuples.values()}) == len(tuples)


def variants(memory: str) -> list[dict[str, Any]]:
    """One pod set, and that pod set with one value changed; its memory request ``memory``."""
    return [
        {"name": "main", "count": 4, "requests": {"cpu": "2", "memory": memory}},
        {"name": "main", "count": 4, "requests": {"cpu": "2", "memory": memory}},  # the first again
        {"name": "main", "count": 5, "requests": {"cpu": "2", "memory": memory}},
        {"name": "main", "count": 4, "requests": {"memory": memory, "cpu": "2"}},  # the first, keys in another order
        {"name": "main", "count": 4, "requests": {"cpu": "3", "memory": memory}},
        {"name": "main", "count": 4, "requests": {"cpu": "2", "memory": memory, "nvidia.com/gpu": "0"}},  # zero: dropped
        {"name": "main", "count": 4, "minCount": 2, "requests": {"cpu": "2", "memory": memory}},
        {"name": "main", "count": 4, "requests": {"cpu": "2", "memory": memory}, "nodeSelector": {"zone": "a"}},
        {"name": "main", "count": 4, "requests": {"cpu": "2", "memory": memory}, "nodeSelector": {"zone": "b"}},
        {"name": "main", "count": 4, "requests": {"cpu": "2", "memory": memory}, "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
        {"name": "main", "count": 4, "requests": {"cpu": "2", "memory": memory}, "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]},
    ]
# Which of the variants hold the same record, worked out from what each says: the second,
# the fourth (the same map) and the sixth (a zero request is none) say what the first says.
SAME_AS = {1: 0, 3: 0, 5: 0}


@pytest.mark.parametrize("read_before", [False, True])
def test_pod_sets_that_differ_in_any_value_are_their_own_records(objects: list[dict[str, Any]], read_before: bool) -> None:
    """``read_before``: the first variant's pod set was read once already, and the shared
    maps let go since (``forget_read_memos``, as a command does once it has its snapshot,
    and the daemon after each cycle): the same map given in another order is still the
    first variant's record. Its memory request is one no other test reads."""
    memory = "8191Mi" if read_before else "8Gi"
    given = variants(memory)
    template = next(o for o in objects if o["kind"] == "Workload" and len(o["spec"]["podSets"]) == 1)
    template = copy.deepcopy(template)
    del template["status"]  # pending: no admission to match the pod sets
    items = [o for o in objects if o["kind"] != "Workload"]
    if read_before:
        read([*items, {**copy.deepcopy(template), "spec": {**template["spec"], "podSets": [given[0]]}}])
        forget_read_memos()
    names = []
    for index, pod_set in enumerate(given):
        workload = copy.deepcopy(template)
        names.append(f"variant-{index}")
        workload["metadata"]["name"] = names[-1]
        workload["spec"]["podSets"] = [pod_set]
        items.append(workload)
    pair = copy.deepcopy(template)  # two pod sets, twice: one tuple
    pair["spec"]["podSets"] = [given[0], {**given[2], "name": "extra"}]
    for name in ("pair-a", "pair-b"):
        items.append({**copy.deepcopy(pair), "metadata": {**pair["metadata"], "name": name}})
    namespace = template["metadata"]["namespace"]
    workloads = read(items)
    records = [workloads[f"{namespace}/{name}"].pod_sets[0] for name in names]
    for index, record in enumerate(records):
        assert record == said(given[index])
        group = SAME_AS.get(index, index)
        alike = [other for other in range(len(records)) if SAME_AS.get(other, other) == group]
        assert [other for other in range(len(records)) if records[other] is record] == alike
    first, second = workloads[f"{namespace}/pair-a"], workloads[f"{namespace}/pair-b"]
    assert first.pod_sets is second.pod_sets
    assert first.pod_sets[0] is records[0]
    assert first.pod_sets == (said(given[0]), said({**given[2], "name": "extra"}))
