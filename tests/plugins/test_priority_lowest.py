"""The ``priority`` plugin passes over a queue whose workloads are all above its ranges.

``withinQueue`` (SEMANTICS §4) offers the preemptor's own queue's workloads of lower
priority (``LowerPriority``), and those of equal priority created after it
(``LowerOrNewerEqualPriority``). When the queue's lowest priority is above the
preemptor's, or equal to it under ``LowerPriority``, neither range holds a workload:
the plugin answers with nothing and builds none of the queue's lists. These tests pin
that the answer is the plain path's (both ranges read from the candidate index) for
every preemptor, and that a queue passed over has no list built.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework import CLASS_SAME_QUEUE, IN_QUEUE, queue_units
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.preemption import unitindex
from preemptd.framework.session import Session, VictimSearch
from preemptd.framework.testing import inventory, open_session, queue, workload
from preemptd.plugins import priority

PLUGINS = [("priority", priority, None)]
NOW = 1_000_000
POLICIES = ("LowerPriority", "LowerOrNewerEqualPriority")


def _session(policy: str, running: list[tuple[int, int]]) -> Session:
    me = queue("me", cpu=1, preemption=PreemptionPolicy(within_queue=policy))
    workloads = [
        workload(f"w{i}", "me", 1, priority=p, created=c, admitted=True) for i, (p, c) in enumerate(running)
    ]
    return open_session(inventory([me], workloads), PLUGINS, NOW)


def _ask(session: Session, p: int, created: int) -> list[str]:
    leaf = session.snapshot.tree.leaves["me"]
    preemptor = workload("preemptor", "me", 100, priority=p, created=created)
    request = VictimSearch(preemptor, leaf, {("default", "cpu"): 100_000}, frozenset({("default", "cpu")}))
    return [c.workload.name for c in priority.preemption_candidates(session, preemptor, request)]


def _built(session: Session) -> bool:
    index = session.state.get(unitindex._STATE)
    return index is not None and "me" in index.lists


@settings(max_examples=150, deadline=None)
@given(
    policy=st.sampled_from(POLICIES),
    running=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=8),
    asks=st.lists(st.tuples(st.integers(-1, 8), st.integers(0, 7)), min_size=1, max_size=6),
)
def test_the_answer_is_the_plain_paths_for_every_preemptor(
    policy: str, running: list[tuple[int, int]], asks: list[tuple[int, int]]
) -> None:
    session = _session(policy, running)
    plain = _session(policy, running)
    leaf = plain.snapshot.tree.leaves["me"]
    for p, created in asks:
        units = queue_units(plain, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
        expected = units.between(None, p)
        if policy == "LowerOrNewerEqualPriority":
            expected = expected + units.newer(p, created)
        assert _ask(session, p, created) == [c.workload.name for c in expected], (p, created)
        # And by hand (SEMANTICS §4), as a set: the ranges hold these workloads.
        by_hand = {
            f"w{i}"
            for i, (q, c) in enumerate(running)
            if q < p or (policy == "LowerOrNewerEqualPriority" and q == p and c > created)
        }
        assert set(_ask(session, p, created)) == by_hand


def test_a_queue_above_the_preemptor_builds_no_list() -> None:
    session = _session("LowerPriority", [(5, 1), (7, 2)])
    assert _ask(session, 5, 0) == []
    assert _ask(session, 3, 0) == []
    assert not _built(session), "every workload is at the preemptor's priority or above"
    assert _ask(session, 6, 0) == ["w0"]
    assert _built(session)


def test_equal_priority_newer_workloads_are_read_under_lower_or_newer_equal() -> None:
    session = _session("LowerOrNewerEqualPriority", [(5, 1), (5, 4), (7, 2)])
    assert _ask(session, 4, 0) == []
    assert not _built(session), "every workload is above the preemptor's priority"
    assert _ask(session, 5, 2) == ["w1"], "equal priority, created after the preemptor"
    assert _built(session)
    assert _ask(session, 5, 4) == []


def test_an_empty_queue_answers_nothing() -> None:
    for policy in POLICIES:
        session = _session(policy, [])
        assert _ask(session, 3, 0) == []
        assert not _built(session)
