"""Walks that never reach a fit test, told before they run.

A lazy walk (``Walk.attempt`` with its running bound) runs its first fit test only once
the request's headroom plus the usage of the victims it accepted reaches the request
for every flavor-resource; until then each candidate is only accepted or passed over.
When no plugin may refuse a candidate and no scenario filter is set, what it accepts is
decided by two rules alone, besides the candidates usable only within nominal that an
attempt which may borrow passes over:

* a candidate of the preemptor's queue, or of a queue on its path, is accepted;
* a candidate of another queue passes the lender test (``margins.py``): its queue, and
  each cohort off the path above it, still uses more than its nominal of some needed
  flavor-resource the candidate holds.

When every other queue's cohort is on the path (its chain is the queue alone), the test
reads the queue's own usage, and taking a victim from a queue lowers that usage by the
victim's usage exactly (``Accounting.remove_all``: the first level takes it whole),
whether the walk takes it at once or lets it wait (the margins count waiting victims as
taken). So the candidates a walk accepts before its first test are those of
:func:`reaches`, which steps the same candidates in the same order with a margin per
queue and the running bound, and nothing else: no statement, no node room, no leading
run (a leading run takes what the steps would accept up to the first test). When the
running bound never reaches the request, the walk runs no test and finds nothing, and
told nobody anything on the way.

Such walks are told before they run only where the last attempt of the same leaf,
needed flavor-resources and borrowing found nothing: elsewhere they mostly find victims,
and the steps here would be paid on top of the walk's (the steps stop once the bound is
reached, so a wrong guess costs the part of the walk before its first test). A
remainder of an elastic workload (taken only after its single pods), or a queue whose
chain holds a cohort, ends the steps with "may reach": the walk then runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..model import FR
from ..quota import QuotaNode
from ..session import CLASS_SAME_QUEUE, Candidate
from .margins import margin_row

__all__ = ["TELL", "Vain", "in_vain", "reaches"]

TELL = True
"""Whether a walk expected to find nothing is told first by :func:`reaches` (tests turn
it off to compare with the walks themselves)."""

_VAIN = "_walks_in_vain"  # in ``session.state``: (leaf index, needed, borrowing) -> last found nothing

Vain = dict[tuple[int, frozenset[FR], bool], bool]
"""Per (leaf index, needed flavor-resources, may it borrow): whether the last attempt
walked found nothing."""


def in_vain(state: dict[str, Any]) -> Vain:
    """The session's :data:`Vain` (``state``: ``session.state``)."""
    found: Vain | None = state.get(_VAIN)
    if found is None:
        found = state[_VAIN] = {}
    return found


def reaches(
    candidates: Iterable[Candidate],
    allow_borrowing: bool,
    request: Mapping[FR, int],
    room: Mapping[FR, int],
    needed: frozenset[FR],
    chain_of: Callable[[QuotaNode], tuple[QuotaNode, ...]],
    all_usage: list[dict[FR, int]],
) -> bool:
    """Whether a lazy walk of ``candidates`` may reach a fit test (module notes): the
    headroom ``room`` plus the usage of the candidates it accepts reaches ``request``
    for every flavor-resource. ``False`` only when that is certain."""
    # The flavor-resources short of the request, and how far each is.
    short_of = [fr for fr, amount in request.items() if room[fr] < amount]
    if not short_of:
        return True
    left = [request[fr] - room[fr] for fr in short_of]
    places = range(len(short_of))
    # Per lender queue asked about: its usage less its nominal, less what was accepted,
    # by the place of each needed flavor-resource.
    needed_places = tuple(enumerate(needed))
    margins: dict[QuotaNode, list[int]] = {}
    for candidate in candidates:
        if allow_borrowing and candidate.only_within_nominal:
            continue
        if not candidate.single_pod and candidate.pod_set is not None:
            return True  # the remainder's own rule: the walk tells
        usage = candidate.usage
        if candidate.group != CLASS_SAME_QUEUE:
            # ``margins.gives`` and ``keep`` for a chain of the queue alone, written out:
            # calling them (a held list and two calls a candidate) costs `contended` 31 M
            # instructions, a third of what telling these walks saves.
            queue = candidate.leaf
            margin = margins.get(queue)
            if margin is None:
                chain = chain_of(queue)
                if chain:
                    if len(chain) > 1:
                        return True  # a cohort's test: the walk tells
                    margin = margins[queue] = margin_row(all_usage[queue.index], queue.subtree, needed_places)
            if margin is not None:
                for place, fr in needed_places:
                    if margin[place] > 0 and fr in usage:
                        break
                else:
                    continue  # refused, now and at every later step
                for place, fr in needed_places:
                    amount = usage.get(fr)
                    if amount:
                        margin[place] -= amount
        short = False
        for i in places:
            more = usage.get(short_of[i])
            if more:
                left[i] -= more
            if left[i] > 0:
                short = True
        if not short:
            return True
    return False
