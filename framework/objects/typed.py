"""Typed decoding: the common, valid object read in one step (private to :mod:`objects`).

Most objects of a large cluster are Pods written by a controller, all alike and all
valid. For them the located-field walker (:mod:`fields`) does far more than needed: it
builds a path string for every field it reads in case it has to report one. Here such an
object is converted by msgspec into a typed record (a Struct per section, unknown fields
ignored as the walker ignores them), then the few checks the types cannot express are
made (integer range, quantities, timestamps, non-empty keys).

The fast reader never reports anything: it returns ``None`` for an object it is not sure
about (a field of an unexpected type, a malformed quantity, anything), and the walker
reads that object instead, so every located error is exactly the walker's. On what it
accepts, its record equals the walker's (``tests/framework/test_typed_decoding.py``
holds the two readers to that over the examples, the bad-input corpus and the generated
clusters).

Repeated texts are shared: namespaces, node names and label keys and values are
interned, and identical request maps and label maps are one object, which is most of
the memory a Pod record takes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from ..model import (
    DELETION_COST_ANNOTATION,
    DEPLOYMENT,
    FORCE_DELETE_ANNOTATION,
    WORKLOAD_LABEL,
    Admission,
    FrozenDict,
    Node,
    Pod,
    PodSet,
    PodSetAdmission,
    Taint,
    Toleration,
    Workload,
)
from ..quantity import MAX_AMOUNT, QuantityError, parse_quantity, parse_timestamp
from .fields import Catalog, Entry, Fields, Problem
from .nodes import parse_node, parse_pod
from .workloads import parse_workload
from .workloads import read_flavor_scan as workload_flavor_scan
from .workloads import read_owner as workload_owner

__all__ = [
    "RawItems",
    "RawObject",
    "decode_items",
    "decode_json",
    "fast_node",
    "fast_pod",
    "fast_workload",
    "pod_entry",
    "read_node",
    "read_pod",
    "read_workload",
    "workload_entry",
]

T = TypeVar("T")

_intern = sys.intern


class _Requests(msgspec.Struct):
    requests: dict[str, Any] | None = None


class _Container(msgspec.Struct):
    resources: _Requests | None = None


class _PodMeta(msgspec.Struct):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creationTimestamp: Any = None
    deletionTimestamp: Any = None


class _PodSpec(msgspec.Struct):
    nodeName: str | None = None
    priority: int | None = None
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None


class _PodStatus(msgspec.Struct):
    phase: str | None = None


class _PodDoc(msgspec.Struct):
    metadata: _PodMeta | None = None
    spec: _PodSpec | None = None
    status: _PodStatus | None = None


class _NotPlain(Exception):
    """The object needs the walker (a check below failed)."""


# One shared record per distinct map: pods of one workload carry the same requests and
# the same labels, so a cluster of 100k pods holds a few thousand distinct maps.
_SHARED_BOUND = 65_536
_SHARED: dict[tuple[tuple[str, Any], ...], FrozenDict[str, Any]] = {}


def _shared(items: list[tuple[str, Any]]) -> FrozenDict[str, Any]:
    key = tuple(items)
    found = _SHARED.get(key)
    if found is None:
        if len(_SHARED) >= _SHARED_BOUND:
            _SHARED.clear()
        found = _SHARED[key] = FrozenDict(items)
    return found


def _strings(mapping: dict[str, str] | None) -> list[tuple[str, str]]:
    """A label or annotation map, sorted and interned, as ``Fields.string_map`` reads it."""
    if not mapping:
        return []
    items = sorted(mapping.items())
    if not items[0][0]:
        raise _NotPlain  # an empty key sorts first
    return [(_intern(key), _intern(value)) for key, value in items]


def _requests(containers: list[_Container] | None, total: dict[str, int], *, init: bool) -> None:
    for container in containers or ():
        resources = container.resources
        requests = resources.requests if resources is not None else None
        for resource, value in (requests or {}).items():
            if not resource:
                raise _NotPlain
            amount = parse_quantity(value, resource)
            if not amount:
                continue  # drop_zero, as the walker reads container requests
            if init:
                total[resource] = max(total.get(resource, 0), amount)
            else:
                total[resource] = total.get(resource, 0) + amount


def read_pod(entry: Entry) -> tuple[Pod, list[Problem]]:
    """A Pod read the fast way when it is plain, else by the walker (with its problems)."""
    pod = fast_pod(entry)
    return (pod, []) if pod is not None else parse_pod(entry)


def fast_pod(entry: Entry) -> Pod | None:
    """The Pod record of a plain, valid Pod object; ``None`` when the walker must read it."""
    body = entry.body
    if type(body) is RawObject:
        return body.pod
    try:
        doc = msgspec.convert(body, _PodDoc)
    except msgspec.ValidationError:
        return None
    return _pod_of(entry.file, entry.namespace, entry.name, doc)


def _pod_of(file: str, namespace: str | None, name: str, doc: _PodDoc | _PodItem) -> Pod | None:
    try:
        metadata = doc.metadata or _PodMeta()
        spec = doc.spec or _PodSpec()
        labels = _strings(metadata.labels)
        annotations = dict(_strings(metadata.annotations))
        deletion_cost = 0
        if DELETION_COST_ANNOTATION in annotations:
            text = annotations[DELETION_COST_ANNOTATION]
            if not (text.isascii() and text.isdigit()) or len(text) >= 19:
                raise _NotPlain  # signs, blanks, large values: the walker decides
            deletion_cost = int(text)
        priority = spec.priority
        if priority is not None and not -MAX_AMOUNT - 1 <= priority <= MAX_AMOUNT:
            raise _NotPlain
        total: dict[str, int] = {}
        _requests(spec.containers, total, init=False)
        _requests(spec.initContainers, total, init=True)
        created = metadata.creationTimestamp
        created_ms = parse_timestamp(created) if created is not None else 0
    except (QuantityError, _NotPlain):
        return None
    namespace = _intern(namespace or "default")
    node_name = _intern(spec.nodeName) if spec.nodeName else None
    phase = doc.status.phase if doc.status is not None else None
    workload_name = metadata.labels.get(WORKLOAD_LABEL) if metadata.labels else None
    return Pod(
        namespace=namespace,
        name=name,
        requests=_shared(sorted(total.items())),
        node_name=node_name,
        workload=_intern(f"{namespace}/{workload_name}") if workload_name else None,
        priority=priority,
        created=created_ms or 0,
        deleting=metadata.deletionTimestamp is not None,
        force_delete=annotations.get(FORCE_DELETE_ANNOTATION) == "true",
        deletion_cost=deletion_cost,
        phase=_intern(phase) if phase else ("Running" if node_name else "Pending"),
        labels=_shared(labels),
        source=file,
    )


# --- straight from JSON text ---------------------------------------------------------


def _json_int(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def decode_json(text: str | bytes) -> Any:
    """One JSON value: msgspec's decoder, else the standard one for its exact answer.

    msgspec reads a valid document into the same values as ``json.loads`` in a fraction
    of the time. Whatever it refuses (malformed text, ``NaN``, an integer of thousands of
    digits, a lone surrogate) goes to ``json.loads``, which either reads it the way the
    files backend always has (an integer too long to convert stays text) or raises the
    error that is reported.
    """
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return json.loads(text, parse_int=_json_int)


class _Envelope(msgspec.Struct):
    """A ``kind: ...List`` document, its items left undecoded."""

    kind: str
    items: list[msgspec.Raw]


class _PodItemMeta(_PodMeta):
    name: Any = None
    namespace: Any = None


class _PodItem(msgspec.Struct):
    kind: Any = None
    apiVersion: Any = None
    metadata: _PodItemMeta | None = None
    spec: _PodSpec | None = None
    status: _PodStatus | None = None


_POD_ITEM = msgspec.json.Decoder(_PodItem)


@dataclass(frozen=True, slots=True)
class RawItems:
    """The objects of a JSON list document, each still its text.

    ``at`` is where the list is in the document: ``""`` for a top-level list,
    ``"items"`` for a ``kind: List``. See :func:`decode_items`. The items are read
    once: :meth:`take` hands them over and lets go of them, so that the file's text
    they point into is freed as soon as the objects are read.
    """

    at: str
    items: list[msgspec.Raw]

    def take(self) -> list[msgspec.Raw]:
        items = self.items[:]
        self.items.clear()
        return items


def decode_items(text: str) -> Any:
    """A JSON document whose objects are left as text when it is a list of them.

    A top-level list, or a ``kind: ...List`` with an ``items`` list, becomes
    :class:`RawItems`; anything else is decoded whole by :func:`decode_json`. The
    intake (``objects._Intake``) reads a plain Pod item as a typed record without ever
    building its dict, and decodes every other item with :func:`decode_json`.
    """
    try:
        found = msgspec.json.decode(text, type=list[msgspec.Raw] | _Envelope)
    except (msgspec.DecodeError, RecursionError):
        return decode_json(text)
    if isinstance(found, list):
        return RawItems("", found)
    if found.kind and found.kind.endswith("List"):
        return RawItems("items", found.items)
    return decode_json(text)


class RawObject(Mapping[str, Any]):
    """An object kept as its JSON text, with its record when it was plain (``pod``);
    read as a mapping, it is decoded on first use (by the walker, when it was not)."""

    __slots__ = ("_decoded", "pod", "raw")

    def __init__(self, raw: msgspec.Raw | None, pod: Pod | None) -> None:
        self.raw = raw  # None once the record is read: nothing will decode it
        self.pod = pod
        self._decoded: dict[str, Any] | None = None

    def _mapping(self) -> dict[str, Any]:
        if self._decoded is None:
            value = decode_json(bytes(self.raw)) if self.raw is not None else {}
            self._decoded = value if isinstance(value, dict) else {}
        return self._decoded

    def __getitem__(self, key: str) -> Any:
        return self._mapping()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())


def pod_entry(file: str, raw: msgspec.Raw) -> Entry | None:
    """The entry of a Pod item that the intake would take as it is, typed; else ``None``.

    The checks are the intake's for a Pod (kind, API group, a name, a namespace);
    anything it would report or skip goes its way instead.
    """
    try:
        item = _POD_ITEM.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    if item.kind != "Pod" or item.metadata is None:
        return None
    api_version = item.apiVersion
    if api_version is not None and not (
        isinstance(api_version, str) and not api_version.rpartition("/")[0]
    ):
        return None
    name, namespace = item.metadata.name, item.metadata.namespace
    if not isinstance(name, str) or not name:
        return None
    if namespace is None or namespace == "":
        namespace = "default"
    elif not isinstance(namespace, str):
        return None
    namespace = _intern(namespace)
    # Read now, while its typed record is at hand: the record is all that is kept.
    pod = _pod_of(file, namespace, name, item)
    return Entry(file, "Pod", namespace, name, RawObject(None if pod else raw, pod))


# --- Workloads and Nodes, converted from their parsed dicts --------------------------
#
# As for a Pod: the record of a plain, valid object, or ``None`` and the walker reads it.
# A Workload also refers to other objects (its PriorityClass, the flavors of its
# admission); one whose reference the catalog does not resolve goes to the walker too.
# The rare, richer parts (tolerations, taints, a flavor scan, owner references) are read
# by the walker's own field readers, and any problem they find sends the whole object to
# the walker, so that it reports every problem of the object as it always has.


class _Owner(msgspec.Struct):
    kind: str | None = None
    name: str | None = None


class _WorkloadMeta(msgspec.Struct):
    creationTimestamp: Any = None
    uid: str | None = None
    ownerReferences: Any = None


class _PodSetDoc(msgspec.Struct):
    name: str | None = None
    count: int | None = None
    minCount: int | None = None
    requests: dict[str, Any] | None = None
    nodeSelector: dict[str, str] | None = None
    tolerations: Any = None


class _WorkloadSpec(msgspec.Struct):
    queueName: str | None = None
    owner: _Owner | None = None
    podSets: list[_PodSetDoc] | None = None
    priority: int | None = None
    priorityClassName: str | None = None


class _AdmittedPodSet(msgspec.Struct):
    name: str | None = None
    count: int | None = None
    flavors: dict[str, str] | None = None


class _AdmissionDoc(msgspec.Struct):
    queue: str | None = None
    podSets: list[_AdmittedPodSet] | None = None


class _WorkloadStatus(msgspec.Struct):
    admission: _AdmissionDoc | None = None
    admittedAt: Any = None
    conditions: list[dict[str, Any]] | None = None
    flavorScan: Any = None


class _WorkloadDoc(msgspec.Struct):
    metadata: _WorkloadMeta | None = None
    spec: _WorkloadSpec | None = None
    status: _WorkloadStatus | None = None


def _text(value: str | None) -> str:
    """A required, non-empty text field."""
    if not value:
        raise _NotPlain
    return value


def _count(value: int | None) -> int | None:
    """An optional integer of at least 1 that fits 64 bits."""
    if value is not None and not 1 <= value <= MAX_AMOUNT:
        raise _NotPlain
    return value


def _amounts(mapping: dict[str, Any] | None, *, drop_zero: bool) -> FrozenDict[str, Any]:
    """A resource map as ``Fields.resources`` reads it, shared."""
    items: list[tuple[str, Any]] = []
    for resource, value in sorted((mapping or {}).items()):
        if not resource:
            raise _NotPlain
        amount = parse_quantity(value, resource)
        if amount or not drop_zero:
            items.append((_intern(resource), amount))
    return _shared(items)


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

    The object is a parsed dict, or (from a JSON list, see :func:`workload_entry`) its
    own text, decoded here straight into the typed record.
    """
    body = entry.body
    try:
        if type(body) is RawObject and body.raw is not None:
            doc = _WORKLOAD_DOC.decode(body.raw)
        elif type(body) is dict:
            doc = msgspec.convert(body, _WorkloadDoc)
        else:
            return None
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    try:
        return _workload_of(entry, catalog, doc)
    except (QuantityError, _NotPlain):
        return None


