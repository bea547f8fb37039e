"""Kubernetes-style objects (CONTRACT §1) -> the model, with located errors.

This is the only place that turns objects into model records. It never
raises on bad input: every problem becomes a :class:`Problem` naming the
file, the object (``Kind/namespace/name`` or ``Kind/name``), the field path
and what is wrong, and the object is isolated (see :class:`Inventory`).

The result does not depend on the order of the documents: objects referred
to by name (flavors, priority classes, queues) are resolved before the
objects referring to them, duplicates invalidate every copy instead of
letting one win, and every collection is built in sorted order. The field
readers live in ``fields``; one module per family of kinds does the
rest (``nodes``, ``queues``, ``local_queues``, ``workloads``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..model import Flavor, LocalQueue, Node, Pod, PriorityClass, QueueSpec, Workload
from .fallbacks import FALLBACKS
from .fields import (
    Catalog,
    Entry,
    Parsed,
    Problem,
    at_index,
    child,
    describe,
    escape,
    shown,
)
from .kueue import READ_KINDS as KUEUE_KINDS
from .kueue import KueueObjects
from .kueue import scope as kueue_scope
from .local_queues import namespace_refusal, parse_local_queue, parse_namespace, queue_problem
from .nodes import parse_flavor
from .pods_by_key import PodsByKey, in_key_order, merged, plain_by_key, pod_entry
from .queues import build_queue_tree
from .records import new_entry
from .typed import RawItems, decode_json, find_unknown_fields
from .typed_nodes import read_node
from .typed_pods import ITEM, ITEM_ERRORS, LastMaps, forget_read_maps, pod_of_item, read_pod
from .typed_queues import read_queue
from .typed_workloads import read_workload, text_entry
from .workloads import check_global_default, parse_priority_class, parse_workload_priority_class

__all__ = [
    "FALLBACKS",
    "Inventory",
    "PodsByKey",
    "Problem",
    "StrayDocument",
    "escape",
    "guarded",
    "namespace_refusal",
    "parse_objects",
    "queue_problem",
]

T = TypeVar("T")

# kind -> (API group, namespaced). The version is not checked: the group says
# whose object it is (a Kueue Workload is not ours), the shape is the same.
_KINDS: dict[str, tuple[str, bool]] = {
    "ResourceFlavor": ("preemptd.io", False),
    "Queue": ("preemptd.io", False),
    "Workload": ("preemptd.io", True),
    "Node": ("", False),
    "Pod": ("", True),
    "PriorityClass": ("scheduling.k8s.io", False),
    "WorkloadPriorityClass": ("preemptd.io", False),
    "LocalQueue": ("preemptd.io", True),
    "Namespace": ("", False),
}
_OWN_KINDS = frozenset(kind for kind, (group, _) in _KINDS.items() if group == "preemptd.io")
_READ_PAST_EVERY = 2_048  # items between calls of ``RawItems.read_past`` (about 1 MB of Pods)


@dataclass(frozen=True, slots=True)
class StrayDocument:
    """A document of a file that is not an object or a list (a plain line, a number).

    The reader passes it on instead of rejecting the file: it is one bad
    document, reported with its ``index`` (1-based, in the file) and skipped.
    ``value`` is kept so that writing the documents back changes nothing.
    """

    index: int
    value: Any


@dataclass(slots=True)
class Inventory:
    """The valid objects of a snapshot, plus everything that was wrong.

    ``queues`` holds only Queues that are valid *and* whose whole tree is
    valid; ``excluded_queues`` names every queue taken out with its tree (an
    invalid Queue takes everything under its root queue with it).
    ``inadmissible`` maps workload keys to the message of why they cannot be
    scheduled (invalid themselves, on an excluded or unknown queue, ...); such
    workloads are not in ``workloads`` and are reported pending ``Inadmissible``.
    ``unknown_fields``: typos in preemptd's own kinds (``known``); ``counts``: objects per kind.
    """

    flavors: dict[str, Flavor] = field(default_factory=dict)
    queues: dict[str, QueueSpec] = field(default_factory=dict)
    workloads: dict[str, Workload] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: Mapping[str, Pod] = field(default_factory=dict)  # parse_objects: a PodsByKey
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    unknown_fields: list[Problem] = field(default_factory=list, compare=False)
    counts: dict[str, int] = field(default_factory=dict, compare=False)
    inadmissible: dict[str, str] = field(default_factory=dict)
    excluded_queues: set[str] = field(default_factory=set)
    local_queues: dict[str, LocalQueue] = field(default_factory=dict)  # by namespace/name
    workload_priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)  # name -> labels


def parse_objects(documents: Iterable[tuple[str, Any]]) -> Inventory:
    """Turn ``(source file, object)`` pairs into an :class:`Inventory`."""
    intake = _Intake()
    for file, document in documents:
        intake.document(file, document)
    forget_read_maps()
    by_kind: dict[str, dict[str, list[Entry]]] = {kind: {} for kind in _KINDS}
    plain = intake.pods  # in the documents' order
    by_key = None if in_key_order(plain) else plain_by_key(plain, intake.entries)
    for entry in intake.entries:
        by_kind[entry.kind].setdefault(entry.key, []).append(entry)
    ours = [entry for entry in intake.entries if entry.kind in _OWN_KINDS]  # checked once read
    intake.entries.clear()
    kueue = KueueObjects.build(intake.kueue)  # Kueue's kinds, read as ours (see .kueue)
    for kind, key, entry in kueue.entries():
        by_kind[kind].setdefault(key, []).append(entry)
    # A plain Pod is read at intake (see _Intake); one whose key also names a Pod that
    # was not is a copy like any other, and goes with it.
    if by_kind["Pod"]:
        by_key = plain_by_key(plain, []) if by_key is None else by_key  # no copies if None
        for key in by_kind["Pod"].keys() & by_key.keys():
            by_kind["Pod"][key].append(pod_entry(by_key.pop(key)))
    plain_pods = plain if by_key is None else by_key

    flavors = _parse_all(by_kind["ResourceFlavor"], guarded(kueue.reader(parse_flavor)))
    classes = _parse_all(by_kind["PriorityClass"], guarded(parse_priority_class))
    check_global_default(classes)
    valid_classes = _valid(classes)
    default_classes = [value for value, is_default in valid_classes.values() if is_default]
    workload_classes = _parse_all(by_kind["WorkloadPriorityClass"], guarded(parse_workload_priority_class))
    local_queues = _parse_all(by_kind["LocalQueue"], guarded(parse_local_queue))
    namespaces = _parse_all(by_kind["Namespace"], guarded(parse_namespace))
    kueue.namespaces = {name: dict(labels) for name, labels in _valid(namespaces).items()}
    catalog = Catalog(
        flavors=_valid(flavors),
        invalid_flavors=flavors.keys() - _valid(flavors).keys(),
        priority_classes={name: value for name, (value, _) in valid_classes.items()},
        invalid_priority_classes=classes.keys() - valid_classes.keys(),
        default_priority=default_classes[0].value if default_classes else 0,
        workload_priority_classes=_valid(workload_classes),
        invalid_workload_priority_classes=workload_classes.keys() - _valid(workload_classes).keys(),
        local_queues=_valid(local_queues),
        invalid_local_queues=local_queues.keys() - _valid(local_queues).keys(),
        namespaces=_valid(namespaces),
        invalid_namespaces=namespaces.keys() - _valid(namespaces).keys(),
    )
    nodes = _parse_all(by_kind["Node"], guarded(read_node))
    pods = _parse_all(by_kind["Pod"], guarded(read_pod))
    valid_pods, plain_count = merged(_valid(pods), plain_pods), len(plain_pods)
    del plain, plain_pods, by_key  # the keys made to sort the Pods go before the Workloads come
    intake.pods.clear()
    queues = _parse_all(by_kind["Queue"], guarded(kueue.reader(lambda e: read_queue(e, catalog), catalog)))
    tree, cycle_problems = build_queue_tree(queues)
    workloads = _parse_all(by_kind["Workload"], guarded(kueue.reader(lambda e: read_workload(e, catalog), catalog)))

    inventory = Inventory(
        flavors=dict(catalog.flavors),
        queues=tree.queues,
        nodes=_valid(nodes),
        pods=valid_pods,
        priority_classes=dict(catalog.priority_classes),
        excluded_queues=set(tree.excluded),
        local_queues=dict(catalog.local_queues),
        workload_priority_classes=dict(catalog.workload_priority_classes),
        namespaces=dict(catalog.namespaces),
    )
    for key, copies in workloads.items():
        for copy in copies:
            if (problem := queue_problem(tree.queue_problem, copy.entry, copy.value)) is not None:
                copy.problems.append(problem)
        own = sorted(problem for copy in copies for problem in copy.problems)
        workload = copies[0].value
        if own:
            inventory.inadmissible[key] = "; ".join(describe(problem) for problem in own)
        elif workload.queue in tree.excluded:
            inventory.inadmissible[key] = tree.excluded[workload.queue]
        elif key in kueue.held:
            inventory.inadmissible[key] = kueue.held[key]
        elif (refused := namespace_refusal(tree.queues, catalog, workload)) is not None:
            inventory.inadmissible[key] = refused
        else:  # keyed by the workload's own key: the same text, kept once
            inventory.workloads[workload.key if workload.key == key else key] = workload

    everything: list[Problem] = [*intake.problems, *cycle_problems, *kueue.problems]
    kinds = (flavors, classes, workload_classes, local_queues, namespaces, nodes, pods, queues)
    for parsed in (*kinds, workloads):
        for versions in parsed.values():
            for version in versions:
                everything.extend(version.problems)
    inventory.problems = sorted(everything)
    inventory.warnings = sorted([*intake.warnings, *kueue.warnings])
    inventory.unknown_fields = sorted(p for entry in ours for p in find_unknown_fields(entry))
    inventory.counts = {kind: sum(map(len, by_kind[kind].values())) for kind in sorted(_KINDS)}
    inventory.counts["Pod"] += plain_count
    return inventory


def guarded(
    parse: Callable[[Entry], tuple[T, list[Problem]]],
) -> Callable[[Entry], tuple[T, list[Problem]]]:
    """``parse``, with any exception it raises turned into a problem of that one object.

    The readers report bad input as problems and do not raise; this is the net
    under them, so that an input nobody foresaw (or a bug) costs one object,
    never the snapshot. The object's record is then a placeholder from
    :data:`FALLBACKS` (its name and, for a Queue or Workload, its parent or
    queue, so that the isolation rules apply to it like to any invalid object).
    """

    def run(entry: Entry) -> tuple[T, list[Problem]]:
        try:
            return parse(entry)
        except Exception as exc:  # see the docstring
            text = str(exc)
            text = text if len(text) <= 200 else text[:197] + "..."
            problem = Problem(
                entry.file, entry.label, "", f"cannot be read: {type(exc).__name__}: {text}"
            )
            value: T = FALLBACKS[entry.kind](entry)
            return value, [problem]

    return run


def _parse_all(
    entries: Mapping[str, list[Entry]], parse: Callable[[Entry], tuple[T, list[Problem]]]
) -> dict[str, list[Parsed[T]]]:
    """Every copy of every object of one kind, by key in sorted order.

    Two objects with the same kind and key are both invalid: keeping either
    would make the result depend on the order of the documents.
    """
    parsed: dict[str, list[Parsed[T]]] = {}
    for key in sorted(entries):
        copies = [Parsed(entry, *parse(entry)) for entry in entries[key]]
        if len(copies) > 1:
            files = ", ".join(sorted(copy.entry.file for copy in copies))
            for copy in copies:
                copy.problems.append(
                    Problem(
                        copy.entry.file,
                        copy.entry.label,
                        "metadata.name",
                        f"{copy.entry.kind} {key!r} is defined {len(copies)} times "
                        f"(in {files}); every copy is ignored",
                    )
                )
        parsed[key] = copies
    return parsed


def _valid(parsed: Mapping[str, list[Parsed[T]]]) -> dict[str, T]:
    return {
        key: copies[0].value
        for key, copies in parsed.items()
        if len(copies) == 1 and not copies[0].problems
    }


class _Intake:
    """Documents -> entries of known kinds; Lists are flattened, the rest reported."""

    __slots__ = ("entries", "kueue", "pods", "problems", "warnings")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.kueue: list[Entry] = []  # Kueue's kinds and Namespaces (see .kueue)
        # Plain Pods, read at intake, in the documents' order: a large cluster is mostly
        # Pods, and the entries and per-copy records of the other kinds would be garbage (a
        # fragmented heap). Copies of a key are found once all are read (parse_objects).
        self.pods: list[Pod] = []
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []

    def document(self, file: str, document: Any) -> None:
        if document is None:
            return  # an empty YAML document, e.g. after a trailing ---
        if isinstance(document, StrayDocument):
            value = document.value
            kind = "plain text" if isinstance(value, str) else type(value).__name__
            self.problems.append(
                Problem(
                    file,
                    "",
                    f"document {document.index}",
                    f"expected an object (a mapping) or a list of objects, got {kind}; skipped",
                )
            )
            return
        if isinstance(document, RawItems):
            self._raw_items(file, document)
            return
        if isinstance(document, list):  # a JSON file holding a list of objects
            for index, item in enumerate(document):
                self.object(file, item, at_index("", index))
        else:
            self.object(file, document, "")

    def object(self, file: str, obj: Any, at: str) -> None:
        if not isinstance(obj, dict):
            self.problems.append(
                Problem(file, "", at, f"expected an object (a mapping), got {type(obj).__name__}")
            )
            return
        kind = obj.get("kind")
        if not isinstance(kind, str) or not kind:
            message = (
                "required field is missing" if kind is None else f"expected a kind, got {shown(kind)}"
            )
            self.problems.append(Problem(file, "", child(at, "kind"), message))
            return
        if kind.endswith("List"):
            self._list(file, obj, kind, at)
            return
        metadata = obj.get("metadata")
        if metadata is None:
            metadata = {}
        elif not isinstance(metadata, dict):
            self.problems.append(
                Problem(file, kind, child(at, "metadata"), f"expected a mapping, got {shown(metadata)}")
            )
            return
        name = metadata.get("name")
        namespace = metadata.get("namespace")
        api_version = obj.get("apiVersion")
        foreign = kueue_scope(kind, api_version) if kind in KUEUE_KINDS else None
        expected = _KINDS.get(kind) if foreign is None else (_group(api_version) or "", foreign)
        if expected is None or (api_version is not None and _group(api_version) != expected[0]):
            label = "/".join(str(part) for part in (kind, namespace, name) if part)
            self.warnings.append(
                Problem(
                    file,
                    label,
                    child(at, "kind" if expected is None else "apiVersion"),
                    f"unknown kind {kind!r} (apiVersion {shown(api_version)}); skipped",
                )
            )
            return
        if not isinstance(name, str) or not name:
            message = (
                "required field is missing" if name is None else f"expected a name, got {shown(name)}"
            )
            self.problems.append(Problem(file, kind, child(at, "metadata.name"), message))
            return
        if not expected[1]:
            namespace = None
        elif namespace is None or namespace == "":
            namespace = "default"
        elif not isinstance(namespace, str):
            self.problems.append(
                Problem(
                    file,
                    f"{kind}/{name}",
                    child(at, "metadata.namespace"),
                    f"expected a string, got {shown(namespace)}",
                )
            )
            return
        (self.entries if foreign is None else self.kueue).append(new_entry(file, kind, namespace, name, obj))

    def _raw_items(self, file: str, document: RawItems) -> None:
        """Items left as JSON text: a plain Pod is taken typed, any other item decoded and
        read like the items of a parsed list (the same checks, the same paths)."""
        in_list = bool(document.at)
        last, decode = LastMaps(), ITEM.decode
        items = document.take()
        items.reverse()
        take = items.pop  # each item let go of once read: the items read free their memory
        read_past, spanned, every = document.read_past, 0, _READ_PAST_EVERY
        for index in range(len(items)):
            if not index % every and read_past is not None:
                read_past(spanned)  # the items before this one lie wholly before that offset
                spanned += sum(map(len, items[-every:]))  # the next ones
            raw = take()
            try:
                item = decode(raw)
            except ITEM_ERRORS:  # not an object, a field of another type
                item = None
            if item is not None and item.kind == "Pod":
                found = pod_of_item(file, raw, item, last)
                if type(found) is Pod:
                    self.pods.append(found)
                    continue
                if found is not None:
                    self.entries.append(found)  # type: ignore[arg-type]  # an Entry
                    continue
            elif item is None or item.kind in ("Workload", "Queue", "Node"):
                entry = text_entry(file, raw, item)
                if entry is not None:
                    self.entries.append(entry)
                    continue
            decoded = decode_json(bytes(raw))
            at = at_index(document.at, index)
            if decoded is None and in_list:
                self.problems.append(Problem(file, "", at, "empty list item"))
            else:
                self.object(file, decoded, at)
        if read_past is not None:
            read_past(spanned)

    def _list(self, file: str, obj: Mapping[str, Any], kind: str, at: str) -> None:
        items = obj.get("items")
        if items is None:
            return
        path = child(at, "items")
        if not isinstance(items, list):
            self.problems.append(Problem(file, kind, path, f"expected a list, got {shown(items)}"))
            return
        for index, item in enumerate(items):
            if item is None:
                self.problems.append(Problem(file, "", at_index(path, index), "empty list item"))
            else:
                self.object(file, item, at_index(path, index))


def _group(api_version: object) -> str | None:
    """``scheduling.k8s.io/v1`` -> ``scheduling.k8s.io``; the core group ``v1`` -> ``""``."""
    if not isinstance(api_version, str):
        return None
    group, _, _ = api_version.rpartition("/")
    return group
