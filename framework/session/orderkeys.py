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

**Flat keys.** When every plugin's key says how many items each of its keys holds
(``fixed_length``, see ``hooks.workload_order``), the parts are not nested: the key is
the parts' items in order, then the creation time and the tiebreak. It orders workloads
as the nested key does. Two keys are compared item by item up to their first
difference; each part begins with its 0 or 1, so two keys whose earlier parts are equal
have those parts at the same places, and the next part begins at the same place in
both: a 0 against a 1 decides there as the nested parts do, and two answers of the one
length each decide at their first differing item, as the nested parts do. A key that
answers another length than it says is counted as one that raises. The nested key reads
each part twice per comparison (once for equality, once for the order) and makes a tuple
per part; the flat one does neither.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import chain
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
    order; a key that raises is recorded as the plugin's failure in ``registry``. Flat
    when every key says its length (see the module)."""
    if not keys:
        return default_key
    lengths = [getattr(key, "fixed_length", None) for _, key in keys]
    flat = all(type(length) is int for length in lengths)
    if len(keys) == 1:
        (only, first), length = keys[0], lengths[0]
        if flat:

            def one_flat(w: Workload) -> tuple[Any, ...]:
                try:
                    part = first(w)
                    if len(part) != length:
                        raise _wrong_length(part, length)
                    return (0, *part, w.created, w.uid, w.namespace, w.name)
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:
                    registry.record_failure(only, "workload_order", exc)
                return (1, w.created, w.uid, w.namespace, w.name)

            return one_flat

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

    named = list(zip(keys, lengths, strict=True))

    def composed(w: Workload) -> tuple[Any, ...]:
        parts: list[Any] = []
        for (name, key), length in named:
            try:
                part = key(w)
                if length is not None and len(part) != length:
                    raise _wrong_length(part, length)
                parts.append((0, *part))
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                registry.record_failure(name, "workload_order", exc)
                parts.append(_BROKEN)
        if flat:
            return (*chain.from_iterable(parts), w.created, w.uid, w.namespace, w.name)
        return (*parts, w.created, w.uid, w.namespace, w.name)

    return composed


def _wrong_length(part: Any, length: object) -> ValueError:
    return ValueError(f"a workload_order key of {len(part)} item(s), not the {length} it says")


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
