"""Typed decoding of Workloads (private to :mod:`objects`); Pods: :mod:`typed`, Nodes: :mod:`typed_nodes`.

As for a Pod: the record of a plain, valid object, or ``None`` and the walker reads it,
so every located error is the walker's. A Workload also refers to other objects (its
PriorityClass, the flavors of its admission); one whose reference the catalog does not
resolve goes to the walker too. The rare, richer parts (tolerations, taints, a flavor
scan, owner references) are read by the walker's own field readers, and any problem
they find sends the whole object to the walker, so that it reports every problem of
the object as it always has.

A field the walker learns to read must be read here too (or send the object to the
walker): ``tests/framework/test_typed_decoding_workloads.py`` holds the two readers to
the same record over variants of every field and over a generated cluster.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec

from ..model import (
    DEPLOYMENT,
    FrozenDict,
    PodSet,
    Toleration,
    Workload,
)
from ..quantity import MAX_AMOUNT, QuantityError, parse_quantity, parse_timestamp_once
from .fields import Catalog, Entry, Fields, Problem
from .known import TOLERATION
from .local_queues import resolve_queue
from .records import new_entry, new_pod_set, new_workload
from .typed import (
    RawObject,
    _count,
    _NotPlain,
    _shared,
    _strings,
    _text,
    intake_key,
    sharing,
    typed_body,
)
from .typed_admissions import _AdmissionDoc, _AdmissionText, read_admission
from .typed_pods import _NULL, _kept, _PodItemMeta
from .workloads import PRIORITY_CLASS_SOURCES, WORKLOAD_PRIORITY_CLASS, parse_workload
from .workloads import read_flavor_scan as workload_flavor_scan
from .workloads import read_owner as workload_owner

__all__ = ["fast_workload", "read_workload", "text_entry"]

T = TypeVar("T")

_intern = sys.intern


# Every Struct of a Workload forbids unknown fields and declares all known ones (``known``):
# a Workload read here has none, so its text is not checked again (``find_unknown_fields``),
# and one that has any goes to the walker and is checked there.


class _Owner(msgspec.Struct, forbid_unknown_fields=True):
    apiVersion: Any = None
    kind: str | None = None
    name: str | None = None
    uid: Any = None


class _WorkloadMeta(msgspec.Struct, forbid_unknown_fields=True):
    creationTimestamp: Any = None
    uid: str | None = None
    ownerReferences: Any = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    # The rest of ObjectMeta: not read, declared so that they are not unknown.
    name: Any = None
    generateName: Any = None
    namespace: Any = None
    selfLink: Any = None
    resourceVersion: Any = None
    generation: Any = None
    deletionTimestamp: Any = None
    deletionGracePeriodSeconds: Any = None
    finalizers: Any = None
    managedFields: Any = None


class _PodSetDoc(msgspec.Struct, forbid_unknown_fields=True):
    name: str | None = None
    count: int | None = None
    minCount: int | None = None
    requests: dict[str, Any] | None = None
    nodeSelector: dict[str, str] | None = None
    tolerations: Any = None


class _WorkloadSpec(msgspec.Struct, forbid_unknown_fields=True):
    queueName: str | None = None
    owner: _Owner | None = None
    podSets: list[_PodSetDoc] | None = None
    priority: int | None = None
    priorityClassName: str | None = None
    priorityClassSource: str | None = None


class _WorkloadStatus(msgspec.Struct, forbid_unknown_fields=True):
    admission: _AdmissionDoc | None = None
    admittedAt: Any = None
    conditions: list[dict[str, Any]] | None = None
    flavorScan: Any = None
    admittedFlavors: Any = None
    state: Any = None


class _WorkloadDoc(msgspec.Struct, forbid_unknown_fields=True):
    apiVersion: Any = None
    kind: Any = None
    metadata: _WorkloadMeta | None = None
    spec: _WorkloadSpec | None = None
    status: _WorkloadStatus | None = None


class _WorkloadSpecText(_WorkloadSpec, forbid_unknown_fields=True):
    podSets: msgspec.Raw = _NULL  # type: ignore[assignment]  # the same field, as its text


class _WorkloadStatusText(_WorkloadStatus, forbid_unknown_fields=True):
    admission: _AdmissionText | None = None


class _WorkloadText(_WorkloadDoc, forbid_unknown_fields=True):
    """A Workload decoded from its own text: its pod sets and admission left as their JSON
    text, which the workloads of one shape repeat, each read once (``_pod_sets_of_text``,
    ``typed_admissions.read_admission``)."""

    spec: _WorkloadSpecText | None = None
    status: _WorkloadStatusText | None = None


# Resource and flavor maps as the JSON gave them (the same keys in the same order), to
# the shared map they read as: the workloads of one shape repeat them, so each is read
# once (bounded as the Pods' maps are: ``typed_pods._kept``; emptied with the shared maps).
_AMOUNTS: dict[tuple[bool, tuple[tuple[str, Any], ...]], FrozenDict[str, Any]] = sharing({})
# Pod sets, and a Workload's tuple of them: the workloads of one shape have equal pod
# sets (a large cluster, a few dozen distinct ones), kept once. A pod set's maps are
# shared records (``_shared``: one per distinct map), so a pod set is found by their ids,
# and a tuple of pod sets by the ids of its pod sets; a kept record holds what its key's
# ids name alive. No record is made or hashed to find the one read before.
_POD_SETS: dict[tuple[Any, ...], PodSet] = sharing({})
_POD_SET_TUPLES: dict[tuple[int, ...], tuple[PodSet, ...]] = sharing({})
# A Workload's pod sets (and the same by name) by the JSON text of its ``podSets``.
_PodSetsRead = tuple[tuple[PodSet, ...], dict[str, PodSet]]
_POD_SETS_BY_TEXT: dict[bytes, _PodSetsRead] = sharing({})
_POD_SET_DOCS = msgspec.json.Decoder(list[_PodSetDoc] | None)
_NO_MAP: FrozenDict[str, Any] = FrozenDict()  # an absent map: none made per Workload


def _pod_set(
    name: str, count: int, requests: FrozenDict[str, Any], min_count: int | None,
    node_selector: FrozenDict[str, Any], tolerations: tuple[Toleration, ...],
) -> PodSet:  # fmt: skip
    """The pod set of these values read before, else a new one, kept for the next."""
    key = (name, count, id(requests), min_count, id(node_selector), tolerations)
    found = _POD_SETS.get(key)
    if found is None:
        made = new_pod_set(name, count, requests, min_count, node_selector, tolerations)
        found = _kept(_POD_SETS, key, made)
    return found


def _pod_sets(pod_sets: list[PodSet]) -> tuple[PodSet, ...]:
    """The tuple of these pod sets read before, else a new one, kept for the next."""
    key = tuple(map(id, pod_sets))
    found = _POD_SET_TUPLES.get(key)
    return found if found is not None else _kept(_POD_SET_TUPLES, key, tuple(pod_sets))


def _amounts(mapping: dict[str, Any] | None, *, drop_zero: bool) -> FrozenDict[str, Any]:
    """A resource map as ``Fields.resources`` reads it, shared: the one record of its
    value while the shared maps are kept (the memo is emptied with them, so that equal
    maps given in other orders are one record, which ``_pod_set`` relies on)."""
    key = (drop_zero, tuple(mapping.items()) if mapping else ())
    try:
        found = _AMOUNTS.get(key)
    except TypeError:  # a value that is no quantity (a list, a mapping): the walker says so
        raise _NotPlain from None
    if found is None:
        items: list[tuple[str, Any]] = []
        for resource, value in sorted(key[1]):
            if not resource:
                raise _NotPlain
            amount = parse_quantity(value, resource)
            if amount or not drop_zero:
                items.append((_intern(resource), amount))
        found = _kept(_AMOUNTS, key, _shared(items))
    return found


def _known_keys(items: Any, known: Mapping[str, Any]) -> None:
    """Mappings of a list with no key ``known`` lacks (the Structs above cannot see into them)."""
    if isinstance(items, list) and any(isinstance(item, dict) and item.keys() - known for item in items):
        raise _NotPlain


def _walked(entry: Entry, read: Callable[..., T], *args: Any) -> T:
    """``read(fields, *args)``, a rare part read by the walker's readers; any problem: not plain."""
    fields = Fields(entry)
    found = read(fields, *args)
    if fields.problems:
        raise _NotPlain
    return found


