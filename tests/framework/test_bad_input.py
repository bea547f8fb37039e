"""One bad value, document or name is one located problem; everything else is scheduled.

Quantities beyond what Kubernetes counts (a signed 64-bit integer in the unit
preemptd stores), non-finite numbers, stray documents and names with control
characters each stay with their object or document.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.backends.files import load_files
from preemptd.daemon.cli import main
from preemptd.daemon.simulation.entries import MAX_COPIES, Reader, node_groups
from preemptd.framework.objects import StrayDocument, parse_objects
from preemptd.framework.quantity import QuantityError, parse_duration, parse_quantity

NOW = "2026-01-01T00:00:00Z"

# Written as YAML scalars, so that YAML's own floats and integers are tried too.
BAD_QUANTITIES = [
    '"1e4300"',
    ".inf",
    ".nan",
    '"1e10000000"',
    "1e300",
    "99999999999999999999999Ei",
    "9" * 5000,  # an integer too long for Python to convert
]

FLAVOR = "apiVersion: preemptd.io/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: od}\n"


def queue_yaml(name: str, cpu: str = '"8"') -> str:
    return (
        f"apiVersion: preemptd.io/v1alpha1\nkind: Queue\nmetadata: {{name: {name}}}\nspec:\n"
        "  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: od\n"
        f"      resources:\n      - {{name: cpu, nominalQuota: {cpu}}}\n"
    )


def workload_yaml(name: str, queue: str, cpu: str = '"1"') -> str:
    return (
        f"apiVersion: preemptd.io/v1alpha1\nkind: Workload\n"
        f"metadata: {{name: {name}, namespace: ns}}\n"
        f"spec:\n  queueName: {queue}\n  podSets: [{{name: main, count: 1, requests: {{cpu: {cpu}}}}}]\n"
    )


def node_yaml(cpu: str) -> str:
    return (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        f"status:\n  allocatable: {{cpu: {cpu}}}\n"
    )


def pod_yaml(cpu: str) -> str:
    return (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: ns}\n"
        f"spec:\n  nodeName: n1\n  containers:\n  - name: c\n    resources: {{requests: {{cpu: {cpu}}}}}\n"
    )


def cycle(capsys: pytest.CaptureFixture[str], *files: str) -> tuple[int, dict[str, Any], str]:
    code = main(["cycle", *files, "--now", NOW, "--output", "json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out else {}, captured.err


def validate(capsys: pytest.CaptureFixture[str], *files: str) -> tuple[int, str]:
    code = main(["validate", *files])
    return code, capsys.readouterr().err


def admitted(decisions: dict[str, Any]) -> list[str]:
    return sorted(entry["workload"] for entry in decisions.get("admitted", []))


# --- quantities ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["1e4300", float("inf"), float("nan"), "1e10000000", 1e300, "99999999999999999999999Ei", 10**5000,
     "8Ei", "9223372036854775808"],
    ids=lambda value: "a 5000-digit integer" if isinstance(value, int) else repr(value)[:30],
)
def test_quantities_beyond_64_bits_or_not_finite_are_errors(value: object) -> None:
    """Nothing that Kubernetes cannot count as a 64-bit integer is accepted, or capped."""
    with pytest.raises(QuantityError):
        parse_quantity(value, "memory")


def test_the_largest_64_bit_amount_is_accepted_in_the_stored_unit() -> None:
    """The bound is on the stored integer: 2^63-1 units of memory, 2^63-1 milli-cpu."""
    assert (2**63 - 1, 2**63 - 1) == (
        parse_quantity("9223372036854775807", "memory"),
        parse_quantity("9223372036854775807m", "cpu"),
    )
    with pytest.raises(QuantityError):
        parse_quantity("9223372036854775807", "cpu")  # 1000 times too many milli-cpu


def test_a_tiny_quantity_rounds_up_to_one_unit_without_expanding_its_exponent() -> None:
    """1e-10000000 is more than nothing: one milli-cpu, as Kubernetes rounds up."""
    assert 1 == parse_quantity("1e-10000000", "cpu")


def test_a_fraction_is_rounded_up_exactly_however_many_digits_it_has() -> None:
    """0.0010...01 cpu is just over 1m: 2m, not 1m lost to 28-digit arithmetic."""
    assert 2 == parse_quantity("0.0010000000000000000000000000000001", "cpu")


@pytest.mark.parametrize("text", ["9" * 5000 + "h", "106751991168d"], ids=["5000-digit-hours", "days"])
def test_durations_beyond_64_bit_milliseconds_are_errors(text: str) -> None:
    with pytest.raises(QuantityError, match="too long"):
        parse_duration(text)


@pytest.mark.parametrize("value", BAD_QUANTITIES, ids=lambda value: value[:30])
def test_a_bad_workload_request_is_isolated_and_the_rest_is_admitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """cycle admits the good workload; the bad one is Inadmissible, named with its field."""
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text(
        "---\n".join([FLAVOR, queue_yaml("qa"), workload_yaml("good", "qa"), workload_yaml("bad", "qa", value)]),
        encoding="utf-8",
    )
    code, decisions, err = cycle(capsys, str(snapshot))
    assert (0, ["ns/good"]) == (code, admitted(decisions))
    assert [("ns/bad", "Inadmissible")] == [(p["workload"], p["reason"]) for p in decisions["pending"]]
    assert err.startswith(f"{snapshot}: Workload/ns/bad: spec.podSets[0].requests[cpu]: ")
    assert 1 == len(err.splitlines())
    code, err = validate(capsys, str(snapshot))
    assert 2 == code
    assert err.startswith(f"{snapshot}: Workload/ns/bad: spec.podSets[0].requests[cpu]: ")


@pytest.mark.parametrize("value", BAD_QUANTITIES, ids=lambda value: value[:30])
def test_a_bad_quota_takes_out_only_its_own_queue_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text(
        "---\n".join(
            [FLAVOR, queue_yaml("qa"), queue_yaml("qb", value), workload_yaml("a", "qa"), workload_yaml("b", "qb")]
        ),
        encoding="utf-8",
    )
    code, decisions, err = cycle(capsys, str(snapshot))
    assert (0, ["ns/a"]) == (code, admitted(decisions))
    assert err.startswith(
        f"{snapshot}: Queue/qb: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
    )


@pytest.mark.parametrize("value", BAD_QUANTITIES, ids=lambda value: value[:30])
def test_a_bad_node_or_pod_quantity_is_one_located_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """Node allocatable and pod requests: the object is reported, the session still runs."""
    for body, where in (
        (node_yaml(value), "Node/n1: status.allocatable[cpu]: "),
        (pod_yaml(value), "Pod/ns/p1: spec.containers[0].resources.requests[cpu]: "),
    ):
        snapshot = tmp_path / "s.yaml"
        snapshot.write_text(
            "---\n".join([FLAVOR, queue_yaml("qa"), workload_yaml("good", "qa"), body]), encoding="utf-8"
        )
        code, decisions, err = cycle(capsys, str(snapshot))
        assert (0, ["ns/good"]) == (code, admitted(decisions))
        assert err.startswith(f"{snapshot}: {where}")


def test_an_integer_too_long_to_convert_is_an_error_of_its_field_in_json_too(tmp_path: Path) -> None:
    """JSON's integers, like YAML's, that Python will not convert stay with their object."""
    snapshot = tmp_path / "s.json"
    snapshot.write_text(
        '[{"apiVersion": "preemptd.io/v1alpha1", "kind": "Workload",'
        ' "metadata": {"name": "w", "namespace": "ns"},'
        f' "spec": {{"queueName": "q", "podSets": [{{"name": "m", "count": {"9" * 5000}}}]}}}}]',
        encoding="utf-8",
    )
    problems = [str(problem) for problem in parse_objects(load_files([snapshot])).problems]
    counted = [problem for problem in problems if "count" in problem]
    assert 1 == len(counted)
    assert counted[0].startswith(f"{snapshot}: Workload/ns/w: spec.podSets[0].count: expected an integer")


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**70], ids=["2^63", "-2^63-1", "2^70"])
def test_integers_beyond_64_bits_are_errors(value: int) -> None:
    """A count or priority Kubernetes could not store is reported, not carried as a big int."""
    document = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"queueName": "q", "priority": value, "podSets": [{"name": "m", "count": 1}]},
    }
    problems = parse_objects([("s.yaml", document)]).problems
    assert ["spec.priority"] == [problem.path for problem in problems if problem.path != "spec.queueName"]


# --- stray documents -------------------------------------------------------------------


def test_a_stray_document_is_one_problem_and_the_rest_of_the_file_is_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text(
        "---\n".join([FLAVOR, "just a line\n", queue_yaml("qa"), "42\n", workload_yaml("good", "qa")]),
        encoding="utf-8",
    )
    code, decisions, err = cycle(capsys, str(snapshot))
    assert (0, ["ns/good"]) == (code, admitted(decisions))
    expected = [
        f"{snapshot}: document 2: expected an object (a mapping) or a list of objects, got plain text; skipped",
        f"{snapshot}: document 4: expected an object (a mapping) or a list of objects, got int; skipped",
    ]
    assert expected == err.splitlines()
    code, err = validate(capsys, str(snapshot))
    assert (2, expected) == (code, err.splitlines())


def test_apply_writes_a_stray_document_back_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text("---\n".join([FLAVOR, queue_yaml("qa"), "[1, 2]\n", "just a line\n"]), encoding="utf-8")
    out = tmp_path / "out.yaml"
    assert 0 == main(["cycle", str(snapshot), "--now", NOW, "--apply", str(out)])
    capsys.readouterr()
    documents = load_files([out])
    assert StrayDocument(4, "just a line") == documents[-1][1]
    assert [1, 2] == documents[-2][1]


# --- one line per problem --------------------------------------------------------------


def test_a_name_with_a_newline_cannot_forge_a_problem_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Control characters in names are escaped: every problem stays on its own line."""
    forged = "x\nother.yaml: Workload/ns/y: spec.queueName: forged"
    document = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": forged, "namespace": "ns\r"},
        "spec": {"podSets": [{"name": "m\x1b[2J", "count": 1, "requests": {"cpu": "1\n2"}}]},
    }
    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps([document]), encoding="utf-8")
    code, err = validate(capsys, str(snapshot))
    assert 2 == code
    lines = err.splitlines()
    lines = [line for line in err.splitlines() if not line.startswith("warning: no ")]
    assert 2 == len(lines)  # queueName missing, bad request
    assert all(line.startswith(f"{snapshot}: Workload/ns\\r/x\\nother.yaml") for line in lines)
    assert "\x1b" not in err and "\r" not in err


