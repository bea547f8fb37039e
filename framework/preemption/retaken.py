"""A workload's units again after the session took from it (the candidate index's patches).

When the session takes from a workload it drops the workload's units
(``session.unit_cache``), and the candidate index patches every list of its queue by making
that workload's units again (``unitindex._patch``). Most of them were one whole unit: a
workload that is not elastic and not a Deployment giving pods, now taken whole. Its units
are then one whole unit again, with only ``evicted`` changed; its node room and unit name
are read from the snapshot alone (``units._room``: the pods and pods placed at session start
of the workload, never what the session took), so they are the ones the unit the list held
carries, and the workload's pods, scattered in memory, are not read again. Any other
workload's units are :func:`.units.candidate_units`' own.

A patched list's running usage totals (``QueueUnits.totals``, which the quota bound reads per
run) are spliced from the totals of the list before (:func:`spliced_totals`): the units
outside the replaced segments are the same objects, with the same usage, so only the new
units' usage is read; the rest is slicing and summing, read in C. A queue's lists are patched
after every take from it and most are read again, so in deep queues reading every unit's usage
again per patch grew with the queue's depth times its takes.
"""

from __future__ import annotations

from itertools import accumulate, islice
from operator import sub

from ..model import FR, Workload
from ..quota import QuotaNode
from ..session import Candidate, Session
from .kept import Units, hold, unit_classes
from .units import _cached_units, _elastic_pod_set, _whole, unit_flags

__all__ = ["Origin", "retaken_units", "spliced_totals", "usage_totals"]

Flags = dict[tuple[frozenset[FR], bool], list[bool]]
Sums = dict[tuple[frozenset[FR], bool, FR], list[int]]
# A patched list's origin: the flags and totals of the list before (``QueueUnits.flags`` and
# ``sums``), and the segments ``(start, end, new units)`` replaced since, each in the list as
# the earlier ones left it.
Origin = tuple[Flags, list[tuple[int, int, Units]], Sums]


def retaken_units(
    session: Session,
    workload: Workload,
    leaf: QuotaNode,
    reason: str,
    group: int,
    only_within_nominal: bool,
    before: Units,
) -> Units:
    """``candidate_units`` of ``workload`` (not deferred) of one class, given its units of
    that class in the list before the take (``before``)."""
    key = workload.key
    taken = session.taken.get(key)
    unit_cache = session.unit_cache
    if taken is None or len(before) != 1 or key in unit_cache:
        return _cached_units(session, workload, leaf, reason, group, only_within_nominal)
    unit = before[0]
    evicted = workload.evicted or taken.whole
    # Whole in ``_units``: evicted, not admitted, or neither a Deployment nor elastic.
    whole = evicted or workload.admission is None or (not workload.is_deployment and _elastic_pod_set(workload) is None)
    if not whole or type(unit) is not Candidate or unit.count is not None or unit.pod_set is not None:
        return _cached_units(session, workload, leaf, reason, group, only_within_nominal)
    usage = session.snapshot.usage.get(key, {})
    made = (_whole(workload, leaf, usage, reason, group, unit.room, unit.unit, only_within_nominal, evicted, session.now),)
    unit_cache[key] = cache = unit_classes(leaf.index)
    return hold(cache, leaf.index, (reason, group, only_within_nominal, False), made)


def spliced_totals(origin: Origin | None, key: tuple[frozenset[FR], bool, FR]) -> list[int] | None:
    """``QueueUnits.totals`` of a patched list (``origin``) for ``key`` (needed, ``with_room``,
    flavor-resource), from the totals of the list before; ``None`` when that list has none
    for ``key`` (or no flags: which units it kept is then not known).

    Per unit kept before, its usage is the difference of two running totals; each segment
    replaced is a range of the kept units (counted by the flags then), whose values are
    replaced by the kept new units' usage, and the flags are spliced as ``using`` splices
    them. The running sum of those values is the totals, value for value."""
    if origin is None:
        return None
    flags_before, splices, sums_before = origin
    needed, with_room, fr = key
    flags = flags_before.get((needed, with_room))
    sums = sums_before.get(key)
    if flags is None or sums is None:
        return None
    values = list(map(sub, islice(sums, 1, None), sums))
    for start, end, new in splices:
        new_flags = unit_flags(new, needed, with_room)
        first = sum(flags[:start])
        values[first : first + sum(flags[start:end])] = [
            unit.usage.get(fr, 0) for unit, kept in zip(new, new_flags, strict=True) if kept
        ]
        flags = [*flags[:start], *new_flags, *flags[end:]]
    return list(accumulate(values, initial=0))


def usage_totals(kept: list[Candidate], fr: FR) -> list[int]:
    """Per i, the usage of ``fr`` of the first i units of ``kept``, each unit read."""
    return list(accumulate([unit.usage.get(fr, 0) for unit in kept], initial=0))
