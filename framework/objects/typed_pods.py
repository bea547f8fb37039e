"""Pods read the fast way (private to :mod:`objects`): see :mod:`.typed` for the design.

A large cluster is mostly Pods, all alike: their label maps and container requests
repeat per workload, so each distinct map (as the JSON gave it: the same keys in the
same order) is read once while a snapshot is read, and the records are built without
the dataclass constructor's keyword handling (:func:`_new_pod`), which cost more than
the rest of reading a Pod.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..model import (
    DELETION_COST_ANNOTATION,
    FORCE_DELETE_ANNOTATION,
    WORKLOAD_LABEL,
    FrozenDict,
    Pod,
)
from ..quantity import MAX_AMOUNT, QuantityError, parse_quantity, parse_timestamp
from .fields import Entry, Problem
from .nodes import parse_pod
from .typed import RawObject, _intern, _NotPlain, _shared, _strings, intake_key

__all__ = ["fast_pod", "forget_read_maps", "pod_entry", "read_pod"]


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


# Label maps and container requests as the JSON gave them (same keys in the same order),
# to what they read as: pods of one workload repeat them, so each is read once.
_READ_BOUND = 4_096  # pods of one workload come together: a few thousand maps are enough
_LABELS: dict[tuple[tuple[str, str], ...], FrozenDict[str, Any]] = {}
_AMOUNTS: dict[tuple[tuple[str, Any], ...], tuple[tuple[str, int], ...]] = {}


def forget_read_maps() -> None:
    """Drop the maps kept while reading (their keys hold the input's own strings)."""
    _LABELS.clear()
    _AMOUNTS.clear()


def _label_map(mapping: dict[str, str] | None) -> FrozenDict[str, Any]:
    """``_shared(_strings(mapping))``, kept per map as given."""
    key = tuple(mapping.items()) if mapping else ()
    found = _LABELS.get(key)
    if found is None:
        if len(_LABELS) >= _READ_BOUND:
            _LABELS.clear()
        found = _LABELS[key] = _shared(_strings(mapping))
    return found


def _amounts(requests: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """One container's non-zero requests, parsed; kept per map as given."""
    key = tuple(requests.items())
    found = _AMOUNTS.get(key)
    if found is None:
        parsed = []
        for resource, value in key:
            if not resource:
                raise _NotPlain
            amount = parse_quantity(value, resource)
            if amount:  # drop_zero, as the walker reads container requests
                parsed.append((resource, amount))
        if len(_AMOUNTS) >= _READ_BOUND:
            _AMOUNTS.clear()
        found = _AMOUNTS[key] = tuple(parsed)
    return found


def _requests(containers: list[_Container] | None, total: dict[str, int], *, init: bool) -> None:
    for container in containers or ():
        resources = container.resources
        requests = resources.requests if resources is not None else None
        if not requests:
            continue
        for resource, amount in _amounts(requests):
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
        labels = _label_map(metadata.labels)
        annotations = metadata.annotations or {}
        if "" in annotations:
            raise _NotPlain  # the walker names the empty key
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
    return _new_pod(
        namespace,
        name,
        _shared(sorted(total.items())),
        node_name,
        _intern(f"{namespace}/{workload_name}") if workload_name else None,
        priority,
        created_ms or 0,
        metadata.deletionTimestamp is not None,
        annotations.get(FORCE_DELETE_ANNOTATION) == "true",
        deletion_cost,
        _intern(phase) if phase else ("Running" if node_name else "Pending"),
        labels,
        file,
    )


_new = object.__new__
_set = object.__setattr__


def _new_pod(
    namespace: str,
    name: str,
    requests: FrozenDict[str, int],
    node_name: str | None,
    workload: str | None,
    priority: int | None,
    created: int,
    deleting: bool,
    force_delete: bool,
    deletion_cost: int,
    phase: str,
    labels: FrozenDict[str, str],
    source: str,
) -> Pod:
    """The Pod ``Pod(...)`` makes of these values (its maps already FrozenDicts, so its
    ``__post_init__`` changes nothing), field by field in its order."""
    pod = _new(Pod)
    _set(pod, "namespace", namespace)
    _set(pod, "name", name)
    _set(pod, "requests", requests)
    _set(pod, "node_name", node_name)
    _set(pod, "workload", workload)
    _set(pod, "priority", priority)
    _set(pod, "created", created)
    _set(pod, "deleting", deleting)
    _set(pod, "force_delete", force_delete)
    _set(pod, "deletion_cost", deletion_cost)
    _set(pod, "phase", phase)
    _set(pod, "labels", labels)
    _set(pod, "source", source)
    return pod


def pod_entry(file: str, raw: msgspec.Raw) -> Entry | None:
    """The entry of a Pod item that the intake would take as it is, typed; else ``None``.

    The checks are the intake's for a Pod (kind, API group, a name, a namespace);
    anything it would report or skip goes its way instead.
    """
    try:
        item = _POD_ITEM.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    key = intake_key(item, "Pod", "")
    if key is None:
        return None
    namespace, name = key
    # Read now, while its typed record is at hand: the record is all that is kept.
    pod = _pod_of(file, namespace, name, item)
    return Entry(file, "Pod", namespace, name, RawObject(None if pod else raw, pod))
