"""The entries of a scenario file: field checks, node groups and arrivals (private to
:mod:`.scenario`).

Every reader records a ``SOURCE: path: message`` problem and returns a usable value
instead of raising, so one pass reports everything wrong with a file. Repeated
arrivals and runtime ranges draw from the generator the caller seeds, in file order.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from preemptd.framework.objects.fields import Fields, Problem, shown
from preemptd.framework.quantity import (
    MAX_AMOUNT,
    QuantityError,
    format_duration,
    format_timestamp,
    parse_duration,
    parse_timestamp,
)

__all__ = ["API", "MAX_COPIES", "Entry", "Reader", "arrivals", "node_groups", "replica_changes"]

API = "preemptd.io/v1alpha1"
_ARRIVAL_KEYS = ("arrival", "runtime", "repeat", "object")
_REPEAT_KEYS = ("count", "every", "jitter")
MAX_COPIES = 100_000
"""The most nodes one ``nodeGroups`` entry, or copies one ``repeat``, may make (each is an
object in memory: a larger count is a typo, not a scenario)."""
_NODE_GROUP_KEYS = ("name", "count", "labels", "allocatable", "taints", "unschedulable")


class Reader:
    """Checks fields and collects ``SOURCE: path: message`` problems; never raises.

    The problems are the framework's located :class:`Problem` records, kept by its
    field reader (:meth:`Fields.of_file`); the checks below are the scenario format's
    own (durations that must be positive, defaults for absent keys)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.fields = Fields.of_file(source)

    @property
    def problems(self) -> list[str]:
        """Every problem so far, one ``SOURCE: path: message`` line each."""
        return [str(problem) for problem in self.fields.problems]

    def problem(self, path: str, message: str) -> None:
        self.fields.report(path, message)

    def line(self, text: str) -> None:
        """A problem already written out (``FILE: ...``), e.g. by the file loader."""
        self.fields.problems.append(Problem("", "", "", text))

    def duration(
        self,
        obj: Mapping[str, Any],
        key: str,
        *,
        at: str = "",
        required: bool = False,
        positive: bool = False,
        maximum: int | None = None,
    ) -> int | None:
        path = f"{at}.{key}" if at else key
        if obj.get(key) is None:
            if required:
                self.problem(path, "required field is missing")
            return None
        try:
            value = parse_duration(obj[key])
        except QuantityError as exc:
            self.problem(path, str(exc))
            return None
        if positive and value <= 0:
            self.problem(path, "must be longer than 0s")
            return None
        if maximum is not None and value > maximum:
            self.problem(path, f"must be at most {format_duration(maximum)}, got {obj[key]}")
            return None
        return value

    def timestamp(self, obj: Mapping[str, Any], key: str, default: str) -> int:
        try:
            return parse_timestamp(obj.get(key, default))
        except QuantityError as exc:
            self.problem(key, str(exc))
            return parse_timestamp(default)

    def integer(
        self,
        obj: Mapping[str, Any],
        key: str,
        default: int,
        *,
        at: str = "",
        minimum: int = 0,
        maximum: int = MAX_AMOUNT,
    ) -> int:
        value = obj.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            wanted = f">= {minimum}" if maximum == MAX_AMOUNT else f"from {minimum} to {maximum}"
            self.problem(f"{at}.{key}" if at else key, f"expected an integer {wanted}, got {shown(value)}")
            return default
        return value

    def flag(self, obj: Mapping[str, Any], key: str) -> bool:
        value = obj.get(key, False)
        if not isinstance(value, bool):
            self.problem(key, f"expected true or false, got {value!r}")
            return False
        return value

    def text(self, obj: Mapping[str, Any], key: str) -> str | None:
        value = obj.get(key)
        if value is not None and not isinstance(value, str):
            self.problem(key, f"expected a string, got {value!r}")
            return None
        return value

    def mapping(self, obj: Mapping[str, Any], key: str, *, at: str = "") -> dict[str, Any]:
        value = obj.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(f"{at}.{key}" if at else key, f"expected a mapping, got {type(value).__name__}")
            return {}
        return value

    def only_known_keys(self, obj: Mapping[str, Any], at: str, known: tuple[str, ...]) -> None:
        """A problem for each key of ``obj`` (found at ``at``) that is not one of ``known``."""
        for key in obj:
            if key not in known:
                self.problem(f"{at}.{key}", f"unknown key (known: {', '.join(known)})")

    def sequence(self, obj: Mapping[str, Any], key: str) -> list[Any]:
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(key, f"expected a list, got {type(value).__name__}")
            return []
        return value


