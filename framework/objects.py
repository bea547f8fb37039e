"""Kubernetes-style objects (CONTRACT §1) -> the model, with located errors.

This is the only place that turns objects into model records. It never
raises on bad input: every problem becomes a :class:`Problem` naming the
file, the object (``Kind/namespace/name`` or ``Kind/name``), the field path
and what is wrong, and the object is isolated (see :class:`Inventory`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .model import Flavor, Node, Pod, PriorityClass, QueueSpec, Workload

__all__ = ["Inventory", "Problem", "parse_objects"]


@dataclass(frozen=True, slots=True, order=True)
class Problem:
    file: str
    object: str  # "Kind/namespace/name" or "Kind/name"
    path: str  # field path, e.g. "spec.resourceGroups[0].flavors[1].name"
    message: str

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.file, self.object, self.path) if part)
        return f"{where}: {self.message}" if where else self.message


@dataclass(slots=True)
class Inventory:
    """The valid objects of a snapshot, plus everything that was wrong.

    ``queues`` holds only Queues that are valid *and* whose whole tree is
    valid; ``excluded_queues`` names every queue taken out with its tree (an
    invalid Queue takes everything under its root queue with it).
    ``inadmissible`` maps workload keys to the message of why they cannot be
    scheduled (invalid themselves, on an excluded or unknown queue, ...); such
    workloads are not in ``workloads`` and are reported pending ``Inadmissible``.
    """

    flavors: dict[str, Flavor] = field(default_factory=dict)
    queues: dict[str, QueueSpec] = field(default_factory=dict)
    workloads: dict[str, Workload] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    inadmissible: dict[str, str] = field(default_factory=dict)
    excluded_queues: set[str] = field(default_factory=set)


def parse_objects(documents: Iterable[tuple[str, Any]]) -> Inventory:
    """Turn ``(source file, object)`` pairs into an :class:`Inventory`."""
    raise NotImplementedError
