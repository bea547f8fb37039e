"""``Placements.best_fit`` walks the flavor's index and then its stale nodes in one frame
(``Placements._best``), and ``best_fit_beside`` shares that walk: each still answers the node
of the flavor where the pod fits with the least (free GPUs of every kind, free cpu, name)
(SEMANTICS §6), stale nodes (room changed tentatively, not yet moved in the index) judged on
their actual room, a node with room kept beside the placements on that room added."""

from __future__ import annotations

import random
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node, Toleration
from preemptd.framework.nodes import NodePool, Placements, gpu_amount, node_matches

GPU = "nvidia.com/gpu"
AMD = "amd.com/gpu"
FLAVORS = {"a100": Flavor("a100", {"pool": "a100"}), "h100": Flavor("h100", {"pool": "h100"})}
_NONE: Mapping[str, int] = {}


def _brute_force(
    placements: Placements,
    flavor: str,
    requests: Mapping[str, int],
    selector: Mapping[str, str],
    changed: Mapping[str, Mapping[str, int]],
) -> str | None:
    """The least (free GPUs, free cpu, name) over every node of the flavor, on its room plus
    ``changed``, where the pod fits and that passes the index's filters (its free GPUs of
    every kind together, and its free cpu, reach the pod's: a node over-committed on one GPU
    kind may not take a pod of the other)."""
    best: tuple[int, int, str] | None = None
    for name in placements.pool.by_flavor.get(flavor, ()):
        free, extra = placements.free[name], changed.get(name, _NONE)
        room = {r: free.get(r, 0) + extra.get(r, 0) for r in {*free, *extra}}
        if gpu_amount(room) < gpu_amount(requests) or room.get("cpu", 0) < requests.get("cpu", 0):
            continue
        if any(room.get(r, 0) < a for r, a in requests.items()):
            continue
        if not node_matches(placements.pool.nodes[name], selector, ()):
            continue
        key = (gpu_amount(room), room.get("cpu", 0), name)
        if best is None or key < best:
            best = key
    return best[2] if best is not None else None


def test_a_stale_node_that_became_the_tightest_fit_is_chosen_and_one_too_short_is_not() -> None:
    """Three 8-GPU nodes; "a" left with 1 GPU free (taken tentatively: stale, indexed at 8)
    no longer fits a 2-GPU pod; "b" left with 3 free (stale) is then the tightest fit, ahead
    of the indexed "c" with 8; with "b" given its room back the tie on (8 GPUs, 64 cpu) goes
    to the name: "b". Beside the placements, 6 GPUs of "c" taken (2 left) make "c" the
    tightest fit."""
    nodes = {n: Node(n, {"pool": "a100"}, {GPU: 8, "cpu": 64_000}) for n in ("a", "b", "c")}
    placements = Placements(NodePool(nodes, FLAVORS))
    placements.take_tentatively("a", {GPU: 7})
    placements.take_tentatively("b", {GPU: 5})
    pod = {GPU: 2, "cpu": 1_000}
    assert placements.best_fit("a100", pod, {}, ()) == "b"
    assert placements.best_fit("a100", {GPU: 1}, {}, ()) == "a"
    # The index walk alone leaves the stale nodes out.
    assert placements.best_fit_unchanged("a100", pod, {}, (), {}) == (8, 64_000, "c")
    placements.give_back_tentatively("b", {GPU: 5})
    assert placements.best_fit("a100", pod, {}, ()) == "b"
    assert placements.best_fit_beside("a100", pod, {}, (), {"c": {GPU: -6}}) == "c"
    assert placements.best_fit("a100", {GPU: 9}, {}, ()) is None
    assert placements.best_fit("h100", pod, {}, ()) is None  # a flavor without nodes


def _cluster(rng: random.Random) -> Placements:
    nodes = {}
    for i in range(rng.randint(1, 14)):
        labels = {"pool": rng.choice(("a100", "h100")), "zone": rng.choice(("z1", "z2"))}
        gpus = {rng.choice((GPU, AMD)): rng.choice((0, 1, 2, 4, 8))}
        cpu = rng.choice((2_000, 8_000, 16_000))
        nodes[f"n{i:02}"] = Node(f"n{i:02}", labels, {**gpus, "cpu": cpu})
    pool = NodePool(nodes, FLAVORS)
    for free in pool.free.values():
        free["cpu"] -= rng.choice((0, 0, 1_000, 20_000))  # some beyond their allocatable
    return Placements(pool)


def _change(rng: random.Random) -> dict[str, int]:
    return {rng.choice((GPU, AMD)): rng.choice((1, 2, 4)), "cpu": rng.choice((0, 500, 4_000))}


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_best_fit_answers_as_the_index_walk_then_the_stale_nodes_and_every_node_do(seed: int) -> None:
    """Random nodes, room taken and given back tentatively (some nodes stale, some back at
    their place) and now and then synced: ``best_fit`` answers as the plain path (the index
    walk leaving stale nodes out, ``best_fit_unchanged``, then each stale node on its room)
    and as the least key over every node where the pod fits; ``best_fit_beside`` with room
    freed or taken beside the placements answers as every node judged on that room added."""
    rng = random.Random(seed)
    placements = _cluster(rng)
    names = sorted(placements.free)
    tolerations: tuple[Toleration, ...] = ()
    for _ in range(rng.randint(1, 12)):
        node = rng.choice(names)
        if rng.random() < 0.6:
            placements.take_tentatively(node, _change(rng))
        else:
            placements.give_back_tentatively(node, _change(rng))
        if rng.random() < 0.15:
            placements.sync()
        flavor = rng.choice(sorted(FLAVORS))
        requests = {rng.choice((GPU, AMD)): rng.choice((0, 1, 2, 4))}
        requests["cpu"] = rng.choice((0, 500, 1_000, 4_000))
        selector = rng.choice(({}, {"zone": "z1"}))
        got = placements.best_fit(flavor, requests, selector, tolerations)
        plain = placements.best_fit_unchanged(flavor, requests, selector, tolerations, {})
        for name in sorted(placements._stale):
            if name not in placements.pool.by_flavor.get(flavor, ()):
                continue
            room = placements.free[name]
            key = (gpu_amount(room), room.get("cpu", 0), name)
            if key[0] < gpu_amount(requests) or key[1] < requests.get("cpu", 0):
                continue
            fits = all(room.get(r, 0) >= a for r, a in requests.items())
            matches = node_matches(placements.pool.nodes[name], selector, ())
            if fits and matches and (plain is None or key < plain):
                plain = key
        assert got == (plain[2] if plain is not None else None)
        assert got == _brute_force(placements, flavor, requests, selector, {})
        changed = {}
        for name in rng.sample(names, min(2, len(names))):
            changed[name] = {r: rng.choice((-1, 1)) * a for r, a in _change(rng).items()}
        beside = placements.best_fit_beside(flavor, requests, selector, tolerations, changed)
        assert beside == _brute_force(placements, flavor, requests, selector, changed)
