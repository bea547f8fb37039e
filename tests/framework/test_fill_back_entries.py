"""Where a victim queue's usage enters the preemptor's path is found once per session
(framework/preemption/fillback.py, ``entries_of``).

An entry reads only the quota tree's shape and the local reserves (``lendingLimit``) of the
requested flavor-resources, which no session changes, so the fill-backs of one preemptor
queue and request keep their entries for the session. The key is the queue and the
requested flavor-resources: another request in the same queue may pass no reserve where
this one passes one.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.preemption import fillback as fillback_module
from preemptd.framework.preemption.fillback import Entries, entries_of
from preemptd.framework.quota import QuotaTree
from preemptd.framework.testing import cohort, queue

from tests.scenarios.test_fill_back import _decided, _generated_decides_as
from tests.scenarios.test_search_memo import _random_cluster

CPU = ("default", "cpu")
GPU = ("default", "nvidia.com/gpu")


def _tree() -> QuotaTree:
    """root: ``a`` (the preemptor's queue) and cohort ``c``; in ``c``, ``lends`` keeps a
    reserve of cpu (lending limit 1 of 4 cores) and ``plain`` keeps none."""
    specs = [
        cohort("root"),
        queue("a", "root", cpu=4),
        cohort("c", "root"),
        queue("lends", "c", cpu=4, lending_limit=1),
        queue("plain", "c", cpu=4),
    ]
    return QuotaTree({spec.name: spec for spec in specs})


def test_entries_are_kept_per_queue_and_request_and_answer_as_found_afresh() -> None:
    """By hand: for cpu, ``lends`` keeps a reserve on the way, so its usage enters at
    itself; ``plain``'s enters at ``root``, as ``a``'s path is reached there. For GPUs no
    reserve is kept: both enter at ``root``. A second fill-back of the same request finds
    the entries already found; the GPU request gets its own."""
    tree = _tree()
    a, lends, plain, root = (tree.nodes[name] for name in ("a", "lends", "plain", "root"))
    path = frozenset(a.path())
    state: dict[str, Any] = {}
    for_cpu = entries_of(state, path, a, (CPU,))
    assert (for_cpu.of(lends), for_cpu.of(plain), for_cpu.of(a)) == (lends, root, a)
    assert entries_of(state, path, a, (CPU,)) is for_cpu
    for_gpus = entries_of(state, path, a, (GPU,))
    assert for_gpus is not for_cpu
    assert (for_gpus.of(lends), for_gpus.of(plain)) == (root, root)
    fresh = Entries(path, a, (CPU,))
    assert [fresh.of(q) for q in (lends, plain, a)] == [for_cpu.of(q) for q in (lends, plain, a)]


def _fresh_entries(patch: pytest.MonkeyPatch) -> None:
    """Every fill-back finds its entries afresh (nothing kept for the session)."""
    patch.setattr(fillback_module, "entries_of", lambda state, path, leaf, frs: Entries(path, leaf, frs))


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
def test_random_queue_trees_decide_as_with_entries_found_per_fill_back(seed: int) -> None:
    """Random queue trees (nominal, lending and borrowing limits, both attempts)."""
    parsed = _random_cluster(seed)
    known = _decided(parsed)
    with pytest.MonkeyPatch.context() as patch:
        _fresh_entries(patch)
        assert _decided(parsed) == known


@settings(max_examples=6, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.sampled_from((1, 5)))
def test_generated_clusters_decide_as_with_entries_found_per_fill_back(seed: int, leaves: int) -> None:
    """Generated clusters with cpu, memory and GPUs and lending limits on some queues."""
    _generated_decides_as(f"entries/{seed}", leaves, _fresh_entries)
