"""Pods by ``namespace/name`` without their keys; the plain Pods of the intake sorted
and checked for copies (for :func:`~.parse_objects`).

A large cluster's snapshot holds a hundred thousand Pods or more, and a map of them by
key keeps a string per Pod beside its namespace and name (about 80 bytes), and a dict
entry for it: a sixth of the snapshot's memory, for a map that is walked in key order
and almost never looked up. :class:`PodsByKey` is that map as the Pods alone, in key
order: a key is made when the map is iterated or asked for one, and a look-up is a
binary search over the Pods' keys.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from itertools import groupby, islice
from operator import attrgetter, lt
from typing import Any

from ..model import Pod
from .fields import Entry
from .typed import RawObject

__all__ = ["PodsByKey", "in_key_order", "merged", "plain_by_key", "pod_entry"]

_KEY = attrgetter("key")
_NAME = attrgetter("name")
_NAMESPACE = attrgetter("facts.namespace")


class PodsByKey(Mapping[str, Pod]):
    """A read-only map of Pods by their key (``Pod.key``), holding only the Pods: a tuple
    of them whose keys are distinct and in sorted order (:func:`in_key_order`)."""

    __slots__ = ("pods",)

    def __init__(self, pods: tuple[Pod, ...]) -> None:
        self.pods = pods

    def __len__(self) -> int:
        return len(self.pods)

    def __iter__(self) -> Iterator[str]:
        return map(_KEY, self.pods)

    def __getitem__(self, key: str) -> Pod:
        pods = self.pods
        if type(key) is str:
            index = bisect_left(pods, key, key=_KEY)
            if index < len(pods) and pods[index].key == key:
                return pods[index]
        raise KeyError(key)

    def values(self) -> ValuesView[Pod]:
        return _Values(self)

    def items(self) -> ItemsView[str, Pod]:
        return _Items(self)

    def __eq__(self, other: object) -> bool:
        if type(other) is PodsByKey:
            return self.pods == other.pods
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PodsByKey({len(self.pods)} pods)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (PodsByKey, (self.pods,))


class _Values(ValuesView[Pod]):
    __slots__ = ()
    _mapping: PodsByKey

    def __iter__(self) -> Iterator[Pod]:
        return iter(self._mapping.pods)


class _Items(ItemsView[str, Pod]):
    __slots__ = ()
    _mapping: PodsByKey

    def __iter__(self) -> Iterator[tuple[str, Pod]]:
        pods = self._mapping.pods
        return zip(map(_KEY, pods), pods, strict=True)


def in_key_order(pods: list[Pod]) -> bool:
    """Whether the keys of ``pods`` are distinct and in sorted order, found without making
    a key per Pod: the Pods of a namespace come together in key order (their keys share
    its prefix), so the names of each such run are compared, and the keys at its ends
    with those of the runs beside it."""
    last: Pod | None = None
    for _, run in groupby(pods, _NAMESPACE):
        listed = list(run)
        names = list(map(_NAME, listed))
        if not all(map(lt, names, islice(names, 1, None))):
            return False
        if last is not None and not last.key < listed[0].key:
            return False
        last = listed[-1]
    return True


def merged(walked: dict[str, Pod], plain: list[Pod] | dict[str, Pod]) -> PodsByKey:
    """Both sets of valid Pods, in key order as ``parse_objects`` gives them; read-only,
    so that a snapshot takes them as they are (a large cluster's Pods are not copied).
    ``plain``: the plain Pods by key, or a list of them in key order when no other Pod
    came (most clusters' Pods, listed in key order)."""
    if isinstance(plain, list):
        return PodsByKey(tuple(plain))
    everything = walked | plain if walked else plain
    return PodsByKey(tuple(map(everything.__getitem__, sorted(everything))))


def plain_by_key(pods: list[Pod], entries: list[Entry]) -> dict[str, Pod]:
    """The plain Pods read at intake by key; a key defined more than once is taken out,
    and each of its Pods goes to ``entries`` as a copy for the checks of all copies."""
    found: dict[str, Pod] = {}
    copied: set[str] = set()
    for pod in pods:
        key = pod.key
        if key in copied:
            entries.append(pod_entry(pod))
        elif key in found:
            copied.add(key)
            entries.append(pod_entry(found.pop(key)))
            entries.append(pod_entry(pod))
        else:
            found[key] = pod
    return found


def pod_entry(pod: Pod) -> Entry:
    """The entry of a Pod read at intake, for the checks that need entries."""
    return Entry(pod.source, "Pod", pod.namespace, pod.name, RawObject(None, pod))
