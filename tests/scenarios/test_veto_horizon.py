"""A hopeless walk stops after the last candidate a plugin may refuse
(``Session.never_vetoes(unless_admitted_after=...)``, ``preemption/search.py``).

``min-runtime`` allows at once every candidate admitted before its longest window began
(SEMANTICS §5) and says so at open. A walk the quota bound proves hopeless only tells
the plugins which candidates reach ``is_preemptible``; with no scenario filter, it need
not go past the last candidate admitted after that time. The cut walk must decide as the
whole hopeless walk (the same run with the promise withheld: byte-identical decisions,
explanations, vetoes and counters) and as the plain path's step-by-step walk.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import PreemptionPolicy, QueueSpec
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, Session, hookimpl
from preemptd.framework.testing import cohort, inventory, open_session, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, gpu_victims, min_runtime, priority
from test_search_memo import assert_same_decisions

NOW = 10_000_000
MINUTE = 60_000


def test_min_runtime_promises_to_allow_what_was_admitted_before_its_longest_window() -> None:
    """Windows of 5 min (default reclaim) and 15 min (a queue's preempt): the longest is
    15 min, so every candidate admitted at or before NOW - 15 min is preemptible whatever
    the pair of queues (SEMANTICS §5) and the session's horizon is that time. A plugin
    that may refuse without such a promise leaves no horizon; with no window at all,
    min-runtime is not asked and there is no horizon either."""
    objects = inventory([cohort("root"), queue("a", "root", cpu=4, preempt_min_runtime=15 * MINUTE)], [])
    config = min_runtime.Config(default_reclaim_min_runtime="5m")
    guarded = open_session(objects, [("min-runtime", min_runtime, config)], NOW)
    assert guarded.may_veto is True
    assert guarded.veto_horizon == NOW - 15 * MINUTE

    class Refusing:
        MEMO_SAFE = True

        @hookimpl
        def is_preemptible(self, session: Any, action: str, preemptor: Any, preemptee: Any) -> bool:
            return False

    mixed = open_session(objects, [("min-runtime", min_runtime, config), ("refusing", Refusing(), None)], NOW)
    assert mixed.veto_horizon is None
    bare = inventory([cohort("root"), queue("a", "root", cpu=4)], [])
    quiet = open_session(bare, [("min-runtime", min_runtime, None)], NOW)
    assert quiet.may_veto is False and quiet.veto_horizon is None


def _cut_cluster() -> Any:
    """Queue a (4 cores, LowerPriority) is full: ``fresh`` (1 core, priority 1, admitted
    1 min ago), ``old1`` and ``old2`` (1 core each, priority 2, admitted long ago) and
    ``top`` (1 core, priority 9). ``high`` (priority 5) asks for 4 cores and may take
    only the three below it: hopeless. Victim order is priority first, so ``fresh``
    comes first and the old ones after it."""
    policy = PreemptionPolicy(within_queue="LowerPriority")
    return inventory(
        [cohort("root"), queue("a", "root", cpu=4, preemption=policy)],
        [
            workload("fresh", "a", 1, priority=1, created=1, admitted=True, admitted_at=NOW - MINUTE),
            workload("old1", "a", 1, priority=2, created=2, admitted=True, admitted_at=0),
            workload("old2", "a", 1, priority=2, created=3, admitted=True, admitted_at=0),
            workload("top", "a", 1, priority=9, created=4, admitted=True, admitted_at=0),
            workload("high", "a", 4, priority=5, created=5),
        ],
    )


def test_a_hopeless_walk_asks_no_candidate_after_the_last_one_a_plugin_may_refuse() -> None:
    """A plugin that refuses what was admitted in the last 10 min and promises to allow
    the rest: on the fast path the hopeless walk asks it about ``fresh`` only (the old
    ones come after it); the plain path's walk asks about all three. Both decide alike:
    ``high`` stays pending, its message names the veto, and one veto is counted."""
    asked: list[str] = []

    class Recent:
        MEMO_SAFE = True

        @hookimpl
        def session_open(self, session: Any) -> None:
            session.never_vetoes("recent", unless_admitted_after=NOW - 10 * MINUTE)

        @hookimpl
        def is_preemptible(self, session: Any, action: str, preemptor: Any, preemptee: Any) -> bool:
            asked.append(preemptee.key)
            return preemptee.workload.admitted_at <= NOW - 10 * MINUTE

    out = []
    for memo in (True, False):
        asked.clear()
        registry = Registry([("priority", priority, None), ("recent", Recent(), None)])
        counters: dict[str, int | str] = {}
        decisions = run_session(snapshot(_cut_cluster(), NOW), registry, counters=counters, memo=memo)
        out.append((decisions.to_json(), dict(registry.vetoes), list(asked), counters["searches-bounded"]))
    (fast, fast_vetoes, fast_asked, bounded), (plain, plain_vetoes, plain_asked, _) = out
    assert fast == plain
    assert "no set of preemptible victims frees enough room (vetoed by recent)" in fast
    assert fast_vetoes == plain_vetoes == {"recent": 1}
    assert bounded == 1
    assert fast_asked == ["ns/fresh"]
    assert plain_asked == ["ns/fresh", "ns/old1", "ns/old2"]


class _Asked:
    """min-runtime's hooks, with the candidates its ``is_preemptible`` is asked about."""

    MEMO_SAFE = True
    VETO_REASON = min_runtime.VETO_REASON

    def __init__(self) -> None:
        self.asked: list[str] = []

    @hookimpl
    def session_open(self, session: Any) -> None:
        min_runtime.session_open(session)

    @hookimpl
    def is_preemptible(self, session: Any, action: str, preemptor: Any, preemptee: Any) -> bool:
        self.asked.append(preemptee.key)
        return min_runtime.is_preemptible(session, action, preemptor, preemptee)


def test_a_candidate_admitted_one_millisecond_inside_the_window_is_still_asked() -> None:
    """Queue a (4 cores, preempt min-runtime 15 min) is full: ``old`` (priority 1, admitted
    long ago), ``inside`` (priority 2, admitted 15 min minus 1 ms ago: protected for one
    more millisecond), ``edge`` (priority 2, admitted exactly 15 min ago: preemptible, the
    boundary itself is, SEMANTICS §5) and ``top`` (priority 9). ``high`` (priority 5)
    asks for 4 cores: hopeless. Victim order: ``old``, then ``inside`` before ``edge``
    (newer first). The walk must ask about ``inside`` (its veto and note name it) and
    need not ask about ``edge``; the plain path asks about all three."""
    policy = PreemptionPolicy(within_queue="LowerPriority")
    window = 15 * MINUTE
    objects = inventory(
        [cohort("root"), queue("a", "root", cpu=4, preemption=policy, preempt_min_runtime=window)],
        [
            workload("old", "a", 1, priority=1, created=1, admitted=True, admitted_at=0),
            workload("inside", "a", 1, priority=2, created=2, admitted=True, admitted_at=NOW - window + 1),
            workload("edge", "a", 1, priority=2, created=3, admitted=True, admitted_at=NOW - window),
            workload("top", "a", 1, priority=9, created=4, admitted=True, admitted_at=0),
            workload("high", "a", 4, priority=5, created=5),
        ],
    )
    out = []
    for memo in (True, False):
        spy = _Asked()
        registry = Registry([("priority", priority, None), ("min-runtime", spy, None)])
        decisions = run_session(snapshot(objects, NOW), registry, memo=memo)
        out.append((decisions.to_json(), dict(registry.vetoes), spy.asked))
    (fast, fast_vetoes, fast_asked), (plain, plain_vetoes, plain_asked) = out
    assert fast == plain
    assert '"reason": "MinRuntime"' in fast
    assert "the first protected candidate, ns/inside, becomes preemptible" in fast
    assert fast_vetoes == plain_vetoes == {"min-runtime": 1}
    assert fast_asked == ["ns/old", "ns/inside"]
    assert plain_asked == ["ns/old", "ns/inside", "ns/edge"]


@contextmanager
def _promise_withheld() -> Iterator[None]:
    """Plugins' ``unless_admitted_after`` promises are dropped: every hopeless walk is
    walked whole (a plugin that never vetoes still says so)."""
    said = Session.never_vetoes

    def never_vetoes(self: Session, plugin: str, *, unless_admitted_after: int | None = None) -> None:
        if unless_admitted_after is None:
            said(self, plugin)

    Session.never_vetoes = never_vetoes  # type: ignore[method-assign]
    try:
        yield
    finally:
        Session.never_vetoes = said  # type: ignore[method-assign]


def _world(seed: int) -> tuple[Any, min_runtime.Config]:
    """A random cohort tree with min-runtime windows here and there, workloads admitted at
    random times (some inside the windows, some evicted, some elastic) and pending ones of
    random priority."""
    rnd = random.Random(seed)
    windows = [None, None, 0, MINUTE, 5 * MINUTE, 20 * MINUTE]
    specs = [
        cohort("root"),
        *(
            QueueSpec(name, "root", defined=False, reclaim_min_runtime=rnd.choice(windows))
            for name in ("c1", "c2")
        ),
    ]
    names = []
    for i in range(rnd.randint(2, 5)):
        name = f"q{i}"
        names.append(name)
        policy = PreemptionPolicy(
            within_queue=rnd.choice(["Never", "LowerPriority", "LowerPriority"]),
            reclaim_within_cohort=rnd.choice(["Never", "LowerPriority", "Any", "Any"]),
            borrow_within_cohort=rnd.choice(["Never", "LowerPriority"]),
            max_priority_threshold=rnd.choice([None, 1, 3]),
        )
        specs.append(
            queue(
                name,
                rnd.choice(["c1", "c2"]),
                cpu=rnd.randint(1, 8),
                borrowing_limit=rnd.choice([None, None, 0, 2, 5]),
                lending_limit=rnd.choice([None, None, 0, 1, 3]),
                preemption=policy,
                preempt_min_runtime=rnd.choice(windows),
                reclaim_min_runtime=rnd.choice(windows),
            )
        )
    workloads = []
    for i in range(rnd.randint(6, 36)):
        admitted = rnd.random() < 0.7
        # Only running ones are elastic (their min-runtime filter is what matters here);
        # a pending elastic head's search may ask for part of it (assert_same_decisions
        # compares what judges asked for by full counts).
        elastic = admitted and rnd.random() < 0.15
        count = rnd.randint(2, 4) if elastic else 1
        workloads.append(
            workload(
                f"w{i}",
                rnd.choice(names),
                rnd.randint(1, 3),
                count=count,
                min_count=1 if elastic else None,
                priority=rnd.randint(0, 4) if admitted else rnd.randint(2, 6),
                created=rnd.randint(0, 50),
                admitted=admitted,
                admitted_at=NOW - _age(rnd) if admitted else None,
                evicted=admitted and rnd.random() < 0.05,
            )
        )
    config = min_runtime.Config(
        default_preempt_min_runtime=rnd.choice(["0s", "2m"]),
        default_reclaim_min_runtime=rnd.choice(["0s", "5m", "10m"]),
        reclaim_resolve_method=rnd.choice(["lca", "queue"]),
    )
    return inventory(specs, workloads), config


def _age(rnd: random.Random) -> int:
    """How long ago a workload was admitted: often right at the edge of a window."""
    if rnd.random() < 0.5:
        return rnd.randint(0, 40 * MINUTE)
    return max(0, rnd.choice([2, 5, 10, 20]) * MINUTE + rnd.choice([-30_000, -1, 0, 1, 30_000]))


def _run(objects: Any, config: min_runtime.Config, memo: bool) -> tuple[Any, ...]:
    registry = Registry(
        [
            ("priority", priority, None),
            ("cohort-reclaim", cohort_reclaim, None),
            ("min-runtime", min_runtime, config),
            ("gpu-victims", gpu_victims, None),
        ]
    )
    counters: dict[str, int | str] = {}
    decisions = run_session(snapshot(objects, NOW), registry, counters=counters, memo=memo)
    return decisions.to_json(), decisions.explanations, dict(registry.vetoes), dict(registry.failures), counters


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_hopeless_walks_cut_at_the_veto_horizon_decide_as_whole_walks(seed: int) -> None:
    objects, config = _world(seed)
    cut = _run(objects, config, memo=True)
    with _promise_withheld():
        whole = _run(objects, config, memo=True)
    assert cut == whole
    plain = _run(objects, config, memo=False)
    assert assert_same_decisions(cut[0], plain[0], snapshot(objects, NOW).workloads) >= 0
    assert cut[2] == plain[2]
    assert not cut[3]


def test_a_plugin_taking_only_some_arguments_of_is_preemptible_is_still_asked() -> None:
    """The session calls each plugin's ``is_preemptible`` with the four values in place;
    one that takes only ``preemptee`` (pluggy allows a subset) gets just that, and its
    refusal of ``fresh`` stands: ``high``'s search, hopeless, names the veto."""
    asked: list[str] = []

    class Named:
        MEMO_SAFE = True

        @hookimpl
        def is_preemptible(self, preemptee: Any) -> bool:
            asked.append(preemptee.key)
            return preemptee.key != "ns/fresh"

    registry = Registry([("priority", priority, None), ("named", Named(), None)])
    decisions = run_session(snapshot(_cut_cluster(), NOW), registry)
    assert "no set of preemptible victims frees enough room (vetoed by named)" in decisions.to_json()
    assert dict(registry.vetoes) == {"named": 1}
    assert asked == ["ns/fresh", "ns/old1", "ns/old2"]
