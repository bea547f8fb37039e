"""The room a walk frees on a node short of its pods' GPUs is the pod's own requests, lent
(framework/preemption/room.py, ``FreedRoom._follow``).

A walk of one pod set keeps, per node it frees room on, the room freed there. Most such
nodes stay short of the pods' GPUs and are never changed again, so the first room freed
there is the victim pod's requests map itself, not a copy, marked as not the walk's own: it
is copied before the walk adds to it or takes from it. The pods' requests are shared by
many pods (and by the session's own books), so a lent map must never change. Answers must
stay those of ``Placements.fit_all`` on placements handed the same room, and every pod's
requests must be as they were after any walk, from a kept first give or not.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node, PodSet
from preemptd.framework.nodes import NodePool, Placements
from preemptd.framework.preemption.room import FreedRoom
from preemptd.framework.session import NodeRoom

from tests.framework.test_freed_room import _fits
from tests.framework.test_given_room_kept import _Session, _walk

GPU = "nvidia.com/gpu"
OTHER_GPU = "amd.com/gpu"
FLAVOR_A = {"a": Flavor("a", {"pool": "a"})}


def _busy(count: int, rng: random.Random | None = None) -> Placements:
    """``count`` nodes of flavor ``a``, 8 GPUs and 64 cores each, most of both taken."""
    nodes = {f"n{i}": Node(f"n{i}", {"pool": "a"}, {GPU: 8, OTHER_GPU: 4, "cpu": 64_000}) for i in range(count)}
    pool = NodePool(nodes, FLAVOR_A)
    for name in nodes:
        gpus = 8 if rng is None else rng.randrange(4, 9)
        cpu = 60_000 if rng is None else rng.randrange(40_000, 68_000, 4000)
        pool.consume(name, {GPU: gpus, OTHER_GPU: 4, "cpu": cpu})
    return Placements(pool)


def test_cpu_lent_on_a_short_node_counts_once_gpus_come_free_there_and_stays_the_pods() -> None:
    """n0 has all its GPUs taken and 4 free cores; the pod asks 4 GPUs and 8 cores. The first
    victim frees 4 cores there (still short of GPUs: lent), the second 4 GPUs: the pod fits
    only with both (4 + 4 cores). Fill-back takes the first back: the pod no longer fits,
    and the step is undone. The victims' requests never change."""
    placements = _busy(1)
    session: Any = SimpleNamespace(placements=placements, snapshot=SimpleNamespace(flavors=FLAVOR_A), state={})
    targets = [(PodSet("main", 1, {GPU: 4, "cpu": 8000}), 1, "a")]
    cpu_only = {"cpu": 4000}
    gpus_only = {GPU: 4}
    first = SimpleNamespace(room=(NodeRoom("n0", cpu_only),))
    second = SimpleNamespace(room=(NodeRoom("n0", gpus_only),))
    freed = FreedRoom(session, targets)
    freed.give([first])
    assert not freed.fits()
    freed.give([second])
    assert freed.fits()  # 4 GPUs, 4 + 4 cores
    saved = freed.saved()
    freed.take_back(first)
    assert not freed.fits()  # 4 GPUs, 4 cores
    freed.undo(first, saved)
    assert freed.fits()
    assert cpu_only == {"cpu": 4000} and gpus_only == {GPU: 4}
    assert freed.extra["n0"] == {"cpu": 4000, GPU: 4}


def test_a_kept_first_give_with_lent_room_is_not_changed_by_a_later_walk() -> None:
    """A first give on committed room keeps its room for the next walk; a later walk that
    frees GPUs on a node whose room was lent copies it first: the kept room, the pod's
    requests and a third walk's answer are as with nothing kept."""
    placements = _busy(2)
    session = _Session(placements)
    spec = PodSet("main", 1, {GPU: 4, "cpu": 8000})
    targets = [(spec, 1, "a")]
    cpu_only = {"cpu": 4000}
    leading = [SimpleNamespace(room=(NodeRoom("n0", cpu_only), NodeRoom("n1", cpu_only))) for _ in range(2)]
    gpus = SimpleNamespace(room=(NodeRoom("n0", {GPU: 4}),))
    for _ in range(3):
        freed = FreedRoom(session, targets, 0)  # type: ignore[arg-type]
        freed.give(leading)
        assert not freed.fits()
        freed.give([gpus])
        assert freed.fits()  # n0: 4 GPUs, 4 + 8 cores
        assert freed.extra["n0"] == {"cpu": 8000, GPU: 4}
        assert freed.extra["n1"] == {"cpu": 8000}
    assert cpu_only == {"cpu": 4000}


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_walks_whose_pods_share_requests_answer_as_the_placements_and_leave_them_unchanged(seed: int) -> None:
    """Busy nodes, GPU pods of one pod set; every victim pod's requests are one of a few
    maps shared by all the victims, mostly cpu; walks of one node epoch (each from the kept
    first give of the last, or not) give, fill back and undo. Every answer is ``fit_all``'s
    on the same room (``_walk`` checks it), and the shared maps never change."""
    rng = random.Random(seed)
    placements = _busy(rng.randrange(1, 9), rng)
    session = _Session(placements)
    names = sorted(placements.free)
    spec = PodSet("main", 1, {GPU: rng.choice((1, 2, 4, 8)), "cpu": rng.choice((4000, 16_000))})
    targets = [(spec, rng.choice((1, 1, 2)), "a")]
    shared = [{"cpu": 4000}, {"cpu": 8000, "memory": 2}, {GPU: 2, "cpu": 2000}, {OTHER_GPU: 4}, {GPU: 1}]
    frozen = [dict(requests) for requests in shared]
    weights = (6, 4, 1, 1, 1)

    def victim() -> Any:
        count = rng.randrange(1, 4)
        return SimpleNamespace(room=tuple(NodeRoom(rng.choice(names), rng.choices(shared, weights)[0]) for _ in range(count)))

    leading = [victim() for _ in range(rng.randrange(2, 12))]
    for _ in range(rng.randrange(2, 5)):
        length = rng.randrange(2, len(leading) + 1)
        more = [victim() for _ in range(rng.randrange(0, 6))]
        _walk(rng, session, 0, targets, leading[:length], more)
        assert shared == frozen
    # A walk with the statement's own changes (no epoch: nothing kept) on the same maps.
    freed = FreedRoom(session, targets)  # type: ignore[arg-type]
    given_room = placements.copy()
    for one in leading:
        freed.give([one])
        for held in one.room:
            node, requests = held.node_name, held.requests
            given_room.give_back_tentatively(node, requests)
        assert freed.fits() == _fits(given_room, targets)
    assert shared == frozen