def _workload_of(entry: Entry, catalog: Catalog, doc: _WorkloadDoc) -> Workload:
    metadata = doc.metadata or _WorkloadMeta()
    spec = doc.spec or _WorkloadSpec()
    status = doc.status or _WorkloadStatus()
    queue = _intern(_text(spec.queueName))

    owner_kind = owner_name = None
    if spec.owner is not None:
        owner_kind, owner_name = _text(spec.owner.kind), _text(spec.owner.name)
    elif metadata.ownerReferences is not None:
        references = {"ownerReferences": metadata.ownerReferences}
        owner_kind, owner_name = _walked(entry, workload_owner, references, {})

    pod_sets: list[PodSet] = []
    by_name: dict[str, PodSet] = {}
    for doc_set in spec.podSets or _no_pod_sets():
        name = _text(doc_set.name)
        count = _count(doc_set.count)
        count = 1 if count is None else count
        min_count = _count(doc_set.minCount)
        if name in by_name or (min_count is not None and min_count > count):
            raise _NotPlain
        tolerations: tuple[Toleration, ...] = ()
        if doc_set.tolerations is not None:
            holder = {"tolerations": doc_set.tolerations}
            tolerations = _walked(entry, Fields.tolerations, holder, "tolerations", "")
        pod_set = by_name[name] = PodSet(
            name=name,
            count=count,
            requests=_amounts(doc_set.requests, drop_zero=True),
            min_count=min_count,
            node_selector=_shared(_strings(doc_set.nodeSelector)),
            tolerations=tolerations,
        )
        pod_sets.append(pod_set)

    if spec.priority is not None:
        if not -MAX_AMOUNT - 1 <= spec.priority <= MAX_AMOUNT:
            raise _NotPlain
        priority = spec.priority
    elif not spec.priorityClassName:
        priority = catalog.default_priority
    elif spec.priorityClassName in catalog.priority_classes:
        priority = catalog.priority_classes[spec.priorityClassName].value
    else:
        raise _NotPlain  # an unknown or invalid class: the walker says which

    owned_by_deployment = owner_kind == DEPLOYMENT
    admission = None
    if status.admission is not None:
        admission = _admission_of(status.admission, queue, by_name, catalog, owned_by_deployment)

    evicted = any(
        condition.get("type") == "Evicted" and condition.get("status") in ("True", True)
        for condition in status.conditions or ()
    )
    flavor_scan: Mapping[str, Mapping[str, int]] = {}
    if status.flavorScan is not None:
        holder = {"flavorScan": status.flavorScan}
        flavor_scan = _walked(entry, workload_flavor_scan, holder)
    created = metadata.creationTimestamp
    admitted_at = status.admittedAt
    return Workload(
        namespace=_intern(entry.namespace or "default"),
        name=entry.name,
        queue=queue,
        pod_sets=tuple(pod_sets),
        priority=priority,
        created=(parse_timestamp(created) if created is not None else 0) or 0,
        uid=metadata.uid or "",
        owner_kind=owner_kind,
        owner_name=owner_name,
        admission=admission,
        admitted_at=parse_timestamp(admitted_at) if admitted_at is not None else None,
        evicted=evicted,
        flavor_scan=flavor_scan,
        source=entry.file,
    )


