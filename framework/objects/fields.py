"""Reading the fields of one object, with their paths: the one located-field reader.

Objects are read here (the rest of :mod:`objects`); the simulator's scenario
entries record their problems through :meth:`Fields.of_file` as well, so every
``file: object: path: message`` line of the product comes from :class:`Problem`.

Every reader records what is wrong as a :class:`Problem` and returns a usable
fallback instead of raising, so one pass over an object reports all of its
problems, not just the first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..model import (
    NAMESPACE_NAME_LABEL,
    Flavor,
    FrozenDict,
    LocalQueue,
    PriorityClass,
    Taint,
    Toleration,
)
from ..quantity import (
    MAX_AMOUNT,
    QuantityError,
    parse_duration,
    parse_quantity,
    parse_timestamp,
)

__all__ = [
    "Catalog",
    "Entry",
    "Fields",
    "Parsed",
    "Problem",
    "at_index",
    "at_key",
    "child",
    "describe",
    "escape",
    "shown",
]

T = TypeVar("T")

_TAINT_EFFECTS = ("NoExecute", "NoSchedule", "PreferNoSchedule")
_TOLERATION_OPERATORS = ("Equal", "Exists")
_INTEGER_TEXT = re.compile(r"^[+-]?\d+$")


@dataclass(frozen=True, slots=True, order=True)
class Problem:
    file: str
    object: str  # "Kind/namespace/name" or "Kind/name"
    path: str  # field path, e.g. "spec.resourceGroups[0].flavors[1].name"
    message: str

    def __str__(self) -> str:
        """One line, always: names and values from the input are escaped (see :func:`escape`)."""
        where = ": ".join(escape(part) for part in (self.file, self.object, self.path) if part)
        return f"{where}: {escape(self.message)}" if where else escape(self.message)


def describe(problem: Problem) -> str:
    """The problem without its file: what an ``Inadmissible`` message quotes (one line)."""
    parts = (problem.object, problem.path, problem.message)
    return ": ".join(escape(part) for part in parts if part)


def escape(text: str) -> str:
    """``text`` with every character that is not printable written as an escape.

    Problems are reported one per line, and object names, keys and values come
    from the input: a name holding a newline (or a carriage return, or a
    terminal control sequence) must not start a line of its own that reads
    like another problem. A backslash is left alone: only non-printable
    characters are changed, so an ordinary message reads as it always did.
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def child(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def at_index(at: str, index: int) -> str:
    return f"{at}[{index}]"


def at_key(at: str, key: str) -> str:
    """Path of a map entry; keys such as ``nvidia.com/gpu`` hold dots, hence brackets."""
    return f"{at}[{key}]"


def shown(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<an integer of about {int(value.bit_length() * 0.30103) + 1} digits>"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _in_range(value: int) -> bool:
    """Integers are 64-bit in Kubernetes; a larger one is an error, never wrapped or kept."""
    return -MAX_AMOUNT - 1 <= value <= MAX_AMOUNT


@dataclass(frozen=True, slots=True)
class Entry:
    """One object of a known kind, with where it came from."""

    file: str
    kind: str
    namespace: str | None  # None for cluster-scoped kinds
    name: str
    body: Mapping[str, Any]

    @property
    def key(self) -> str:
        return self.name if self.namespace is None else f"{self.namespace}/{self.name}"

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.key}"


@dataclass(slots=True)
class Parsed(Generic[T]):
    """One object as read: its record (best effort when invalid) and its problems."""

    entry: Entry
    value: T
    problems: list[Problem]


@dataclass(frozen=True, slots=True)
class Catalog:
    """The objects others refer to by name, resolved before the objects referring to them."""

    flavors: Mapping[str, Flavor] = field(default_factory=dict)
    invalid_flavors: Set[str] = frozenset()
    priority_classes: Mapping[str, PriorityClass] = field(default_factory=dict)
    invalid_priority_classes: Set[str] = frozenset()
    default_priority: int = 0
    workload_priority_classes: Mapping[str, PriorityClass] = field(default_factory=dict)
    invalid_workload_priority_classes: Set[str] = frozenset()
    local_queues: Mapping[str, LocalQueue] = field(default_factory=dict)  # by namespace/name
    invalid_local_queues: Set[str] = frozenset()
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name -> labels
    invalid_namespaces: Set[str] = frozenset()

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """A namespace's labels; one the snapshot has no Namespace object of has only the
        label the API server gives every Namespace, its name."""
        found = self.namespaces.get(namespace)
        return found if found is not None else FrozenDict({NAMESPACE_NAME_LABEL: namespace})

    def flavor_problem(self, name: str) -> str | None:
        """Why ``name`` cannot be used as a flavor, or None when it can."""
        if name in self.flavors:
            return None
        if name in self.invalid_flavors:
            return f"ResourceFlavor {name!r} is invalid"
        return f"unknown flavor {name!r}: no ResourceFlavor of that name"


class Fields:
    """The fields of one object; problems are collected in :attr:`problems`."""

    __slots__ = ("file", "label", "problems")

    def __init__(self, entry: Entry) -> None:
        self.file = entry.file
        self.label = entry.label
        self.problems: list[Problem] = []

    @classmethod
    def of_file(cls, file: str) -> Fields:
        """The fields of a file that is not one object (a scenario file): its problems
        name the file and the path only."""
        fields = cls.__new__(cls)
        fields.file = file
        fields.label = ""
        fields.problems = []
        return fields

    def report(self, path: str, message: str) -> None:
        self.problems.append(Problem(self.file, self.label, path, message))

    def _missing(self, path: str) -> None:
        self.report(path, "required field is missing")

    def section(self, obj: Mapping[str, Any], key: str, at: str) -> dict[str, Any]:
        """An optional mapping; ``{}`` when absent or wrong."""
        value = obj.get(key)
        if value is None:
            return {}
        if isinstance(value, dict):
            return value
        self.report(child(at, key), f"expected a mapping, got {shown(value)}")
        return {}

    def items(
        self, obj: Mapping[str, Any], key: str, at: str, *, non_empty: bool = False
    ) -> list[tuple[str, Any]]:
        """The elements of an optional list, each with its path."""
        path = child(at, key)
        value = obj.get(key)
        if value is None or value == []:
            if non_empty:
                self.report(path, "must list at least one element")
            return []
        if not isinstance(value, list):
            self.report(path, f"expected a list, got {shown(value)}")
            return []
        return [(at_index(path, i), item) for i, item in enumerate(value)]

    def records(
        self, obj: Mapping[str, Any], key: str, at: str, *, non_empty: bool = False
    ) -> list[tuple[str, dict[str, Any]]]:
        """The mapping elements of an optional list; other elements are problems."""
        found: list[tuple[str, dict[str, Any]]] = []
        for path, item in self.items(obj, key, at, non_empty=non_empty):
            if isinstance(item, dict):
                found.append((path, item))
            else:
                self.report(path, f"expected a mapping, got {shown(item)}")
        return found

    def text(
        self, obj: Mapping[str, Any], key: str, at: str, *, required: bool = False
    ) -> str | None:
        path = child(at, key)
        value = obj.get(key)
        if value is None:
            if required:
                self._missing(path)
            return None
        if not isinstance(value, str):
            self.report(path, f"expected a string, got {shown(value)}")
            return None
        if not value and required:
            self.report(path, "must not be empty")
            return None
        return value

    def integer(
        self,
        obj: Mapping[str, Any],
        key: str,
        at: str,
        *,
        required: bool = False,
        minimum: int | None = None,
    ) -> int | None:
        path = child(at, key)
        value = obj.get(key)
        if value is None:
            if required:
                self._missing(path)
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.report(path, f"expected an integer, got {shown(value)}")
            return None
        if not _in_range(value):
            self.report(path, f"integer {shown(value)} does not fit 64 bits")
            return None
        if minimum is not None and value < minimum:
            self.report(path, f"must be at least {minimum}, got {value}")
            return None
        return value

    def integer_text(self, value: object, path: str) -> int | None:
        """An integer written as a string, as annotations carry them."""
        if isinstance(value, str) and _INTEGER_TEXT.match(value.strip()) and len(value) < 40:
            number = int(value)
            if _in_range(number):
                return number
        self.report(path, f"expected an integer, got {shown(value)}")
        return None

    def flag(self, obj: Mapping[str, Any], key: str, at: str) -> bool:
        value = obj.get(key)
        if value is None:
            return False
        if isinstance(value, bool):
            return value
        self.report(child(at, key), f"expected true or false, got {shown(value)}")
        return False

    def choice(
        self, obj: Mapping[str, Any], key: str, at: str, allowed: Mapping[str, T]
    ) -> T | None:
        """An enum field; ``allowed`` maps every accepted spelling to its canonical value."""
        value = self.text(obj, key, at)
        if value is None:
            return None
        if value in allowed:
            return allowed[value]
        self.report(
            child(at, key), f"unknown value {value!r}; expected one of {', '.join(sorted(allowed))}"
        )
        return None

    def quantity(
        self,
        obj: Mapping[str, Any],
        key: str,
        at: str,
        resource: str,
        *,
        required: bool = False,
    ) -> int | None:
        path = child(at, key)
        value = obj.get(key)
        if value is None:
            if required:
                self._missing(path)
            return None
        try:
            return parse_quantity(value, resource)
        except QuantityError as exc:
            self.report(path, str(exc))
            return None

    def resources(
        self, obj: Mapping[str, Any], key: str, at: str, *, drop_zero: bool
    ) -> dict[str, int]:
        """A ``{resource: quantity}`` map, in resource order."""
        path = child(at, key)
        amounts: dict[str, int] = {}
        for resource, value in sorted(self._map_entries(obj, key, at)):
            try:
                amount = parse_quantity(value, resource)
            except QuantityError as exc:
                self.report(at_key(path, resource), str(exc))
                continue
            if amount or not drop_zero:
                amounts[resource] = amount
        return amounts

    def string_map(self, obj: Mapping[str, Any], key: str, at: str) -> dict[str, str]:
        """Labels, selectors, annotations: strings only, as Kubernetes stores them."""
        path = child(at, key)
        strings: dict[str, str] = {}
        for name, value in sorted(self._map_entries(obj, key, at)):
            if isinstance(value, str):
                strings[name] = value
            else:
                self.report(
                    at_key(path, name), f"expected a string (quote it), got {shown(value)}"
                )
        return strings

    def _map_entries(self, obj: Mapping[str, Any], key: str, at: str) -> list[tuple[str, Any]]:
        path = child(at, key)
        entries: list[tuple[str, Any]] = []
        for name, value in self.section(obj, key, at).items():
            if isinstance(name, str) and name:
                entries.append((name, value))
            else:
                self.report(
                    at_key(path, shown(name)), f"expected a non-empty string key, got {shown(name)}"
                )
        return entries

    def duration(self, obj: Mapping[str, Any], key: str, at: str) -> int | None:
        return self._parsed(obj, key, at, parse_duration)

    def timestamp(self, obj: Mapping[str, Any], key: str, at: str) -> int | None:
        return self._parsed(obj, key, at, parse_timestamp)

    def _parsed(self, obj: Mapping[str, Any], key: str, at: str, parse: Callable[[object], int]) -> int | None:
        """``parse(obj[key])``; absent is ``None``, malformed is reported and ``None``."""
        value = obj.get(key)
        if value is None:
            return None
        try:
            return parse(value)
        except QuantityError as exc:
            self.report(child(at, key), str(exc))
            return None

    def taints(self, obj: Mapping[str, Any], key: str, at: str) -> tuple[Taint, ...]:
        found: list[Taint] = []
        for path, item in self.records(obj, key, at):
            taint_key = self.text(item, "key", path, required=True)
            value = self.text(item, "value", path) or ""
            effect = self.text(item, "effect", path, required=True)
            if effect is not None and effect not in _TAINT_EFFECTS:
                self.report(
                    child(path, "effect"),
                    f"unknown value {effect!r}; expected one of {', '.join(_TAINT_EFFECTS)}",
                )
                effect = None
            if taint_key is not None and effect is not None:
                found.append(Taint(taint_key, value, effect))
        return tuple(sorted(found, key=lambda t: (t.key, t.value, t.effect)))

    def tolerations(self, obj: Mapping[str, Any], key: str, at: str) -> tuple[Toleration, ...]:
        found: list[Toleration] = []
        for path, item in self.records(obj, key, at):
            before = len(self.problems)
            toleration_key = self.text(item, "key", path) or ""
            operator = self.text(item, "operator", path) or "Equal"
            value = self.text(item, "value", path) or ""
            effect = self.text(item, "effect", path) or ""
            if operator not in _TOLERATION_OPERATORS:
                self.report(
                    child(path, "operator"),
                    f"unknown value {operator!r}; expected one of Equal, Exists",
                )
            elif operator == "Exists" and value:
                self.report(child(path, "value"), "must be empty when operator is Exists")
            elif operator == "Equal" and not toleration_key:
                self.report(child(path, "operator"), "must be Exists when key is empty")
            if effect and effect not in _TAINT_EFFECTS:
                self.report(
                    child(path, "effect"),
                    f"unknown value {effect!r}; expected one of {', '.join(_TAINT_EFFECTS)}",
                )
            if len(self.problems) == before:
                found.append(Toleration(toleration_key, operator, value, effect))
        return tuple(sorted(found, key=lambda t: (t.key, t.operator, t.value, t.effect)))

