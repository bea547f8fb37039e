"""Fill-back answers its quota tests from an exact slack (framework/preemption/fillback.py).

When no node of the preemptor's lineage keeps a reserve of a requested flavor-resource and
none below the root limits its borrowing, Available drops by exactly what a victim put
back brings to the path: the slack says whether the test fails, and where, without
putting the victim back. The decisions and explanations must be those of a fill-back that
tests every victim.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.preemption import fillback as fillback_module
from preemptd.framework.preemption import walk as walk_module
from preemptd.framework.quota import Accounting, QuotaTree
from preemptd.framework.testing import cohort, inventory, queue, workload

from tests.scenarios.test_fill_back import _decided, _generated_decides_as, _put_back_in_fill_back
from tests.scenarios.test_search_memo import _random_cluster


def _plain(patch: pytest.MonkeyPatch) -> None:
    """Fill-back tests every victim it reaches: no exact slack, no slack covering a victim,
    no failure remembered."""
    patch.setattr(fillback_module, "_exact_slack", lambda leaf, request: False)
    patch.setattr(
        walk_module.Walk, "_slack", lambda self: ((-1,) * len(self.usage), (1 << 62,) * len(self.usage))
    )
    patch.setattr(fillback_module, "_remember", lambda least, shape, short: None)


def _lenders(lending_limit: int | None) -> Any:
    """Cohort ``root``: ``a`` (4 cores, idle, may reclaim), ``b`` and ``c`` (1 core each, each
    running four 500m workloads: 2 cores, borrowing 1; ``b`` may lend only
    ``lending_limit``). ``h`` in ``a`` asks for 4 cores."""
    policy = PreemptionPolicy(reclaim_within_cohort="LowerPriority")
    return inventory(
        [
            cohort("root"),
            queue("a", "root", cpu=4, preemption=policy),
            queue("b", "root", cpu=1, lending_limit=lending_limit),
            queue("c", "root", cpu=1),
        ],
        [
            *(workload(f"b{i}", "b", 0.5, created=1, admitted=True, admitted_at=100 - 10 * i) for i in range(1, 5)),
            *(workload(f"c{i}", "c", 0.5, created=1, admitted=True, admitted_at=95 - 10 * i) for i in range(1, 5)),
            workload("h", "a", 4, priority=5, created=2),
        ],
    )


def test_a_victim_the_request_needs_is_known_from_the_exact_slack_without_putting_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SEMANTICS §4 by hand. Cohort quota 6, usage 4: Available 2 for 4 cores. The walk
    takes b1, c1, b2, c2 (newest first; each lender stays above its nominal before each
    take) and then fits exactly: Available 4, slack 0. No queue keeps a reserve and none
    has a borrowing limit, so putting back b2 (500m) would leave Available at 3.5: it
    fails, known from the slack, and so do c1 and b1 (as much, the same entry). All four
    are preempted and fill-back changes no usage (before, it put b2 back to test it)."""
    put_back = _put_back_in_fill_back(monkeypatch)
    decided = json.loads(_decided(_lenders(None))[0])
    assert sorted(p["workload"] for p in decided["preempted"]) == ["ns/b1", "ns/b2", "ns/c1", "ns/c2"]
    assert put_back == []


