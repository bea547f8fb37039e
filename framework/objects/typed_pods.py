"""Pods read the fast way (private to :mod:`objects`): see :mod:`.typed` for the design.

A large cluster is mostly Pods, all alike: their label maps, annotations and container
requests repeat per workload. A Pod item of a JSON list (:func:`pod_item`) is decoded
with those maps left as their JSON text, and each distinct text is read once while a
snapshot is read; what differs from Pod to Pod (its name, node and phase) is all that is
decoded per Pod. A Pod converted from a parsed dict (:func:`fast_pod`) has its maps
read once per distinct map as the dict gave it (the same keys in the same order). Both
build the record as its twin (:mod:`.records`), without the dataclass constructor's
keyword handling and calls, which cost more than the rest of reading a Pod.
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
    PodFacts,
)
from ..quantity import MAX_AMOUNT, QuantityError, parse_quantity, parse_timestamp
from .fields import Entry, Problem
from .nodes import parse_pod
from .records import builder, twin
from .typed import RawObject, _intern, _NotPlain, _shared, _strings, intake_key

__all__ = ["ITEM", "ITEM_ERRORS", "LastMaps", "decode_item", "fast_pod", "forget_read_maps", "pod_item", "pod_of_item", "read_pod"]


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


_NULL = msgspec.Raw(b"null")
"""An absent map of a Pod item: read as JSON ``null`` is."""


# The Structs an item is decoded into hold only texts, numbers and Raws, and live for
# the one item: they are not tracked by the cyclic collector (``gc=False``).


class _ItemMeta(msgspec.Struct, gc=False):
    """A Pod item's metadata, its maps left as their JSON text (see the module docstring)."""

    name: Any = None
    namespace: Any = None
    labels: msgspec.Raw = _NULL
    annotations: msgspec.Raw = _NULL
    creationTimestamp: Any = None
    deletionTimestamp: Any = None


class _ItemSpec(msgspec.Struct, gc=False):
    nodeName: str | None = None
    priority: int | None = None
    containers: msgspec.Raw = _NULL
    initContainers: msgspec.Raw = _NULL


class _ItemStatus(msgspec.Struct, gc=False):
    phase: str | None = None


class _Item(msgspec.Struct, gc=False):
    """What :func:`decode_item` reads of an item before it knows its kind."""

    kind: Any = None
    apiVersion: Any = None
    metadata: _ItemMeta | None = None
    spec: _ItemSpec | None = None
    status: _ItemStatus | None = None


ITEM = _ITEM = msgspec.json.Decoder(_Item)  # what the intake reads of every item of a list
ITEM_ERRORS = (msgspec.ValidationError, msgspec.DecodeError)  # ITEM.decode: not such an item
_STRING_MAP = msgspec.json.Decoder(dict[str, str] | None)
_CONTAINERS = msgspec.json.Decoder(list[_Container] | None)
_NO_SPEC = _ItemSpec()
_new_pod = builder(Pod)
_new_facts = builder(PodFacts)
_PodTwin = twin(Pod)  # written in place by pod_of_item (see .records)


# Label maps and container requests as the JSON gave them (same keys in the same order),
# to what they read as: pods of one workload repeat them, so each is read once. The
# ``_ITEM_*`` maps do the same for the JSON text of a Pod item's maps.
_READ_BOUND = 4_096  # pods of one workload come together: a few thousand maps are enough
_LABELS: dict[tuple[tuple[str, str], ...], FrozenDict[str, Any]] = {}
_AMOUNTS: dict[tuple[tuple[str, Any], ...], tuple[tuple[str, int], ...]] = {}
_ITEM_LABELS: dict[tuple[str, bytes], tuple[FrozenDict[str, str], str | None]] = {}
_ITEM_REQUESTS: dict[tuple[bytes, bytes], FrozenDict[str, int]] = {}
_ITEM_ANNOTATIONS: dict[bytes, tuple[bool, int]] = {}
_FACTS: dict[tuple[Any, ...], PodFacts] = {}
_TAILS: dict[str, str] = {}  # the ends of Pod names, each text once
_NO_ANNOTATIONS = (False, 0)  # (force delete, deletion cost)


def forget_read_maps() -> None:
    """Drop the maps kept while reading (their keys hold the input's own strings)."""
    for kept in (_LABELS, _AMOUNTS, _ITEM_LABELS, _ITEM_REQUESTS, _ITEM_ANNOTATIONS, _FACTS, _TAILS):
        kept.clear()


def _kept(kept: dict[Any, Any], key: Any, value: Any) -> Any:
    """``kept[key] = value`` in a map of at most :data:`_READ_BOUND` entries; ``value``."""
    if len(kept) >= _READ_BOUND:
        kept.clear()
    kept[key] = value
    return value


def _label_map(mapping: dict[str, str] | None) -> FrozenDict[str, Any]:
    """``_shared(_strings(mapping))``, kept per map as given."""
    key = tuple(mapping.items()) if mapping else ()
    found = _LABELS.get(key)
    if found is None:
        found = _kept(_LABELS, key, _shared(_strings(mapping)))
    return found