# --- nodeGroups --------------------------------------------------------------------------


def node_groups(reader: Reader, data: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """Node objects for each ``nodeGroups`` entry: ``count`` identical nodes."""
    nodes: list[tuple[int, dict[str, Any]]] = []
    for index, group in enumerate(reader.sequence(data, "nodeGroups")):
        at = f"nodeGroups[{index}]"
        if not isinstance(group, dict):
            reader.problem(at, f"expected a mapping, got {type(group).__name__}")
            continue
        reader.only_known_keys(group, at, _NODE_GROUP_KEYS)
        name = group.get("name")
        if not isinstance(name, str) or not name:
            reader.problem(f"{at}.name", f"expected a name prefix, got {name!r}")
            continue
        count = reader.integer(group, "count", 0, at=at, minimum=1, maximum=MAX_COPIES)
        labels = reader.mapping(group, "labels", at=at)
        allocatable = reader.mapping(group, "allocatable", at=at)
        width = max(3, len(str(count - 1)))
        for i in range(count):
            node_name = f"{name}-{i:0{width}d}"
            spec: dict[str, Any] = {}
            if group.get("taints") is not None:
                spec["taints"] = copy.deepcopy(group["taints"])
            if group.get("unschedulable") is not None:
                spec["unschedulable"] = group["unschedulable"]
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node_name, "labels": {**labels, "kubernetes.io/hostname": node_name}},
                "spec": spec,
                "status": {"allocatable": dict(allocatable)},
            }
            nodes.append((index, node))
    return nodes


# --- workloads -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Copy:
    key: str
    name: str
    suffix: str
    at: int
    runtime: int | None


@dataclass(frozen=True, slots=True)
class Entry:
    index: int
    template_key: str
    document: dict[str, Any]
    copies: tuple[_Copy, ...]


def arrivals(reader: Reader, data: Mapping[str, Any], rng: random.Random, start: int) -> list[Entry]:
    entries: list[Entry] = []
    for index, item in enumerate(reader.sequence(data, "workloads")):
        at = f"workloads[{index}]"
        if not isinstance(item, dict):
            reader.problem(at, f"expected a mapping, got {type(item).__name__}")
            continue
        reader.only_known_keys(item, at, _ARRIVAL_KEYS)
        arrival = reader.duration(item, "arrival", at=at, required=True)
        document = _workload_object(reader, item.get("object"), f"{at}.object")
        repeat = reader.mapping(item, "repeat", at=at)
        reader.only_known_keys(repeat, f"{at}.repeat", _REPEAT_KEYS)
        count = reader.integer(repeat, "count", 1, at=f"{at}.repeat", minimum=1, maximum=MAX_COPIES)
        every = reader.duration(repeat, "every", at=f"{at}.repeat") or 0
        jitter = reader.duration(repeat, "jitter", at=f"{at}.repeat") or 0
        runtime_value = item.get("runtime")
        if runtime_value is None and _is_deployment(document):
            runtime_value = "forever"  # a Deployment serves until it is deleted
        runtime = _runtime(reader, runtime_value, f"{at}.runtime")
        if arrival is None or document is None or runtime is None:
            continue
        metadata = document["metadata"]
        namespace = metadata.get("namespace") or "default"
        name = str(metadata["name"])
        width = len(str(count - 1))
        copies = []
        for i in range(count):
            offset = rng.randint(0, jitter) if jitter else 0
            ms = runtime.draw(rng)
            suffix = f"{i:0{width}d}" if count > 1 else ""
            copy_name = f"{name}-{suffix}" if suffix else name
            copies.append(_Copy(f"{namespace}/{copy_name}", copy_name, suffix, arrival + i * every + offset, ms))
        template = copy.deepcopy(document)
        template["metadata"]["name"] = copies[0].name
        template["metadata"]["creationTimestamp"] = format_timestamp(start + copies[0].at)
        entries.append(Entry(index, copies[0].key, template, tuple(copies)))
    return entries


