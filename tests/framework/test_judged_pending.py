"""The pending entry of a judged head is made directly (framework/actions/allocate.py,
``_judged``), not through the general path of an entry left without victims: it must be
what that path makes, for a kept head that did not fit any flavor (``NoFit``) and for one
that found no candidates (``PreemptionNoCandidates``), in a queue that reserves quota for
a preemptor and in one that reclaims ``Any``.

Each cluster is decided twice: as the session does it, and with every judged head sent
through ``nominate`` and the general path instead (``_through_nominate`` with the judgement
written out, tests/framework/test_judged_heads.py). Decisions, explanations, stored flavor
scans, vetoes and counters must be the same; the pending entries are also checked by hand.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.preemption.failures import (
    Answers,
    answers_now,
    remember_failure,
    search_state,
)
from preemptd.framework.preemption.memo import snapshot_counts
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, SearchResult
from preemptd.framework.testing import cohort, inventory, open_session, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, flavor_fungibility, min_runtime, priority

from tests.framework.test_judged_heads import (
    _first_failure_cluster,
    _through_nominate,
    _written_out,
)


def _registry() -> Registry:
    return Registry(
        [
            ("priority", priority, None),
            ("cohort-reclaim", cohort_reclaim, None),
            ("min-runtime", min_runtime, None),
            ("flavor-fungibility", flavor_fungibility, None),
        ]
    )


def _cluster(reclaim: str) -> Any:
    """Queue ``a`` (4 cores, borrows nothing, in-queue LowerPriority, ``reclaimWithinCohort``
    as given) is full with ``top`` (3 cores, priority 9) and ``low`` (1 core, priority 1);
    queue ``b`` (2 cores) is full. Pending in ``a``, by queue order: ``big`` (9 cores,
    priority 8: more than the queue may hold, no flavor fits), ``x`` (3 cores, priority 7:
    only ``low`` may be taken, no set frees 3 cores), then ``big2``, ``big3`` (as ``big``)
    and ``x2``, ``x3`` (as ``x``), all weaker: judged with ``big`` and ``x``. A preemptor of
    ``a`` left without victims reserves what ``a`` may still take within its quota when it
    does not reclaim ``Any``: nothing here (a full queue that borrows nothing), so the state
    stays and the weaker heads are judged in both cases."""
    policy = PreemptionPolicy(within_queue="LowerPriority", reclaim_within_cohort=reclaim)
    return inventory(
        [cohort("root"), queue("a", "root", cpu=4, borrowing_limit=0, preemption=policy), queue("b", "root", cpu=2)],
        [
            workload("top", "a", 3, priority=9, created=1, admitted=True, admitted_at=0),
            workload("low", "a", 1, priority=1, created=2, admitted=True, admitted_at=0),
            workload("used", "b", 2, priority=0, created=3, admitted=True, admitted_at=0),
            workload("big", "a", 9, priority=8, created=10),
            workload("x", "a", 3, priority=7, created=10),
            workload("big2", "a", 9, priority=6, created=20),
            workload("x2", "a", 3, priority=5, created=20),
            workload("big3", "a", 9, priority=4, created=30),
            workload("x3", "a", 3, priority=3, created=30),
        ],
    )


def _decide(reclaim: str) -> tuple[dict[str, Any], dict[str, list[str]], Any, dict[str, int], dict[str, int | str]]:
    registry = _registry()
    counters: dict[str, int | str] = {}
    decisions = run_session(snapshot(_cluster(reclaim), 100_000), registry, counters=counters)
    return (
        json.loads(decisions.to_json()),
        decisions.explanations,
        decisions.flavor_scans,
        dict(registry.vetoes),
        counters,
    )


@pytest.mark.parametrize("reclaim", ["LowerPriority", "Any"])
def test_a_judged_heads_pending_entry_is_the_one_the_general_path_makes(
    reclaim: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _decide(reclaim)
    pending = {entry["workload"]: (entry["reason"], entry["message"]) for entry in fast[0]["pending"]}
    no_set = pending["ns/x"][1]
    assert pending["ns/x"][0] == "PreemptionNoCandidates"
    for name in ("big", "big2", "big3"):
        assert pending[f"ns/{name}"] == ("NoFit", pending["ns/big"][1])
    for name in ("x2", "x3"):  # the answer x's search would give them, naming x
        assert pending[f"ns/{name}"] == (
            "PreemptionNoCandidates",
            f"{no_set} (judged with ns/x: no lower priority, asking for no more)",
        )
    assert fast[1]["ns/big3"] == ["flavors as for ns/big: the same pod sets, no lower priority, the same state"]
    assert fast[1]["ns/x3"] == ["flavors as for ns/x: the same pod sets, no lower priority, the same state"]
    assert fast[4]["heads-judged"] == 4
    assert fast[0]["admitted"] == [] and fast[0]["preempted"] == []
    _through_nominate(monkeypatch, _written_out)
    assert _decide(reclaim) == fast


def test_the_failures_read_for_a_request_are_taken_as_they_are_only_while_nothing_was_kept_since() -> None:
    """``Answers.current``: the failures read for a request in one state answer again as they
    are while the state stands and no failure was kept since; after a failure is kept, or
    once the state moves, they are read again (``answers_now``)."""
    session = open_session(
        _first_failure_cluster(), [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)], 100_000
    )
    leaf = session.snapshot.tree.leaves["a"]
    cpu = ("default", "cpu")
    needed = frozenset({cpu})

    def fail(name: str, prio: int) -> None:
        preemptor = workload(name, "a", 3, priority=prio, created=5)
        before = snapshot_counts(session, preemptor)
        result = SearchResult(message=f"no room for {name}", silent=True)
        remember_failure(session, preemptor, leaf, {cpu: 3000}, needed, [], result, before)

    answers = Answers({cpu: 3000}, needed, False)
    state = search_state(session, leaf)
    assert answers.current(state) is None  # never read
    fail("f3", 3)
    assert answers.current(state) is None
    found = answers_now(session, leaf, answers, state)
    assert found is not None and [p for p, _, _, _ in found] == [3]
    assert answers.current(state) is found
    fail("f7", 7)  # kept since: read again, the new one added
    assert answers.current(state) is None
    assert [p for p, _, _, _ in answers_now(session, leaf, answers, state) or ()] == [3, 7]
    assert [p for p, _, _, _ in answers.current(state) or ()] == [3, 7]
    session.statement.add_usage(leaf, {cpu: 1000})
    session.statement.commit()
    moved = search_state(session, leaf)
    assert answers.current(moved) is None
    assert answers_now(session, leaf, answers, moved) is None  # nothing kept in the new state
    fail("f4", 4)
    assert [p for p, _, _, _ in answers_now(session, leaf, answers, moved) or ()] == [4]
    assert answers.current(state) is None  # the old state's reading is gone
