"""Honest input handling (issue 20, points 1 and 2): nothing is never a silent success, a
scenario is not a snapshot (nor the reverse), and typos in preemptd's own kinds are found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_cli import NOW, flavor, preemption_snapshot, queue, run, workload, write_snapshot

REPO = Path(__file__).resolve().parents[2]


# --- point 1: silent success on nothing ----------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b"---\n---\n"], ids=["empty", "bom", "separators"])
@pytest.mark.parametrize("command", ["cycle", "validate"])
def test_a_file_without_objects_is_an_error_not_a_silent_success(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, command: str
) -> None:
    """An empty (or BOM-only) snapshot exits 2 saying so, as `kubectl apply` refuses one."""
    path = tmp_path / "empty.yaml"
    path.write_bytes(content)
    code, out, err = run(capsys, command, str(path), *(["--now", NOW] if command == "cycle" else []))
    assert (2, "", f"preemptd: error: {path}: no objects: the file is empty\n") == (code, out, err)


def test_an_empty_file_beside_real_ones_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One empty file among others is named in a warning; the session runs (exit 0)."""
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    (tmp_path / "empty.yaml").write_bytes(b"")
    code, _, err = run(capsys, "cycle", snapshot, str(tmp_path / "empty.yaml"), "--now", NOW, "-o", "json")
    assert (0, [f"warning: {tmp_path / 'empty.yaml'}: no objects: the file is empty"]) == (code, err.splitlines())


def test_a_snapshot_without_queues_or_workloads_warns_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No Queue: nothing can be admitted; no Workload: nothing to schedule; both said on stderr."""
    no_queue = write_snapshot(tmp_path / "a.yaml", [flavor("default"), workload("w", "team", "1")])
    no_workload = write_snapshot(tmp_path / "b.yaml", [flavor("default"), queue("team", "4")])
    first = run(capsys, "cycle", no_queue, "--now", NOW, "-o", "json")
    second = run(capsys, "cycle", no_workload, "--now", NOW, "-o", "json")
    assert "warning: no Queue in the snapshot: no workload can be admitted" in first[2].splitlines()
    assert ["warning: no Workload in the snapshot: there is nothing to schedule"] == second[2].splitlines()
    assert (0, 0) == (first[0], second[0])


def test_only_foreign_kinds_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file of kinds preemptd does not read (a Job, a Kueue AdmissionCheck) holds nothing
    to schedule with: exit 2, not `0 admitted`."""
    foreign = [
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ml"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "AdmissionCheck", "metadata": {"name": "prov"}},
    ]
    snapshot = write_snapshot(tmp_path / "k.yaml", foreign)
    code, out, err = run(capsys, "cycle", snapshot, "--now", NOW)
    assert (2, "") == (code, out)
    assert err.splitlines()[-1].startswith("preemptd: error: no objects of the kinds preemptd reads")


