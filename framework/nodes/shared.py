"""Flavor indexes shared between a :class:`~.placements.Placements` and its copies.

A session copies the snapshot's placements, and a preempting entry copies the
session's; copying every flavor index and laying out each node's list of them
(``NodePool.lay_out``) was most of a copy, and many copies never change an index. So
a copy shares the indexes and the per-node lists of the placements it was copied
from, its *holder*, until one side changes an index or hands one out (a ``PodTally``
reads it while the placements change): then that side must own them. A copy takes
copies of its own. The holder keeps its objects, since it may have handed them out
before it was copied, and first gives each copy still sharing them copies of its own.
A copy of a copy shares its holder's objects and joins the same holder.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .pool import NodePool, _FlavorIndex

__all__ = ["SharedIndexes"]


class SharedIndexes:
    """The sharing half of ``Placements``."""

    __slots__ = ("__weakref__", "_holder", "_index", "_node_flavors", "_sharers")

    pool: NodePool
    _index: dict[str, _FlavorIndex]
    _node_flavors: Mapping[str, list[_FlavorIndex]]
    _holder: SharedIndexes | None  # whose indexes this object shares; None: its own
    _sharers: list[weakref.ref[SharedIndexes]]  # copies that may share this object's indexes

    def _share(self, clone: SharedIndexes) -> None:
        """Let ``clone``, a new copy of this object, share its indexes."""
        clone._index = self._index
        clone._node_flavors = self._node_flavors
        holder = clone._holder = self._holder or self
        clone._sharers = []
        holder._sharers.append(weakref.ref(clone))

    def _own_index(self) -> None:
        """Make this object's indexes its own: before it changes one or hands one out."""
        sharing: list[SharedIndexes] = []
        if self._holder is not None:
            sharing.append(self)
        elif self._sharers:
            for ref in self._sharers:
                other = ref()
                if other is not None and other._holder is self:
                    sharing.append(other)
            self._sharers = []
        else:
            return
        for owner in sharing:
            owner._holder = None
            owner._index = {flavor: index.copy() for flavor, index in owner._index.items()}
            owner._node_flavors = owner.pool.lay_out(owner._index)
