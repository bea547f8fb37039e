"""A run of candidates sorted into the base victim order from the last run of its queue and
class (``search.py``).

The runs a search merges are each sorted once per session (``search._merged_runs``), but a
take from a queue patches its lists (``unitindex.py``), and the patched list's runs are new
runs, sorted again. In deep queues most of such a run's units are those of the last run of
the same queue and class, in the same places (a take replaces one workload's units with
their evicted twins), and its sort grew with the queue's depth times its takes. So the last
run sorted of each queue, class and kind (``only_within_nominal``) is kept as it came and as
sorted; a run of the same length that differs from it in a few places is the last sorted
run without the units that left those places, each new unit put in by bisection.

That is ``sorted(units, key=sort_key)``, the stable sort. The units left in the places that
did not change are the last run's there, in the last sorted run's order: by key, and those
of one key by place, the same places now. When fewer are left than those places, a unit that
left a changed place is also in an unchanged one (it came twice), and the run is sorted in
full. Each new unit goes before the first of a greater key; where a unit of its own key
already is, only its place could order them, and the run is sorted in full too.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import compress, filterfalse
from operator import attrgetter, is_not
from typing import Any

from ..session import Candidate

__all__ = ["MOST", "RESORT", "sorted_units"]

_SORT_KEY = attrgetter("sort_key")
_LAST = "_last_sorted_runs"  # in ``session.state``: see :func:`sorted_units`

# The most places a run may differ in from the last one to be sorted from it.
MOST = 16
# Whether runs are sorted from the last one (tests turn it off).
RESORT = True

# A run as it came, and sorted.
_Last = tuple[list[Candidate], list[Candidate]]


def sorted_units(state: dict[str, Any], units: list[Candidate]) -> list[Candidate]:
    """``sorted(units, key=sort_key)``, from the last run of the same queue, class and kind
    when that is exact (see the module notes). ``state``: the session's ``state``."""
    if not units or not RESORT:
        return sorted(units, key=_SORT_KEY)
    kept: dict[tuple[int, int, bool], _Last] | None = state.get(_LAST)
    if kept is None:
        kept = state[_LAST] = {}
    head = units[0]
    place = (head.leaf.index, head.group, head.only_within_nominal)
    last = kept.get(place)
    found = _from_last(last, units) if last is not None else None
    # Kept as it came in a copy of its own (the caller's list is not read again); the sorted
    # run is read only, by the caller too.
    if found is None:
        found = sorted(units, key=_SORT_KEY)
    kept[place] = (list(units), found)
    return found


def _from_last(last: _Last, units: list[Candidate]) -> list[Candidate] | None:
    """``units`` sorted from ``last`` (see the module notes), or ``None``."""
    came, ordered = last
    size = len(units)
    if len(came) != size:
        return None
    places = list(compress(range(size), map(is_not, came, units)))
    if len(places) > MOST:
        return None
    if not places:
        return list(ordered)
    left = {came[at] for at in places}
    out = list(filterfalse(left.__contains__, ordered))
    if len(out) != size - len(places):
        return None  # a unit that left a place is in another that did not change
    for at in places:
        unit = units[at]
        key = unit.sort_key
        into = bisect_left(out, key, key=_SORT_KEY)
        if into < len(out) and out[into].sort_key == key:
            return None  # two units share a key
        out.insert(into, unit)
    return out
