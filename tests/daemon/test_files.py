"""The files backend: snapshot files in and committed objects out (daemon/backends/files.py)."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.backends.files import (
    LoadError,
    apply_decisions,
    dump_documents,
    load_files,
    parse_text,
    write_documents,
)
from preemptd.framework.decisions import (
    Admitted,
    AdmittedPodSet,
    Decisions,
    PodAction,
    Preempted,
)
from preemptd.framework.quantity import parse_timestamp

NOW = parse_timestamp("2026-01-01T00:10:00Z")


def write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- reading -----------------------------------------------------------------------------


def test_yaml_stream_gives_every_document_in_order(tmp_path: Path) -> None:
    """Each `---` document is one entry, in file order; empty documents are dropped."""
    path = write(tmp_path, "s.yaml", "---\nkind: Queue\n---\n---\nkind: Workload\n...\n---\n")
    assert [(path, {"kind": "Queue"}), (path, {"kind": "Workload"})] == load_files([path])


def test_json_object_list_and_kind_list_are_passed_on_whole(tmp_path: Path) -> None:
    """JSON objects, lists and `kind: List` reach parse_objects unflattened."""
    listed = {"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node"}]}
    paths = [
        write(tmp_path, "a.json", json.dumps({"kind": "Queue"})),
        write(tmp_path, "b.json", json.dumps([{"kind": "Pod"}, {"kind": "Pod"}])),
        write(tmp_path, "c.yaml", json.dumps(listed)),
    ]
    expected = [
        (paths[0], {"kind": "Queue"}),
        (paths[1], [{"kind": "Pod"}, {"kind": "Pod"}]),
        (paths[2], listed),
    ]
    assert expected == load_files(paths)


def test_unquoted_timestamps_stay_strings() -> None:
    """A bare RFC 3339 value is kept as text, the way JSON and kubectl carry it."""
    expected = [{"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}, "day": "2026-01-02"}]
    assert expected == parse_text("metadata: {creationTimestamp: 2026-01-01T00:00:00Z}\nday: 2026-01-02\n")


def test_directory_stands_for_its_snapshot_files_in_name_order(tmp_path: Path) -> None:
    """A directory argument reads its .yaml, .yml and .json files sorted by name."""
    write(tmp_path, "b.yml", "kind: B\n")
    write(tmp_path, "a.json", '{"kind": "A"}')
    write(tmp_path, "notes.txt", "not a snapshot")
    expected = ["A", "B"]
    assert expected == [obj["kind"] for _, obj in load_files([tmp_path])]


def test_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """`-` reads the snapshot from stdin, named <stdin> in messages."""
    monkeypatch.setattr("sys.stdin", io.StringIO('{"kind": "Queue"}'))
    expected = [("<stdin>", {"kind": "Queue"})]
    assert expected == load_files(["-"])


def test_every_unreadable_file_is_named_in_one_error(tmp_path: Path) -> None:
    """Missing files, bad YAML, bad JSON and plain text are each one line of one LoadError."""
    good = write(tmp_path, "good.yaml", "kind: Queue\n")
    yaml_file = write(tmp_path, "bad.yaml", "kind: Queue\nspec: [a\n")
    json_file = write(tmp_path, "bad.json", '{"kind": }')
    text_file = write(tmp_path, "notes.yaml", "just some words\n")
    missing = str(tmp_path / "missing.yaml")
    with pytest.raises(LoadError) as raised:
        load_files([good, yaml_file, json_file, text_file, missing])
    expected = [
        f"{yaml_file}:3:1: not valid YAML: did not find expected ',' or ']'",
        f"{json_file}:1:10: not valid JSON: Expecting value",
        f"{text_file}: document 1: not YAML or JSON objects, got plain text",
        f"{missing}: cannot read: No such file or directory",
    ]
    assert expected == raised.value.messages
    assert [(good, {"kind": "Queue"})] == raised.value.documents


def test_binary_file_is_not_yaml(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 are reported, not decoded into garbage."""
    path = tmp_path / "image.yaml"
    path.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(LoadError) as raised:
        load_files([path])
    assert [f"{path}: not YAML or JSON: not UTF-8 text"] == raised.value.messages