_WORKLOAD_DOC = msgspec.json.Decoder(_WorkloadDoc)


class _Header(msgspec.Struct):
    """What the intake reads of an item before knowing its kind."""

    kind: Any = None
    apiVersion: Any = None
    metadata: _PodItemMeta | None = None


_HEADER = msgspec.json.Decoder(_Header)


def workload_entry(file: str, raw: msgspec.Raw) -> Entry | None:
    """The entry of a Workload item that the intake would take as it is; else ``None``.

    Its body is its own text (a copy: the file's text is freed once all items are
    read), read typed when the catalog is known (:func:`fast_workload`), or decoded
    for the walker. A Workload's parsed dict is several times its text, and the
    dicts of a large cluster's Workloads, made between its Pods, would be freed
    between them, leaving the heap fragmented. The checks are the intake's, as in
    :func:`pod_entry`.
    """
    try:
        item = _HEADER.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    if item.kind != "Workload" or item.metadata is None:
        return None
    api_version = item.apiVersion
    if api_version is not None and not (
        isinstance(api_version, str) and api_version.rpartition("/")[0] == "preemptd.io"
    ):
        return None
    name, namespace = item.metadata.name, item.metadata.namespace
    if not isinstance(name, str) or not name:
        return None
    if namespace is None or namespace == "":
        namespace = "default"
    elif not isinstance(namespace, str):
        return None
    return Entry(file, "Workload", _intern(namespace), name, RawObject(raw.copy(), None))


