"""The lender test of a lazy victim walk (``walk.py``), asked on margins.

The lender test (SEMANTICS §4, ``quota.lender_may_give``) of a candidate reads, for its
queue and each cohort above it off the preemptor's path (its *chain*), whether the node
still uses more than its nominal of some needed flavor-resource the candidate holds. A
lazy walk lets accepted victims wait before it takes them from the quota, and asks the
test on a lower bound of the usage they leave: the node's usage less the needed usage of
every victim waiting under it (``waiting.py``, where the leading run asks it so too).

Here that bound is kept as one number per node and needed flavor-resource, its *margin*
(a row of them per node, by the place of each needed flavor-resource):
usage less nominal, read from the accounting when the node is first asked about (nothing
waits under it then), less the needed usage of each victim accepted under it since. The
node's usage does not move while its victims wait (only taking them changes it), so the
margin is the bound's ``usage - waiting - nominal`` exactly, and the test is "some held
flavor-resource has a margin above 0" at each node of the chain: one number per node and
flavor-resource instead of three. With nothing waiting under a node its margin is exact,
and so is the test. When the victims waiting under a top are taken, the margins of their
chains are dropped (read again, exactly, when next asked); when every waiting victim is
taken, all are.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..model import FR
from ..quota import QuotaNode
from ..session import Candidate

__all__ = ["Margins", "Places", "drop", "gives", "held_of", "keep", "margin_row"]

Margins = dict[QuotaNode, list[int]]
"""Per queue or cohort off the path asked about in an attempt: per needed
flavor-resource at its place (:data:`Places`), its usage less its nominal less the
needed usage of the victims waiting under it."""

Places = tuple[tuple[int, FR], ...]
"""The needed flavor-resources of an attempt, each with its place in a margin row, in
order (``tuple(enumerate(needed))``): a row is read and written by place, without
hashing a flavor-resource per step."""


def held_of(usage: Mapping[FR, int], places: Places) -> list[tuple[int, FR]]:
    """The needed flavor-resources a candidate of ``usage`` holds, with their places."""
    return [pair for pair in places if pair[1] in usage]


def gives(
    all_usage: list[dict[FR, int]],
    chain: tuple[QuotaNode, ...],
    held: list[tuple[int, FR]],
    places: Places,
    margins: Margins,
) -> bool:
    """The lender test of a candidate of ``chain`` holding ``held`` (:func:`held_of`) on
    the margins; ``False``: not known to pass (refused when nothing waits under the chain)."""
    for node in chain:
        margin = margins.get(node)
        if margin is None:
            margin = margins[node] = margin_row(all_usage[node.index], node.subtree, places)
        for place, _ in held:
            if margin[place] > 0:
                break
        else:
            return False
    return True


def margin_row(used: dict[FR, int], subtree: dict[FR, int], places: Places) -> list[int]:
    """A node's margin with nothing waiting under it, as a row: its usage (``used``) less
    its nominal (``subtree``) of each needed flavor-resource at its place."""
    return [used.get(fr, 0) - subtree.get(fr, 0) for _, fr in places]


def keep(
    all_usage: list[dict[FR, int]],
    chain: tuple[QuotaNode, ...],
    usage: Mapping[FR, int],
    held: list[tuple[int, FR]],
    places: Places,
    margins: Margins,
) -> None:
    """A victim of ``chain`` waits: its needed usage comes off the margins of its chain
    (made by the test that accepted it, or here: nothing waits under a node without one)."""
    for node in chain:
        margin = margins.get(node)
        if margin is None:
            margin = margins[node] = margin_row(all_usage[node.index], node.subtree, places)
        for place, fr in held:
            margin[place] -= usage[fr]


def drop(
    waiting: list[Candidate], chains: dict[QuotaNode, tuple[QuotaNode, ...]], margins: Margins
) -> None:
    """The victims ``waiting`` under one top are taken: the margins of their chains no
    longer hold (read again when next asked)."""
    for victim in waiting:
        for node in chains[victim.leaf]:
            margins.pop(node, None)