def _is_deployment(document: dict[str, Any] | None) -> bool:
    spec = document.get("spec") if document is not None else None
    owner = spec.get("owner") if isinstance(spec, dict) else None
    return isinstance(owner, dict) and owner.get("kind") == "Deployment"


def _workload_object(reader: Reader, obj: Any, at: str) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        reader.problem(at, "required: the Workload object (a mapping)")
        return None
    kind = obj.get("kind", "Workload")
    if kind != "Workload":
        reader.problem(f"{at}.kind", f"an arriving object is a Workload, got {kind!r}")
        return None
    if obj.get("status") is not None:
        reader.problem(
            f"{at}.status", "an arriving workload has no status; put workloads running at the start under objects"
        )
        return None
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        reader.problem(f"{at}.metadata.name", "required field is missing")
        return None
    return {"apiVersion": API, "kind": "Workload", **obj, "metadata": dict(metadata)}


@dataclass(frozen=True, slots=True)
class _Runtime:
    low: int
    high: int
    forever: bool = False

    def draw(self, rng: random.Random) -> int | None:
        if self.forever:
            return None
        return self.low if self.low == self.high else rng.randint(self.low, self.high)


def _runtime(reader: Reader, value: Any, at: str) -> _Runtime | None:
    """``2h``; ``{min: 1h, max: 3h}`` (uniform, from the seed); or ``forever``."""
    if value == "forever":
        return _Runtime(0, 0, forever=True)
    if isinstance(value, dict):
        reader.only_known_keys(value, at, ("min", "max"))
        low = reader.duration(value, "min", at=at, required=True, positive=True)
        high = reader.duration(value, "max", at=at, required=True, positive=True)
        if low is None or high is None:
            return None
        if high < low:
            reader.problem(f"{at}.max", "must not be shorter than min")
            return None
        return _Runtime(low, high)
    if value is None:
        reader.problem(at, "required field is missing (a duration, {min, max}, or forever)")
        return None
    try:
        ms = parse_duration(value)
    except QuantityError as exc:
        reader.problem(at, str(exc))
        return None
    if ms <= 0:
        reader.problem(at, "must be longer than 0s")
        return None
    return _Runtime(ms, ms)


# --- replicaChanges ------------------------------------------------------------------------

_CHANGE_KEYS = ("at", "workload", "replicas")


@dataclass(frozen=True, slots=True)
class ReplicaChange:
    """A Deployment's desired replica count becomes ``replicas`` at ``at`` ms after the start."""

    index: int
    at: int
    workload: str
    replicas: int


def replica_changes(reader: Reader, data: Mapping[str, Any]) -> list[ReplicaChange]:
    """The ``replicaChanges`` entries; which workloads they name is checked by the caller."""
    changes: list[ReplicaChange] = []
    for index, item in enumerate(reader.sequence(data, "replicaChanges")):
        at = f"replicaChanges[{index}]"
        if not isinstance(item, dict):
            reader.problem(at, f"expected a mapping, got {type(item).__name__}")
            continue
        reader.only_known_keys(item, at, _CHANGE_KEYS)
        moment = reader.duration(item, "at", at=at, required=True)
        workload = item.get("workload")
        if not isinstance(workload, str) or workload.count("/") != 1 or not all(workload.split("/")):
            reader.problem(f"{at}.workload", f"expected a workload key namespace/name, got {workload!r}")
            workload = None
        if item.get("replicas") is None:
            reader.problem(f"{at}.replicas", "required field is missing")
            continue
        replicas = reader.integer(item, "replicas", -1, at=at, minimum=1)
        if moment is None or workload is None or replicas < 1:
            continue
        changes.append(ReplicaChange(index, moment, workload, replicas))
    return changes