def read_workload(entry: Entry, catalog: Catalog) -> tuple[Workload, list[Problem]]:
    """A Workload read the fast way when it is plain, else by the walker."""
    workload = fast_workload(entry, catalog)
    return (workload, []) if workload is not None else parse_workload(entry, catalog)


def fast_workload(entry: Entry, catalog: Catalog) -> Workload | None:
    """The Workload record of a plain, valid Workload object; ``None`` for the walker.

    The object is a parsed dict, or (from a JSON list, see :func:`text_entry`) its
    own text, decoded here straight into the typed record.
    """
    body = entry.body
    doc = typed_body(body, _WORKLOAD_TEXT, _WorkloadDoc)
    if doc is None:
        return None
    try:
        workload = _workload_of(entry, catalog, doc)
    except (QuantityError, _NotPlain, msgspec.ValidationError):  # the last: a part left as text
        return None
    if type(body) is RawObject:
        body.raw = None
    return workload


def _workload_of(entry: Entry, catalog: Catalog, doc: _WorkloadDoc) -> Workload:
    metadata = doc.metadata or _WorkloadMeta()
    spec = doc.spec or _WorkloadSpec()
    status = doc.status or _WorkloadStatus()
    namespace = _intern(entry.namespace or "default")
    queue, local_queue, problem = resolve_queue(catalog, namespace, _text(spec.queueName))
    if problem is not None:
        raise _NotPlain  # the walker says which
    queue = _intern(queue)

    owner_kind = owner_name = None
    if spec.owner is not None:
        owner_kind, owner_name = _intern(_text(spec.owner.kind)), _text(spec.owner.name)
    elif metadata.ownerReferences is not None:
        references = {"ownerReferences": metadata.ownerReferences}
        owner_kind, owner_name = _walked(entry, workload_owner, references, {})

    pod_sets, by_name = _pod_sets_of_text(entry, spec.podSets)
    source = PRIORITY_CLASS_SOURCES.get(spec.priorityClassSource or "")
    if source is None:
        raise _NotPlain  # an unknown source: the walker says so
    if spec.priority is not None:
        if not -MAX_AMOUNT - 1 <= spec.priority <= MAX_AMOUNT:
            raise _NotPlain
        priority = spec.priority
    elif source == WORKLOAD_PRIORITY_CLASS:
        found = catalog.workload_priority_classes.get(spec.priorityClassName or "")
        if found is None:
            raise _NotPlain  # no name, or an unknown or invalid class: the walker says which
        priority = found.value
    elif not spec.priorityClassName:
        priority = catalog.default_priority
    elif spec.priorityClassName in catalog.priority_classes:
        priority = catalog.priority_classes[spec.priorityClassName].value
    else:
        raise _NotPlain  # an unknown or invalid class: the walker says which

    owned_by_deployment = owner_kind == DEPLOYMENT
    admission = read_admission(status.admission, queue, pod_sets, by_name, catalog, owned_by_deployment)

    evicted = status.conditions is not None and any(
        condition.get("type") == "Evicted" and condition.get("status") in ("True", True)
        for condition in status.conditions
    )
    flavor_scan: Mapping[str, Mapping[str, int]] = _NO_MAP
    if status.flavorScan is not None:
        holder = {"flavorScan": status.flavorScan}
        flavor_scan = _walked(entry, workload_flavor_scan, holder)
    created = metadata.creationTimestamp
    admitted_at = status.admittedAt
    return new_workload(
        namespace=namespace,
        name=entry.name,
        queue=queue,
        pod_sets=pod_sets,
        priority=priority,
        created=(parse_timestamp_once(created) if created is not None else 0) or 0,
        uid=metadata.uid or "",
        owner_kind=owner_kind,
        owner_name=entry.name if owner_name == entry.name else owner_name,  # one text, mostly
        admission=admission,
        admitted_at=parse_timestamp_once(admitted_at) if admitted_at is not None else None,
        evicted=evicted,
        flavor_scan=flavor_scan,
        source=entry.file,
        local_queue=local_queue,
        # Not shared as a Pod's are: a Workload's labels name its own Job, mostly.
        labels=FrozenDict(_strings(metadata.labels)) if metadata.labels else _NO_MAP,
        annotations=FrozenDict(_strings(metadata.annotations)) if metadata.annotations else _NO_MAP,
    )


