"""A queue node's weighted dominant resource share (SEMANTICS §7.1), exactly.

A share is kept as a :data:`Share` pair so that comparing two is one tuple
comparison in exact arithmetic: ``(0, ratio / weight)`` when finite, ``(1, ratio)``
when the weight is 0 and the node borrows (two infinite shares compare by their
ratios, and every infinite share sorts above every finite one). Ratios are
:class:`~fractions.Fraction`: ``B[r] × 1000 / lendable[r]`` is never rounded, only
the reported figure is (``⌈share⌉``).

Every function reads the session's accounting as it stands, plus an optional
*overlay*: usage added at a leaf and bubbled up the way ``Accounting.add`` does
(a head's assignment in the tournament, a preemptor's request in the victim
search), without touching the accounting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from math import ceil

from preemptd.framework import FR, Accounting, QuotaNode

__all__ = ["INFINITE", "ZERO", "Overlay", "Share", "Shares", "bubble", "reported"]

Share = tuple[int, Fraction]
Overlay = Mapping[int, Mapping[FR, int]]
"""Node index -> usage added on top of the accounting."""

ZERO: Share = (0, Fraction(0))
INFINITE = 9223372036854775807  # 2^63 - 1: a borrowing queue of weight 0, as reported
_NONE: Overlay = {}


def bubble(accounting: Accounting, leaf: QuotaNode, usage: Mapping[FR, int]) -> dict[int, dict[FR, int]]:
    """What adding ``usage`` at ``leaf`` adds to each node on its path (SEMANTICS §1)."""
    out: dict[int, dict[FR, int]] = {}
    for fr, amount in usage.items():
        node: QuotaNode | None = leaf
        while node is not None and amount > 0:
            out.setdefault(node.index, {})[fr] = amount
            headroom = node.guaranteed.get(fr, 0) - accounting.used(node, fr)
            if headroom > 0:
                amount -= headroom
            node = node.parent
    return out


def reported(share: Share) -> int:
    """``status.fairSharing.weightedShare``: ⌈share⌉, or 2^63 − 1 when infinite."""
    return INFINITE if share[0] else ceil(share[1])


class Shares:
    """Shares of one session's tree nodes; the static part (lendable) computed once."""

    __slots__ = ("_lendable", "accounting")

    def __init__(self, accounting: Accounting) -> None:
        self.accounting = accounting
        self._lendable: dict[int, dict[str, int]] = {}

    def lendable(self, node: QuotaNode) -> dict[str, int]:
        """lendable[r]: Σ over every flavor f of r anywhere in N's tree (the whole tree
        from its root) of PotentialAvailable(N's parent, (f, r))."""
        found = self._lendable.get(node.index)
        if found is None:
            found = {}
            parent = node.parent
            if parent is not None:
                for fr in node.root.frs:
                    found[fr[1]] = found.get(fr[1], 0) + parent.potential.get(fr, 0)
            self._lendable[node.index] = found
        return found

    def borrows(self, node: QuotaNode, frs: Iterable[FR] | None = None, overlay: Overlay = _NONE) -> bool:
        """Usage above subtree quota on some fr of ``frs`` (all of the node's by default);
        a root never borrows."""
        if node.parent is None:
            return False
        accounting = self.accounting
        added = overlay.get(node.index, {})
        for fr in node.frs if frs is None else frs:
            if accounting.used(node, fr) + added.get(fr, 0) > node.subtree.get(fr, 0):
                return True
        return False

    def share(self, node: QuotaNode, overlay: Overlay = _NONE) -> Share:
        if node.parent is None:
            return ZERO
        accounting = self.accounting
        added = overlay.get(node.index, {})
        borrowed: dict[str, int] = {}
        for fr in node.frs:
            over = accounting.used(node, fr) + added.get(fr, 0) - node.subtree.get(fr, 0)
            if over > 0:
                borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
        if not borrowed:
            return ZERO
        lendable = self.lendable(node)
        ratio = Fraction(0)
        for resource, amount in borrowed.items():
            lend = lendable.get(resource, 0)
            if lend > 0:
                ratio = max(ratio, Fraction(amount * 1000, lend))
        if ratio == 0:
            return ZERO
        weight = node.spec.fair_weight
        if weight == 0:
            return (1, ratio)
        return (0, ratio / weight)


def shown(share: Share) -> str:
    """A share for explanations: the reported integer, or "∞"."""
    return "inf" if share[0] else str(reported(share))
