"""Kueue's own objects as input (framework/objects/kueue.py) and Kueue's status on --apply.

The fixtures are written from Kueue's API types (apis/kueue/v1beta1, v1beta2, and the
v1alpha1 Cohort): v1beta2.yaml and v1beta1.yaml are the same cluster in each version's
own spellings, equivalent.yaml is that cluster written by hand in preemptd's kinds.

The expected decisions, worked out by hand (SEMANTICS §1-§4). On-demand cpu: ml 4,
team-b 4, the cohort ml's own 2, so 10 in the tree; running-low holds 2 in ml and
running-b 6 in team-b (its containers' limits, 2 cpu a pod, count as its requests),
so 2 are free. The Finished workload "done" (8 cpu) holds nothing.

* urgent (priority 1000 from WorkloadPriorityClass high, 4 cpu): on on-demand ml would
  be at 6 > 4 and the tree has 2 free, so it needs preemption; whenCanPreempt
  TryNextFlavor tries spot, where ml's 2 cpu is the most it could ever get: no. Back
  on on-demand: reclaim needs urgent within ml's nominal (2 + 4 > 4), so not; within
  ml (withinClusterQueue LowerPriority) running-low (10) goes, and then ml is at 4 and
  the tree at 10: urgent fits. running-low is preempted InQueue (Kueue's
  InClusterQueue); urgent is pending PendingPreemption, waiting for it.
* spot-job (2 pods of 1 cpu selecting the spot nodes): on-demand's node labels
  conflict with its nodeSelector; spot (tainted, tolerated) has ml's 2 cpu: admitted
  on spot, not borrowing.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from preemptd.daemon.cli import main
from preemptd.framework.objects import parse_objects
from preemptd.framework.objects.kueue import cohort_queue_names

HERE = Path(__file__).parent
NOW = "2026-01-01T01:00:00Z"
LATER = "2026-01-01T01:01:00Z"


def cycle(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["cycle", *args, "--output", "json"]) == 0, capsys.readouterr().err
    decisions: dict[str, Any] = json.loads(capsys.readouterr().out)
    return decisions


def dump(path: Path) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = yaml.safe_load(path.read_text())["items"]
    return items


def write(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def named(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(i for i in items if i["kind"] == kind and i["metadata"]["name"] == name)


# --- decisions ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_a_kueue_dump_gets_the_decisions_of_its_hand_written_equivalent(
    capsys: pytest.CaptureFixture[str], version: str
) -> None:
    kueue = cycle(capsys, str(HERE / f"{version}.yaml"), "--now", NOW)
    ours = cycle(capsys, str(HERE / "equivalent.yaml"), "--now", NOW)
    assert ours == kueue
    assert [(a["workload"], a["queue"], a["borrowing"], a["podSets"]) for a in kueue["admitted"]] == [
        ("research/spot-job", "ml", False, [{"name": "main", "count": 2, "flavors": {"cpu": "spot", "memory": "spot"}}])
    ]
    assert [(p["workload"], p["preemptor"], p["reason"], p["count"]) for p in kueue["preempted"]] == [
        ("research/running-low", "research/urgent", "InQueue", None)
    ]
    assert [(p["workload"], p["reason"], p["waitingFor"]) for p in kueue["pending"]] == [
        ("research/urgent", "PendingPreemption", ["research/running-low"])
    ]


def test_the_dump_is_read_without_problems_and_a_cohort_sharing_a_clusterqueue_name_is_renamed() -> None:
    inventory = parse_objects([("d.yaml", yaml.safe_load((HERE / "v1beta2.yaml").read_text()))])
    assert (inventory.problems, inventory.inadmissible) == ([], {})
    assert sorted(inventory.queues) == ["ml", "ml-cohort", "org", "team-b"]
    assert (inventory.queues["ml"].parent, inventory.queues["team-b"].parent) == ("ml-cohort", "ml-cohort")
    assert inventory.queues["ml-cohort"].parent == "org"
    assert not inventory.queues["org"].defined
    # "done" is Finished: not in the snapshot at all.
    assert sorted(inventory.workloads) == ["research/running-low", "research/spot-job", "research/urgent", "team-b/running-b"]
    running_b = inventory.workloads["team-b/running-b"]
    assert (running_b.priority, dict(running_b.pod_sets[0].requests)) == (100, {"cpu": 2000, "memory": 2 * 2**30})


def test_cohort_names_avoid_every_clusterqueue_and_cohort_name() -> None:
    names = cohort_queue_names({"a", "a-cohort", "b"}, {"a", "a-cohort-2", "c"})
    assert names == {"a": "a-cohort-3", "a-cohort-2": "a-cohort-2", "c": "c"}


def test_a_cohort_without_a_clusterqueue_of_its_name_keeps_it(tmp_path: Path) -> None:
    items = dump(HERE / "v1beta2.yaml")
    for item in items:
        if item["kind"] == "ClusterQueue":
            item["spec"]["cohortName"] = "shared"
    named(items, "Cohort", "ml")["metadata"]["name"] = "shared"
    inventory = parse_objects([("d.yaml", {"kind": "List", "items": items})])
    assert inventory.problems == []
    assert (inventory.queues["ml"].parent, inventory.queues["shared"].parent) == ("shared", "org")


# --- apply: Kueue's status, and stepping sessions in Kueue's format -----------------------


def test_apply_writes_kueue_status_and_the_next_cycles_step_on_like_preemptds_own(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    step1 = tmp_path / "step1.yaml"
    first = cycle(capsys, str(HERE / "v1beta2.yaml"), "--now", NOW, "--apply", str(step1))
    items = dump(step1)

    spot = named(items, "Workload", "spot-job")["status"]
    assert spot["admission"] == {
        "clusterQueue": "ml",
        "podSetAssignments": [
            {"name": "main", "flavors": {"cpu": "spot", "memory": "spot"}, "resourceUsage": {"cpu": "2", "memory": "2Gi"}, "count": 2}
        ],
    }
    assert [(c["type"], c["status"], c["reason"], c["lastTransitionTime"]) for c in spot["conditions"]] == [
        ("QuotaReserved", "True", "QuotaReserved", NOW),
        ("Admitted", "True", "Admitted", NOW),
    ]
    # urgent waits: Kueue's QuotaReserved False, its time kept while the status stays False.
    waiting = named(items, "Workload", "urgent")["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"], c["lastTransitionTime"]) for c in waiting] == [
        ("QuotaReserved", "False", "Pending", "2026-01-01T00:30:00Z")
    ]
    assert waiting[0]["message"].startswith("PendingPreemption: preempting research/running-low")
    victim = named(items, "Workload", "running-low")["status"]
    evicted = {c["type"]: c for c in victim["conditions"]}
    assert (evicted["Evicted"]["status"], evicted["Evicted"]["reason"]) == ("True", "Preempted")
    assert (evicted["Preempted"]["status"], evicted["Preempted"]["reason"]) == ("True", "InClusterQueue")
    assert "research/urgent" in evicted["Evicted"]["message"]
    assert victim["admission"]["clusterQueue"] == "ml"  # quota held until it is gone
    # Objects no decision touched are written back as they were.
    assert named(items, "ClusterQueue", "ml") == named(dump(HERE / "v1beta2.yaml"), "ClusterQueue", "ml")

    # The same steps in preemptd's own format give the same decisions at every step.
    ours1 = tmp_path / "ours1.yaml"
    assert cycle(capsys, str(HERE / "equivalent.yaml"), "--now", NOW, "--apply", str(ours1)) == first
    second = cycle(capsys, str(step1), "--now", LATER)
    assert second == cycle(capsys, str(ours1), "--now", LATER)
    # running-low is leaving, not gone: nothing changes, urgent keeps waiting for it.
    assert (second["admitted"], second["preempted"]) == ([], [])
    assert [(p["workload"], p["reason"]) for p in second["pending"]] == [("research/urgent", "PendingPreemption")]

    # Once it is gone, urgent is admitted on on-demand within ml's nominal 4.
    gone = write(tmp_path / "gone.yaml", [i for i in items if i["metadata"]["name"] != "running-low"])
    ours_gone = [d for d in yaml.safe_load_all(ours1.read_text()) if d["metadata"]["name"] != "running-low"]
    (tmp_path / "ours-gone.yaml").write_text(yaml.safe_dump_all(ours_gone))
    third = cycle(capsys, str(gone), "--now", LATER, "--apply", str(tmp_path / "step3.yaml"))
    assert third == cycle(capsys, str(tmp_path / "ours-gone.yaml"), "--now", LATER)
    assert [(a["workload"], a["borrowing"], a["podSets"][0]["flavors"]) for a in third["admitted"]] == [
        ("research/urgent", False, {"cpu": "on-demand", "memory": "on-demand"})
    ]
    urgent = named(dump(tmp_path / "step3.yaml"), "Workload", "urgent")["status"]
    assert urgent["admission"]["podSetAssignments"][0]["resourceUsage"] == {"cpu": "4", "memory": "4Gi"}
    # Kueue's earlier Pending condition is replaced, not duplicated.
    assert [c["type"] for c in urgent["conditions"]] == ["QuotaReserved", "Admitted"]
    # And the session after that has nothing left to do.
    fourth = cycle(capsys, str(tmp_path / "step3.yaml"), "--now", LATER)
    assert (fourth["admitted"], fourth["preempted"], fourth["pending"]) == ([], [], [])


def test_a_shrunk_kueue_workload_has_its_assignment_count_and_usage_lowered() -> None:
    from preemptd.framework.decisions import Preempted
    from preemptd.framework.objects.kueue import commit_preempted

    obj = named(dump(HERE / "v1beta2.yaml"), "Workload", "running-b")
    changed = copy.deepcopy(obj)
    commit_preempted(changed, Preempted("team-b/running-b", "x/y", "InCohortReclamation", count=1), NOW)
    assignment = changed["status"]["admission"]["podSetAssignments"][0]
    assert (assignment["count"], assignment["resourceUsage"]) == (2, {"cpu": "4", "memory": "4Gi"})
    assert changed["status"]["conditions"] == obj["status"]["conditions"]  # not evicted


# --- Kueue's admission rules ---------------------------------------------------------------


def with_workload_in(namespace: str, **spec: Any) -> list[dict[str, Any]]:
    items = dump(HERE / "v1beta2.yaml")
    items.append(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"team": "c"}},
        }
    )
    items.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "main", "namespace": namespace},
            "spec": {"clusterQueue": "team-b"},
        }
    )
    items.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "w", "namespace": namespace},
            "spec": {
                "queueName": "main",
                "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c"}]}}}],
                **spec,
            },
        }
    )
    return items


def test_a_namespace_outside_the_clusterqueue_selector_is_pending_inadmissible() -> None:
    inventory = parse_objects([("d.yaml", {"kind": "List", "items": with_workload_in("team-c")})])
    assert inventory.problems == []
    assert inventory.inadmissible == {
        "team-c/w": "namespace 'team-c' does not match the namespaceSelector of ClusterQueue 'team-b'"
    }


def test_a_clusterqueue_without_a_namespace_selector_admits_no_namespace() -> None:
    items = with_workload_in("team-c")
    del named(items, "ClusterQueue", "team-b")["spec"]["namespaceSelector"]
    inventory = parse_objects([("d.yaml", {"kind": "List", "items": items})])
    assert "it has none, which admits no namespace" in inventory.inadmissible["team-c/w"]
    # running-b is admitted already: it keeps its quota.
    assert "team-b/running-b" in inventory.workloads


def test_a_bad_clusterqueue_namespace_selector_is_a_located_error() -> None:
    items = with_workload_in("team-c")
    named(items, "ClusterQueue", "team-b")["spec"]["namespaceSelector"] = {
        "matchExpressions": [{"key": "team", "operator": "In", "values": []}]
    }
    inventory = parse_objects([("d.yaml", {"kind": "List", "items": items})])
    assert [(p.file, p.object, p.path) for p in inventory.problems] == [
        ("d.yaml", "ClusterQueue/team-b", "spec.namespaceSelector.matchExpressions[0].values")
    ]
    # The queue is invalid: nothing is admitted to it, and its workloads wait.
    assert "team-c/w" in inventory.inadmissible


def test_stopped_queues_and_deactivated_workloads_are_held_and_drained() -> None:
    items = with_workload_in("team-c", active=False)
    inventory = parse_objects([("d.yaml", {"kind": "List", "items": items})])
    assert inventory.inadmissible["team-c/w"] == "the workload is deactivated (spec.active is false)"

    items = dump(HERE / "v1beta2.yaml")
    named(items, "ClusterQueue", "ml")["spec"]["stopPolicy"] = "HoldAndDrain"
    inventory = parse_objects([("d.yaml", {"kind": "List", "items": items})])
    assert inventory.inadmissible["research/urgent"] == "ClusterQueue 'ml' is stopped (stopPolicy HoldAndDrain)"
    assert inventory.workloads["research/running-low"].evicted


# --- located errors and isolation ------------------------------------------------------------


def errors(items: list[dict[str, Any]]) -> list[str]:
    return [str(p) for p in parse_objects([("d.yaml", {"kind": "List", "items": items})]).problems]


def test_a_field_of_the_other_version_is_an_error_at_that_field() -> None:
    items = dump(HERE / "v1beta2.yaml")
    named(items, "ClusterQueue", "team-b")["spec"]["cohort"] = "ml"
    assert errors(items) == [
        "d.yaml: ClusterQueue/team-b: spec.cohort: not a field of kueue.x-k8s.io/v1beta2 ClusterQueue; "
        "this version spells it cohortName"
    ]


def test_each_version_accepts_only_its_own_enum_spellings() -> None:
    items = dump(HERE / "v1beta2.yaml")
    named(items, "ClusterQueue", "ml")["spec"]["flavorFungibility"]["whenCanBorrow"] = "Borrow"
    assert errors(items) == [
        "d.yaml: ClusterQueue/ml: spec.flavorFungibility.whenCanBorrow: unknown value 'Borrow'; "
        "expected one of MayStopSearch, TryNextFlavor"
    ]
    items = dump(HERE / "v1beta1.yaml")
    named(items, "ClusterQueue", "ml")["spec"]["preemption"]["withinClusterQueue"] = "Any"
    assert errors(items) == [
        "d.yaml: ClusterQueue/ml: spec.preemption.withinClusterQueue: unknown value 'Any'; "
        "expected one of LowerOrNewerEqualPriority, LowerPriority, Never"
    ]


def test_an_unserved_version_is_an_error_at_apiversion() -> None:
    items = dump(HERE / "v1beta2.yaml")
    named(items, "ClusterQueue", "team-b")["apiVersion"] = "kueue.x-k8s.io/v1alpha1"
    assert errors(items) == [
        "d.yaml: ClusterQueue/team-b: apiVersion: ClusterQueue is not served as 'kueue.x-k8s.io/v1alpha1'; "
        "expected kueue.x-k8s.io/v1beta1 or kueue.x-k8s.io/v1beta2"
    ]


def test_a_bad_clusterqueue_takes_its_tree_out_and_nothing_else(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    items = dump(HERE / "v1beta2.yaml")
    named(items, "ClusterQueue", "team-b")["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
    items.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "solo"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {"coveredResources": ["cpu"], "flavors": [{"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}
                ],
            },
        }
    )
    items.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "solo", "namespace": "research"}, "spec": {"clusterQueue": "solo"}})
    items.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "small", "namespace": "research"},
            "spec": {
                "queueName": "solo",
                "podSets": [{"count": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}],
            },
        }
    )
    path = write(tmp_path / "d.yaml", items)
    assert main(["cycle", str(path), "--now", NOW, "--output", "json"]) == 0
    captured = capsys.readouterr()
    assert "ClusterQueue/team-b: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in captured.err
    decisions = json.loads(captured.out)
    # The tree of ml and team-b is out; "small" (default pod set name "main") on solo is admitted.
    assert [(a["workload"], a["podSets"][0]["name"]) for a in decisions["admitted"]] == [("research/small", "main")]
    pending = {p["workload"]: p for p in decisions["pending"]}
    assert pending["research/urgent"]["reason"] == "Inadmissible"
    assert "queue tree of 'org' is invalid" in pending["research/urgent"]["message"]


def test_workload_references_are_located_errors() -> None:
    items = dump(HERE / "v1beta2.yaml")
    named(items, "Workload", "urgent")["spec"]["queueName"] = "nope"
    named(items, "Workload", "spot-job")["spec"]["priorityClassRef"] = {
        "group": "kueue.x-k8s.io",
        "kind": "PriorityClass",
        "name": "missing",
    }
    named(items, "Workload", "running-low")["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] = "gold"
    assert errors(items) == [
        "d.yaml: Workload/research/running-low: status.admission.podSetAssignments[0].flavors[cpu]: "
        "unknown flavor 'gold': no ResourceFlavor of that name",
        "d.yaml: Workload/research/spot-job: spec.priorityClassRef.kind: must be WorkloadPriorityClass for group "
        "kueue.x-k8s.io, got 'PriorityClass'",
        "d.yaml: Workload/research/spot-job: spec.priorityClassRef.name: WorkloadPriorityClass 'missing' does not exist",
        "d.yaml: Workload/research/urgent: spec.queueName: no LocalQueue 'nope' in namespace 'research'",
    ]


def test_bad_lookups_are_located_and_isolate_only_their_users() -> None:
    items = dump(HERE / "v1beta2.yaml")
    named(items, "LocalQueue", "main")["spec"] = {}  # research/main: no clusterQueue
    named(items, "WorkloadPriorityClass", "low")["value"] = "ten"
    inventory = parse_objects([("d.yaml", {"kind": "List", "items": items})])
    assert [str(p) for p in inventory.problems] == [
        "d.yaml: LocalQueue/research/main: spec.clusterQueue: required field is missing",
        "d.yaml: Workload/research/running-low: spec.queueName: LocalQueue 'research/main' is invalid",
        "d.yaml: Workload/research/spot-job: spec.queueName: LocalQueue 'research/main' is invalid",
        "d.yaml: Workload/research/urgent: spec.queueName: LocalQueue 'research/main' is invalid",
        "d.yaml: WorkloadPriorityClass/low: value: expected an integer, got 'ten'",
    ]
    # running-low carries spec.priority (Kueue resolved it): the bad class is not looked up.
    assert sorted(inventory.workloads) == ["team-b/running-b"]


def test_unread_fields_are_warnings() -> None:
    items = dump(HERE / "v1beta2.yaml")
    named(items, "ClusterQueue", "ml")["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    inventory = parse_objects([("d.yaml", {"kind": "List", "items": items})])
    assert inventory.problems == []
    assert [str(w) for w in inventory.warnings] == [
        "d.yaml: ClusterQueue/ml: spec.admissionChecksStrategy: preemptd does not apply this; ignored"
    ]


def test_a_malformed_condition_is_an_error_of_that_workload_only() -> None:
    items = dump(HERE / "v1beta2.yaml")
    named(items, "Workload", "urgent")["status"] = {"conditions": [{"type": "Admitted", "status": "True", "lastTransitionTime": 5}]}
    inventory = parse_objects([("d.yaml", {"kind": "List", "items": items})])
    assert [p.object for p in inventory.problems] == ["Workload/research/urgent"]
    assert "research/spot-job" in inventory.workloads



def test_a_json_dump_gets_the_decisions_of_the_yaml_one(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`kubectl get -o json` goes through the typed JSON intake: the same objects, the same decisions."""
    as_json = tmp_path / "dump.json"
    as_json.write_text(json.dumps(yaml.safe_load((HERE / "v1beta2.yaml").read_text())))
    assert cycle(capsys, str(as_json), "--now", NOW) == cycle(capsys, str(HERE / "v1beta2.yaml"), "--now", NOW)
