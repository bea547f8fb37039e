"""The room a walk's first victims free, kept for the next walk of the same pods
(``room.py``).

A lazy walk gives its victims' node room to its :class:`~.room.FreedRoom` when the quota
first fits: every victim so far at once, most of them the leading run. The searches of a
node epoch often walk the same leading victims again for the same pod set (the flavor
scan and ``finish_assignment`` ask about the same preemptor, an attempt that may borrow
follows one that may not), and each gave all their pods' room again, node by node.

The state of a walk's room after that first give is made of the placements' room, the
pod set and flavor it follows and the victims' rooms in order, nothing else: giving
victims one list at a time leaves the same state as giving them all at once. The room the
placements hold is the committed room of the session's node epoch when the statement has
no change of its own at the walk's start (a lazy walk changes no node room; only quota),
so for one pod set (``FreedRoom.exact``) the state after the first give is kept in
``session.state`` per node epoch, pod set, count and flavor, and a walk whose first victims
begin with the kept ones starts from a copy of it and gives only the rest.

In deep queues the searches of one epoch alternate between a few victim lists for the same
pod set, so the last :data:`KEPT` first gives are kept per pod set, count and flavor, and a
walk starts from the one with the most victims its own begin with.

The copy is shallow: the room map of a node is shared with the kept state until the walk
changes it (the nodes not in ``FreedRoom.owned``), and is copied first then.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import is_
from typing import Any

from ..model import PodSet, Toleration
from ..nodes import PodTally
from ..session import Candidate

__all__ = ["KEPT", "GivenRoom", "begun", "keep", "kept_given"]

_KEPT = "_given_room"  # in ``session.state``: (node epoch, {(flavor, count, id(pod set)): [GivenRoom]})

KEPT = 4
"""How many first gives are kept per pod set, count and flavor in a node epoch (the latest)."""


class GivenRoom:
    """A walk's room after its first give (see the notes): what ``FreedRoom`` holds then."""

    __slots__ = ("extra", "known", "last", "live", "spec", "tallies", "terms", "totals", "victims")

    def __init__(
        self,
        spec: PodSet,
        victims: list[Candidate],
        tallies: list[PodTally],
        terms: list[tuple[Mapping[str, str], tuple[Toleration, ...]]],
        live: list[PodTally],
        totals: tuple[int, ...],
        last: int,
        known: dict[str, int],
        extra: dict[str, dict[str, int]],
    ) -> None:
        self.spec = spec  # kept alive with the entry, so its id names it
        self.victims = victims
        # Never changed once made: shared with the walks that start from this one.
        self.tallies = tallies
        self.terms = terms
        self.live = live
        self.last = last
        # Copied into each walk that starts from it (the room maps only shallowly).
        self.totals = totals
        self.known = known
        self.extra = extra

    def begins(self, victims: list[Candidate]) -> bool:
        """Whether ``victims`` begin with the kept victims (the same objects, in order)."""
        mine = self.victims
        return len(mine) <= len(victims) and all(map(is_, mine, victims))


def kept_given(state: dict[str, Any], epoch: int) -> dict[tuple[str, int, int], list[GivenRoom]]:
    """The kept first gives of node epoch ``epoch``, oldest first (those of an earlier epoch
    are dropped)."""
    kept: tuple[int, dict[tuple[str, int, int], list[GivenRoom]]] | None = state.get(_KEPT)
    if kept is None or kept[0] != epoch:
        kept = state[_KEPT] = (epoch, {})
    return kept[1]


def begun(gives: list[GivenRoom], spec: PodSet, victims: list[Candidate]) -> GivenRoom | None:
    """The kept give of ``gives`` of pod set ``spec`` with the most victims that ``victims``
    begin with, if any."""
    found: GivenRoom | None = None
    for given in gives:
        if given.spec is spec and given.begins(victims) and (found is None or len(given.victims) > len(found.victims)):
            found = given
    return found


def keep(gives: list[GivenRoom], given: GivenRoom) -> None:
    """Keep ``given`` as the latest of ``gives``, dropping the oldest past :data:`KEPT`."""
    gives.append(given)
    if len(gives) > KEPT:
        del gives[0]
