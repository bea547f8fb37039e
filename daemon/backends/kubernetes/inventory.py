"""The framework's :class:`Inventory`, kept up to date one watch event at a time.

``parse_objects`` turns a whole snapshot of objects into an Inventory; this
module does the same job incrementally, through the same per-kind parsers, so
a session's snapshot costs what changed since the last one:

* a Pod, Node or Workload event re-reads that one object;
* a ResourceFlavor, PriorityClass, WorkloadPriorityClass, Queue, LocalQueue or
  Namespace event marks the *catalog* stale (flavors, priority classes, the queue
  tree, the LocalQueues and the Namespaces' labels, which workloads are read
  against); the next :meth:`ClusterInventory.inventory` rebuilds it and
  re-reads every workload. These kinds are few and change rarely. The catalog
  is marked fresh only once a rebuild has finished: a rebuild that fails is
  tried again at the next call, never leaving the view frozen at what it was.

The rules are the ones ``parse_objects`` applies (CONTRACT §2): an invalid
object is reported in ``problems`` and left out, a workload that is invalid or
whose queue is unknown, not a leaf or in an invalid tree is ``inadmissible``
with the reason, and an invalid Queue takes its whole tree out. Every object
is read through :func:`~preemptd.framework.objects.guarded`, so even a reader
that raises costs that one object only. In a cluster two objects cannot share
a key, so the duplicate rule never applies.

A Workload whose ``Finished`` condition is True is gone as far as scheduling
goes: its Job completed and the quota is free.

**Released.** An evicted Workload (``Evicted`` True, ``status.admission``
still there) whose owner has stopped — ``owner_stopped`` says so, through the owner's integration (for a Job:
suspended, no active pod, no live pod labelled for it) — no longer uses its
quota, whatever its status says yet. It is read as if its quota were given
back (:func:`released_view`: no ``admission``, no ``admittedAt``), so the
next session queues it again; that session's commit writes the release and
the workload's new pending reason (or its admission) in one status write
(``commit``, design note point 9). The rule is read from the cluster each
time :meth:`ClusterInventory.inventory` is called, never remembered: after a
restart, or a release write that was refused, the same objects say the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from preemptd.framework.model import Flavor, Node, Pod
from preemptd.framework.objects import Inventory, guarded, namespace_refusal, queue_problem
from preemptd.framework.objects.fields import Catalog, Entry, Parsed, Problem, describe
from preemptd.framework.objects.local_queues import parse_local_queue, parse_namespace
from preemptd.framework.objects.nodes import parse_flavor
from preemptd.framework.objects.queues import QueueTree, build_queue_tree, parse_queue
from preemptd.framework.objects.typed_nodes import read_node
from preemptd.framework.objects.typed_pods import read_pod
from preemptd.framework.objects.typed_workloads import read_workload
from preemptd.framework.objects.workloads import parse_priority_class, parse_workload_priority_class

from .client import Obj

__all__ = ["SOURCE", "ClusterInventory", "entry_of", "is_evicting", "is_finished", "released_view"]

SOURCE = "cluster"
"""What a problem names as its file: the object came from the API, not from a file."""

T = TypeVar("T")

_CATALOG_KINDS = ("ResourceFlavor", "PriorityClass", "Queue", "WorkloadPriorityClass", "LocalQueue", "Namespace")


def entry_of(kind: str, obj: Obj, *, namespaced: bool) -> Entry | None:
    """The parser's view of an API object (None when it has no name)."""
    metadata = obj.get("metadata") or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    namespace = (metadata.get("namespace") or "default") if namespaced else None
    return Entry(SOURCE, kind, namespace, name, obj)


def is_finished(obj: Obj) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(
        isinstance(c, dict) and c.get("type") == "Finished" and c.get("status") == "True" for c in conditions
    )


def is_evicting(obj: Obj) -> bool:
    """Its eviction is issued (``Evicted`` True) and it still holds quota (``status.admission``)."""
    status = obj.get("status") or {}
    if not status.get("admission"):
        return False
    conditions = status.get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Evicted" and c.get("status") == "True" for c in conditions)


def released_view(obj: Obj) -> Obj:
    """An evicted Workload as it reads once its quota is given back, before that is written:
    no ``admission``, no ``admittedAt``; its conditions as they are."""
    status = {k: v for k, v in (obj.get("status") or {}).items() if k not in ("admission", "admittedAt")}
    return {**obj, "status": status}


OwnerStopped = Callable[[str, Obj], bool]
"""Whether the owner of the evicted Workload ``(namespace/name, object)`` has stopped all its pods."""


