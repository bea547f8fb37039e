"""The memo's bookkeeping of one victim search is read once per search.

``find_victims`` reads the search state of the preemptor's queue tree (``failures.search_state``:
the tree's commits, node room, the victims chosen in it) once, before the search, and hands
it to ``dominated`` and ``remember_failure``: a search moves no epoch and chooses no victim,
so the state after it is the state before. What the plugins said is read once after the
search and serves both ``remember`` and ``remember_failure``; the vetoes a search counted are
the per-plugin differences, none when the total did not move (each count only grows).
"""

from __future__ import annotations

import sys
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.preemption import failures, memo, victims
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, SearchResult
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_saturated

_SEARCHING = {"find_victims", "dominated", "remember_failure"}


def test_each_search_reads_the_search_state_of_its_tree_once(monkeypatch: pytest.MonkeyPatch) -> None:
    actions, registry_of = default_session()
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    reads = Counter[str]()
    keyed = [0]
    real_state = failures.search_state
    real_key = memo.memo_key

    def reading(*args: Any) -> tuple[int, int, int]:
        caller = sys._getframe(1).f_code.co_name
        if caller in _SEARCHING:
            reads[caller] += 1
        return real_state(*args)

    real_at = failures.search_state_at

    def reading_at(session: Any, leaf: Any, epoch: int) -> tuple[int, int, int]:
        # The state with the tree's epoch the memo key read: the state read afresh.
        caller = sys._getframe(1).f_code.co_name
        if caller in _SEARCHING:
            reads[caller] += 1
        found = real_at(session, leaf, epoch)
        assert found == real_state(session, leaf)
        return found

    def keying(session: Any, preemptor: Any, *args: Any) -> Any:
        key = real_key(session, preemptor, *args)
        if key is not None and not preemptor.is_deployment:
            keyed[0] += 1
        return key

    monkeypatch.setattr(failures, "search_state", reading)
    monkeypatch.setattr(victims, "search_state", reading, raising=False)
    monkeypatch.setattr(victims, "search_state_at", reading_at)
    monkeypatch.setattr(victims, "memo_key", keying)
    run_session(snap, registry_of(), actions=actions)
    assert keyed[0] > 20  # the saturated cluster: searches, most of them failing
    assert reads["remember_failure"] + reads["dominated"] == 0  # handed over by find_victims
    assert reads["find_victims"] == keyed[0]


def test_the_memo_path_decides_and_counts_vetoes_as_the_plain_path() -> None:
    actions, registry_of = default_session()
    objects = generate_saturated(2, queues=10, workloads=300)
    fast_registry, plain_registry = registry_of(), registry_of()
    fast = run_session(snapshot(objects, NOW_MS), fast_registry, actions=actions)
    plain = run_session(snapshot(objects, NOW_MS), plain_registry, actions=actions, memo=False)
    assert fast.admitted == plain.admitted
    assert fast.preempted == plain.preempted
    assert sorted((p.workload, p.reason) for p in fast.pending) == sorted((p.workload, p.reason) for p in plain.pending)
    assert dict(fast_registry.vetoes) == dict(plain_registry.vetoes)


_COUNTS = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 5), max_size=4)


@settings(max_examples=200, deadline=None)
@given(before=_COUNTS, grown=_COUNTS, failed=st.booleans())
def test_remember_keeps_the_vetoes_the_search_counted_per_plugin(
    before: dict[str, int], grown: dict[str, int], failed: bool
) -> None:
    """What ``remember`` keeps equals the per-plugin differences of the registry's veto
    counts, in the registry's order, whether or not the total moved; a search in which a
    plugin failed is not kept."""
    session: Any = SimpleNamespace(memo={}, registry=Registry([]))
    vetoes = session.registry.vetoes
    vetoes.update(before)
    counts = (dict(vetoes), (sum(vetoes.values()), 0, 0, 0))
    for plugin, more in grown.items():
        vetoes[plugin] += more
    after = (sum(vetoes.values()), int(failed), 0, 0)
    kept = memo.remember(session, ("k",), SearchResult(), counts, after)
    assert kept is not failed
    if kept:
        expected = tuple(
            (plugin, count - before.get(plugin, 0)) for plugin, count in vetoes.items() if count != before.get(plugin, 0)
        )
        assert session.memo[("k",)][1] == expected
