"""Which nodes a "these pods fit" answer counted on, so that it can be kept across changes
of room elsewhere.

:meth:`Placements.can_place` of ``count`` identical pods sums, over the flavor's nodes that
pass the index's filters (free GPUs of every kind together and free cpu at least the pods'),
how many pods each node's room holds of every positive request, and says yes when the sum
reaches ``count``. The nodes that made the sum are its witness: while each of them keeps at
least its room of the requested resources, of cpu and of every GPU kind, each still passes
the filters and holds at least as many pods (its labels and taints do not change), so the
sum still reaches ``count`` whatever happened on other nodes. A node that lost room of one
of these, even by a pod that took room on it and gave it back elsewhere, ends the witness:
the answer is then asked again. Zero pods fit without a witness; a "no" has none (every
node's room counts for it). Any nodes whose pods make the sum are a witness: it is counted
from the roomiest nodes down, those best fit takes last, so that the room admissions take
on the nodes best fit chose leaves it standing.

Only one pod set's answer is witnessed: placing several together
(:meth:`Placements.fit_all`) places the earlier ones best fit, and which nodes they take
follows the room of every node of their flavor.
"""

from __future__ import annotations

from bisect import bisect_left

from ..model import GPU_RESOURCES, Flavor, PodSet
from .placements import Placements
from .pool import gpu_amount, node_matches, pod_terms, pods_held

__all__ = ["Witness", "fit_witness", "witness_holds"]

Witness = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
"""Per node counted: its name and the room it had then of each resource the answer read."""


def fit_witness(placements: Placements, flavor_name: str, flavor: Flavor, pod_set: PodSet, count: int) -> Witness | None:
    """``can_place`` of ``count`` pods of ``pod_set`` on ``flavor_name``'s nodes (with the
    flavor's node labels and tolerations), on placements with no stale node (committed
    room): the nodes it counted on when they fit, else ``None``. The index is walked from
    its top down to the request (every node below fails its filters)."""
    if count <= 0:
        return ()
    assert not placements._stale, "a witness is read on committed room only"
    index = placements._index.get(flavor_name)
    if index is None:
        return None
    selector, tolerations = pod_terms(flavor, pod_set)
    requests = pod_set.requests
    gpus = gpu_amount(requests)
    cpu = requests.get("cpu", 0)
    requested = [(r, a) for r, a in requests.items() if a > 0]
    read = (*GPU_RESOURCES, "cpu", *(r for r, _ in requested if r != "cpu" and r not in GPU_RESOURCES))
    nodes = placements.pool.nodes
    free = placements.free
    witness: list[tuple[str, tuple[tuple[str, int], ...]]] = []
    found = 0
    keys = index.keys
    names = index.names
    mask = index.mask
    floor = cpu << index.shift
    for k in reversed(keys[bisect_left(keys, gpus) :]):
        bucket = index.buckets[k]
        for j in range(len(bucket) - 1, bisect_left(bucket, floor) - 1, -1):
            name = names[bucket[j] & mask]
            room = free[name]
            fits = pods_held(room, requested, count - found)
            if fits > 0 and node_matches(nodes[name], selector, tolerations):
                get = room.get
                witness.append((name, tuple([(r, get(r, 0)) for r in read])))
                found += fits
                if found >= count:
                    return tuple(witness)
    return None


def witness_holds(placements: Placements, witness: Witness) -> bool:
    """Whether every node of ``witness`` still has at least the room it had of what the
    answer read."""
    free = placements.free
    for name, had in witness:
        get = free[name].get
        for resource, amount in had:
            if get(resource, 0) < amount:
                return False
    return True