def _amounts(requests: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """One container's non-zero requests, parsed; kept per map as given."""
    key = tuple(requests.items())
    try:
        found = _AMOUNTS.get(key)
    except TypeError:  # a value that is no quantity (a list, a mapping): the walker says so
        raise _NotPlain from None
    if found is None:
        parsed = []
        for resource, value in key:
            if not resource:
                raise _NotPlain
            amount = parse_quantity(value, resource)
            if amount:  # drop_zero, as the walker reads container requests
                parsed.append((resource, amount))
        found = _kept(_AMOUNTS, key, tuple(parsed))
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


def _pod_of(file: str, namespace: str | None, name: str, doc: _PodDoc) -> Pod | None:
    try:
        metadata = doc.metadata or _PodMeta()
        spec = doc.spec or _PodSpec()
        labels = _label_map(metadata.labels)
        force_delete, deletion_cost = _annotations(metadata.annotations)
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
    cut = name.rfind("-") + 1
    phase = _intern(phase) if phase else ("Running" if node_name else "Pending")
    workload = _intern(f"{namespace}/{workload_name}") if workload_name else None
    deleting = metadata.deletionTimestamp is not None
    facts = (namespace, workload, priority, created_ms or 0, labels, force_delete, deletion_cost, phase, file, deleting, name[:cut])
    return _new_pod(_tail(name[cut:]), _shared(sorted(total.items())), node_name, _facts(facts))


def _facts(values: tuple[Any, ...]) -> PodFacts:
    """The one record of these values, given in the order of :class:`~..model.PodFacts`.
    Its label map is a shared record, looked up by identity (a kept record holds its own
    alive), so that no map is hashed."""
    key = (*values[:4], id(values[4]), *values[5:])
    found: PodFacts | None = _FACTS.get(key)
    return found if found is not None else _kept(_FACTS, key, _new_facts(*values))


def _tail(text: str) -> str:
    """``text``, as the one string of its value read before when there is one (the end of
    a name: ``pod_of_item`` looks it up first itself)."""
    found = _TAILS.get(text)
    return found if found is not None else _kept(_TAILS, text, text)


def _annotations(annotations: dict[str, str] | None) -> tuple[bool, int]:
    """What a Pod's annotations say: (force delete, deletion cost)."""
    if not annotations:
        return _NO_ANNOTATIONS
    if "" in annotations:
        raise _NotPlain  # the walker names the empty key
    deletion_cost = 0
    if DELETION_COST_ANNOTATION in annotations:
        text = annotations[DELETION_COST_ANNOTATION]
        if not (text.isascii() and text.isdigit()) or len(text) >= 19:
            raise _NotPlain  # signs, blanks, large values: the walker decides
        deletion_cost = int(text)
    return annotations.get(FORCE_DELETE_ANNOTATION) == "true", deletion_cost


def decode_item(raw: msgspec.Raw) -> _Item | None:
    """What the intake reads of an item of a JSON list before it knows its kind; ``None``
    when the item does not decode so (not an object, a field of another type)."""
    try:
        return _ITEM.decode(raw)
    except ITEM_ERRORS:
        return None


def pod_item(file: str, raw: msgspec.Raw) -> Pod | Entry | None:
    """A Pod item of a JSON list: its record when it is plain, its entry (for the walker)
    when the intake takes it as it is but it is not plain; ``None`` for any other item."""
    item = decode_item(raw)
    if item is None or item.kind != "Pod":
        return None
    return pod_of_item(file, raw, item, LastMaps())


_UNSEEN = msgspec.Raw(b"")  # no JSON value has this text
_LEAST = -MAX_AMOUNT - 1


class LastMaps:
    """What the last Pod items read, by their texts. The Pods of one workload come one
    after another and repeat their maps and creation time, so most items
    compare their texts with these and look nothing up. One per reading (the intake's);
    the map texts are copies, not views of the file's text.

    ``record`` is the last Pod's record, and the texts and values read last are the ones
    it was built from (an item that is not read into a record leaves ``labels_text``
    unseen). So a Pod whose every text compares equal, with the same stem, phase,
    deletion mark and file, takes that record without making the tuple of its values."""

    __slots__ = (
        "annotations", "containers", "created", "created_ms", "init", "labels", "labels_namespace",
        "labels_text", "priority", "record", "requests", "workload",
    )  # fmt: skip

    def __init__(self) -> None:
        self.labels_namespace = ""  # interned (``intake_key``, which takes it for an equal namespace)
        self.labels_text = self.containers = self.init = _UNSEEN
        self.labels: FrozenDict[str, str] = FrozenDict()
        self.workload: str | None = None
        self.requests: FrozenDict[str, int] = FrozenDict()
        self.created = ""
        self.created_ms = 0
        self.priority: int | None = None
        self.annotations = _NO_ANNOTATIONS
        self.record = PodFacts()  # the last Pod's


def pod_of_item(file: str, raw: msgspec.Raw, item: _Item, last: LastMaps) -> Pod | Entry | None:
    """:func:`pod_item` of an item :func:`decode_item` read, of kind ``Pod``; ``last``:
    what the Pod items before it read (see :class:`LastMaps`).

    The checks are the intake's for a Pod (:func:`~.typed.intake_key`: API group, a
    name, a namespace); anything it would report or skip goes its way instead. The maps of the Pod are read from their text, once per distinct text
    (see the module docstring); the record is all that is kept, built as a twin (see
    :mod:`.records`) without ``__post_init__``: its maps are FrozenDicts already.
    """
    key = intake_key(item, "Pod", "", last.labels_namespace)
    if key is None:
        return None
    namespace, name = key
    metadata = item.metadata
    assert metadata is not None  # intake_key found a name in it
    spec = item.spec or _NO_SPEC
    same = True  # every value of the record so far is the last Pod's (see LastMaps.record)
    try:
        text = metadata.labels
        if text == last.labels_text and namespace is last.labels_namespace:
            labels, workload = last.labels, last.workload
        else:
            same = False
            labels, workload = _item_labels(namespace, text)
            last.labels_text, last.labels_namespace = text.copy(), namespace
            last.labels, last.workload = labels, workload
        containers, init = spec.containers, spec.initContainers
        if containers == last.containers and init == last.init:
            requests = last.requests
        else:
            requests = last.requests = _item_requests(containers, init)
            last.containers, last.init = containers.copy(), init.copy()
        text = metadata.annotations
        annotations = _NO_ANNOTATIONS if text is _NULL else _item_annotations(text)
        if annotations is not last.annotations:
            same = False
            last.annotations = annotations
        priority = spec.priority
        if priority == last.priority:
            priority = last.priority  # one int for them all (a few values, mostly)
        elif priority is not None and not _LEAST <= priority <= MAX_AMOUNT:
            raise _NotPlain
        else:
            same = False
            last.priority = priority
        created = metadata.creationTimestamp
        if created == last.created:
            created_ms = last.created_ms
        else:
            same = False
            created_ms = 0 if created is None else parse_timestamp(created) or 0
            last.created, last.created_ms = created, created_ms
    except (QuantityError, _NotPlain, msgspec.ValidationError, msgspec.DecodeError):
        last.labels_text = _UNSEEN  # what was read of this item is no record's
        return Entry(file, "Pod", namespace, name, RawObject(raw.copy(), None))
    node_name = spec.nodeName
    node_name = _intern(node_name) if node_name else None
    phase = item.status.phase if item.status is not None else None
    if phase == "Running":
        phase = "Running"  # the interned text, without looking it up
    else:
        phase = _intern(phase) if phase else ("Running" if node_name else "Pending")
    record = last.record
    stem = record.stem  # the name up to its last "-" as the last Pod's record holds it, when it is:
    tail = name[len(stem) :]  # the stem ends with "-" or is empty, so it is when the rest has none
    if "-" in tail or not name.startswith(stem):
        cut = name.rfind("-") + 1
        stem, tail, same = name[:cut], name[cut:], False
    deleting = metadata.deletionTimestamp is not None
    if not (same and phase is record.phase and deleting is record.deleting and file is record.source):
        force_delete, deletion_cost = annotations  # in the order of PodFacts' fields:
        values = (namespace, workload, priority, created_ms, labels, force_delete, deletion_cost, phase, file, deleting, stem)
        last.record = record = _facts(values)
    pod = _PodTwin()
    pod.tail = _TAILS.get(tail) or _tail(tail)
    pod.requests = requests
    pod.node_name = node_name
    pod.facts = record
    pod.__class__ = Pod
    return pod  # type: ignore[no-any-return]


def _item_labels(namespace: str, text: msgspec.Raw) -> tuple[FrozenDict[str, str], str | None]:
    """A Pod item's labels, and the key of the workload they name in ``namespace``."""
    key = (namespace, bytes(text))
    found: tuple[FrozenDict[str, str], str | None] | None = _ITEM_LABELS.get(key)
    if found is None:
        mapping = _STRING_MAP.decode(text)
        name = mapping.get(WORKLOAD_LABEL) if mapping else None
        workload = _intern(f"{namespace}/{name}") if name else None
        found = _kept(_ITEM_LABELS, key, (_shared(_strings(mapping)), workload))
    return found


def _item_requests(containers: msgspec.Raw, init: msgspec.Raw) -> FrozenDict[str, int]:
    """A Pod item's requests: its containers' added up, raised to any init container's."""
    key = (bytes(containers), b"" if init is _NULL else bytes(init))
    found: FrozenDict[str, int] | None = _ITEM_REQUESTS.get(key)
    if found is None:
        total: dict[str, int] = {}
        _requests(_CONTAINERS.decode(containers), total, init=False)
        _requests(_CONTAINERS.decode(init), total, init=True)
        found = _kept(_ITEM_REQUESTS, key, _shared(sorted(total.items())))
    return found


def _item_annotations(text: msgspec.Raw) -> tuple[bool, int]:
    key = bytes(text)
    found: tuple[bool, int] | None = _ITEM_ANNOTATIONS.get(key)
    if found is None:
        found = _kept(_ITEM_ANNOTATIONS, key, _annotations(_STRING_MAP.decode(text)))
    return found