_WORKLOAD_TEXT = msgspec.json.Decoder(_WorkloadText)


def _pod_sets_of_text(entry: Entry, given: list[_PodSetDoc] | msgspec.Raw | None) -> _PodSetsRead:
    """:func:`_pod_sets_of` the pod sets given, read once per distinct text when given
    as their JSON text (a text that does not read as pod sets raises
    ``msgspec.ValidationError``: :func:`fast_workload` leaves the Workload to the walker)."""
    if type(given) is not msgspec.Raw:
        return _pod_sets_of(entry, given)
    key = bytes(given)
    found = _POD_SETS_BY_TEXT.get(key)
    if found is None:
        found = _kept(_POD_SETS_BY_TEXT, key, _pod_sets_of(entry, _POD_SET_DOCS.decode(given)))
    return found


def _pod_sets_of(entry: Entry, docs: list[_PodSetDoc] | None) -> _PodSetsRead:
    """A Workload's pod sets, and the same by name."""
    pod_sets: list[PodSet] = []
    by_name: dict[str, PodSet] = {}
    for doc_set in docs or _no_pod_sets():
        name = _intern(_text(doc_set.name))  # most are "main"
        count = _count(doc_set.count)
        count = 1 if count is None else count
        min_count = _count(doc_set.minCount)
        if name in by_name or (min_count is not None and min_count > count):
            raise _NotPlain
        if min_count is not None and any(ps.min_count is not None for ps in pod_sets):
            raise _NotPlain  # a second podSet with minCount: the walker reports it
        tolerations: tuple[Toleration, ...] = ()
        if doc_set.tolerations is not None:
            _known_keys(doc_set.tolerations, TOLERATION)
            holder = {"tolerations": doc_set.tolerations}
            tolerations = _walked(entry, Fields.tolerations, holder, "tolerations", "")
        requests = _amounts(doc_set.requests, drop_zero=True)
        node_selector = _shared(_strings(doc_set.nodeSelector))
        pod_set = by_name[name] = _pod_set(
            name, count, requests, min_count, node_selector, tolerations
        )
        pod_sets.append(pod_set)
    return _pod_sets(pod_sets), by_name


