"""A queue tree deeper than MAX_DEPTH levels is one located error, never a RecursionError.

The first Queue too deep is reported at its ``spec.parent`` and its tree is
out, like any tree with an invalid Queue; other trees keep scheduling. Within
the limit, every level is scheduled as usual.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.backends.kubernetes.inventory import ClusterInventory
from preemptd.daemon.cli import main
from preemptd.framework.model import FlavorQuotas, QueueSpec, ResourceGroup, ResourceQuota
from preemptd.framework.objects import parse_objects
from preemptd.framework.objects.queues import MAX_DEPTH
from preemptd.framework.quota import QuotaTree
from preemptd.framework.snapshot import Snapshot

NOW = "2026-01-01T00:00:00Z"


def flavor() -> dict[str, Any]:
    return {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "od"}}


def queue(name: str, parent: str | None, cpu: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [{"name": "od", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}
        ]
    }
    if parent is not None:
        spec["parent"] = parent
    return {"apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def workload(name: str, queue_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"queueName": queue_name, "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1"}}]},
    }


def chain(levels: int, prefix: str = "q") -> list[dict[str, Any]]:
    """``levels`` queues, each the parent of the next; the last is the leaf."""
    return [queue(f"{prefix}{i}", f"{prefix}{i - 1}" if i else None) for i in range(levels)]


def deep_snapshot(tmp_path: Path, levels: int) -> Path:
    objects = [flavor(), *chain(levels), workload("deep", f"q{levels - 1}"), queue("flat", None), workload("ok", "flat")]
    path = tmp_path / "deep.json"
    path.write_text(json.dumps(objects), encoding="utf-8")
    return path


def test_a_thousand_levels_are_one_located_error_in_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = deep_snapshot(tmp_path, 1000)
    assert 2 == main(["validate", str(snapshot)])
    expected = [
        f"{snapshot}: Queue/q{MAX_DEPTH}: spec.parent: the queue tree is more than {MAX_DEPTH} levels deep "
        f"here (at most {MAX_DEPTH} are allowed)"
    ]
    assert expected == capsys.readouterr().err.splitlines()


def test_a_thousand_levels_cost_their_own_tree_only_in_cycle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = deep_snapshot(tmp_path, 1000)
    assert 0 == main(["cycle", str(snapshot), "--now", NOW, "--output", "json"])
    decisions = json.loads(capsys.readouterr().out)
    assert ["ns/ok"] == [entry["workload"] for entry in decisions["admitted"]]
    assert [("ns/deep", "Inadmissible")] == [(p["workload"], p["reason"]) for p in decisions["pending"]]


def test_a_tree_of_exactly_max_depth_levels_is_scheduled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = deep_snapshot(tmp_path, MAX_DEPTH)
    assert 0 == main(["cycle", str(snapshot), "--now", NOW, "--output", "json"])
    captured = capsys.readouterr()
    assert "" == captured.err
    assert ["ns/deep", "ns/ok"] == sorted(entry["workload"] for entry in json.loads(captured.out)["admitted"])


def test_an_implicit_cohort_counts_as_a_level() -> None:
    """q0's parent is named but never defined: it is level 1, so q{MAX_DEPTH - 1} is too deep."""
    objects = [flavor(), queue("q0", "cohort"), *chain(MAX_DEPTH, "q")[1:]]
    problems = parse_objects([("s.yaml", obj) for obj in objects]).problems
    assert [f"Queue/q{MAX_DEPTH - 1}"] == [problem.object for problem in problems]


def test_the_daemon_snapshot_of_a_thousand_levels_isolates_the_tree() -> None:
    cluster = ClusterInventory()
    cluster.apply("ResourceFlavor", flavor())
    for obj in [*chain(1000), queue("flat", None)]:
        cluster.apply("Queue", obj)
    cluster.apply("Workload", workload("deep", "q999"))
    cluster.apply("Workload", workload("ok", "flat"))
    inventory = cluster.inventory()
    snapshot = Snapshot.build(inventory, now=0)
    assert ["flat"] == sorted(inventory.queues)
    assert ["ns/ok"] == sorted(snapshot.workloads)
    assert [f"Queue/q{MAX_DEPTH}"] == [problem.object for problem in inventory.problems]


def test_quota_figures_of_a_thousand_levels_are_derived_without_recursion() -> None:
    """QuotaTree walks the tree iteratively: each level adds its own nominal to its parent's."""
    quota = ResourceGroup(("cpu",), (FlavorQuotas("od", {"cpu": ResourceQuota(1000)}),))
    specs = {f"q{i:04d}": QueueSpec(f"q{i:04d}", f"q{i - 1:04d}" if i else None, (quota,)) for i in range(1000)}
    tree = QuotaTree(specs)
    root, leaf = tree.nodes["q0000"], tree.nodes["q0999"]
    assert (1000 * 1000, 999, 999, 0) == (root.subtree[("od", "cpu")], root.height, leaf.depth, leaf.height)
    assert 1000 * 1000 == leaf.potential[("od", "cpu")]
