"""Placing a pod set's identical pods best fit: one walk of the flavor's nodes per call.

Placing pods one at a time asks best fit (the least free GPUs, free cpu, name of a node
where the pod fits) once per pod. :meth:`Filling.place_pods` answers exactly as that does,
with one walk of the flavor's index and one look at each stale node per call:

- The node chosen takes every pod it still holds at once (the pods it holds by each
  requested resource, and by the free GPUs of every kind together, as the index's filter
  counts them). After that it holds no further pod: a requested resource or its free GPUs
  run short (requests are never negative), so it is never chosen again in the call.
- Taking room changes only the node chosen. Every node the walk passed before it (stale,
  or short of room, or not matching the pods' terms) is passed again for the next pod, and
  so is the chosen node; so the next index walk resumes just after it, from its key
  (the key, not a position: a ``take`` that is not tentative moves the node in the index).
  The first node that fits found by a walk stays the index's answer until it is chosen.
- The stale nodes (judged on their actual room, as a fresh index would) are the ones
  stale when the call starts: a node the call takes room on holds no further pod. They
  are sorted once by their key; the first that fits is the stale answer until it is
  chosen, and one that does not fit never fits later in the call.

Each pod's node is the least key of the index's answer and the stale answer, as best fit
answers it for that pod.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence

from ..model import Toleration
from .pool import GPU_KINDS, NodePool, _FlavorIndex, node_matches

__all__ = ["Filling"]

_GPU_ONE, _GPU_TWO = GPU_KINDS


class Filling:
    """The placement half of ``Placements`` (it holds the room and the indexes)."""

    __slots__ = ()

    pool: NodePool
    free: dict[str, dict[str, int]]
    _index: dict[str, _FlavorIndex]
    _node_flavors: Mapping[str, list[_FlavorIndex]]
    _stale: dict[str, tuple[int, int]]
    _moved: dict[str, tuple[int, int]]

    def take(self, node_name: str, requests: Mapping[str, int]) -> None:
        raise NotImplementedError

    def defer(
        self, node_name: str, requests: Mapping[str, int], sign: int, before: tuple[int, int] | None = None
    ) -> None:
        raise NotImplementedError

    def place_pods(
        self,
        flavor: str,
        requests: Mapping[str, int],
        count: int,
        selector: Mapping[str, str],
        tolerations: Sequence[Toleration],
        take: Callable[[str, Mapping[str, int]], None] | None = None,
        *,
        additive: bool = False,
        taken: list[tuple[str, Mapping[str, int]]] | None = None,
    ) -> list[str]:
        """Place up to ``count`` identical pods best fit, as one at a time would; the nodes
        chosen (fewer than ``count``: not all fit). Each pod's room is taken before the next
        is placed, with ``take`` (a statement's ``take_room``, or what binds the pod) or else
        :meth:`take`; the pods a node holds go there at once, their room taken in one call
        when ``take`` is ``additive`` (it may be handed their room summed). See the notes.

        With ``taken`` (``take`` unused), the room is taken tentatively with ``defer``, each
        node's (node, room taken) appended to ``taken`` for the caller to record (a
        statement's ``took_rooms``): the node's (free GPUs, free cpu) before is its key in
        the walk, handed to ``defer`` so that it is not read again."""
        chosen: list[str] = []
        index = self._index.get(flavor)
        if index is None or count <= 0:
            return chosen
        gpus = requests.get(_GPU_ONE, 0) + requests.get(_GPU_TWO, 0)
        cpu = requests.get("cpu", 0)
        # The positive requests, what counts the pods a node holds (one pod needs no count).
        requested: list[tuple[str, int]] = []
        if count > 1:
            for resource, amount in requests.items():  # a plain loop: no comprehension's frame
                if amount > 0:
                    requested.append((resource, amount))
        pool = self.pool
        nodes = pool.nodes
        # Every node of the flavor matches the pods (none is judged): see ``matches_all``.
        matched = pool.matches_all(flavor, selector)
        free = self.free
        stale = self._stale
        defer = self.defer
        # The stale nodes passing the index's filters, least key first (see the notes).
        waiting: list[tuple[int, int, str]] = []
        if stale:
            node_flavors = self._node_flavors
            for name, (node_gpus, node_cpu) in self._moved.items():
                if node_gpus >= gpus and node_cpu >= cpu and index in node_flavors[name]:
                    waiting.append((node_gpus, node_cpu, name))
            waiting.sort()
        at = 0  # the first of ``waiting`` not passed
        found: tuple[int, int, str] | None = None  # the index's answer, walked from ``after``
        after: tuple[int, int, str] | None = None
        place = 0  # where the walk found ``found`` in its bucket (checked before it is used)
        code = 0  # ``found``'s entry in its bucket
        names = index.names
        mask = index.mask
        shift = index.shift
        floor = cpu << shift  # no entry of a node short of cpu reaches it
        walk = True
        left = count
        while True:
            if walk:
                walk = False
                found = None
                index = self._index[flavor]  # a ``take`` that moves nodes may own a copy
                keys = index.keys
                for i in range(bisect_left(keys, gpus if after is None else after[0]), len(keys)):
                    key = keys[i]
                    bucket = index.buckets[key]
                    if after is not None and key == after[0]:
                        if place < len(bucket) and bucket[place] == code:
                            first = place + 1  # the bucket is as the last walk left it
                        else:
                            first = bisect_right(bucket, code)
                    elif bucket[0] >= floor:
                        first = 0
                    else:
                        first = bisect_left(bucket, floor)
                    for j in range(first, len(bucket)):
                        code = bucket[j]
                        name = names[code & mask]
                        if stale and name in stale:
                            continue
                        room = free[name]
                        for resource, amount in requests.items():
                            if room.get(resource, 0) < amount:
                                break
                        else:
                            if matched or node_matches(nodes[name], selector, tolerations):
                                found = (key, code >> shift, name)
                                place = j
                                break
                    if found is not None:
                        break
            best = found
            while at < len(waiting):
                candidate = waiting[at]
                if best is not None and candidate > best:
                    break
                name = candidate[2]
                room = free[name]
                for resource, amount in requests.items():
                    if room.get(resource, 0) < amount:
                        at += 1
                        break
                else:
                    if matched or node_matches(nodes[name], selector, tolerations):
                        best = candidate
                        break
                    at += 1
            if best is None:
                return chosen
            node = best[2]
            fits = 1
            if left > 1:
                # The pods it holds: by the free GPUs of every kind together (its key's), and
                # by each requested resource.
                room = free[node]
                fits = left if not gpus else min(left, best[0] // gpus)
                for resource, amount in requested:
                    held = room.get(resource, 0) // amount
                    if held < fits:
                        fits = held
                if fits < 1:
                    fits = 1
            left -= fits
            if fits == 1:
                chosen.append(node)
            else:
                chosen.extend([node] * fits)
            if taken is None and not additive:
                take_room = take if take is not None else self.take
                for _ in range(fits):
                    take_room(node, requests)
            else:
                # The room the pods take, summed.
                amounts = requests
                if fits > 1:
                    amounts = {}
                    for resource, amount in requests.items():  # a plain loop: no comprehension's frame
                        amounts[resource] = amount * fits
                if taken is None:
                    (take if take is not None else self.take)(node, amounts)
                else:
                    # Its node's (free GPUs, free cpu) before read from ``best``, not again by ``defer``.
                    taken.append((node, amounts))
                    defer(node, amounts, -1, (best[0], best[1]))
            if left <= 0:
                return chosen
            if best is found:
                after = found
                walk = True
            else:
                at += 1
