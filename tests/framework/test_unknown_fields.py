"""Unknown fields of preemptd's own kinds are found on every way an object is read.

An object comes as a parsed mapping (YAML, a JSON object) or, as an item of a JSON list,
as its own text that the typed reader decodes without building a dict (see ``typed``).
A typo must be found either way and at any depth, with its path; the fields Kubernetes
itself sets must never be one. The typed Workload reader refuses unknown fields (that is
what lets a large cluster's Workloads skip the check): it must declare exactly the
fields the schema knows, or a typo could slip through it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest
from preemptd.daemon.backends.files import parse_text
from preemptd.framework.objects import parse_objects
from preemptd.framework.objects.known import SCHEMAS
from preemptd.framework.objects.typed_workloads import _WorkloadDoc

FLAVOR = {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "a"}}
QUEUE = {
    "apiVersion": "preemptd.io/v1alpha1",
    "kind": "Queue",
    "metadata": {"name": "q"},
    "spec": {
        "resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [{"name": "a", "resources": [{"name": "cpu", "nominalQuota": "8"}]}]}
        ],
        "preemption": {"borrowWithinCohort": {"policy": "Never"}},
    },
}
WORKLOAD = {
    "apiVersion": "preemptd.io/v1alpha1",
    "kind": "Workload",
    "metadata": {"name": "w", "namespace": "ml", "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {
        "queueName": "q",
        "owner": {"apiVersion": "batch/v1", "kind": "Job", "name": "w"},
        "podSets": [
            {"name": "main", "count": 1, "requests": {"cpu": "1"},
             "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]}
        ],
    },
    "status": {
        "admission": {"queue": "q", "podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "a"}}]},
        "admittedAt": "2026-01-01T00:00:00Z",
    },
}

# (object, where the typo goes, its path in the problem)
TYPOS = [
    (WORKLOAD, (), "specc"),
    (WORKLOAD, ("metadata",), "metadata.namspace"),
    (WORKLOAD, ("spec",), "spec.priorty"),
    (WORKLOAD, ("spec", "owner"), "spec.owner.nmae"),
    (WORKLOAD, ("spec", "podSets", 0), "spec.podSets[0].requets"),
    (WORKLOAD, ("spec", "podSets", 0, "tolerations", 0), "spec.podSets[0].tolerations[0].efect"),
    (WORKLOAD, ("status",), "status.admited"),
    (WORKLOAD, ("status", "admission"), "status.admission.queu"),
    (WORKLOAD, ("status", "admission", "podSets", 0), "status.admission.podSets[0].flavours"),
    (QUEUE, ("spec",), "spec.preemtion"),
    (QUEUE, ("spec", "resourceGroups", 0, "flavors", 0, "resources", 0), "spec.resourceGroups[0].flavors[0].resources[0].borowingLimit"),
    (QUEUE, ("spec", "preemption", "borrowWithinCohort"), "spec.preemption.borrowWithinCohort.polcy"),
    (FLAVOR, (), "spek"),
]


def with_typo(obj: dict[str, Any], where: tuple[Any, ...], path: str) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    target: Any = changed
    for step in where:
        target = target[step]
    target[path.rpartition(".")[2].rpartition("]")[2] or path] = "x"
    return changed


def unknown(objects: list[dict[str, Any]], *, as_json_list: bool) -> list[tuple[str, str]]:
    if as_json_list:
        documents = parse_text(json.dumps(objects), json_only=True, typed=True)
    else:
        documents = list(objects)
    inventory = parse_objects(("s", document) for document in documents)
    return [(problem.object, problem.path) for problem in inventory.unknown_fields]


@pytest.mark.parametrize("as_json_list", [False, True], ids=["mapping", "json-list"])
@pytest.mark.parametrize(("obj", "where", "path"), TYPOS, ids=[path for _, _, path in TYPOS])
def test_a_typo_is_found_at_any_depth(obj: dict[str, Any], where: tuple[Any, ...], path: str, as_json_list: bool) -> None:
    typo = with_typo(obj, where, path)
    others = [o for o in (FLAVOR, QUEUE, WORKLOAD) if o["kind"] != obj["kind"]]
    label = {"Workload": "Workload/ml/w", "Queue": "Queue/q", "ResourceFlavor": "ResourceFlavor/a"}[obj["kind"]]
    assert [(label, path)] == unknown([*others, typo], as_json_list=as_json_list)


@pytest.mark.parametrize("as_json_list", [False, True], ids=["mapping", "json-list"])
def test_plain_objects_have_no_unknown_field(as_json_list: bool) -> None:
    assert [] == unknown([FLAVOR, QUEUE, WORKLOAD], as_json_list=as_json_list)


def test_a_typo_says_what_was_meant() -> None:
    inventory = parse_objects([("s", FLAVOR), ("s", with_typo(QUEUE, ("spec",), "spec.preemtion"))])
    assert ["unknown field (did you mean 'preemption'?)"] == [p.message for p in inventory.unknown_fields]


def test_an_unknown_field_does_not_make_the_object_invalid() -> None:
    """The object is read without the field (the caller decides error or warning)."""
    inventory = parse_objects([("s", FLAVOR), ("s", QUEUE), ("s", with_typo(WORKLOAD, ("spec",), "spec.priorty"))])
    assert (["ml/w"], []) == (list(inventory.workloads), inventory.problems)


def struct_fields(kind: Any) -> Any:
    """The fields a Struct type accepts, nested as the schemas are (None: not looked into)."""
    args = getattr(kind, "__args__", None)
    if args:  # X | None, list[X]
        found = [struct_fields(arg) for arg in args]
        return next((f for f in found if f is not None), None)
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        hints = {field.name: field.type for field in msgspec.structs.fields(kind)}
        return {name: struct_fields(hint) for name, hint in hints.items()}
    return None


def test_the_typed_workload_reader_knows_exactly_the_schemas_fields() -> None:
    """Where the typed reader looks into a section, it accepts just the schema's fields."""
    def compare(fields: Any, schema: Any, at: str) -> list[str]:
        if fields is None:
            return []
        found = [f"{at}.{key}: typed only" for key in fields.keys() - schema.keys()]
        found += [f"{at}.{key}: schema only" for key in schema.keys() - fields.keys()]
        for key in fields.keys() & schema.keys():
            if schema[key] is None and fields[key] is not None:
                found.append(f"{at}.{key}: typed looks in, schema does not")
            elif schema[key] is not None:
                found += compare(fields[key], schema[key], f"{at}.{key}")
        return found

    assert [] == compare(struct_fields(_WorkloadDoc), SCHEMAS["Workload"], "Workload")
