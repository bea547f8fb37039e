"""Node-level fit and placement (SEMANTICS §6, first part).

Only flavors that have Node objects (nodes whose labels match the flavor's
``nodeLabels``) are placed; without nodes only quota counts, as in Kueue.

Pods are placed one at a time, best fit: the node with the least free GPUs
that still fits, then the least free cpu, then the node name. Scanning 4,000
nodes per pod would be quadratic over a burst of pods, so each flavor keeps
its nodes bucketed by free GPUs, each bucket sorted by ``(free cpu, name)``;
the first fitting node found walking buckets upwards from the request is the
best fit. The identical pods of a pod set are placed with one such walk, resumed
after each node they fill (``filling.py``). A bucket's entry is one integer,
``cpu << shift | rank``, the rank being the node's place among the pool's sorted
names: integers order as the (cpu, name) pairs do, and a search of a bucket (what
keeping it sorted mostly costs) compares integers, not pairs of a number and a string.

A victim search frees and takes room tentatively, and undoes it after every
attempt; re-sorting a node in its bucket each time cost more than the search
itself. Room changed through :meth:`Placements.defer` (what a statement calls;
``take_tentatively`` and ``give_back_tentatively`` are its two-argument forms, for a
``take`` callback) changes only the node's free room: the
node is marked stale, with the place the index still holds for it, and is moved
in the index by :meth:`Placements.sync` (the session's statement syncs on commit,
and when a rollback brings it back to the last commit). Until then every query
skips stale nodes in the index and judges them one by one on their actual room,
with the same filters and order, so its answer is the one a fresh index gives.
"""

from .placements import Placements
from .pool import (
    GPU_KINDS,
    NodePool,
    PodTally,
    flavor_taints_tolerated,
    flavor_tolerations,
    gpu_amount,
    node_matches,
    pod_terms,
)

__all__ = [
    "GPU_KINDS",
    "NodePool",
    "Placements",
    "PodTally",
    "flavor_taints_tolerated",
    "flavor_tolerations",
    "gpu_amount",
    "node_matches",
    "pod_terms",
]