# --- scenarios -------------------------------------------------------------------------


def scenario_yaml(duration: str = "10m", node_cpu: str = '"8"', request: str = '"1"') -> str:
    return f"""duration: {duration}
nodeGroups:
- {{name: n, count: 2, labels: {{flavor: od}}, allocatable: {{cpu: "8"}}}}
- {{name: odd, count: 1, allocatable: {{cpu: {node_cpu}}}}}
objects:
- {{apiVersion: preemptd.io/v1alpha1, kind: ResourceFlavor, metadata: {{name: od}}, spec: {{nodeLabels: {{flavor: od}}}}}}
- apiVersion: preemptd.io/v1alpha1
  kind: Queue
  metadata: {{name: qa}}
  spec:
    resourceGroups:
    - coveredResources: [cpu]
      flavors: [{{name: od, resources: [{{name: cpu, nominalQuota: "8"}}]}}]
workloads:
- arrival: 1m
  runtime: 2m
  object: {{apiVersion: preemptd.io/v1alpha1, kind: Workload, metadata: {{name: good, namespace: ns}},
           spec: {{queueName: qa, podSets: [{{name: main, count: 1, requests: {{cpu: "1"}}}}]}}}}
- arrival: 1m
  runtime: 2m
  object: {{apiVersion: preemptd.io/v1alpha1, kind: Workload, metadata: {{name: bad, namespace: ns}},
           spec: {{queueName: qa, podSets: [{{name: main, count: 1, requests: {{cpu: {request}}}}}]}}}}
"""


