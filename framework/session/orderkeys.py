"""The session's workload order (SEMANTICS §2): the plugins' ``workload_order`` keys
composed into one key per workload, and the keys of many workloads made in one loop.

A workload's key is, for each plugin that answers ``workload_order``, ``(0, *key)`` —
or ``(1,)`` when its key raises, which sorts after every answer, so one broken plugin
cannot stop ordering — then its creation time and its tiebreak ``(uid, namespace,
name)``. The session keeps each key once made (``Session.workload_key``); the rounds
ask for every pending workload's key at once (:func:`keys_of`), without a call of the
cached key per workload. With one plugin's key (the default configuration) the key is
made without a list of parts; the tiebreak is read field by field, not as a tuple made
and unpacked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..model import Workload
from .registry import Registry

__all__ = ["composed_key", "default_key", "keys_of"]

OrderKey = Callable[[Workload], tuple[Any, ...]]

_BROKEN = (1,)  # the part of a plugin's key that raised


def default_key(w: Workload) -> tuple[Any, ...]:
    """The key without an ordering plugin: ``(w.created, *w.tiebreak)``."""
    return (w.created, w.uid, w.namespace, w.name)


def composed_key(keys: list[tuple[str, Any]], registry: Registry) -> OrderKey:
    """The session's key from the plugins' ``keys`` (name, key function), in plugin
    order; a key that raises is recorded as the plugin's failure in ``registry``."""
    if not keys:
        return default_key
    if len(keys) == 1:
        only, first = keys[0]

        def one_part(w: Workload) -> tuple[Any, ...]:
            try:
                part = (0, *first(w))
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                registry.record_failure(only, "workload_order", exc)
                part = _BROKEN
            return (part, w.created, w.uid, w.namespace, w.name)

        return one_part

    def composed(w: Workload) -> tuple[Any, ...]:
        parts: list[Any] = []
        for name, key in keys:
            try:
                parts.append((0, *key(w)))
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                registry.record_failure(name, "workload_order", exc)
                parts.append(_BROKEN)
        return (*parts, w.created, w.uid, w.namespace, w.name)

    return composed


def keys_of(cache: dict[str, tuple[Any, ...]], make: OrderKey, workloads: Iterable[Workload]) -> list[tuple[Any, ...]]:
    """The key of each of ``workloads``: the one ``cache`` holds under its workload's key,
    else made by ``make`` and kept there."""
    found = cache.get
    keys = []
    for w in workloads:
        key = found(w.key)
        if key is None:
            key = cache[w.key] = make(w)
        keys.append(key)
    return keys
