"""Simulation scenarios (docs/simulation.md): a YAML file → a :class:`Scenario`.

A scenario is the objects of CONTRACT §1 as they stand at the start, plus the
workloads that arrive later with their run times, and the settings of the
simulated clock. Loading does everything that can fail on input: the file is
read, every field checked (all problems are collected, each with its path),
repeated arrivals expanded with the seed, and every object parsed once through
:func:`~preemptd.framework.objects.parse_objects`, so the simulation itself
never parses and never fails on input.

Structural mistakes (a missing ``duration``, an arrival that is not a duration,
an ``object`` that is not a Workload) stop the run: :class:`ScenarioError`,
exit 2. Invalid *objects* are isolated the way ``cycle`` isolates them
(CONTRACT §2): reported in :attr:`Scenario.problems`, and the workloads that
depend on them stay pending ``Inadmissible``.

Randomness (runtime ranges, arrival jitter) comes from one generator seeded
with ``seed`` and consumed in file order, so a scenario and its seed always
expand to the same arrivals.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from preemptd.framework.model import Workload
from preemptd.framework.objects import Inventory, Problem, parse_objects
from preemptd.framework.quantity import (
    QuantityError,
    parse_duration,
)

from ..backends.files import Document, LoadError, load_files, parse_text
from .entries import Reader, ReplicaChange, arrivals, node_groups, replica_changes

__all__ = [
    "DEFAULT_START",
    "RUNTIME_ANNOTATION",
    "Arrival",
    "ReplicaChange",
    "Scenario",
    "ScenarioError",
    "load_scenario",
    "scenario_from_data",
]

DEFAULT_START = "2026-01-01T00:00:00Z"
DEFAULT_GRACE = 30_000
MAX_DURATION = 366 * 86_400_000
"""The longest simulated time: a year of cycles already takes hours of wall time."""
RUNTIME_ANNOTATION = "simulation.preemptd.io/runtime"
"""On a Workload under ``objects``: how long it runs, counted from its ``admittedAt``."""

_KEYS = (
    "duration",
    "start",
    "cycleInterval",
    "cycle_interval",
    "terminationGrace",
    "seed",
    "runIdleCycles",
    "reportResource",
    "config",
    "objectFiles",
    "nodeGroups",
    "objects",
    "workloads",
    "replicaChanges",
)


class ScenarioError(LoadError):
    """The scenario cannot be simulated; one message per problem (exit 2)."""


@dataclass(frozen=True, slots=True)
class Arrival:
    """A workload that arrives ``at`` ms after the start and runs ``runtime`` ms once admitted."""

    key: str
    at: int
    runtime: int | None  # None: runs past the end of the simulation
    workload: Workload | None  # None when the object is invalid: see ``inadmissible``
    inadmissible: str = ""


@dataclass(frozen=True, slots=True)
class Scenario:
    source: str
    start: int  # epoch ms of simulated time 0
    duration: int
    cycle_interval: int | None  # None: the configuration's [scheduler] cycle_interval
    termination_grace: int
    seed: int
    run_idle_cycles: bool
    report_resource: str | None
    config: Mapping[str, Any]  # raw overrides of the configuration (TOML's shape)
    inventory: Inventory  # the objects at the start: cluster, initial workloads, pods
    runtimes: Mapping[str, int]  # runtime of initial workloads that carry the annotation
    arrivals: tuple[Arrival, ...]  # by (at, key)
    replica_changes: tuple[ReplicaChange, ...] = ()  # by (at, file order)
    problems: tuple[str, ...] = ()  # invalid objects, isolated (reported, not fatal)
    warnings: tuple[str, ...] = ()


def load_scenario(path: str | Path) -> Scenario:
    """Read and check a scenario file; :class:`ScenarioError` lists every problem."""
    source = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise ScenarioError([f"{source}: cannot read: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError:
        raise ScenarioError([f"{source}: not YAML or JSON: not UTF-8 text"]) from None
    try:
        documents = parse_text(text, json_only=source.endswith(".json"))
    except ValueError as exc:
        raise ScenarioError([f"{source}{exc}"]) from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise ScenarioError([f"{source}: a scenario is one YAML or JSON mapping"])
    return scenario_from_data(documents[0], source=source, base=Path(path).parent)


def scenario_from_data(data: Mapping[str, Any], *, source: str, base: Path | None = None) -> Scenario:
    """The scenario a mapping describes (what a scenario file holds); ``base`` is the
    folder ``objectFiles`` are relative to."""
    reader = Reader(source)
    unknown = [key for key in data if key not in _KEYS]
    for key in unknown:
        reader.problem(str(key), f"unknown key (known: {', '.join(k for k in _KEYS if k != 'cycle_interval')})")
    duration = reader.duration(data, "duration", required=True, positive=True, maximum=MAX_DURATION)
    start = reader.timestamp(data, "start", DEFAULT_START)
    interval_key = "cycleInterval" if "cycleInterval" in data else "cycle_interval"
    interval = reader.duration(data, interval_key, positive=True)
    grace = reader.duration(data, "terminationGrace")
    seed = reader.integer(data, "seed", 0)
    run_idle = reader.flag(data, "runIdleCycles")
    resource = reader.text(data, "reportResource")
    config = reader.mapping(data, "config")
    documents: list[tuple[str, Document]] = []
    for index, name in enumerate(reader.sequence(data, "objectFiles")):
        if not isinstance(name, str):
            reader.problem(f"objectFiles[{index}]", f"expected a file path, got {name!r}")
            continue
        try:
            documents += load_files([(base or Path(".")) / name])
        except LoadError as exc:
            for message in exc.messages:
                reader.line(message)
    documents += [(f"{source}: nodeGroups[{i}]", node) for i, node in node_groups(reader, data)]
    for index, obj in enumerate(reader.sequence(data, "objects")):
        documents.append((f"{source}: objects[{index}]", obj))
    entries = arrivals(reader, data, random.Random(f"preemptd-simulate/{seed}"), start)
    changes = replica_changes(reader, data)
    if reader.problems:
        raise ScenarioError(reader.problems)
    assert duration is not None

    templates = [(f"{source}: workloads[{entry.index}].object", entry.document) for entry in entries]
    inventory = parse_objects([*documents, *templates])
    initial = {key for key in inventory.workloads} | set(inventory.inadmissible)
    expanded: list[Arrival] = []
    template_keys = {entry.template_key for entry in entries}
    for entry in entries:
        template = inventory.workloads.get(entry.template_key)
        message = inventory.inadmissible.get(entry.template_key, "")
        for copy_ in entry.copies:
            if template is None:
                expanded.append(Arrival(copy_.key, copy_.at, copy_.runtime, None, message))
                continue
            workload = dataclasses.replace(
                template,
                name=copy_.name,
                created=start + copy_.at,
                uid=f"{template.uid}-{copy_.suffix}" if template.uid and copy_.suffix else template.uid,
            )
            expanded.append(Arrival(copy_.key, copy_.at, copy_.runtime, workload))
    for key in template_keys:
        inventory.workloads.pop(key, None)
        inventory.inadmissible.pop(key, None)
    initial -= template_keys
    _check_unique(reader, initial, expanded)
    _check_changes(reader, changes, inventory, expanded)
    runtimes = _initial_runtimes(reader, documents, inventory)
    if reader.problems:
        raise ScenarioError(reader.problems)
    expanded.sort(key=lambda a: (a.at, a.key))
    return Scenario(
        source=source,
        start=start,
        duration=duration,
        cycle_interval=interval,
        termination_grace=DEFAULT_GRACE if grace is None else grace,
        seed=seed,
        run_idle_cycles=run_idle,
        report_resource=resource,
        config=config,
        inventory=inventory,
        runtimes=runtimes,
        arrivals=tuple(expanded),
        replica_changes=tuple(sorted(changes, key=lambda c: (c.at, c.index))),
        problems=tuple(map(str, inventory.problems)),
        warnings=tuple(map(str, [*inventory.warnings, *inventory.unknown_fields])),
    )


def _check_unique(reader: Reader, initial: set[str], arrivals: Sequence[Arrival]) -> None:
    """Workload keys name one workload each: the simulation follows them by key."""
    seen = set(initial)
    for arrival in arrivals:
        if arrival.key in seen:
            reader.problem("workloads", f"workload {arrival.key} is defined more than once")
        seen.add(arrival.key)


def _check_changes(
    reader: Reader, changes: Sequence[ReplicaChange], inventory: Inventory, arrivals: Sequence[Arrival]
) -> None:
    """Each replica change names a Deployment-owned workload of the scenario."""
    workloads = {key: w for key, w in inventory.workloads.items()}
    workloads.update((a.key, a.workload) for a in arrivals if a.workload is not None)
    known = set(workloads) | set(inventory.inadmissible) | {a.key for a in arrivals}
    for change in changes:
        at = f"replicaChanges[{change.index}].workload"
        workload = workloads.get(change.workload)
        if change.workload not in known:
            reader.problem(at, f"workload {change.workload} is not in the scenario")
        elif workload is not None and not workload.is_deployment:
            reader.problem(at, f"workload {change.workload} is not owned by a Deployment (apps/v1)")


def _initial_runtimes(
    reader: Reader, documents: Sequence[tuple[str, Document]], inventory: Inventory
) -> dict[str, int]:
    runtimes: dict[str, int] = {}
    for file, document in documents:
        for obj in _flatten(document):
            if obj.get("kind") != "Workload":
                continue
            metadata = obj.get("metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            annotations = metadata.get("annotations")
            value = annotations.get(RUNTIME_ANNOTATION) if isinstance(annotations, dict) else None
            if value is None:
                continue
            key = f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"
            try:
                runtimes[key] = parse_duration(value)
            except QuantityError as exc:
                reader.fields.problems.append(
                    Problem(file, f"Workload/{key}", f"metadata.annotations[{RUNTIME_ANNOTATION}]", str(exc))
                )
    return {key: ms for key, ms in runtimes.items() if key in inventory.workloads}


def _flatten(document: Any) -> list[dict[str, Any]]:
    """The objects of a document: itself, a list's items, or a ``kind: List``'s items."""
    if isinstance(document, list):
        return [obj for item in document for obj in _flatten(item)]
    if not isinstance(document, dict):
        return []
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(document.get("items"), list):
        return _flatten(document["items"])
    return [document]
