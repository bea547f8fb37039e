"""The fair victim search (SEMANTICS §7.4), as a ``victim_strategy``.

Candidates: the preemptor's own leaf L per ``withinQueue`` (the in-queue candidates
every plugin offers), and — unless ``reclaimWithinCohort`` is ``Never`` — the
workloads of every other leaf of L's tree that borrows on a needed fr. Each leaf
keeps its own list in the session's victim order, already filtered by
``is_preemptible``.

Targets: descend from the root to the child with the highest share, dropping
what cannot give (a leaf with no candidate left, a leaf other than L that borrows
on nothing, a parent that borrows on nothing and is not an ancestor of L, a
parent with no child left). Every share is taken with the preemptor's request
added at L and the victims taken so far removed (the walk evicts them from the
session's accounting as it takes them).

Nominal floor (``protect_nominal``, on by default; docs/fair-sharing.md): a
fair-sharing victim (``InCohortFairSharing``, either pass) is never taken when its
removal would bring its leaf from at or above its nominal quota to below it on a
flavor-resource the victim uses. Such a victim, pending
again, would find its queue within nominal and reclaim its place without any share
test (the ``within`` rule), so the preemptor's gain would be undone by the next
session. In pass 1 a refused candidate counts as failing (kept); in pass 2 the
target's first kept candidate that is not refused is taken. In-queue and
within-nominal reclamation victims are not concerned: the first never leaves L,
and a preemptor within nominal does not borrow what it takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from preemptd.framework import (
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    FR,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAIM,
    IN_QUEUE,
    Candidate,
    QuotaNode,
    VictimWalk,
    candidate_units,
    format_quantity,
)

from .shares import Overlay, Share, Shares, bubble, shown

__all__ = ["FINAL", "INITIAL", "FairSearch"]

FINAL = "LessThanOrEqualToFinalShare"
INITIAL = "LessThanInitialShare"


def _leaves(node: QuotaNode) -> list[QuotaNode]:
    out: list[QuotaNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.is_leaf:
            out.append(current)
        else:
            stack.extend(reversed(current.children))
    return out


def _sides(leaf: QuotaNode, target: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
    """P_L and P_T: the children of the lowest common ancestor of L and T on each side."""
    above = {node.index: node for node in leaf.path()}
    previous = target
    node = target.parent
    while node is not None and node.index not in above:
        previous = node
        node = node.parent
    assert node is not None, "L and T are in one tree"
    on_l = leaf
    while on_l.parent is not node:
        assert on_l.parent is not None
        on_l = on_l.parent
    return on_l, previous


class FairSearch:
    """One preemptor's search: its candidate lists, the descent and the two passes."""

    __slots__ = (
        "_cache",
        "_overlay",
        "ancestors",
        "floor",
        "leaf",
        "lists",
        "order",
        "shares",
        "strategies",
        "walk",
    )

    def __init__(
        self, walk: VictimWalk, shares: Shares, strategies: tuple[str, ...], protect_nominal: bool = True
    ) -> None:
        self.walk = walk
        self.shares = shares
        self.strategies = strategies
        self.floor = protect_nominal
        self.leaf = walk.request.leaf
        self.ancestors = {node.index for node in self.leaf.ancestors()}
        self.order: Callable[[Candidate], Any] = walk.order
        self.lists: dict[int, list[Candidate]] = {}
        # Shares as the accounting stands, by node index: a take changes only the nodes on
        # its victim's path and on L's (through the preemptor's bubbled request).
        self._cache: dict[int, Share] = {}
        self._overlay: Overlay | None = None

    # -- candidates ----------------------------------------------------------

    def collect(self) -> None:
        walk = self.walk
        leaf = self.leaf
        own = [c for c in walk.candidates() if c.leaf is leaf and c.group == CLASS_SAME_QUEUE]
        self.lists[leaf.index] = [c for c in own if walk.preemptible(c)]
        policy = leaf.spec.preemption.reclaim_within_cohort
        session = walk.session
        if policy == "Never" or leaf.parent is None or not session.cross_queue_enabled:
            return
        needed = walk.request.needed
        preemptor = walk.request.preemptor
        for other in _leaves(leaf.root):
            if other is leaf or not self.shares.borrows(other, needed & other.frs):
                continue
            found: list[Candidate] = []
            for running in session.snapshot.admitted_by_queue.get(other.name, ()):
                if policy == "LowerPriority" and running.priority >= preemptor.priority:
                    continue
                units = candidate_units(session, running, other, reason=IN_COHORT_RECLAIM, group=CLASS_OTHER_QUEUE)
                found.extend(u for u in units if not needed.isdisjoint(u.usage) and walk.preemptible(u))
            found.sort(key=self.order)
            if found:
                self.lists[other.index] = found

    # -- shares --------------------------------------------------------------

    def overlay(self) -> Overlay:
        """The preemptor's request added at L, on the accounting as it stands now."""
        if self._overlay is None:
            self._overlay = bubble(self.shares.accounting, self.leaf, self.walk.request.usage)
        return self._overlay

    def share(self, node: QuotaNode, overlay: Overlay) -> Share:
        """share(node) with the preemptor's request at L (``overlay`` is :meth:`overlay`)."""
        found = self._cache.get(node.index)
        if found is None:
            found = self._cache[node.index] = self.shares.share(node, overlay)
        return found

    def _take(self, candidate: Candidate, reason: str) -> bool:
        """``walk.take``; a taken victim changes the shares on its path and on L's."""
        if not self.walk.take(candidate, reason):
            return False
        for node in candidate.leaf.path():
            self._cache.pop(node.index, None)
        for node in self.leaf.path():
            self._cache.pop(node.index, None)
        self._overlay = None
        return True

    def below_nominal(self, candidate: Candidate) -> tuple[FR, int, int] | None:
        """The nominal floor: the first fr (in the candidate's usage order) on which taking
        ``candidate`` brings its leaf from at or above nominal to below it, with the usage
        it would be left with and the nominal; ``None`` when there is none or the floor is off."""
        if not self.floor:
            return None
        leaf = candidate.leaf
        accounting = self.shares.accounting
        for fr, amount in candidate.usage.items():
            if amount <= 0:
                continue
            nominal = leaf.subtree.get(fr, 0)
            before = accounting.used(leaf, fr)
            if before >= nominal > before - amount:
                return fr, before - amount, nominal
        return None

    def _refuse(self, candidate: Candidate, target: QuotaNode) -> bool:
        """Whether the nominal floor refuses ``candidate``; says why in the explanation."""
        below = self.below_nominal(candidate)
        if below is None:
            return False
        fr, left, nominal = below
        self.walk.lines.append(
            f"fair sharing: {candidate.key} of {target.name} passed over: {target.name} would go below "
            f"its nominal quota on {fr[0]}/{fr[1]} "
            f"({format_quantity(left, fr[1])} < {format_quantity(nominal, fr[1])})"
        )
        return True

    # -- the descent ---------------------------------------------------------

    def target(self, root: QuotaNode, dropped: set[int]) -> QuotaNode | None:
        """The leaf the descent reaches, or ``None`` when the root has no child left."""
        if root.is_leaf:
            return root if self.lists.get(root.index) and root.index not in dropped else None
        overlay = self.overlay()
        return self._descend(root, dropped, overlay)

    def _descend(self, node: QuotaNode, dropped: set[int], overlay: Overlay) -> QuotaNode | None:
        while True:
            left: list[tuple[Any, QuotaNode]] = []
            for child in node.children:
                if child.index in dropped:
                    continue
                if child.is_leaf:
                    items = self.lists.get(child.index)
                    if not items or (child is not self.leaf and not self.shares.borrows(child)):
                        dropped.add(child.index)
                        continue
                    share = self.share(child, overlay)
                    tie: tuple[Any, ...] = (1, child is self.leaf, self.order(items[0]))
                else:
                    if child.index not in self.ancestors and not self.shares.borrows(child, None, overlay):
                        dropped.add(child.index)
                        continue
                    share = self.share(child, overlay)
                    tie = (0, child.name)
                left.append(((-share[0], -share[1], *tie), child))
            if not left:
                dropped.add(node.index)
                return None
            best = min(left, key=lambda item: item[0])[1]
            if best.is_leaf:
                return best
            reached = self._descend(best, dropped, overlay)
            if reached is not None:
                return reached
            # ``best`` had no child left: it is dropped, choose again at this level.

    # -- the passes ----------------------------------------------------------

    def run(self) -> bool:
        self.collect()
        walk = self.walk
        root = self.leaf.root
        kept: dict[int, list[Candidate]] = {}
        dropped: set[int] = set()
        first = self.strategies[0]
        while True:
            target = self.target(root, dropped)
            if target is None:
                break
            items = self.lists[target.index]
            overlay = self.overlay()
            if target is self.leaf:
                if self._take(items.pop(0), IN_QUEUE) and walk.fits():
                    return True
                continue
            needed = walk.request.needed
            if not self.shares.borrows(self.leaf, needed, overlay):
                if self._take(items.pop(0), IN_COHORT_RECLAIM) and walk.fits():
                    return True
                continue
            side_l, side_t = _sides(self.leaf, target)
            s_w, s_t = self.share(side_l, overlay), self.share(side_t, overlay)
            while items:
                candidate = items.pop(0)
                passed, compared = self._passes(first, candidate, side_t, s_w, s_t)
                if passed and not self._refuse(candidate, target):
                    after = "" if first == INITIAL else " without it"
                    walk.lines.append(
                        f"fair sharing: {candidate.key} of {target.name} chosen ({first}): {side_l.name} "
                        f"share {shown(s_w)} with the preemptor, {side_t.name} {shown(compared)}{after} "
                        f"({shown(s_t)} before)"
                    )
                    if self._take(candidate, IN_COHORT_FAIR_SHARING):
                        if walk.fits():
                            return True
                        break
                    continue  # a scenario filter rejected it: passed over, not kept
                kept.setdefault(target.index, []).append(candidate)
        if len(self.strategies) < 2:
            return False
        return self._second_pass(root, kept)

    def _passes(
        self, strategy: str, candidate: Candidate, side_t: QuotaNode, s_w: Share, s_t: Share
    ) -> tuple[bool, Share]:
        """Whether ``candidate`` passes ``strategy``, and the share of P_T it was judged on."""
        if strategy == INITIAL:
            return s_w < s_t, s_t
        accounting = self.shares.accounting
        accounting.remove_all(candidate.leaf, candidate.usage)
        try:
            # P_T is not on L's path, so the preemptor's request does not reach it.
            final = self.shares.share(side_t)
        finally:
            accounting.add_all(candidate.leaf, candidate.usage)
        return s_w <= final, final

    def _second_pass(self, root: QuotaNode, kept: dict[int, list[Candidate]]) -> bool:
        walk = self.walk
        self.lists = kept
        dropped: set[int] = set()
        while True:
            target = self.target(root, dropped)
            if target is None:
                return False
            overlay = self.overlay()
            side_l, side_t = _sides(self.leaf, target)
            s_w, s_t = self.share(side_l, overlay), self.share(side_t, overlay)
            dropped.add(target.index)
            if s_w < s_t:
                candidate = next((c for c in kept[target.index] if not self._refuse(c, target)), None)
                if candidate is None:
                    continue
                walk.lines.append(
                    f"fair sharing: {candidate.key} of {target.name} chosen ({INITIAL}): "
                    f"{side_l.name} share {shown(s_w)} < {side_t.name} {shown(s_t)}"
                )
                if self._take(candidate, IN_COHORT_FAIR_SHARING) and walk.fits():
                    return True
