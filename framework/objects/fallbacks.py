"""A placeholder record per kind, for an object that could not be read at all.

:func:`~preemptd.framework.objects.guarded` puts one in the place of an object whose
reader raised: its name and, for a Queue or Workload, its parent or queue, so that
the isolation rules apply to it like to any other invalid object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..model import Flavor, FrozenDict, LocalQueue, Node, Pod, PriorityClass, QueueSpec, Workload
from .fields import Entry

__all__ = ["FALLBACKS"]


def _text_at(entry: Entry, section: str, key: str) -> str | None:
    value = entry.body.get(section)
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, str) and found else None


FALLBACKS: dict[str, Callable[[Entry], Any]] = {
    "ResourceFlavor": lambda entry: Flavor(entry.name),
    "PriorityClass": lambda entry: (PriorityClass(entry.name, 0), False),
    "Node": lambda entry: Node(entry.name, {}, {}),
    "Pod": lambda entry: Pod(entry.namespace or "default", entry.name, {}),
    "Queue": lambda entry: QueueSpec(
        entry.name, parent=_text_at(entry, "spec", "parent"), source=entry.file
    ),
    "WorkloadPriorityClass": lambda entry: PriorityClass(entry.name, 0),
    "LocalQueue": lambda entry: LocalQueue(entry.namespace or "default", entry.name, "", entry.file),
    "Namespace": lambda entry: FrozenDict(),
    "Workload": lambda entry: Workload(
        entry.namespace or "default",
        entry.name,
        _text_at(entry, "spec", "queueName") or "",
        (),
        source=entry.file,
    ),
}
"""A placeholder record per kind, for an object that could not be read at all."""
