"""Which entry of a round goes next (SEMANTICS §7.2): a tournament per tree.

Each leaf with an entry nominates it; each parent, deepest first, nominates the
best of its children's nominees, judging a nominee by C, the child of that parent
on the nominee's path, with the nominee's assignment usage added at its leaf: C
not borrowing on a requested fr first, then the lower share of C, then higher
priority, older creation and the tie-break key. Roots' winners meet on priority,
creation and the tie-break key alone. The picker is called before every pick, so
each pick sees what the entries processed before it changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from preemptd.framework import NOFIT, Assignment, QuotaNode, Session

from .shares import Overlay, Shares, bubble, shown

__all__ = ["Tournament"]


def _workload_key(assignment: Assignment) -> tuple[Any, ...]:
    w = assignment.workload
    return (-w.priority, w.created, *w.tiebreak)


class Tournament:
    """The ``round_order`` picker of one session.

    Trees are independent: processing an entry changes only its own tree's usage, so
    between two picks only the tree of the last pick is judged again; every other
    tree keeps its winner (and its explanation) until that winner is picked or a new
    round brings new entries.
    """

    __slots__ = ("_last", "_winners", "session", "shares")

    def __init__(self, session: Session, shares: Shares) -> None:
        self.session = session
        self.shares = shares
        self._winners: dict[int, tuple[Assignment, list[str]]] = {}
        self._last = -1  # root index of the last pick

    def _judge(self, entry: Assignment, overlay: Overlay, node: QuotaNode) -> tuple[Any, ...]:
        requested = () if entry.mode == NOFIT else entry.usage.keys()
        borrows = bool(requested) and self.shares.borrows(node, requested, overlay)
        return (borrows, self.shares.share(node, overlay), *_workload_key(entry))

    def __call__(self, entries: Sequence[Assignment]) -> int:
        trees: dict[int, list[int]] = {}
        for i, entry in enumerate(entries):
            trees.setdefault(entry.leaf.root.index, []).append(i)
        best: list[tuple[int, list[str]]] = []
        for root, members in trees.items():
            kept = self._winners.get(root)
            if root != self._last and kept is not None:
                found = next((i for i in members if entries[i] is kept[0]), None)
                if found is not None:
                    best.append((found, kept[1]))
                    continue
            winner, lines = self._tree([entries[i] for i in members])
            self._winners[root] = (entries[members[winner]], lines)
            best.append((members[winner], lines))
        index, lines = min(best, key=lambda b: _workload_key(entries[b[0]]))
        self._last = entries[index].leaf.root.index
        for line in lines:
            self.session.explain(entries[index].workload.key, line)
        return index

    def _tree(self, entries: Sequence[Assignment]) -> tuple[int, list[str]]:
        """The winner of one tree's tournament (an index into ``entries``) and the lines
        that say which shares decided it."""
        accounting = self.shares.accounting
        overlays: list[Overlay] = []
        # parent index -> its contenders: (entry index, the child of that parent it came through)
        nominees: dict[int, list[tuple[int, QuotaNode]]] = {}
        parents: dict[int, QuotaNode] = {}
        for i, entry in enumerate(entries):
            leaf = entry.leaf
            if leaf.parent is None:
                return i, []  # a leaf without parent is a tree of its own
            usage = {} if entry.mode == NOFIT else entry.usage
            overlays.append(bubble(accounting, leaf, usage) if usage else {})
            nominees.setdefault(leaf.parent.index, []).append((i, leaf))
            for node in leaf.ancestors():
                parents[node.index] = node
        lines: dict[int, list[str]] = {}
        for parent in sorted(parents.values(), key=lambda n: (-n.depth, n.index)):
            contenders = nominees.get(parent.index)
            if not contenders:
                continue
            judged = sorted(
                ((self._judge(entries[i], overlays[i], child), i, child) for i, child in contenders),
                key=lambda k: k[0],
            )
            top, winner, child = judged[0]
            if len(judged) > 1:
                rest = "; ".join(f"{c.name} {shown(k[1])}" for k, _, c in judged[1:])
                lines.setdefault(winner, []).append(
                    f"fair sharing: picked at {parent.name}: {child.name} share {shown(top[1])} after "
                    f"admission{' (borrowing)' if top[0] else ''}, before {rest}"
                )
            if parent.parent is None:
                return winner, lines.get(winner, [])
            nominees.setdefault(parent.parent.index, []).append((winner, parent))
        raise AssertionError("every tree has a root")
