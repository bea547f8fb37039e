"""cohort-reclaim keeps its answers and its sibling cohorts' parts per queue tree, at the
tree's state, and holds nothing of a state gone by.

An answer is a function of the tree's committed state (its epoch), the units and workloads
the session has taken, the request and the priority bounds (SEMANTICS §4). Each of the
first three only grows, so an answer kept at an earlier state is never asked for again:
a commit to the tree, or a take anywhere, drops the tree's kept answers. A commit to
another tree leaves them.
"""

from __future__ import annotations

from typing import Any

from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.session import Taken, VictimSearch
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
CPU = ("default", "cpu")


def _session() -> Any:
    policy = PreemptionPolicy(reclaim_within_cohort="Any", borrow_within_cohort="Never")
    queues = [
        cohort("a"), queue("a-me", "a", cpu=1, preemption=policy), queue("a-other", "a", cpu=1),
        cohort("b"), queue("b-me", "b", cpu=1, preemption=policy), queue("b-other", "b", cpu=1),
    ]
    running = [
        workload(f"{tree}{i}", f"{tree}-other", 1, priority=i, created=i, admitted=True)
        for tree in ("a", "b") for i in range(2)
    ]
    return open_session(inventory(queues, running), PLUGINS, 1_000_000)


def _ask(session: Any, tree: str) -> list[Any]:
    leaf = session.snapshot.tree.leaves[f"{tree}-me"]
    preemptor = workload(f"{tree}-p", f"{tree}-me", 1, priority=5, created=9)
    request = VictimSearch(preemptor, leaf, {CPU: 1000}, frozenset({CPU}))
    return cohort_reclaim.preemption_candidates(session, preemptor, request)


def _kept(session: Any, tree: str) -> list[Any]:
    """The answers held for ``tree``'s queues."""
    root = session.snapshot.tree.leaves[f"{tree}-me"].root.index
    found = session.state[cohort_reclaim.NAME].get(root)
    return [] if found is None else [answer for answer, _ in found[1].values()]


def test_a_commit_to_the_tree_drops_its_kept_answer_and_a_commit_to_another_does_not() -> None:
    session = _session()
    first = _ask(session, "a")
    assert sorted(c.workload.name for c in first) == ["a0", "a1"]
    assert _ask(session, "a") is first  # the same question at the same state: the kept answer
    # A commit to tree b: tree a's state is as it was, its answer stays kept.
    session.statement.add_usage(session.snapshot.tree.leaves["b-other"], {CPU: 1000})
    session.statement.commit()
    assert _ask(session, "a") is first
    assert _kept(session, "a") == [first]
    # A commit to tree a: its answer is collected again, and the one kept before is gone.
    session.statement.add_usage(session.snapshot.tree.leaves["a-other"], {CPU: 1000})
    session.statement.commit()
    again = _ask(session, "a")
    assert again is not first and list(again) == list(first)
    assert _kept(session, "a") == [again]


def test_a_take_drops_the_kept_answers_of_every_tree() -> None:
    session = _session()
    kept_a, kept_b = _ask(session, "a"), _ask(session, "b")
    assert _kept(session, "a") == [kept_a] and _kept(session, "b") == [kept_b]
    # The session takes a workload outside both trees' answers: the units and workloads taken
    # grow, and neither tree's answer at the state before is held once the tree is asked again.
    session.taken["elsewhere/w"] = Taken(whole=True)
    again_a = _ask(session, "a")
    again_b = _ask(session, "b")
    assert again_a is not kept_a and again_b is not kept_b
    assert _kept(session, "a") == [again_a] and _kept(session, "b") == [again_b]



def test_a_sibling_queues_kept_part_holds_its_candidates_and_runs_in_tuples() -> None:
    """A queue's part (``_Part``) is kept for the session, thousands of them in a large
    cluster: its candidates and runs are tuples (an empty part's, the one empty tuple), the
    candidates those the answer holds of that queue, in order."""
    session = _session()
    answer = _ask(session, "a")
    parts = [part for table in session.state[cohort_reclaim.OFFERS].values() for part in table.values()]
    assert len(parts) == 1
    part = parts[0]
    assert type(part.units) is tuple and type(part.runs) is tuple
    assert list(part.units) == list(answer)
    assert [unit for source, start, end in part.runs for unit in source.units[start:end]] == list(answer)
