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
    """The ``round_order`` picker of one session."""

    __slots__ = ("session", "shares")

    def __init__(self, session: Session, shares: Shares) -> None:
        self.session = session
        self.shares = shares

    def _judge(self, entry: Assignment, overlay: Overlay, node: QuotaNode) -> tuple[Any, ...]:
        requested = () if entry.mode == NOFIT else entry.usage.keys()
        borrows = bool(requested) and self.shares.borrows(node, requested, overlay)
        return (borrows, self.shares.share(node, overlay), *_workload_key(entry))

    def __call__(self, entries: Sequence[Assignment]) -> int:
        accounting = self.shares.accounting
        overlays: list[Overlay] = []
        # parent index -> its contenders: (entry index, the child of that parent it came through)
        nominees: dict[int, list[tuple[int, QuotaNode]]] = {}
        parents: dict[int, QuotaNode] = {}
        roots: list[int] = []
        for i, entry in enumerate(entries):
            usage = {} if entry.mode == NOFIT else entry.usage
            overlays.append(bubble(accounting, entry.leaf, usage) if usage else {})
            leaf = entry.leaf
            if leaf.parent is None:
                roots.append(i)
                continue
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
            best, winner, child = judged[0]
            if len(judged) > 1:
                rest = "; ".join(f"{c.name} {shown(k[1])}" for k, _, c in judged[1:])
                lines.setdefault(winner, []).append(
                    f"fair sharing: picked at {parent.name}: {child.name} share {shown(best[1])} after "
                    f"admission{' (borrowing)' if best[0] else ''}, before {rest}"
                )
            if parent.parent is None:
                roots.append(winner)
            else:
                nominees.setdefault(parent.parent.index, []).append((winner, parent))
        winner = min(roots, key=lambda i: _workload_key(entries[i]))
        for line in lines.get(winner, ()):
            self.session.explain(entries[winner].workload.key, line)
        return winner
