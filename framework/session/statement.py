"""Virtual admit / evict with checkpoint and rollback.

Every change a session makes to its accounting or to node room goes through
a :class:`Statement` as an operation that knows its own inverse, so "take
victims until it fits, then put back what is not needed" costs exactly the
operations undone, and a rollback restores the accounting bit for bit.

Epochs: a commit that keeps a change bumps the epoch of every queue tree whose
usage it touched (by the root's index) and, if it touched node room, the node
epoch. Between commits the state of a tree is therefore named by its epoch, which
is what the session's search memo keys on (``preemption/memo.py``). A change
later rolled back may still bump an epoch: a spurious bump only costs a memo miss.

Node room changes tentatively (``Placements.defer``, one call per change): the sorted node
index is brought up to date on commit, and when a rollback returns to the last
commit, not after every operation a search undoes.

A victim walk changes the quota of many queues and always returns to where it started:
undoing its steps one by one costs as much as making them. :meth:`hold` marks such a
start: before the first change of each queue tree's lineage after it, the usage of the
lineage's nodes is copied, and :meth:`release` puts the copies back instead of undoing
each quota operation (node operations are still undone one by one). Adding and removing
usage are exact inverses, so a rollback leaves every value as it was before the hold,
and a flavor-resource first met during the hold stays at 0: the release leaves the
same maps, keys in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..model import FR, Workload
from ..nodes import Placements
from ..quota import Accounting, QuotaNode
from .candidates import Candidate, HeldRoom

__all__ = ["Statement"]

_ADD = 0
_REMOVE = 1
_TAKE = 2
_GIVE = 3

Listener = Callable[[Workload, int | None], None]


class Statement:
    __slots__ = (
        "_held",
        "_held_at",
        "_held_nodes",
        "_nodes_touched",
        "_touched",
        "accounting",
        "epochs",
        "last_fit",
        "node_epoch",
        "on_admit",
        "on_evict",
        "ops",
        "placements",
    )

    def __init__(
        self,
        accounting: Accounting,
        placements: Placements | None,
        *,
        on_admit: Listener | None = None,
        on_evict: Listener | None = None,
    ) -> None:
        self.accounting = accounting
        self.placements = placements
        self.ops: list[tuple[int, object, Mapping[str, int] | Mapping[FR, int]]] = []
        self.on_admit = on_admit
        self.on_evict = on_evict
        self.epochs: dict[int, int] = {}  # root index -> commits that changed its tree
        self.node_epoch = 0
        # The last pods-fit answer on committed room (Session.pods_fit): key, answer, pod sets.
        self.last_fit: tuple[list[object], bool, object] | None = None
        self._touched: set[int] = set()
        self._nodes_touched = False
        # During a hold: per node index, its usage when first changed (see the notes), and
        # whether a node operation was made.
        self._held: dict[int, dict[FR, int]] | None = None
        self._held_at = 0  # the checkpoint of the hold
        self._held_nodes = False

    def checkpoint(self) -> int:
        return len(self.ops)

    def rollback(self, checkpoint: int = 0) -> None:
        if self._held is not None and checkpoint < self._held_at:
            self._held = None  # back past a hold: its copies are of a later state
        ops = self.ops
        accounting = self.accounting
        placements = self.placements
        while len(ops) > checkpoint:
            kind, target, amounts = ops.pop()
            if kind == _ADD:
                accounting.remove_all(target, amounts)  # type: ignore[arg-type]
            elif kind == _REMOVE:
                accounting.add_all(target, amounts)  # type: ignore[arg-type]
            elif kind == _TAKE:
                assert placements is not None
                placements.defer(target, amounts, 1)  # type: ignore[arg-type]
            else:
                assert placements is not None
                placements.defer(target, amounts, -1)  # type: ignore[arg-type]
        if not ops:
            # Back at the last commit: nothing touched is kept.
            self._touched.clear()
            self._nodes_touched = False
            if placements is not None:
                placements.sync()

    def hold(self) -> int:
        """A checkpoint :meth:`release` returns to (see the notes). A hold inside a hold
        is a plain checkpoint (the outer copies are of an earlier state) and its release
        a plain rollback; a rollback or commit past a hold ends it."""
        if self._held is None:
            self._held = {}
            self._held_at = len(self.ops)
            self._held_nodes = False
        return len(self.ops)

    def release(self, checkpoint: int) -> None:
        """:meth:`rollback` to ``checkpoint``, a :meth:`hold`: the quota from the copies."""
        held = self._held
        ops = self.ops
        if held is None or checkpoint != self._held_at or len(ops) < checkpoint:
            self.rollback(checkpoint)
            return
        self._held = None
        placements = self.placements
        if self._held_nodes:
            # Node operations undone in reverse; quota operations only dropped.
            assert placements is not None
            for i in range(len(ops) - 1, checkpoint - 1, -1):
                kind, target, amounts = ops[i]
                if kind == _TAKE:
                    placements.defer(target, amounts, 1)  # type: ignore[arg-type]
                elif kind == _GIVE:
                    placements.defer(target, amounts, -1)  # type: ignore[arg-type]
        del ops[checkpoint:]
        all_usage = self.accounting.usage
        for index, saved in held.items():
            usage = all_usage[index]
            if len(usage) == len(saved):
                usage.update(saved)
                continue
            for fr in usage:  # one first met during the hold: 0, as a rollback leaves it
                usage[fr] = saved.get(fr, 0)
        if not ops:
            self._touched.clear()
            self._nodes_touched = False
            if placements is not None:
                placements.sync()

    def _save(self, held: dict[int, dict[FR, int]], leaf: QuotaNode) -> None:
        """Copy the usage of ``leaf`` and its ancestors not copied yet (an ancestor of a
        copied node is copied)."""
        all_usage = self.accounting.usage
        for node in reversed(leaf.lineage):
            index = node.index
            if index in held:
                return
            held[index] = dict(all_usage[index])

    def commit(self) -> None:
        """Keep everything done so far; later rollbacks cannot undo it (nor a release:
        a hold ends here)."""
        self._held = None
        if self.ops:
            epochs = self.epochs
            for root in self._touched:
                epochs[root] = epochs.get(root, 0) + 1
            if self._nodes_touched:
                self.node_epoch += 1
            self.ops.clear()
            if self.placements is not None:
                self.placements.sync()
        self._touched.clear()
        self._nodes_touched = False

    def epoch(self, leaf: QuotaNode) -> int:
        """How many commits changed the usage of ``leaf``'s queue tree."""
        return self.epochs.get(leaf.root.index, 0)

    # -- quota -------------------------------------------------------------

    def add_usage(self, leaf: QuotaNode, usage: Mapping[FR, int]) -> None:
        held = self._held
        if held is not None and leaf.index not in held:
            self._save(held, leaf)
        self.accounting.add_all(leaf, usage)
        self.ops.append((_ADD, leaf, usage))
        self._touched.add(leaf.root.index)

    def remove_usage(self, leaf: QuotaNode, usage: Mapping[FR, int]) -> None:
        held = self._held
        if held is not None and leaf.index not in held:
            self._save(held, leaf)
        self.accounting.remove_all(leaf, usage)
        self.ops.append((_REMOVE, leaf, usage))
        self._touched.add(leaf.root.index)

    # -- nodes -------------------------------------------------------------

    def take_room(self, node: str, requests: Mapping[str, int]) -> None:
        assert self.placements is not None
        self.placements.defer(node, requests, -1)
        self.ops.append((_TAKE, node, requests))
        self._nodes_touched = True
        self._held_nodes = True

    def took_rooms(self, taken: Sequence[tuple[str, Mapping[str, int]]]) -> None:
        """Record the room its placements took themselves, each (node, requests) of
        ``taken`` in order (``Placements.place_pods`` with ``taken``), as :meth:`take_room`
        of each records it."""
        if not taken:
            return
        ops = self.ops
        for node, requests in taken:
            ops.append((_TAKE, node, requests))
        self._nodes_touched = True
        self._held_nodes = True

    def give_room(self, node: str, requests: Mapping[str, int]) -> None:
        assert self.placements is not None
        self.placements.defer(node, requests, 1)
        self.ops.append((_GIVE, node, requests))
        self._nodes_touched = True
        self._held_nodes = True

    def give_rooms(self, room: Sequence[HeldRoom]) -> None:
        """:meth:`give_room` of each pod's node and requests in ``room`` (a candidate's), in order."""
        if not room:
            return
        placements = self.placements
        assert placements is not None
        defer = placements.defer
        ops = self.ops
        for pod in room:
            node, requests = pod.node_name, pod.requests
            defer(node, requests, 1)
            ops.append((_GIVE, node, requests))
        self._nodes_touched = True
        self._held_nodes = True

    # -- workloads ---------------------------------------------------------

    def admit(self, workload: Workload, leaf: QuotaNode, usage: Mapping[FR, int], count: int | None = None) -> None:
        self.add_usage(leaf, usage)
        if self.on_admit is not None:
            self.on_admit(workload, count)

    def evict(self, candidate: Candidate, *, nodes: bool = True) -> None:
        """Virtually take one candidate unit: its quota and (with ``nodes``) its pods'
        room come free. A search that does not place pods leaves node room alone."""
        leaf = candidate.leaf
        held = self._held
        if held is not None and leaf.index not in held:
            self._save(held, leaf)
        self.accounting.remove_all(leaf, candidate.usage)
        ops = self.ops
        ops.append((_REMOVE, leaf, candidate.usage))
        self._touched.add(leaf.root.index)
        placements = self.placements
        if nodes and placements is not None and candidate.room:
            # give_room, inlined: a victim search evicts once per step.
            defer = placements.defer
            for pod in candidate.room:
                node, requests = pod.node_name, pod.requests
                defer(node, requests, 1)
                ops.append((_GIVE, node, requests))
            self._nodes_touched = True
            self._held_nodes = True
        if self.on_evict is not None:
            self.on_evict(candidate.workload, candidate.count)