def test_what_a_lenders_reserve_keeps_is_read_from_its_usage_without_putting_a_victim_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As above with ``b`` lending nothing (``lendingLimit: 0``: a reserve of its whole
    nominal, 1 core). ``b`` runs 2 cores: 1 in its reserve, 1 in the cohort. The cohort's
    usage is then 3, Available 3 for 4 cores; ``b``'s 1 core above its reserve is what it
    borrows. The same four victims fit exactly (slack 0). Putting back b2 would add 500m
    to ``b``, whose reserve is full (usage 1, reserve 1, nothing kept): all 500m reach the
    cohort, Available drops to 3.5, it fails; read from ``b``'s usage, not put back. The
    same for b1 and c1: nothing is put back, all four are preempted."""
    put_back = _put_back_in_fill_back(monkeypatch)
    decided = json.loads(_decided(_lenders(0))[0])
    assert sorted(p["workload"] for p in decided["preempted"]) == ["ns/b1", "ns/b2", "ns/c1", "ns/c2"]
    assert put_back == []


def test_a_lender_victim_whose_usage_partly_stays_in_its_reserve_is_put_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SEMANTICS §1 and §4 by hand. Cohort ``root``: ``a`` (3 cores, idle, may reclaim),
    ``b`` (1 core, ``lendingLimit: 0``: a reserve of 1 core) running b1 (1.5 cores: 1 in
    its reserve, 0.5 in the cohort), ``c`` (1 core) running c1 (2 cores). The cohort's
    quota is 3 + 0 + 1 = 4, its usage 0.5 + 2 = 2.5: Available 1.5 for ``h`` in ``a``
    asking 3 cores. The walk takes b1 (newest; ``b`` borrows): 0.5 leaves the cohort,
    Available 2; then c1: Available 4, it fits with slack 1. Fill-back puts back b1:
    1.5 cores is more than the slack, but ``b``'s reserve is empty again and keeps 1 core
    of it, so only 0.5 reaches the cohort: Available 3.5, it fits. b1 is put back (read
    from ``b``'s usage, then put back once) and only c1 is preempted."""
    policy = PreemptionPolicy(reclaim_within_cohort="LowerPriority")
    parsed = inventory(
        [
            cohort("root"),
            queue("a", "root", cpu=3, preemption=policy),
            queue("b", "root", cpu=1, lending_limit=0),
            queue("c", "root", cpu=1),
        ],
        [
            workload("b1", "b", 1.5, created=1, admitted=True, admitted_at=90),
            workload("c1", "c", 2, created=1, admitted=True, admitted_at=80),
            workload("h", "a", 3, priority=5, created=2),
        ],
    )
    with pytest.MonkeyPatch.context() as patch:
        _plain(patch)
        plain = _decided(parsed)
    put_back = _put_back_in_fill_back(monkeypatch)
    decided = _decided(parsed)
    assert [p["workload"] for p in json.loads(decided[0])["preempted"]] == ["ns/c1"]
    assert put_back == ["b"]
    assert decided == plain


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.sampled_from([None, 0, 1, 3])), min_size=1, max_size=4),
    st.lists(st.integers(0, 9), min_size=4, max_size=4),
    st.integers(0, 6),
)
def test_what_reaches_the_path_is_what_adding_the_usage_brings_to_it(
    chain: list[tuple[int, int | None]], used: list[int], put: int
) -> None:
    """A queue under ``len(chain) - 1`` cohorts off the preemptor's path, then the path's
    root (random nominal, lending limit and usage per node): ``_arriving`` is exactly what
    ``Accounting.add_all`` adds to the path node when the usage is put back at the queue."""
    names = [f"n{i}" for i in range(len(chain))]
    specs = [cohort("top"), queue("p", "top", cpu=1)]
    for i, (nominal, lending) in enumerate(chain):
        parent = names[i + 1] if i + 1 < len(chain) else "top"
        specs.append(queue(names[i], parent, cpu=nominal, lending_limit=lending))
    tree = QuotaTree({spec.name: spec for spec in specs})
    accounting = Accounting(tree)
    fr = next(iter(tree.nodes["p"].nominal))
    for name, amount in zip(names, used, strict=False):
        accounting.usage[tree.nodes[name].index][fr] = amount * 1000
    path = frozenset(tree.nodes["p"].path())
    top = tree.nodes["top"]
    before = accounting.usage[top.index].get(fr, 0)
    arriving = fillback_module._arriving(accounting.usage, tree.nodes[names[0]], path, (fr,), (put * 1000,))
    accounting.add_all(tree.nodes[names[0]], {fr: put * 1000})
    assert arriving == (accounting.usage[top.index].get(fr, 0) - before,)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
def test_fill_back_decides_random_queue_trees_as_testing_every_victim(seed: int) -> None:
    """Random queue trees (nominal, lending and borrowing limits, both attempts): the same
    decisions and explanations as a fill-back that tests every victim it reaches."""
    parsed = _random_cluster(seed)
    known = _decided(parsed)
    with pytest.MonkeyPatch.context() as patch:
        _plain(patch)
        assert _decided(parsed) == known


def _lending_cluster(seed: int) -> Any:
    """Random trees where the slack is mostly exact: no borrowing limits, local reserves
    (lending limits) on some queues, most queues may reclaim, many lenders borrowing."""
    rnd = random.Random(seed)
    queues = [cohort("root"), cohort("c1", "root"), cohort("c2", "root")]
    names = []
    for i in range(rnd.randint(2, 6)):
        names.append(f"q{i}")
        queues.append(
            queue(
                f"q{i}",
                rnd.choice(["c1", "c2", "root"]),
                cpu=rnd.randint(0, 6),
                lending_limit=rnd.choice([None, None, 0, 1, 2]),
                preemption=PreemptionPolicy(
                    within_queue=rnd.choice(["Never", "LowerPriority"]),
                    reclaim_within_cohort=rnd.choice(["LowerPriority", "Any"]),
                ),
            )
        )
    workloads = [
        workload(
            f"w{i}", rnd.choice(names), rnd.randint(1, 8) / 2, priority=rnd.randint(0, 3),
            created=rnd.randint(0, 50), admitted=(admitted := rnd.random() < 0.7),
            admitted_at=rnd.randint(0, 100_000) if admitted else None,
        )
        for i in range(rnd.randint(1, 30))
    ]
    return inventory(queues, workloads)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
def test_fill_back_decides_random_lending_trees_as_testing_every_victim(seed: int) -> None:
    """Random trees with reserves and no borrowing limits (where the slack is exact): the
    same decisions and explanations as a fill-back that tests every victim it reaches."""
    parsed = _lending_cluster(seed)
    known = _decided(parsed)
    with pytest.MonkeyPatch.context() as patch:
        _plain(patch)
        assert _decided(parsed) == known


@settings(max_examples=8, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.sampled_from((1, 5)))
def test_fill_back_decides_generated_clusters_as_testing_every_victim(seed: int, leaves: int) -> None:
    """Generated clusters with nodes, cpu, memory and GPUs (several flavor-resources per
    request, lending limits on some queues): the same decisions and explanations."""
    _generated_decides_as(f"exact-slack/{seed}", leaves, _plain)
