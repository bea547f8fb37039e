"""The Pods of a snapshot by key, held without their keys (``objects/pods_by_key.py``).

``parse_objects`` hands the valid Pods over as a :class:`PodsByKey`: the Pods alone, in
key order, a key made when asked. These tests hold it to the map the Pods were kept in
before, a dict from ``namespace/name`` to the Pod in sorted key order, built here from
the same Pods; and the check of the documents' order (:func:`in_key_order`) to the plain
comparison of the keys themselves, namespaces that are prefixes of one another
included (``a/x`` sorts after ``a-b/y`` and ``a.b/y``).
"""

from __future__ import annotations

import json
import pickle
import sys
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.daemon.backends.files import parse_text
from preemptd.framework.model import Pod
from preemptd.framework.objects import PodsByKey, parse_objects
from preemptd.framework.objects.pods_by_key import in_key_order
from preemptd.framework.snapshot import Snapshot

NAMESPACES = ("a", "a-b", "a.b", "ab", "b", "default")
NAMES = ("x", "x-1", "x-10", "x-2", "x.y", "y", "z/w")


def pod(namespace: str, name: str) -> Pod:
    return Pod(namespace, name, {"cpu": 1}, node_name="n1")


def item(namespace: str, name: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": cpu}}}]},
    }


def read(items: list[dict[str, Any]]) -> Any:
    """The inventory of one JSON file listing ``items``, read as ``preemptd cycle`` reads it."""
    documents = parse_text(json.dumps(items).encode(), json_only=True, typed=True)
    return parse_objects([("f.json", document) for document in documents])


pairs = st.lists(st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(NAMES)), max_size=25)


@settings(max_examples=200, deadline=None)
@given(pairs)
def test_in_key_order_is_the_keys_being_distinct_and_sorted(listed: list[tuple[str, str]]) -> None:
    keys = [f"{namespace}/{name}" for namespace, name in listed]
    expected = all(a < b for a, b in pairwise(keys))
    assert in_key_order([pod(namespace, name) for namespace, name in listed]) == expected


@settings(max_examples=200, deadline=None)
@given(pairs)
def test_the_map_reads_as_the_dict_of_the_pods_by_key(listed: list[tuple[str, str]]) -> None:
    by_key = {f"{namespace}/{name}": pod(namespace, name) for namespace, name in listed}
    expected = dict(sorted(by_key.items()))
    pods = PodsByKey(tuple(expected.values()))
    assert len(pods) == len(expected)
    assert list(pods) == list(expected)
    assert list(pods.keys()) == list(expected.keys())
    assert list(pods.values()) == list(expected.values())
    assert list(pods.items()) == list(expected.items())
    assert pods == expected and expected == pods
    for namespace in NAMESPACES:
        for name in NAMES:
            key = f"{namespace}/{name}"
            assert (key in pods) == (key in expected)
            assert pods.get(key) is expected.get(key)
    assert "a" not in pods and "" not in pods and 3 not in pods  # type: ignore[comparison-overlap]


def test_the_map_is_read_only_and_looks_up_the_pod_itself() -> None:
    pods = PodsByKey((pod("a-b", "y"), pod("a", "x")))
    assert pods["a/x"] is pods.pods[1]
    with pytest.raises(KeyError):
        pods["a/y"]
    with pytest.raises(TypeError):
        pods["a/y"] = pod("a", "y")  # type: ignore[index]
    assert pickle.loads(pickle.dumps(pods)) == pods


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(NAMES), st.sampled_from("12")), max_size=20))
def test_parse_objects_keeps_each_pod_defined_once_in_key_order(listed: list[tuple[str, str, str]]) -> None:
    """In or out of order, copies or not: the Pods of keys defined once, by key in sorted
    order; every copy of a key defined more than once is reported and left out."""
    inventory = read([item(namespace, name, cpu) for namespace, name, cpu in listed])
    defined: dict[str, list[str]] = {}
    for namespace, name, cpu in listed:
        defined.setdefault(f"{namespace}/{name}", []).append(cpu)
    once = {key: cpus[0] for key, cpus in sorted(defined.items()) if len(cpus) == 1}
    assert type(inventory.pods) is PodsByKey
    assert list(inventory.pods) == list(once)
    assert [p.requests["cpu"] for p in inventory.pods.values()] == [int(cpu) * 1000 for cpu in once.values()]
    assert inventory.counts["Pod"] == len(listed)
    copies = sorted(key for key, cpus in defined.items() for _ in cpus if len(cpus) > 1)
    reported = sorted(p.object.partition("/")[2] for p in inventory.problems if "defined" in p.message)
    assert reported == copies
    assert Snapshot.build(inventory, now=0).pods is inventory.pods


def test_a_pod_the_walker_reads_joins_the_plain_pods_in_key_order() -> None:
    """A Pod that is not plain is read by the walker: a valid one (a negative deletion
    cost) joins the plain ones in key order; an invalid one (a priority that is text)
    makes a plain Pod of its key a copy, and both are left out."""
    walked = item("a-b", "y")
    walked["metadata"]["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": "-7"}
    odd = item("a", "x")
    odd["spec"]["priority"] = "high"
    inventory = read([item("b", "z/w"), walked, item("a", "y"), odd, item("a", "x")])
    assert list(inventory.pods) == ["a-b/y", "a/y", "b/z/w"]
    assert inventory.pods["a-b/y"].deletion_cost == -7
    assert sorted((p.object, p.path) for p in inventory.problems) == [
        ("Pod/a/x", "metadata.name"),
        ("Pod/a/x", "metadata.name"),
        ("Pod/a/x", "spec.priority"),
    ]


def test_the_intake_lets_go_of_each_item_once_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A JSON list's items are read one by one, and the intake holds none it has read:
    when an item is decoded, the items read before the last one are referred to by
    nothing of the intake's (only by this test's own list; the last one's decoded
    header holds it until the next is decoded), so that the memory of the items read is
    free for the records made of them."""
    from preemptd.framework import objects

    documents = parse_text(json.dumps([item("a", f"x-{n}") for n in range(5)]).encode(), json_only=True, typed=True)
    raws = list(documents[0].items)
    held: list[int] = []
    decode = objects.ITEM.decode

    class Decoder:
        def decode(self, raw: Any) -> Any:
            index = next(n for n, seen in enumerate(raws) if seen is raw)
            if index >= 2:
                held.append(sys.getrefcount(raws[index - 2]) - 2)  # less this list's and the call's
            return decode(raw)

    monkeypatch.setattr(objects, "ITEM", Decoder())
    inventory = parse_objects([("f.json", documents[0])])
    assert len(inventory.pods) == 5
    assert held == [0, 0, 0]
