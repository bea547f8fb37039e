"""The preemptor's path and the lender chains a victim walk reads (framework/preemption/walk.py)
are kept per preemptor leaf for the session's walks, not made again by each walk.

They read only the quota tree, which a session never changes. These tests hold every chain
and path a walk holds, after each of its attempts in sessions on generated clusters with
cohorts, to the ones made afresh from the tree, and check that walks did read chains an
earlier walk had made.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from preemptd.framework.objects import parse_objects
from preemptd.framework.preemption import walk as walking
from preemptd.framework.quota import QuotaNode
from preemptd.framework.run import run_session
from preemptd.framework.snapshot import Snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, Size, generate_spec, growth_spec

CLUSTERS = {
    "deep-1200-seed-1": (growth_spec("deep", 1_200), 1),
    "queues-1500-seed-2": (growth_spec("queues", 1_500), 2),
}


def _fresh_chain(queue: QuotaNode, path: frozenset[QuotaNode]) -> tuple[QuotaNode, ...]:
    """``queue`` and its ancestors off ``path``, up to the highest of them: read from the tree."""
    return tuple(itertools.takewhile(lambda node: node not in path, queue.path()))


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_kept_chains_are_the_tree_s(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, seed = CLUSTERS[name]
    assert isinstance(spec, Size)
    objects = generate_spec(spec, f"walk-chains/{name}/{seed}")
    snapshot = Snapshot.build(parse_objects([("g.json", o) for o in objects]), now=NOW_MS)
    attempt = walking.Walk.attempt
    seen = {"walks": 0, "chains": 0, "reused": 0}

    def checked(self: walking.Walk, *args: Any, **kwargs: Any) -> Any:
        before = set(self.chains)
        try:
            return attempt(self, *args, **kwargs)
        finally:
            path = frozenset(self.leaf.path())
            assert self.path == path
            for queue, chain in self.chains.items():
                assert chain == _fresh_chain(queue, path)
            seen["walks"] += 1
            seen["chains"] += len(self.chains)
            seen["reused"] += len(before)

    monkeypatch.setattr(walking.Walk, "attempt", checked)
    actions, registry = default_session()
    run_session(snapshot, registry(), actions=actions)
    assert seen["walks"] > 0
    assert seen["chains"] > 0
    assert seen["reused"] > 0