# --- committing --------------------------------------------------------------------------


def workload(
    name: str,
    *,
    pod_sets: list[dict[str, Any]] | None = None,
    status: dict[str, Any] | None = None,
    owner: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": "team-a",
        "podSets": pod_sets or [{"name": "main", "count": 4, "requests": {"cpu": "1"}}],
    }
    if owner is not None:
        spec["owner"] = {"apiVersion": "apps/v1", "kind": owner, "name": name}
    obj: dict[str, Any] = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def pod(name: str, **annotations: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ml", "labels": {"preemptd.io/workload": "svc"}}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"nodeName": "n1"}}


def admission(*pod_sets: tuple[str, int]) -> dict[str, Any]:
    return {
        "queue": "team-a",
        "podSets": [{"name": name, "count": count, "flavors": {"cpu": "a100"}} for name, count in pod_sets],
    }


def admitted(name: str, *pod_sets: tuple[str, int]) -> Admitted:
    sets = tuple(AdmittedPodSet(ps, count, {"cpu": "a100"}) for ps, count in pod_sets)
    return Admitted(f"ml/{name}", "team-a", False, sets)


def test_admitted_workload_gets_admission_and_admitted_at() -> None:
    """Admission writes status.admission and admittedAt = now, and drops a finished eviction."""
    evicted_before = {"conditions": [{"type": "Evicted", "status": "True", "reason": "Preempted"}]}
    objects = [workload("train", status=evicted_before)]
    original = copy.deepcopy(objects)
    decisions = Decisions(now=NOW, admitted=[admitted("train", ("main", 4))])
    expected = workload(
        "train",
        status={"conditions": [], "admission": admission(("main", 4)), "admittedAt": "2026-01-01T00:10:00Z"},
    )
    assert [expected] == apply_decisions(objects, decisions)
    assert original == objects


def test_whole_victim_gets_the_evicted_condition() -> None:
    """A victim taken whole keeps its admission and gains Evicted=True naming its preemptor."""
    status = {"admission": admission(("main", 4)), "conditions": [{"type": "Ready", "status": "True"}]}
    decisions = Decisions(now=NOW, preempted=[Preempted("ml/old", "ml/new", "InCohortReclamation")])
    [committed] = apply_decisions([workload("old", status=status)], decisions)
    expected = [
        {"type": "Ready", "status": "True"},
        {
            "type": "Evicted",
            "status": "True",
            "reason": "Preempted",
            "message": "Preempted to accommodate ml/new (InCohortReclamation)",
        },
    ]
    assert (expected, admission(("main", 4))) == (
        committed["status"]["conditions"],
        committed["status"]["admission"],
    )


def test_shrunk_victim_loses_pods_from_the_named_pod_set() -> None:
    """`count` is taken from the podSet the decision names, and admittedAt is kept."""
    pod_sets = [
        {"name": "driver", "count": 1, "requests": {"cpu": "1"}},
        {"name": "workers", "count": 6, "minCount": 2, "requests": {"cpu": "1"}},
    ]
    status = {"admission": admission(("driver", 1), ("workers", 6)), "admittedAt": "2026-01-01T00:00:00Z"}
    victim = Preempted("ml/elastic", "ml/new", "InQueue", count=3, pod_set="workers")
    [committed] = apply_decisions([workload("elastic", pod_sets=pod_sets, status=status)], Decisions(NOW, preempted=[victim]))
    expected = {"admission": admission(("driver", 1), ("workers", 3)), "admittedAt": "2026-01-01T00:00:00Z"}
    assert expected == committed["status"]


def test_shrunk_victim_without_pod_set_loses_pods_from_its_elastic_pod_set() -> None:
    """Without a podSet name the first podSet with minCount is lowered."""
    pod_sets = [
        {"name": "driver", "count": 1, "requests": {"cpu": "1"}},
        {"name": "workers", "count": 6, "minCount": 2, "requests": {"cpu": "1"}},
    ]
    status = {"admission": admission(("driver", 1), ("workers", 6))}
    victim = Preempted("ml/elastic", "ml/new", "InQueue", count=2)
    [committed] = apply_decisions([workload("elastic", pod_sets=pod_sets, status=status)], Decisions(NOW, preempted=[victim]))
    assert admission(("driver", 1), ("workers", 4)) == committed["status"]["admission"]


def test_deployment_victim_pods_get_the_lowest_deletion_cost() -> None:
    """The replicas taken lower the committed count and their pods are marked for the scale-down."""
    status = {"admission": admission(("main", 3)), "admittedAt": "2026-01-01T00:00:00Z"}
    objects = [workload("svc", owner="Deployment", status=status), pod("svc-a"), pod("svc-b"), pod("svc-c")]
    victim = Preempted("ml/svc", "ml/train", "InQueue", count=2, pods=("ml/svc-a", "ml/svc-c"))
    committed = apply_decisions(objects, Decisions(NOW, preempted=[victim]))
    cost = "controller.kubernetes.io/pod-deletion-cost"
    expected = [
        workload("svc", owner="Deployment", status={**status, "admission": admission(("main", 1))}),
        pod("svc-a", **{cost: "-2147483648"}),
        objects[2],
        pod("svc-c", **{cost: "-2147483648"}),
    ]
    assert expected == committed


def test_force_deleted_pod_gets_the_annotation() -> None:
    """A ForceDelete pod action marks the pod with preemptd.io/force-delete."""
    decisions = Decisions(NOW, pod_actions=[PodAction("ml/svc-a", "ForceDelete", "ml/train")])
    expected = [pod("svc-a", **{"preemptd.io/force-delete": "true"})]
    assert expected == apply_decisions([pod("svc-a")], decisions)


def test_grown_deployment_keeps_its_admitted_at() -> None:
    """A Deployment admitted again only has its committed count raised."""
    status = {"admission": admission(("main", 2)), "admittedAt": "2026-01-01T00:00:00Z"}
    objects = [workload("svc", owner="Deployment", status=status)]
    committed = apply_decisions(objects, Decisions(NOW, admitted=[admitted("svc", ("main", 5))]))
    expected = {"admission": admission(("main", 5)), "admittedAt": "2026-01-01T00:00:00Z"}
    assert expected == committed[0]["status"]


def test_flavor_scan_is_written_and_cleared() -> None:
    """A scan is stored in status.flavorScan; an empty one removes it."""
    objects = [workload("a"), workload("b", status={"flavorScan": {"main": {"cpu": 1}}})]
    decisions = Decisions(NOW, flavor_scans={"ml/a": {"main": {"cpu": 0}}, "ml/b": {}})
    committed = apply_decisions(objects, decisions)
    expected = ({"flavorScan": {"main": {"cpu": 0}}}, {})
    assert expected == (committed[0]["status"], committed[1]["status"])


def test_objects_inside_lists_are_committed_in_place() -> None:
    """A `kind: List` and a plain list keep their shape; untouched documents are the same objects."""
    listed = {"apiVersion": "v1", "kind": "List", "items": [pod("p1"), workload("w")]}
    plain = [workload("x"), pod("p2")]
    queue = {"apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": "team-a"}}
    decisions = Decisions(NOW, pod_actions=[PodAction("ml/p1", "ForceDelete", "ml/w")])
    committed = apply_decisions([queue, listed, plain], decisions)
    expected_list = {**listed, "items": [pod("p1", **{"preemptd.io/force-delete": "true"}), workload("w")]}
    expected = ([queue, expected_list, plain], [True, True])
    assert expected == (committed, [committed[0] is queue, committed[2] is plain])


def test_written_stream_reads_back_as_the_same_documents(tmp_path: Path) -> None:
    """The YAML written by --apply loads back equal, timestamps and quoted booleans included."""
    documents = [
        workload("w", status={"admittedAt": "2026-01-01T00:00:00Z", "conditions": [{"status": "True"}]}),
        [pod("p")],
    ]
    out = tmp_path / "out.yaml"
    write_documents(out, documents)
    assert dump_documents(documents) == out.read_text(encoding="utf-8")
    assert documents == parse_text(out.read_text(encoding="utf-8"))