def _no_pod_sets() -> list[_PodSetDoc]:
    raise _NotPlain  # at least one is required


def _admission_of(
    doc: _AdmissionDoc,
    queue: str,
    by_name: Mapping[str, PodSet],
    catalog: Catalog,
    owned_by_deployment: bool,
) -> Admission:
    assigned: list[PodSetAdmission] = []
    seen: set[str] = set()
    for doc_set in doc.podSets or _no_admitted_pod_sets():
        name = _text(doc_set.name)
        spec_pod_set = by_name.get(name)
        if spec_pod_set is None or name in seen:
            raise _NotPlain
        seen.add(name)
        count = _count(doc_set.count)
        if count is None:
            count = spec_pod_set.count
        elif count > spec_pod_set.count and not owned_by_deployment:
            raise _NotPlain
        flavors = _strings(doc_set.flavors)
        for _, flavor in flavors:
            if catalog.flavor_problem(flavor) is not None:
                raise _NotPlain
        if spec_pod_set.requests.keys() - {resource for resource, _ in flavors}:
            raise _NotPlain
        assigned.append(PodSetAdmission(name, count, _shared(flavors)))
    return Admission(_intern(doc.queue or queue), tuple(assigned))


def _no_admitted_pod_sets() -> list[_AdmittedPodSet]:
    raise _NotPlain  # at least one is required


