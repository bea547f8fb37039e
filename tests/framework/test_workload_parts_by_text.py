"""A Workload item's pod sets and admission are read once per distinct JSON text
(``typed_workloads._pod_sets_of_text``, ``typed_admissions.read_admission``): a text
read before gives the records read then, and only when everything else the reading
depends on is the same. An admission's checks depend on the Workload's queue (an
admission that names none is in it), its pod sets (an admitted count may not exceed
the spec's, unless a Deployment owns the Workload) and the catalog (its flavors must
be valid): each Workload below shares its admission's text with one read before it and
differs from it in one of those, and reads as its own object says, as the plain path
(parsed documents, no texts kept) reads it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from preemptd.daemon.backends.files import parse_text
from preemptd.framework.model import Admission, FrozenDict, PodSetAdmission
from preemptd.framework.objects import Inventory, parse_objects


def flavor(name: str, *, valid: bool = True) -> dict[str, Any]:
    spec = {} if valid else {"nodeLabels": {"a": 1}}  # a label value must be a string
    return {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


QUEUES = [
    {"apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"}},
    {"apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": "other"}},
]
# No queue named: the admission is in the Workload's queue.
ADMITTED = {"podSets": [{"name": "main", "count": 4, "flavors": {"cpu": "a100"}}]}


def workload(
    name: str, *, queue: str = "q", count: int = 4, owner: str = "Job", admission: Any = ADMITTED
) -> dict[str, Any]:
    return {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
        "spec": {
            "queueName": queue,
            "owner": {"apiVersion": "apps/v1", "kind": owner, "name": name},
            "podSets": [{"name": "main", "count": count, "requests": {"cpu": "1"}}],
        },
        "status": {"admission": copy.deepcopy(admission)},
    }


def read_both(items: list[dict[str, Any]]) -> Inventory:
    """``items`` read as ``preemptd cycle`` reads a JSON list (each Workload kept as its
    text, read typed), after checking that the plain path reads the same snapshot."""
    documents = parse_text(json.dumps(items).encode(), json_only=True, typed=True)
    typed = parse_objects([("f.json", document) for document in documents])
    plain = parse_objects([("f.json", copy.deepcopy(item)) for item in items])
    assert [str(p) for p in typed.problems] == [str(p) for p in plain.problems]
    assert typed.inadmissible == plain.inadmissible
    assert typed.workloads == plain.workloads
    return typed


def admission(queue: str, count: int) -> Admission:
    return Admission(queue, (PodSetAdmission("main", count, {"cpu": "a100"}),))


def test_one_admission_text_in_two_queues_is_in_each_workloads_queue() -> None:
    found = read_both(
        [flavor("a100"), *QUEUES, workload("a", queue="q"), workload("b", queue="other")]
    )
    assert found.workloads["ns/a"].admission == admission("q", 4)
    assert found.workloads["ns/b"].admission == admission("other", 4)


def test_one_admission_text_over_other_pod_sets_or_owners_is_checked_for_each() -> None:
    items = [
        flavor("a100"),
        *QUEUES,
        workload("a", count=4),
        # Two pods of the spec's, four admitted: a Deployment's Workload may (it grew since);
        # read first, its answer must not be the next one's.
        workload("b-deployment", count=2, owner="Deployment"),
        workload("c-job", count=2),
    ]
    found = read_both(items)
    assert found.workloads["ns/a"].admission == admission("q", 4)
    assert found.workloads["ns/b-deployment"].admission == admission("q", 4)
    assert "ns/c-job" not in found.workloads
    (problem,) = found.problems
    assert (problem.object, problem.path) == (
        "Workload/ns/c-job",
        "status.admission.podSets[0].count",
    )
    assert "must not exceed spec count 2, got 4" in problem.message


def test_one_admission_text_is_checked_again_against_another_catalog() -> None:
    first = read_both([flavor("a100"), *QUEUES, workload("a")])
    assert first.workloads["ns/a"].admission == admission("q", 4)
    second = read_both([flavor("a100", valid=False), *QUEUES, workload("a")])
    assert "ns/a" not in second.workloads
    assert any(
        p.object == "Workload/ns/a" and p.path.startswith("status.admission")
        for p in second.problems
    )


def test_a_null_admission_is_none_and_a_bad_pod_sets_text_is_the_walkers_each_time() -> None:
    bad = {"name": "main", "count": 0, "requests": {"cpu": "1"}}  # a count must be at least 1
    items = [flavor("a100"), *QUEUES, workload("a", admission=None), workload("b"), workload("c")]
    for item in items[-2:]:
        item["spec"]["podSets"] = [bad]
    found = read_both(items)
    assert found.workloads["ns/a"].admission is None
    assert sorted(p.object for p in found.problems if p.path == "spec.podSets[0].count") == [
        "Workload/ns/b",
        "Workload/ns/c",
    ]


def test_a_workloads_absent_maps_and_conditions_read_as_empty_and_present_ones_as_given() -> None:
    bare = workload("a")
    full = workload("b")
    full["metadata"] |= {"labels": {"team": "x"}, "annotations": {"note": "y"}}
    full["status"]["conditions"] = [{"type": "Evicted", "status": "True"}]
    full["status"]["flavorScan"] = {"main": {"a100": 1}}
    found = read_both([flavor("a100"), *QUEUES, bare, full])
    a, b = found.workloads["ns/a"], found.workloads["ns/b"]
    for empty in (a.labels, a.annotations, a.flavor_scan):
        assert empty == {} and type(empty) is FrozenDict
    assert a.evicted is False
    assert (dict(b.labels), dict(b.annotations), b.evicted) == ({"team": "x"}, {"note": "y"}, True)
    assert {name: dict(scan) for name, scan in b.flavor_scan.items()} == {"main": {"a100": 1}}
