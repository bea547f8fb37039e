"""``preemptd convert``: a Kueue dump -> preemptd.io objects (daemon/convert.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from preemptd.daemon.cli import main

HERE = Path(__file__).parent
NOW = "2026-01-01T01:00:00Z"


def convert(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["convert", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def objects(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def by_name(items: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(i for i in items if i["kind"] == kind and i["metadata"]["name"] == name)


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_converted_dump_validates_and_gets_the_same_decisions(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, version: str
) -> None:
    code, out, err = convert(capsys, str(HERE / f"{version}.yaml"), "--workloads")
    assert (code, err) == (0, "")
    converted = tmp_path / "converted.yaml"
    converted.write_text(out)
    assert main(["validate", str(converted)]) == 0
    capsys.readouterr()
    assert main(["cycle", str(converted), "--now", NOW, "--output", "json"]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert main(["cycle", str(HERE / f"{version}.yaml"), "--now", NOW, "--output", "json"]) == 0
    assert ours == json.loads(capsys.readouterr().out)


def test_converted_objects_have_preemptds_shapes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = convert(capsys, str(HERE / "v1beta1.yaml"))
    assert code == 0
    items = objects(out)
    assert {i["kind"] for i in items} == {
        "Namespace",
        "PriorityClass",
        "WorkloadPriorityClass",
        "ResourceFlavor",
        "Queue",
        "LocalQueue",
    }  # no Workloads without --workloads
    assert by_name(items, "LocalQueue", "main") == {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "LocalQueue",
        "metadata": {"name": "main", "namespace": "research"},
        "spec": {"queue": "ml"},
    }
    assert by_name(items, "WorkloadPriorityClass", "high")["value"] == 1000
    cohort = by_name(items, "Queue", "ml-cohort")
    assert cohort["spec"]["parent"] == "org"  # v1alpha1's spec.parent
    ml = by_name(items, "Queue", "ml")["spec"]
    assert ml["parent"] == "ml-cohort"
    # v1beta1's deprecated Borrow is written as what it means.
    assert ml["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert ml["preemption"]["withinQueue"] == "LowerPriority"
    assert "# named ml-cohort: ClusterQueue ml has the name" in out


def test_what_has_no_equivalent_is_a_comment_above_its_object(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    items = yaml.safe_load((HERE / "v1beta2.yaml").read_text())["items"]
    team_b = by_name(items, "ClusterQueue", "team-b")["spec"]
    team_b["stopPolicy"] = "Hold"
    team_b["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov"}]}
    del by_name(items, "ClusterQueue", "ml")["spec"]["namespaceSelector"]
    by_name(items, "ResourceFlavor", "spot")["spec"]["topologyName"] = "racks"
    by_name(items, "LocalQueue", "main")["spec"]["stopPolicy"] = "HoldAndDrain"
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    code, out, _ = convert(capsys, str(dump))
    assert code == 0
    blocks = {block.splitlines()[0]: block for block in out.split("---\n")[1:]}
    team_b_block = blocks["# from ClusterQueue/team-b (kueue.x-k8s.io/v1beta2)"]
    assert "# not converted: spec.admissionChecksStrategy {admissionChecks: [{name: prov}]}: admission checks are not run by preemptd" in team_b_block
    assert "# not converted: spec.stopPolicy Hold: no stop policy on a Queue" in team_b_block
    assert "# not converted: spec.topologyName racks: no topology-aware scheduling" in blocks[
        "# from ResourceFlavor/spot (kueue.x-k8s.io/v1beta2)"
    ]
    assert "# not converted: spec.stopPolicy HoldAndDrain: no stop policy on a LocalQueue" in blocks[
        "# from LocalQueue/research/main (kueue.x-k8s.io/v1beta2)"
    ]
    ml_block = blocks["# from ClusterQueue/ml (kueue.x-k8s.io/v1beta2)"]
    assert "no namespaceSelector, which in Kueue admits no namespace" in ml_block
    assert yaml.safe_load(ml_block)["spec"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}]
    }


def test_invalid_objects_stop_the_conversion_with_located_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    items = yaml.safe_load((HERE / "v1beta2.yaml").read_text())["items"]
    by_name(items, "ClusterQueue", "ml")["spec"]["preemption"]["reclaimWithinCohort"] = "Sometimes"
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    code, out, err = convert(capsys, str(dump))
    assert (code, out) == (2, "")
    assert f"{dump}: ClusterQueue/ml: spec.preemption.reclaimWithinCohort: unknown value 'Sometimes'" in err
    assert "nothing converted" in err


def test_input_without_kueue_objects_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = convert(capsys, str(HERE / "equivalent.yaml"))
    assert (code, out) == (2, "")
    assert "no Kueue objects" in err
