"""A victim's pods as a walk's freed room judges them, read once per session (``room.py``).

A walk of one pod set judges each pod its victims free on three things: the pod's node,
its requests, and their GPUs of every kind summed (``FreedRoom._follow``). The walks of a
session give the same victims many times over (in ``large``, 9,644 victims given over
3,776 gives, of 1,603 rooms), and each gave reads every pod's node and requests again and
summed its GPUs again. So a victim room's pods are read into those three once per session
and kept in ``session.state`` by the room's id, with the room itself: an id names a room
only while it lives, so a kept read whose room is not the one asked about is read anew.
A victim's room never changes (its Pods, or the room of pods placed at session start).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..nodes import GPU_KINDS
from ..session import HeldRoom

__all__ = ["Pods", "pods_of", "read_pods"]

_GPU_ONE, _GPU_TWO = GPU_KINDS

_KEPT = "_freed_pods"  # in ``session.state``: {id(room): (room, its pods)}

Pods = tuple[tuple[str, Mapping[str, int], int], ...]  # (node, requests, GPUs summed) per pod
Read = dict[int, tuple[Sequence[HeldRoom], Pods]]


def read_pods(state: dict[str, Any]) -> Read:
    """The rooms read so far in the session of ``state``."""
    read: Read | None = state.get(_KEPT)
    if read is None:
        read = state[_KEPT] = {}
    return read


def pods_of(read: Read, room: Sequence[HeldRoom]) -> Pods:
    """The pods of a victim's ``room`` as (node, requests, GPUs of every kind summed), read
    once and kept in ``read``."""
    found = read.get(id(room))
    if found is not None and found[0] is room:
        return found[1]
    pods = tuple(
        (held.node_name, held.requests, held.requests.get(_GPU_ONE, 0) + held.requests.get(_GPU_TWO, 0))
        for held in room
    )
    read[id(room)] = (room, pods)
    return pods
