"""Waiting victims of a walk (``walk.py``): what the lender test may know without
taking them.

A victim the walk accepts waits, untaken, until a test reads the state it changes. The
lender test of a later candidate reads the usage of the candidate's queue and of the
cohorts above it, off the preemptor's path, so the waiting victims under the same top
could change its answer. Taking them is exact but costs a quota change (and its undo)
per victim. First the test is asked on a lower bound instead: every node's usage less
the needed usage of everything waiting under it, kept as running sums. Removing usage
passes up no more than it took at each level, so the usage left after taking them is
at least that bound, and the test only reads "usage above nominal": when it passes on
the bound, it passes after taking them, and they keep waiting. When it does not, the
walk takes them and asks the exact test.
"""

from __future__ import annotations

from ..model import FR
from ..quota import Accounting, QuotaNode
from ..session import Candidate

__all__ = ["forget", "lender_gives_anyway", "remember"]

Pending = dict[QuotaNode, dict[FR, int]]


def remember(
    victim: Candidate, pending: Pending, needed: frozenset[FR], path: frozenset[QuotaNode]
) -> None:
    """Add a waiting victim's needed usage to its queue and the cohorts above it up to
    its top."""
    usage = victim.usage
    held = [(fr, usage[fr]) for fr in needed if usage.get(fr)]
    if not held:
        return
    node: QuotaNode | None = victim.leaf
    while node is not None and node not in path:
        sums = pending.get(node)
        if sums is None:
            pending[node] = dict(held)
        else:
            for fr, amount in held:
                sums[fr] = sums.get(fr, 0) + amount
        node = node.parent


def forget(waiting: list[Candidate], pending: Pending, path: frozenset[QuotaNode]) -> None:
    """Drop the sums of the nodes under one top: only its waiting victims are in them."""
    for victim in waiting:
        node: QuotaNode | None = victim.leaf
        while node is not None and node not in path:
            pending.pop(node, None)
            node = node.parent


def lender_gives_anyway(
    accounting: Accounting,
    candidate: Candidate,
    pending: Pending,
    needed: frozenset[FR],
    path: frozenset[QuotaNode],
) -> bool:
    """:func:`~preemptd.framework.quota.lender_may_give` on the lower bound of the usage
    the waiting victims leave (see the module notes); ``False`` means "not known"."""
    usage = candidate.usage
    held = [fr for fr in needed if fr in usage]
    all_usage = accounting.usage
    node: QuotaNode | None = candidate.leaf
    while node is not None and node not in path:
        used = all_usage[node.index]
        subtree = node.subtree
        less = pending.get(node)
        for fr in held:
            if used.get(fr, 0) - (less.get(fr, 0) if less else 0) > subtree.get(fr, 0):
                break
        else:
            return False
        node = node.parent
    return True