class _Header(msgspec.Struct):
    """What the intake reads of an item before knowing its kind."""

    kind: Any = None
    apiVersion: Any = None
    metadata: _PodItemMeta | None = None


_HEADER = msgspec.json.Decoder(_Header)


# Kinds whose items are kept as their text, read typed later: (API group, namespaced).
_READ_FROM_TEXT = {"Workload": ("preemptd.io", True), "Queue": ("preemptd.io", False), "Node": ("", False)}
_NOT_READ: tuple[str | None, bool] = (None, False)


def text_entry(file: str, raw: msgspec.Raw, item: Any = None) -> Entry | None:
    """The entry of a Workload, Queue or Node item the intake would take as it is; else ``None``.

    Its body is its own text (a copy: the file's text is freed once all items are
    read), read typed once the catalog is known (``fast_workload``, ``fast_queue``, ``fast_node``), or
    decoded for the walker. A Workload's parsed dict is several times its text, and the
    dicts of a large cluster's Workloads, made between its Pods, would be freed between
    them, leaving the heap fragmented. The checks are the intake's, as in ``pod_entry``,
    made on ``item`` when the intake decoded the item's header already.
    """
    if item is None:
        try:
            item = _HEADER.decode(raw)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None
    kind = item.kind
    group, namespaced = _READ_FROM_TEXT.get(kind, _NOT_READ) if type(kind) is str else _NOT_READ
    key = None if group is None else intake_key(item, kind, group)
    if key is None:
        return None
    namespace, name = key  # a Workload's name interned: its Pods' labels name it too
    return new_entry(file, kind, namespace if namespaced else None, _intern(name), RawObject(raw.copy(), None))


def _no_pod_sets() -> list[_PodSetDoc]:
    raise _NotPlain  # at least one is required
