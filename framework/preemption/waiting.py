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

from collections.abc import Mapping

from ..model import FR
from ..quota import QuotaNode
from ..session import Candidate

__all__ = ["forget", "lender_gives_anyway", "remember"]

Pending = dict[QuotaNode, dict[FR, int]]
# A queue and the cohorts above it off the preemptor's path, up to its top (the last).
Chain = tuple[QuotaNode, ...]


def remember(chain: Chain, usage: Mapping[FR, int], held: list[FR], pending: Pending) -> None:
    """Add a waiting victim's needed usage (``held``: the needed flavor-resources it
    holds) to its queue and the cohorts above it up to its top."""
    amounts = [(fr, usage[fr]) for fr in held if usage[fr]]
    if not amounts:
        return
    for node in chain:
        sums = pending.get(node)
        if sums is None:
            pending[node] = dict(amounts)
        else:
            for fr, amount in amounts:
                sums[fr] = sums.get(fr, 0) + amount


def forget(waiting: list[Candidate], chains: dict[QuotaNode, Chain], pending: Pending) -> None:
    """Drop the sums of the nodes under one top: only its waiting victims are in them."""
    for victim in waiting:
        for node in chains[victim.leaf]:
            pending.pop(node, None)


def lender_gives_anyway(all_usage: list[dict[FR, int]], chain: Chain, held: list[FR], pending: Pending) -> bool:
    """:func:`~preemptd.framework.quota.lender_may_give` on the lower bound of the usage
    the waiting victims leave (see the module notes); ``False`` means "not known".
    ``all_usage``: the accounting's usage per node; ``held``: the needed
    flavor-resources the candidate holds."""
    for node in chain:
        used = all_usage[node.index]
        subtree = node.subtree
        less = pending.get(node)
        for fr in held:
            if used.get(fr, 0) - (less.get(fr, 0) if less else 0) > subtree.get(fr, 0):
                break
        else:
            return False
    return True