class ClusterInventory:
    """Objects in, an up-to-date :class:`Inventory` out (see the module docstring)."""

    def __init__(self, *, owner_stopped: OwnerStopped = lambda key, obj: False) -> None:
        self.owner_stopped = owner_stopped
        self._evicting: set[str] = set()  # Workloads evicted that still hold quota
        self._released: frozenset[str] = frozenset()  # of those, the ones whose owner has stopped
        self._catalog_objects: dict[str, dict[str, Obj]] = {kind: {} for kind in _CATALOG_KINDS}
        self._catalog_stale = True
        self._catalog = Catalog()
        self._tree: QueueTree | None = None
        self._catalog_problems: list[Problem] = []
        self._workload_objects: dict[str, Obj] = {}
        self._stale_workloads: set[str] = set()
        self._problems: dict[tuple[str, str], list[Problem]] = {}  # (kind, key) -> its problems
        self._problems_changed = True
        self._pods: dict[str, Pod] = {}  # the inventory's, kept up to date here
        self._inventory = Inventory(pods=self._pods)
        self.reads = 0  # objects parsed so far: what "O(changes)" is measured by

    # -- events ---------------------------------------------------------------

    def apply(self, kind: str, obj: Obj | None, *, deleted: bool = False) -> None:
        """One object's new state (``deleted``: it is gone)."""
        if obj is None:
            return
        namespaced = kind in ("Workload", "Pod", "LocalQueue")
        entry = entry_of(kind, obj, namespaced=namespaced)
        if entry is None:
            return
        key = entry.key
        if kind in _CATALOG_KINDS:
            objects = self._catalog_objects[kind]
            if deleted:
                objects.pop(key, None)
            else:
                objects[key] = obj
            self._catalog_stale = True
        elif kind == "Workload":
            if deleted or is_finished(obj):
                self._workload_objects.pop(key, None)
                self._evicting.discard(key)
            else:
                self._workload_objects[key] = obj
                if is_evicting(obj):
                    self._evicting.add(key)
                else:
                    self._evicting.discard(key)
            self._stale_workloads.add(key)
        elif kind == "Pod":
            self._read_one(entry, deleted, read_pod, self._pods)
        elif kind == "Node":
            self._read_one(entry, deleted, read_node, self._inventory.nodes)

    def _read_one(
        self,
        entry: Entry,
        deleted: bool,
        parse: Callable[[Entry], tuple[T, list[Problem]]],
        into: dict[str, T],
    ) -> None:
        slot = (entry.kind, entry.key)
        had_problems = self._problems.pop(slot, None) is not None
        if deleted:
            into.pop(entry.key, None)
        else:
            self.reads += 1
            value, problems = guarded(parse)(entry)
            if problems:
                into.pop(entry.key, None)
                self._problems[slot] = problems
            else:
                into[entry.key] = value
            had_problems = had_problems or bool(problems)
        self._problems_changed = self._problems_changed or had_problems

    # -- the inventory -----------------------------------------------------------

    @property
    def pods(self) -> Mapping[str, Pod]:
        return self._inventory.pods

    @property
    def nodes(self) -> Mapping[str, Node]:
        return self._inventory.nodes

    @property
    def flavors(self) -> Mapping[str, Flavor]:
        self._ensure_catalog()
        return self._catalog.flavors

    def priority(self, class_name: str | None) -> int | None:
        """A PriorityClass's value (no name: the cluster's default); None when unknown or invalid."""
        self._ensure_catalog()
        if not class_name:
            return self._catalog.default_priority
        found = self._catalog.priority_classes.get(class_name)
        return None if found is None else found.value

    def _ensure_catalog(self) -> None:
        if self._catalog_stale:
            self._rebuild_catalog()
            self._stale_workloads = set(self._workload_objects) | set(self._inventory.workloads)
            self._stale_workloads |= set(self._inventory.inadmissible)

    @property
    def released(self) -> frozenset[str]:
        """The Workloads read as released (module docstring) by the last :meth:`inventory`."""
        return self._released

    def inventory(self) -> Inventory:
        """The Inventory as of the last event applied; shared, not to be changed by callers."""
        self._ensure_catalog()
        if self._evicting or self._released:
            objects = self._workload_objects
            released = frozenset(key for key in self._evicting if self.owner_stopped(key, objects[key]))
            if released != self._released:
                self._stale_workloads |= released ^ self._released
                self._released = released
        if self._stale_workloads:
            for key in self._stale_workloads:
                self._read_workload(key)
            self._stale_workloads = set()
        if self._problems_changed:
            everything = [*self._catalog_problems, *(p for found in self._problems.values() for p in found)]
            self._inventory.problems = sorted(everything)
            self._problems_changed = False
        return self._inventory

    def _read_workload(self, key: str) -> None:
        inventory = self._inventory
        slot = ("Workload", key)
        self._problems_changed = self._problems_changed or slot in self._problems
        self._problems.pop(slot, None)
        inventory.workloads.pop(key, None)
        inventory.inadmissible.pop(key, None)
        obj = self._workload_objects.get(key)
        if obj is not None and key in self._released:
            obj = released_view(obj)
        entry = entry_of("Workload", obj, namespaced=True) if obj is not None else None
        if entry is None:
            return
        assert self._tree is not None
        self.reads += 1
        catalog = self._catalog
        workload, problems = guarded(lambda entry: read_workload(entry, catalog))(entry)
        if (problem := queue_problem(self._tree.queue_problem, entry, workload)) is not None:
            problems.append(problem)
        if problems:
            self._problems[slot] = problems
            self._problems_changed = True
            inventory.inadmissible[key] = "; ".join(describe(p) for p in sorted(problems))
        elif workload.queue in self._tree.excluded:
            inventory.inadmissible[key] = self._tree.excluded[workload.queue]
        elif (refused := namespace_refusal(self._tree.queues, catalog, workload)) is not None:
            inventory.inadmissible[key] = refused
        else:
            inventory.workloads[key] = workload

    def _rebuild_catalog(self) -> None:
        problems: list[Problem] = []
        flavors = _read_all(self._catalog_objects["ResourceFlavor"], "ResourceFlavor", parse_flavor, problems)
        classes = _read_all(self._catalog_objects["PriorityClass"], "PriorityClass", parse_priority_class, problems)
        defaults = sorted(name for name, (_, is_default) in classes.items() if is_default)
        default_priority = 0
        if len(defaults) == 1:
            default_priority = classes[defaults[0]][0].value
        elif len(defaults) > 1:
            # Kubernetes allows one globalDefault; with several none is trusted (as parse_objects).
            for name in defaults:
                problems.append(
                    Problem(
                        SOURCE,
                        f"PriorityClass/{name}",
                        "globalDefault",
                        f"more than one PriorityClass is globalDefault ({', '.join(defaults)})",
                    )
                )
                del classes[name]
        workload_classes = _read_all(
            self._catalog_objects["WorkloadPriorityClass"], "WorkloadPriorityClass",
            parse_workload_priority_class, problems,
        )
        local_queues = _read_all(self._catalog_objects["LocalQueue"], "LocalQueue", parse_local_queue, problems)
        namespaces = _read_all(self._catalog_objects["Namespace"], "Namespace", parse_namespace, problems)
        catalog = Catalog(
            flavors=flavors,
            invalid_flavors=frozenset(self._catalog_objects["ResourceFlavor"]) - flavors.keys(),
            priority_classes={name: value for name, (value, _) in classes.items()},
            invalid_priority_classes=frozenset(self._catalog_objects["PriorityClass"]) - classes.keys(),
            default_priority=default_priority,
            workload_priority_classes=workload_classes,
            invalid_workload_priority_classes=frozenset(self._catalog_objects["WorkloadPriorityClass"])
            - workload_classes.keys(),
            local_queues=local_queues,
            invalid_local_queues=frozenset(self._catalog_objects["LocalQueue"]) - local_queues.keys(),
            namespaces=namespaces,
            invalid_namespaces=frozenset(self._catalog_objects["Namespace"]) - namespaces.keys(),
        )
        parsed: dict[str, list[Parsed[Any]]] = {}
        read_queue = guarded(lambda entry: parse_queue(entry, catalog))
        for key in sorted(self._catalog_objects["Queue"]):
            entry = entry_of("Queue", self._catalog_objects["Queue"][key], namespaced=False)
            if entry is None:
                continue
            value, found = read_queue(entry)
            parsed[key] = [Parsed(entry, value, found)]
            problems += found
        tree, cycle_problems = build_queue_tree(parsed)
        problems += cycle_problems
        self._catalog = catalog
        self._tree = tree
        self._catalog_problems = problems
        self._problems_changed = True
        inventory = self._inventory
        inventory.flavors = dict(catalog.flavors)
        inventory.priority_classes = dict(catalog.priority_classes)
        inventory.queues = tree.queues
        inventory.excluded_queues = set(tree.excluded)
        inventory.local_queues = dict(local_queues)
        inventory.workload_priority_classes = dict(workload_classes)
        inventory.namespaces = dict(namespaces)
        self._catalog_stale = False  # only now: a rebuild that raised is tried again


def _read_all(
    objects: Mapping[str, Obj],
    kind: str,
    parse: Callable[[Entry], tuple[T, list[Problem]]],
    problems: list[Problem],
) -> dict[str, T]:
    valid: dict[str, T] = {}
    for key in sorted(objects):
        entry = entry_of(kind, objects[key], namespaced=kind == "LocalQueue")
        if entry is None:
            continue
        value, found = guarded(parse)(entry)
        if found:
            problems += found
        else:
            valid[key] = value
    return valid
