"""The queue tree's resource nodes and the quota arithmetic of SEMANTICS §1.

Static figures (nominal, limits, subtree quota, local reserve, potential
availability) live on :class:`QuotaNode` and never change within a session.
Usage is the only mutable part and lives in :class:`Accounting`, one per
session, so a snapshot can be shared by any number of sessions.

The arithmetic follows Kueue's hierarchical resource nodes: a node keeps a
*local reserve* (``nominal - lendingLimit``) that only its own subtree may
use; what exceeds the reserve is "stored in the parent", which is why usage
bubbles up as ``max(0, v - local headroom)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .model import FR, QueueSpec

__all__ = ["Accounting", "QuotaNode", "QuotaTree", "fr_of", "lender_may_give"]

_FRS: dict[FR, FR] = {}


def fr_of(flavor: str, resource: str) -> FR:
    """The one tuple of ``(flavor, resource)``. A tuple's hash is not kept, and a map
    asked with a key equal to one of its own but another object compares the two item by
    item: a key that *is* the map's is found on identity. The queues' quota figures and
    kept levels, the flavor checks' requests, the snapshot's usage maps and the usage of
    the assignments the flavor scans make key by these."""
    fr = (flavor, resource)
    return _FRS.setdefault(fr, fr)


class QuotaNode:
    """One queue or cohort of the tree, with its static quota figures."""

    __slots__ = (
        "borrowing_limit",
        "children",
        "depth",
        "frs",
        "guaranteed",
        "height",
        "index",
        "is_leaf",
        "lending_limit",
        "levels",
        "lineage",
        "name",
        "nominal",
        "parent",
        "potential",
        "reserved",
        "root",
        "spec",
        "subtree",
        "up",
    )

    def __init__(self, spec: QueueSpec, index: int) -> None:
        self.spec = spec
        self.name = spec.name
        self.index = index
        self.parent: QuotaNode | None = None
        self.children: list[QuotaNode] = []
        self.is_leaf = True
        self.nominal: dict[FR, int] = {}
        self.borrowing_limit: dict[FR, int] = {}
        self.lending_limit: dict[FR, int] = {}
        self.subtree: dict[FR, int] = {}
        self.guaranteed: dict[FR, int] = {}
        self.potential: dict[FR, int] = {}
        self.frs: frozenset[FR] = frozenset()
        self.height = 0
        self.depth = 0
        self.root: QuotaNode = self
        # The root, then each node down to this one (``Accounting._available`` reads it).
        self.lineage: tuple[QuotaNode, ...] = (self,)
        # The indices of this node and its ancestors, bottom up, and the flavor-resources
        # some node of them below the root keeps a local reserve of (``Accounting.add_all``).
        self.up: tuple[int, ...] = (index,)
        self.reserved: frozenset[FR] = frozenset()
        # Per flavor-resource, once asked: the static figures ``Accounting._available``
        # reads besides usage (see ``_levels``).
        self.levels: dict[FR, _Levels] = {}
        for group in spec.resource_groups:
            for flavor in group.flavors:
                for resource, quota in flavor.resources.items():
                    fr = fr_of(flavor.flavor, resource)
                    self.nominal[fr] = quota.nominal
                    if quota.borrowing_limit is not None:
                        self.borrowing_limit[fr] = quota.borrowing_limit
                    if quota.lending_limit is not None:
                        self.lending_limit[fr] = quota.lending_limit

    def ancestors(self) -> Iterable[QuotaNode]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def path(self) -> list[QuotaNode]:
        """This node and its ancestors, from itself up to the root."""
        out = [self]
        out.extend(self.ancestors())
        return out

    def __repr__(self) -> str:
        return f"QuotaNode({self.name!r})"


class QuotaTree:
    """All queues and cohorts of a snapshot, with derived static figures."""

    __slots__ = ("leaves", "nodes", "roots")

    def __init__(self, specs: Mapping[str, QueueSpec]) -> None:
        self.nodes: dict[str, QuotaNode] = {}
        for i, name in enumerate(sorted(specs)):
            self.nodes[name] = QuotaNode(specs[name], i)
        for node in self.nodes.values():
            parent_name = node.spec.parent
            if parent_name is not None and parent_name in self.nodes:
                parent = self.nodes[parent_name]
                node.parent = parent
                parent.children.append(node)
                parent.is_leaf = False
        self.roots = [n for n in self.nodes.values() if n.parent is None]
        for root in self.roots:
            self._derive(root)
        self.leaves = {name: n for name, n in self.nodes.items() if n.is_leaf and n.spec.defined}

    @staticmethod
    def _derive(root: QuotaNode) -> None:
        """Depth, root, subtree, guaranteed and potential of every node of one tree.

        Without recursion (a tree's depth comes from the input): nodes are listed
        parents first, then the bottom-up figures are taken in reverse order and
        the top-down ones in order.
        """
        order: list[QuotaNode] = []
        stack = [root]
        root.depth = 0
        while stack:
            node = stack.pop()
            node.root = root
            node.lineage = (node,) if node.parent is None else (*node.parent.lineage, node)
            order.append(node)
            for child in reversed(node.children):
                child.depth = node.depth + 1
                stack.append(child)
        for node in reversed(order):
            subtree = dict(node.nominal)
            height = 0
            frs: set[FR] = set()
            for child in node.children:
                height = max(height, child.height + 1)
                for fr, amount in child.subtree.items():
                    subtree[fr] = subtree.get(fr, 0) + amount - child.guaranteed.get(fr, 0)
                frs |= child.frs
            node.height = height
            node.subtree = subtree
            node.guaranteed = {
                fr: max(0, subtree.get(fr, 0) - limit) for fr, limit in node.lending_limit.items()
            }
            node.frs = frozenset(frs | set(subtree))
        for node in order:
            if node.parent is not None:
                node.up = (node.index, *node.parent.up)
                reserved = {fr for fr, amount in node.guaranteed.items() if amount > 0}
                node.reserved = node.parent.reserved | reserved
            for fr in node.frs:
                if node.parent is None:
                    value = node.subtree.get(fr, 0)
                else:
                    value = node.guaranteed.get(fr, 0) + node.parent.potential.get(fr, 0)
                    limit = node.borrowing_limit.get(fr)
                    if limit is not None:
                        value = min(value, node.subtree.get(fr, 0) + limit)
                node.potential[fr] = value


class Accounting:
    """Mutable usage per node of a :class:`QuotaTree`; one per session."""

    __slots__ = ("tree", "usage")

    def __init__(self, tree: QuotaTree) -> None:
        self.tree = tree
        self.usage: list[dict[FR, int]] = [{} for _ in tree.nodes]

    def copy(self) -> Accounting:
        clone = Accounting.__new__(Accounting)
        clone.tree = self.tree
        clone.usage = [dict(u) for u in self.usage]
        return clone

    def add(self, node: QuotaNode | None, fr: FR, amount: int) -> None:
        """Add usage at ``node``; what exceeds its local headroom bubbles to the parent."""
        while node is not None and amount > 0:
            usage = self.usage[node.index]
            used = usage.get(fr, 0)
            headroom = node.guaranteed.get(fr, 0) - used
            usage[fr] = used + amount
            if headroom > 0:
                amount -= headroom
            node = node.parent

    def remove(self, node: QuotaNode | None, fr: FR, amount: int) -> None:
        """Mirror of :meth:`add`: only what was stored in the parent leaves the parent."""
        while node is not None and amount > 0:
            usage = self.usage[node.index]
            used = usage.get(fr, 0)
            stored_in_parent = used - node.guaranteed.get(fr, 0)
            usage[fr] = used - amount
            if stored_in_parent <= 0:
                return
            amount = min(amount, stored_in_parent)
            node = node.parent

    def add_all(self, node: QuotaNode, usage: Mapping[FR, int]) -> None:
        """:meth:`add` of each flavor-resource (inlined: victim searches call this per step).

        A flavor-resource no node below the root keeps a reserve of (``node.reserved``)
        has no headroom at a level but what negative usage there would give, so the
        amount goes up the node's indices (``node.up``) whole; the others take
        :meth:`add`'s walk."""
        all_usage = self.usage
        reserved = node.reserved
        up = node.up
        for fr, amount in usage.items():
            if amount <= 0:
                continue
            if reserved and fr in reserved:
                self.add(node, fr, amount)
                continue
            for index in up:
                here = all_usage[index]
                used = here.get(fr, 0)
                here[fr] = used + amount
                if used < 0:  # headroom -used: only that much less goes up
                    amount += used
                    if amount <= 0:
                        break

    def remove_all(self, node: QuotaNode, usage: Mapping[FR, int]) -> None:
        """:meth:`remove` of each flavor-resource (as :meth:`add_all`: without a reserve,
        a level stores in its parent all its usage, and no more than that leaves it)."""
        all_usage = self.usage
        reserved = node.reserved
        up = node.up
        for fr, amount in usage.items():
            if amount <= 0:
                continue
            if reserved and fr in reserved:
                self.remove(node, fr, amount)
                continue
            for index in up:
                here = all_usage[index]
                used = here.get(fr, 0)
                here[fr] = used - amount
                if used <= 0:
                    break
                if used < amount:
                    amount = used

    def used(self, node: QuotaNode, fr: FR) -> int:
        return self.usage[node.index].get(fr, 0)

    def available(self, node: QuotaNode, fr: FR) -> int:
        """SEMANTICS §1 Available(q): never negative (:meth:`_available` clipped at 0)."""
        available = self._available(node, fr)
        return available if available > 0 else 0

    def _available(self, node: QuotaNode, fr: FR) -> int:
        """Available(q) unclipped, from the root down the node's lineage: at each level
        the local reserve left plus what the level above offers, capped by the
        borrowing limit (SEMANTICS §1)."""
        all_usage = self.usage
        levels = node.levels.get(fr)
        if levels is None:
            levels = _levels(node, fr)
        root, available, below, _ = levels
        available -= all_usage[root].get(fr, 0)
        for index, guaranteed, limit, stored in below:
            used = all_usage[index].get(fr, 0)
            if limit is not None:
                cap = stored - (used - guaranteed if used > guaranteed else 0) + limit
                if cap < available:
                    available = cap
            if guaranteed > used:
                available += guaranteed - used
        return available

    headroom = _available
    """:meth:`available` before it is clipped at 0 (negative: over-committed). It grows
    by at most ``x`` when ``x`` of usage is removed anywhere in the tree (each level
    passes up no more than it lost), which bounds what any set of victims can free."""

    def borrowing(self, node: QuotaNode, fr: FR) -> bool:
        """Usage above the node's own (subtree) quota."""
        return self.usage[node.index].get(fr, 0) > node.subtree.get(fr, 0)

    def within_nominal(self, node: QuotaNode, fr: FR) -> bool:
        return self.usage[node.index].get(fr, 0) <= node.subtree.get(fr, 0)

    def level_of(self, leaf: QuotaNode, usage: Mapping[FR, int]) -> int:
        """The borrowing level of a whole request: the highest of its flavor-resources'."""
        level = 0
        for fr, amount in usage.items():
            found = self.borrowing_level(leaf, fr, amount)
            if found > level:
                level = found
        return level

    def fit_level(self, leaf: QuotaNode, fr: FR, request: int) -> int:
        """:meth:`borrowing_level` of ``request`` when it is within :meth:`available`, else
        -1: one walk for both (the flavor checks ask both per flavor-resource). Available's
        walk ends at the leaf, whose usage and quota then answer level 0 as they stand."""
        all_usage = self.usage
        levels = leaf.levels.get(fr)
        if levels is None:
            levels = _levels(leaf, fr)
        root, available, below, _ = levels
        available -= all_usage[root].get(fr, 0)
        used = guaranteed = stored = 0
        for index, guaranteed, limit, stored in below:
            used = all_usage[index].get(fr, 0)
            if limit is not None:
                cap = stored - (used - guaranteed if used > guaranteed else 0) + limit
                if cap < available:
                    available = cap
            if guaranteed > used:
                available += guaranteed - used
        if request > (available if available > 0 else 0):
            return -1
        if below and used + request <= stored + guaranteed:
            return 0  # the leaf's usage and quota (stored in its parent plus its reserve)
        return self.borrowing_level(leaf, fr, request)

    def borrowing_level(self, leaf: QuotaNode, fr: FR, request: int) -> int:
        """SEMANTICS §2.3: 0 within the leaf's nominal, else the height of the lowest
        ancestor whose subtree can supply the request (the root's height if none can).
        Each level's quota, reserve and height from the node's kept figures (``_levels``)."""
        levels = leaf.levels.get(fr)
        if levels is None:
            levels = _levels(leaf, fr)
        top, steps = levels[3]
        all_usage = self.usage
        for index, subtree, guaranteed, height in steps:
            used = all_usage[index].get(fr, 0)
            if used + request <= subtree:
                return height
            if guaranteed > used:
                request -= guaranteed - used
        return top

    def fits_ancestor(self, leaf: QuotaNode, fr: FR, request: int, *, below_root: bool) -> QuotaNode | None:
        """The lowest ancestor A with ``usage(A) + remaining <= subtree(A)``, where
        ``remaining`` is the request less what the levels below A can still supply from
        their local reserves (SEMANTICS §4, hierarchical reclaim). With ``below_root``
        the root itself does not count."""
        used = self.usage[leaf.index].get(fr, 0)
        amount = request - max(0, leaf.guaranteed.get(fr, 0) - used)
        node = leaf.parent
        while node is not None:
            if below_root and node.parent is None:
                return None
            used = self.usage[node.index].get(fr, 0)
            if used + amount <= node.subtree.get(fr, 0):
                return node
            amount -= max(0, node.guaranteed.get(fr, 0) - used)
            node = node.parent
        return None


_Step = tuple[int, int, int, int]
_Levels = tuple[int, int, tuple[tuple[int, int, int | None, int], ...], tuple[int, tuple[_Step, ...]]]


def _levels(node: QuotaNode, fr: FR) -> _Levels:
    """What ``Accounting._available`` reads of ``node``'s lineage besides usage: the root's
    index and quota, then per level below the root its index, local reserve, borrowing
    limit (or ``None``) and the quota it stores in its parent. Then what
    ``borrowing_level`` reads: the root's height and, from the node up, each level's index,
    subtree quota, reserve and the level it answers (0 at the node). Static: kept on the node."""
    found = []
    for at in node.lineage[1:]:
        guaranteed = at.guaranteed.get(fr, 0)
        found.append((at.index, guaranteed, at.borrowing_limit.get(fr), at.subtree.get(fr, 0) - guaranteed))
    steps = [
        (at.index, at.subtree.get(fr, 0), at.guaranteed.get(fr, 0), 0 if at is node else at.height)
        for at in node.path()
    ]
    root = node.lineage[0]
    up = (root.height, tuple(steps))
    levels = node.levels[fr] = (root.index, root.subtree.get(fr, 0), tuple(found), up)
    return levels


def lender_may_give(
    accounting: Accounting,
    leaf: QuotaNode,
    lender: QuotaNode,
    usage: Mapping[FR, int],
    needed: frozenset[FR],
    path: frozenset[QuotaNode] | None = None,
) -> bool:
    """Whether taking ``usage`` from a workload of queue ``lender`` keeps that queue — and
    every cohort between it and the preemptor's ``leaf`` — at or above nominal: each must
    still borrow on some needed flavor-resource the taken usage holds (SEMANTICS §4).
    ``path``: the preemptor's leaf and ancestors, when the caller has it already."""
    preemptor_path = path if path is not None else frozenset(leaf.path())
    held = [fr for fr in needed if fr in usage]
    all_usage = accounting.usage
    node: QuotaNode | None = lender
    while node is not None and node not in preemptor_path:
        used = all_usage[node.index]
        subtree = node.subtree
        for fr in held:
            if used.get(fr, 0) > subtree.get(fr, 0):
                break
        else:
            return False
        node = node.parent
    return True
