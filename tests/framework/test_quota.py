"""Quota arithmetic of SEMANTICS §1 on the queue tree."""

from __future__ import annotations

from preemptd.framework.quota import Accounting, QuotaTree
from preemptd.framework.testing import cohort, queue

CPU = ("default", "cpu")


def tree(*specs):  # type: ignore[no-untyped-def]
    return QuotaTree({s.name: s for s in specs})


def test_idle_lender_lets_a_queue_use_the_whole_cohort() -> None:
    """A nominal 9 and B nominal 12 in a flat cohort: A can use 21 while B is idle."""
    t = tree(cohort("c"), queue("A", "c", cpu=9), queue("B", "c", cpu=12))
    acc = Accounting(t)
    assert 21_000 == acc.available(t.nodes["A"], CPU)
    assert 21_000 == t.nodes["A"].potential[CPU]


def test_borrowing_limit_caps_what_a_queue_takes_beyond_nominal() -> None:
    """With A's borrowingLimit 1, A can use at most 10."""
    t = tree(cohort("c"), queue("A", "c", cpu=9, borrowing_limit=1), queue("B", "c", cpu=12))
    acc = Accounting(t)
    assert 10_000 == acc.available(t.nodes["A"], CPU)
    assert 10_000 == t.nodes["A"].potential[CPU]


def test_lending_limit_keeps_the_rest_of_nominal_for_the_lender() -> None:
    """With B's lendingLimit 1, A can use at most 10 while B keeps 11 for itself."""
    t = tree(cohort("c"), queue("A", "c", cpu=9), queue("B", "c", cpu=12, lending_limit=1))
    acc = Accounting(t)
    a, b = t.nodes["A"], t.nodes["B"]
    assert 10_000 == acc.available(a, CPU)
    acc.add(a, CPU, 10_000)
    assert 11_000 == acc.available(b, CPU)
    assert 0 == acc.available(a, CPU)


def test_subtree_quota_subtracts_each_childs_local_reserve() -> None:
    """A cohort's subtree quota is Σ(child subtree − child local reserve)."""
    t = tree(cohort("c"), queue("A", "c", cpu=9, lending_limit=4), queue("B", "c", cpu=12))
    assert 4_000 + 12_000 == t.nodes["c"].subtree[CPU]
    assert 5_000 == t.nodes["A"].guaranteed[CPU]


def test_usage_within_local_reserve_does_not_reach_the_parent() -> None:
    """Adding v to a node with local headroom h adds max(0, v − h) to its parent."""
    t = tree(cohort("c"), queue("A", "c", cpu=9, lending_limit=4), queue("B", "c", cpu=12))
    acc = Accounting(t)
    a, c = t.nodes["A"], t.nodes["c"]
    acc.add(a, CPU, 3_000)
    assert 0 == acc.used(c, CPU)
    acc.add(a, CPU, 4_000)  # headroom was 2: 2 more reach the cohort
    assert 2_000 == acc.used(c, CPU)
    acc.remove(a, CPU, 4_000)
    assert (3_000, 0) == (acc.used(a, CPU), acc.used(c, CPU))


def test_available_is_never_negative() -> None:
    """Usage above what the cohort has (e.g. evicted victims still held) gives Available 0."""
    t = tree(cohort("c"), queue("A", "c", cpu=2), queue("B", "c", cpu=2))
    acc = Accounting(t)
    acc.add(t.nodes["B"], CPU, 6_000)
    assert 0 == acc.available(t.nodes["A"], CPU)


def test_queue_without_parent_has_only_its_nominal() -> None:
    """At the root, Available is subtree quota − usage."""
    t = tree(queue("solo", cpu=4))
    acc = Accounting(t)
    acc.add(t.nodes["solo"], CPU, 1_500)
    assert 2_500 == acc.available(t.nodes["solo"], CPU)


def test_parent_queue_with_own_quota_shares_it_with_its_subtree() -> None:
    """A defined parent's own nominal is added to its subtree quota."""
    t = tree(queue("org", cpu=5), queue("A", "org", cpu=1), queue("B", "org", cpu=1))
    assert 7_000 == t.nodes["org"].subtree[CPU]
    assert 7_000 == Accounting(t).available(t.nodes["A"], CPU)


def test_borrowing_level_is_the_height_of_the_lowest_ancestor_that_can_supply() -> None:
    """Level 0 within nominal; else the height of the first ancestor whose subtree suffices."""
    t = tree(
        cohort("root"),
        cohort("mid", "root"),
        queue("A", "mid", cpu=2),
        queue("B", "mid", cpu=2),
        queue("C", "root", cpu=10),
    )
    acc = Accounting(t)
    a = t.nodes["A"]
    assert (1, 2) == (t.nodes["mid"].height, t.nodes["root"].height)
    assert 0 == acc.borrowing_level(a, CPU, 2_000)
    assert 1 == acc.borrowing_level(a, CPU, 3_000)
    assert 2 == acc.borrowing_level(a, CPU, 5_000)
