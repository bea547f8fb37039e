"""The lender test of a lazy victim walk (``walk.py``), asked on margins.

The lender test (SEMANTICS §4, ``quota.lender_may_give``) of a candidate reads, for its
queue and each cohort above it off the preemptor's path (its *chain*), whether the node
still uses more than its nominal of some needed flavor-resource the candidate holds. A
lazy walk lets accepted victims wait before it takes them from the quota, and asks the
test on a lower bound of the usage they leave: the node's usage less the needed usage of
every victim waiting under it (``waiting.py``, where the leading run asks it so too).

Here that bound is kept as one number per node and needed flavor-resource, its *margin*:
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

__all__ = ["Margins", "drop", "gives", "keep", "margin_of", "margin_row"]

Margins = dict[QuotaNode, dict[FR, int]]
"""Per queue or cohort off the path asked about in an attempt: per needed
flavor-resource, its usage less its nominal less the needed usage waiting under it."""


def gives(
    all_usage: list[dict[FR, int]],
    chain: tuple[QuotaNode, ...],
    held: list[FR],
    needed: frozenset[FR],
    margins: Margins,
) -> bool:
    """The lender test of a candidate of ``chain`` holding ``held`` (the needed
    flavor-resources it holds) on the margins; ``False``: not known to pass (refused when
    nothing waits under the chain)."""
    for node in chain:
        margin = margins.get(node)
        if margin is None:
            margin = margins[node] = margin_of(all_usage[node.index], node.subtree, needed)
        for fr in held:
            if margin[fr] > 0:
                break
        else:
            return False
    return True


def margin_of(used: dict[FR, int], subtree: dict[FR, int], needed: frozenset[FR]) -> dict[FR, int]:
    """A node's margin with nothing waiting under it: its usage (``used``) less its nominal
    (``subtree``), per needed flavor-resource."""
    return {fr: used.get(fr, 0) - subtree.get(fr, 0) for fr in needed}


def margin_row(used: dict[FR, int], subtree: dict[FR, int], places: tuple[tuple[int, FR], ...]) -> list[int]:
    """:func:`margin_of` as a row: the margin of each needed flavor-resource at its place
    (``places``: each place with its flavor-resource, in order)."""
    return [used.get(fr, 0) - subtree.get(fr, 0) for _, fr in places]


def keep(
    all_usage: list[dict[FR, int]],
    chain: tuple[QuotaNode, ...],
    usage: Mapping[FR, int],
    held: list[FR],
    needed: frozenset[FR],
    margins: Margins,
) -> None:
    """A victim of ``chain`` waits: its needed usage comes off the margins of its chain
    (made by the test that accepted it, or here: nothing waits under a node without one)."""
    for node in chain:
        margin = margins.get(node)
        if margin is None:
            margin = margins[node] = margin_of(all_usage[node.index], node.subtree, needed)
        for fr in held:
            margin[fr] -= usage[fr]


def drop(
    waiting: list[Candidate], chains: dict[QuotaNode, tuple[QuotaNode, ...]], margins: Margins
) -> None:
    """The victims ``waiting`` under one top are taken: the margins of their chains no
    longer hold (read again when next asked)."""
    for victim in waiting:
        for node in chains[victim.leaf]:
            margins.pop(node, None)
