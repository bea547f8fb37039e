"""The intake takes the last Pod's record for a Pod item whose every value the record
holds was read as the last item's (``typed_pods.LastMaps``). Whatever changes from one
Pod item to the next, one value at a time or several, and whatever item between them is
read by the walker instead, every Pod reads as its own object says.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.objects.typed_pods import LastMaps, decode_item, pod_of_item

from tests.framework.test_pod_facts_by_pod_set import read, said, values

WORKLOAD = "preemptd.io/workload"
COST = "controller.kubernetes.io/pod-deletion-cost"
FORCE = "preemptd.io/force-delete"

# Each field of a Pod's record, by a few values; the signed deletion cost is read by the
# walker, not by the intake (typed_pods._annotations).
NAMESPACES = ["a", "b"]
LABELS = [None, {WORKLOAD: "w1"}, {WORKLOAD: "w2", "tier": "x"}, {WORKLOAD: "w1", "tier": "x"}]
ANNOTATIONS = [None, {FORCE: "true"}, {COST: "7"}, {COST: "-3"}, {FORCE: "true", COST: "7"}]
PRIORITIES = [None, 0, 5]
CREATED = [None, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]
PHASES = [None, "Running", "Succeeded", "Pending"]
NODES = [None, "n1"]
STEMS = ["p-a-", "p-b-", "pa-", "x"]  # "x": a name without "-"


def item(index: int, choice: tuple[int, ...]) -> dict[str, Any]:
    namespace, labels, annotations, priority, created, phase, node, deleting, stem = choice
    metadata: dict[str, Any] = {"name": f"{STEMS[stem]}{index}", "namespace": NAMESPACES[namespace]}
    if LABELS[labels] is not None:
        metadata["labels"] = LABELS[labels]
    if ANNOTATIONS[annotations] is not None:
        metadata["annotations"] = ANNOTATIONS[annotations]
    if CREATED[created] is not None:
        metadata["creationTimestamp"] = CREATED[created]
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-03T00:00:00Z"
    spec: dict[str, Any] = {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}
    if PRIORITIES[priority] is not None:
        spec["priority"] = PRIORITIES[priority]
    if NODES[node] is not None:
        spec["nodeName"] = NODES[node]
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if PHASES[phase] is not None:
        obj["status"] = {"phase": PHASES[phase]}
    return obj


CHOICE = st.tuples(
    *(st.integers(0, len(values) - 1) for values in (NAMESPACES, LABELS, ANNOTATIONS, PRIORITIES, CREATED, PHASES, NODES)),
    st.booleans(),
    st.integers(0, len(STEMS) - 1),
)


def runs(choices: list[tuple[tuple[int, ...], int]]) -> list[dict[str, Any]]:
    """Items in runs of equal choices (a pod set's Pods come together), numbered in turn."""
    items = []
    for choice, length in choices:
        start = len(items)
        items.extend(item(start + offset, choice) for offset in range(length))
    return items


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(CHOICE, st.integers(1, 3)), min_size=1, max_size=8))
def test_every_pod_reads_as_its_object_says_whatever_changes_from_the_last(
    choices: list[tuple[tuple[int, ...], int]],
) -> None:
    items = runs(choices)
    pods = read(items, "f.json")
    assert len(pods) == len(items)
    for obj in items:
        assert values(pods[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"]) == said(obj, "f.json")


def test_one_value_changed_at_a_time_each_pod_reads_its_own() -> None:
    base = (0, 1, 0, 1, 1, 1, 1, False, 0)
    items = []
    for place in range(len(base)):  # the base, then the base with one value changed, then the base
        changed = list(base)
        changed[place] = (not base[place]) if place == 7 else (base[place] + 1) % 2
        for choice in (base, tuple(changed), base):
            items.append(item(len(items), choice))
    pods = read(items)
    for obj in items:
        assert values(pods[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"]) == said(obj, "f.json")


def test_a_pod_after_one_the_walker_reads_takes_no_record_of_it() -> None:
    """The item between two Pods is not plain (a signed deletion cost): the intake leaves
    it to the walker after reading its labels. The next Pod has that item's labels and
    otherwise the first Pod's values: it holds its own labels and workload."""
    last = LastMaps()
    first = item(0, (0, 1, 0, 1, 1, 1, 1, False, 0))
    odd = item(1, (0, 2, 3, 1, 1, 1, 1, False, 0))  # other labels (workload w2); cost -3
    after = item(2, (0, 2, 0, 1, 1, 1, 1, False, 0))  # odd's labels, first's other values
    read_back = []
    for obj in (first, odd, after):
        raw = msgspec.Raw(msgspec.json.encode(obj))
        decoded = decode_item(raw)
        assert decoded is not None
        read_back.append(pod_of_item("f.json", raw, decoded, last))
    assert type(read_back[1]).__name__ == "Entry"  # the walker's
    pod = read_back[2]
    assert values(pod) == said(after, "f.json")  # type: ignore[arg-type]
    assert pod.facts is not read_back[0].facts  # type: ignore[union-attr]
