"""cohort-reclaim keeps its answer for the session while the queue tree has not moved.

Heads of one queue often ask the same: the answer is a function of the tree's committed
state (its epoch), the units taken so far, the request and the priority bounds, so a
second preemptor asking the same gets the same candidates without a second collection,
and a commit that changes the tree makes the next one collect again.
"""

from __future__ import annotations

from typing import Any

import pytest
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.session import VictimSearch
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
CPU = ("default", "cpu")


def test_a_second_preemptor_asking_the_same_gets_the_kept_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = PreemptionPolicy(reclaim_within_cohort="Any", borrow_within_cohort="Never")
    queues = [cohort("all"), queue("me", "all", cpu=1, preemption=policy), queue("other", "all", cpu=1)]
    running = [workload(f"w{i}", "other", 1, priority=i, created=i, admitted=True) for i in range(3)]
    session = open_session(inventory(queues, running), PLUGINS, 1_000_000)
    leaf = session.snapshot.tree.leaves["me"]
    collected: list[str] = []
    real = cohort_reclaim.queue_units

    def counting(*args: Any, **kwargs: Any) -> Any:
        collected.append(args[1].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(cohort_reclaim, "queue_units", counting)

    def ask(name: str, prio: int) -> list[str]:
        preemptor = workload(name, "me", 1, priority=prio, created=9)
        request = VictimSearch(preemptor, leaf, {CPU: 1000}, frozenset({CPU}))
        return sorted(c.workload.name for c in cohort_reclaim.preemption_candidates(session, preemptor, request))

    first = ask("low", 0)
    assert first == ["w0", "w1", "w2"]  # reclaimWithinCohort Any: every priority
    assert collected == ["other"]
    # Another priority, the same bounds (Any, Never): the kept answer, not collected again.
    assert ask("high", 7) == first
    assert collected == ["other"]
    # A commit that changes the tree moves its epoch: the next preemptor collects again,
    # and takes the sibling queue's kept part: nothing was taken from its workloads.
    session.statement.add_usage(session.snapshot.tree.leaves["other"], {CPU: 1000})
    session.statement.commit()
    assert ask("later", 7) == first
    assert collected == ["other"]


def test_the_queues_above_nominal_are_read_once_per_commit_of_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which sibling queues are above nominal is read from the committed usage once per
    cohort, needed flavor-resources and epoch of the tree, for the searches of every queue
    of the tree; a commit that lifts a sibling above its nominal makes the next search
    offer its units."""
    policy = PreemptionPolicy(reclaim_within_cohort="Any", borrow_within_cohort="Never")
    queues = [
        cohort("all"),
        queue("me", "all", cpu=1, preemption=policy),
        queue("you", "all", cpu=1, preemption=policy),
        queue("over", "all", cpu=1),
        queue("under", "all", cpu=2),
    ]
    running = [
        workload("o1", "over", 1, created=1, admitted=True),
        workload("o2", "over", 1, created=2, admitted=True),
        workload("u1", "under", 2, created=3, admitted=True),
    ]
    session = open_session(inventory(queues, running), PLUGINS, 1_000_000)
    leaves = session.snapshot.tree.leaves
    answers: list[list[Any]] = []
    real = cohort_reclaim._above

    def keeping(*args: Any) -> Any:
        found = real(*args)
        answers.append(found)
        return found

    monkeypatch.setattr(cohort_reclaim, "_above", keeping)

    def ask(name: str, queue_name: str) -> list[str]:
        preemptor = workload(name, queue_name, 1, priority=5, created=9)
        request = VictimSearch(preemptor, leaves[queue_name], {CPU: 1000}, frozenset({CPU}))
        return sorted(c.workload.name for c in cohort_reclaim.preemption_candidates(session, preemptor, request))

    assert ask("mine", "me") == ["o1", "o2"]  # "under" uses no more than its nominal
    assert ask("yours", "you") == ["o1", "o2"]
    # One reading of the cohort's children for both queues' searches: the second search,
    # at the same epoch of the tree, is handed the kept answer without asking again.
    assert [[q.name for q in found] for found in answers] == [["over"]]
    # A commit to the tree puts "under" above its nominal: read again, and offered.
    session.statement.add_usage(leaves["under"], {CPU: 1000})
    session.statement.commit()
    assert ask("again", "me") == ["o1", "o2", "u1"]
    assert [q.name for q in answers[1]] == ["over", "under"]