@pytest.mark.parametrize("value", BAD_QUANTITIES, ids=lambda value: value[:30])
def test_a_scenario_with_bad_quantities_is_simulated_with_those_objects_isolated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(scenario_yaml(node_cpu=value, request=value), encoding="utf-8")
    report = tmp_path / "report"
    assert 0 == main(["simulate", str(scenario), "--report", str(report)])
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{scenario}: nodeGroups[1]: Node/odd-000: status.allocatable[cpu]: ")
    assert err[1].startswith(f"{scenario}: workloads[1].object: Workload/ns/bad: spec.podSets[0].requests[cpu]: ")
    run = json.loads((report / "report.json").read_text(encoding="utf-8"))["runs"][0]
    assert 1 == run["queues"]["qa"]["admissions"]


def test_a_scenario_duration_beyond_a_year_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(scenario_yaml(duration="999999999999h"), encoding="utf-8")
    assert 2 == main(["simulate", str(scenario)])
    assert f"{scenario}: duration: must be at most 8784h, got 999999999999h\n" == capsys.readouterr().err


def test_a_node_group_or_repeat_count_beyond_the_limit_is_an_error() -> None:
    """A count of 10^12 would build 10^12 objects; past MAX_COPIES it is a located error."""
    reader = Reader("s.yaml")
    groups = node_groups(reader, {"nodeGroups": [{"name": "n", "count": MAX_COPIES + 1}]})
    assert ([], [f"s.yaml: nodeGroups[0].count: expected an integer from 1 to {MAX_COPIES}, got {MAX_COPIES + 1}"]) == (
        groups,
        reader.problems,
    )


def test_a_moment_past_year_9999_is_written_as_the_last_one_not_raised() -> None:
    """admittedAt plus a very long min-runtime lands past what RFC 3339 can write: shown capped."""
    from preemptd.framework.quantity import format_timestamp

    assert ("9999-12-31T23:59:59.999Z", "1970-01-01T00:00:00Z") == (format_timestamp(2**62), format_timestamp(0))


def test_a_moment_before_year_1_is_written_as_the_first_one_in_four_digits() -> None:
    """admittedAt minus a long window lands before year 1: shown capped, its year in the four
    digits RFC 3339 requires, so that it reads back as the same moment."""
    from preemptd.framework.quantity import format_timestamp, parse_timestamp

    first = format_timestamp(-(2**62))
    assert first == "0001-01-01T00:00:00Z"
    assert format_timestamp(parse_timestamp(first)) == first
    assert format_timestamp(parse_timestamp("0999-05-06T07:08:09.010Z")) == "0999-05-06T07:08:09.010Z"


def test_a_scenario_key_with_a_newline_stays_on_its_problem_line() -> None:
    reader = Reader("s.yaml")
    reader.problem("colour\ns.yaml: duration", "unknown key")
    assert ["s.yaml: colour\\ns.yaml: duration: unknown key"] == reader.problems


def test_json_nested_too_deeply_is_an_error_of_its_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"kind": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    assert 2 == main(["validate", str(deep)])
    assert f"{deep}: not valid JSON: nested too deeply\n" == capsys.readouterr().err