@pytest.mark.parametrize("command", ["cycle", "explain", "validate"])
def test_a_scenario_given_to_a_snapshot_command_points_to_simulate(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """A scenario with arrivals cannot be one session: the message names `preemptd simulate`."""
    scenario = str(REPO / "examples/scenarios/gpu-fleet.yaml")
    argv = [command, *(["ml/x"] if command == "explain" else []), scenario]
    code, out, err = run(capsys, *argv)
    assert (2, "") == (code, out)
    assert f"{scenario}: a simulation scenario, not a snapshot of objects: run it with `preemptd simulate {scenario}`" in err


def test_a_snapshot_given_to_simulate_points_to_cycle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    code, _, err = run(capsys, "simulate", snapshot)
    assert 2 == code
    assert f"{snapshot}: a snapshot of objects, not a scenario: run one session on it with `preemptd cycle {snapshot}`" in err


def test_validate_says_how_many_objects_of_each_kind_it_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    code, out, _ = run(capsys, "validate", snapshot)
    assert (0, "valid: configuration and 1 snapshot file (2 Queue, 1 ResourceFlavor, 3 Workload)\n") == (code, out)


# --- point 2: typos --------------------------------------------------------------------------


def typo_snapshot() -> list[dict[str, Any]]:
    """`preemtion:` on a Queue and `borowingLimit:` in its quota: the second would mean
    unlimited borrowing if it were read past in silence."""
    team = queue("team", "4")
    team["spec"]["preemtion"] = {"withinQueue": "LowerPriority"}
    team["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borowingLimit"] = "0"
    return [flavor("default"), team, workload("w", "team", "1")]


TYPO_LINES = [
    "Queue/team: spec.preemtion: unknown field (did you mean 'preemption'?)",
    "Queue/team: spec.resourceGroups[0].flavors[0].resources[0].borowingLimit: "
    "unknown field (did you mean 'borrowingLimit'?)",
]


def test_unknown_fields_are_errors_in_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = write_snapshot(tmp_path / "s.yaml", typo_snapshot())
    code, out, err = run(capsys, "validate", snapshot)
    assert (2, "", [f"{snapshot}: {line}" for line in TYPO_LINES]) == (code, out, err.splitlines())


def test_unknown_fields_are_warnings_in_cycle_and_errors_with_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cycle` warns (file, object, field) and schedules; `--strict` exits 2 printing nothing on stdout."""
    snapshot = write_snapshot(tmp_path / "s.yaml", typo_snapshot())
    code, out, err = run(capsys, "cycle", snapshot, "--now", NOW, "-o", "json")
    assert (0, [f"warning: {snapshot}: {line}" for line in TYPO_LINES]) == (code, err.splitlines())
    assert ["ml/w"] == [entry["workload"] for entry in json.loads(out)["admitted"]]
    code, out, err = run(capsys, "cycle", snapshot, "--now", NOW, "--strict")
    assert (2, "", [f"{snapshot}: {line}" for line in TYPO_LINES]) == (code, out, err.splitlines())


def test_an_unknown_field_of_a_workload_in_a_json_list_is_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Workloads of a JSON list are read from their text (the fast way): a typo is still found."""
    typo = workload("w", "team", "1")
    typo["spec"]["podSets"][0]["requets"] = {"cpu": "1"}
    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps([flavor("default"), queue("team", "4"), typo, workload("v", "team", "1")]))
    code, _, err = run(capsys, "validate", str(snapshot))
    expected = f"{snapshot}: Workload/ml/w: spec.podSets[0].requets: unknown field (did you mean 'requests'?)"
    assert (2, [expected]) == (code, err.splitlines())


def test_fields_kubernetes_sets_never_warn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What the API server puts on objects (managedFields, uid, resourceVersion, generation,
    ownerReferences, ...) and every field of the core kinds (a Node's status) are not typos."""
    meta = {
        "uid": "u", "resourceVersion": "7", "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z",
        "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}],
        "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "1"}],
        "labels": {"a": "b"}, "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        "finalizers": ["f"], "generateName": "g-",
    }
    objects = [flavor("default"), queue("team", "4"), workload("w", "team", "1", admitted=True)]
    for obj in objects:
        obj["metadata"].update(meta)
    objects[2]["status"]["conditions"] = [
        {"type": "Admitted", "status": "True", "reason": "R", "message": "m",
         "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}
    ]
    objects[1]["status"] = {"pendingWorkloads": 0, "anything": {"preemptd": "writes"}}
    node = {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", **meta},
        "spec": {"podCIDR": "10.0.0.0/24"},
        "status": {"allocatable": {"cpu": "8"}, "capacity": {"cpu": "8"}, "nodeInfo": {"kubeletVersion": "v1.30"}},
    }
    snapshot = write_snapshot(tmp_path / "s.yaml", [*objects, node])
    assert (0, "") == run(capsys, "validate", snapshot)[::2]


def test_every_field_of_the_crds_is_known() -> None:
    """An object that passes the CRDs' schemas (config/kubernetes/10-crds.yaml) has no
    unknown field: the two lists of fields agree."""
    from preemptd.framework.objects.known import SCHEMAS

    def walk(schema: dict[str, Any], known: Any, at: str) -> list[str]:
        if schema.get("type") == "array":
            return walk(schema["items"], known, at + "[]")
        missing = []
        for key, below in (schema.get("properties") or {}).items():
            if known is None:
                continue
            if key not in known:
                missing.append(f"{at}.{key}")
            else:
                missing += walk(below, known[key], f"{at}.{key}")
        return missing

    missing = []
    for document in yaml.safe_load_all((REPO / "config/kubernetes/10-crds.yaml").read_text()):
        if document and document.get("kind") == "CustomResourceDefinition":
            kind = document["spec"]["names"]["kind"]
            for version in document["spec"]["versions"]:
                missing += walk(version["schema"]["openAPIV3Schema"], SCHEMAS[kind], kind)
    assert [] == missing


@pytest.mark.parametrize("now", ["2026-01-01T00:00:00", "2026-01-01"])
def test_now_without_a_zone_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], now: str) -> None:
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    code, out, err = run(capsys, "cycle", snapshot, "--now", now)
    assert (2, "") == (code, out)
    assert err.startswith(f"preemptd: error: --now: {now!r} has no time zone")


def test_a_slow_load_off_a_terminal_prints_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off a terminal a load that takes longer than the interval says what it is doing."""
    import time

    from preemptd.daemon import cli

    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    real = cli.parse_objects

    def slow(documents: Any) -> Any:
        time.sleep(0.3)
        return real(documents)

    monkeypatch.setattr(cli, "LOAD_PROGRESS_INTERVAL", 0.05)
    monkeypatch.setattr(cli, "parse_objects", slow)
    code, _, err = run(capsys, "cycle", snapshot, "--now", NOW, "-o", "json")
    lines = err.splitlines()
    # The slow phase is reported while it lasts; on a loaded machine the other phases
    # (reading the file, building the snapshot) may take an interval too and say so.
    reading = [line for line in lines if line.startswith(f"loading {snapshot}: reading objects, ")]
    assert (0, True) == (code, len(reading) >= 2)
    assert all(line.startswith(f"loading {snapshot}: ") for line in lines)


def test_the_crds_let_the_api_server_prune_unknown_fields() -> None:
    """No part of the shipped CRDs keeps unknown fields: in a cluster the API server drops
    (or, with `kubectl apply --validate=strict`, refuses) them before the daemon reads the
    object, so the daemon needs no check of its own (README, Commands)."""

    def kept(schema: Any, at: str) -> list[str]:
        if not isinstance(schema, dict):
            return []
        found = [at] if schema.get("x-kubernetes-preserve-unknown-fields") else []
        for key, below in (schema.get("properties") or {}).items():
            found += kept(below, f"{at}.{key}")
        return found + kept(schema.get("items"), f"{at}[]") + kept(schema.get("additionalProperties"), f"{at}{{}}")

    found = []
    for document in yaml.safe_load_all((REPO / "config/kubernetes/10-crds.yaml").read_text()):
        if document and document.get("kind") == "CustomResourceDefinition":
            for version in document["spec"]["versions"]:
                found += kept(version["schema"]["openAPIV3Schema"], document["spec"]["names"]["kind"])
    assert [] == found


def test_simulate_warns_of_unknown_fields_in_the_scenarios_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({"duration": "1m", "objects": typo_snapshot()}, sort_keys=False))
    code, _, err = run(capsys, "simulate", str(scenario))
    assert 0 == code, err
    for line in TYPO_LINES:
        assert f"warning: {scenario}: objects[1]: {line}" in err.splitlines()