class _NodeMeta(msgspec.Struct):
    labels: dict[str, str] | None = None


class _NodeSpec(msgspec.Struct):
    unschedulable: bool | None = None
    taints: Any = None


class _NodeStatus(msgspec.Struct):
    allocatable: dict[str, Any] | None = None


class _NodeDoc(msgspec.Struct):
    metadata: _NodeMeta | None = None
    spec: _NodeSpec | None = None
    status: _NodeStatus | None = None


def read_node(entry: Entry) -> tuple[Node, list[Problem]]:
    """A Node read the fast way when it is plain, else by the walker."""
    node = fast_node(entry)
    return (node, []) if node is not None else parse_node(entry)


def fast_node(entry: Entry) -> Node | None:
    """The Node record of a plain, valid Node object; ``None`` for the walker."""
    if type(entry.body) is not dict:
        return None
    try:
        doc = msgspec.convert(entry.body, _NodeDoc)
    except msgspec.ValidationError:
        return None
    try:
        metadata = doc.metadata or _NodeMeta()
        spec = doc.spec or _NodeSpec()
        status = doc.status or _NodeStatus()
        taints: tuple[Taint, ...] = ()
        if spec.taints is not None:
            holder = {"taints": spec.taints}
            taints = _walked(entry, Fields.taints, holder, "taints", "")
        return Node(
            name=_intern(entry.name),
            labels=_shared(_strings(metadata.labels)),
            allocatable=_amounts(status.allocatable, drop_zero=False),
            unschedulable=bool(spec.unschedulable),
            taints=taints,
        )
    except (QuantityError, _NotPlain):
        return None
