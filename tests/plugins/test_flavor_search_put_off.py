"""The flavor scan puts off the victim searches whose answer cannot change the flavor taken.

With ``whenCanPreempt: TryNextFlavor`` what a flavor's search finds never ends the scan
(SEMANTICS §3): it only decides which flavor is best once the scan is over. So the scan
goes on without it, and afterwards searches only a flavor that could still beat the best
one seen: not when the scan stopped at a later flavor, nor when a flavor already seen ranks
above anything a search could give (``Reclaim``, at the borrowing level of the part that
fits). Decisions, recorded scan positions and pending reasons are those of searching every
flavor; only the explanation line of a flavor left unsearched differs.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, PreemptionPolicy, QueueSpec, Workload
from preemptd.framework.objects import Inventory
from preemptd.framework.run import run_session
from preemptd.framework.session import FIT, PREEMPT, Registry
from preemptd.framework.snapshot import Snapshot
from preemptd.plugins import cohort_reclaim, min_runtime, priority
from preemptd.plugins import flavor_fungibility as ff
from preemptd.plugins.flavor_fungibility import PREEMPTION_OVER_BORROWING, Config

from tests.plugins.test_flavor_fungibility import (
    NOW,
    STOP,
    TRY,
    _borrow_or_preempt,
    _own_queue_preemption,
    assign,
    chosen,
    job,
    positions,
    queue,
    session,
)


def test_a_flavor_before_the_one_the_scan_stops_at_is_not_searched() -> None:
    """a is full with a lower-priority job, b is free: b fits without borrowing and ends the
    scan, so whatever a's search would find, b is taken; a is not searched."""
    s, pending = _own_queue_preemption()
    found = assign(s, pending)
    assert (["b"], FIT, {"main": {"cpu": -1}}) == (chosen(found), found.mode, positions(found))
    assert "podSet main: flavor a: needs victims, not searched (the scan stopped at flavor b)" == found.tried[0]
    assert 0 == s.counters.searches


def test_may_stop_search_still_searches_the_first_flavor() -> None:
    """whenCanPreempt MayStopSearch: a's victims end the scan, so a is searched as it is met."""
    s, pending = _own_queue_preemption(preempt=STOP)
    found = assign(s, pending)
    assert (["a"], PREEMPT) == (chosen(found), found.mode)
    assert "podSet main: flavor a: Preempt (1 victim(s))" == found.tried[0]
    assert s.counters.searches >= 1


def test_a_flavor_that_cannot_beat_the_best_seen_is_not_searched() -> None:
    """Both TryNextFlavor, BorrowingOverPreemption: a fits by borrowing (level 1), b needs a
    victim at level 0. A fit ranks above any preemption by that preference: b is not searched."""
    s, pending = _borrow_or_preempt(borrow=TRY, preempt=TRY)
    found = assign(s, pending)
    assert (["a"], FIT, 1) == (chosen(found), found.mode, found.level)
    assert (
        "podSet main: flavor b: needs victims, not searched (by BorrowingOverPreemption it cannot beat flavor a)"
        in found.tried
    )
    assert 0 == s.counters.searches


def test_a_flavor_that_could_win_is_searched_after_the_scan_and_wins() -> None:
    """The same queue with PreemptionOverBorrowing: a preemption at level 0 could beat a's
    borrowing fit, so b is searched once the scan is over: it finds the victim and is taken."""
    s, pending = _borrow_or_preempt(borrow=TRY, preempt=TRY, preference=PREEMPTION_OVER_BORROWING)
    found = assign(s, pending)
    assert (["b"], PREEMPT, 0, ["ml/low"]) == (chosen(found), found.mode, found.level, [v.key for v in found.victims])
    assert found.tried[:2] == ["podSet main: flavor a: Fit, borrowing level 1", "podSet main: flavor b: Preempt (1 victim(s))"]


def test_when_every_flavor_needs_victims_each_that_could_still_win_is_searched_in_order() -> None:
    """a and b are both full with a lower-priority job of the same queue. Nothing fits, so a
    is searched: Preempt, level 0. b could still beat that (a search at best finds Reclaim),
    so it is searched too: Preempt, level 0, a tie, which goes to the earlier flavor a."""
    q = queue("q", {"a": 4, "b": 4})
    pending = job("high", "q", 4, priority=10)
    s = session([q], [job("low-a", "q", 4, on="a"), job("low-b", "q", 4, on="b"), pending])
    found = assign(s, pending)
    assert (["a"], PREEMPT, ["ml/low-a"]) == (chosen(found), found.mode, [v.key for v in found.victims])
    assert found.tried[:2] == ["podSet main: flavor a: Preempt (1 victim(s))", "podSet main: flavor b: Preempt (1 victim(s))"]


# --- put off against searched everywhere, on random clusters ----------------------------------


UNSEARCHED = re.compile(r"(podSet \S+: flavor \S+): needs victims, not searched \(.*\)")
SEARCHED = re.compile(r"podSet \S+: flavor \S+: (NoCandidates|Preempt|Reclaim)\b.*")


def _searching_every_flavor(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ff.evaluate_flavor

    def eager(*args: Any, **kwargs: Any) -> Any:
        kwargs["defer"] = False
        return real(*args, **kwargs)

    monkeypatch.setattr(ff, "evaluate_flavor", eager)


def _random_cluster(seed: int) -> Inventory:
    """Queues of two or three cpu flavors under two cohorts, every fungibility setting and
    preference, with workloads admitted on random flavors and some pending."""
    rnd = random.Random(seed)
    flavors = ["a", "b", "c"]
    queues: list[QueueSpec] = []
    names = []
    for i in range(rnd.randint(2, 5)):
        own = flavors[: rnd.randint(2, 3)]
        spec = queue(
            f"q{i}",
            {f: rnd.choice([0, 2, 4, 6]) for f in own},
            parent=rnd.choice(["c1", "c2"]),
            borrow=rnd.choice([TRY, STOP]),
            preempt=rnd.choice([TRY, STOP]),
            preference=rnd.choice([None, ff.BORROWING_OVER_PREEMPTION, PREEMPTION_OVER_BORROWING]),
            preemption=PreemptionPolicy(
                within_queue=rnd.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
                reclaim_within_cohort=rnd.choice(["Never", "LowerPriority", "Any"]),
                borrow_within_cohort=rnd.choice(["Never", "LowerPriority"]),
            ),
        )
        queues.append(spec)
        names.append((spec.name, own))
    workloads: list[Workload] = []
    for i in range(rnd.randint(2, 24)):
        name, own = rnd.choice(names)
        on = rnd.choice(own) if rnd.random() < 0.5 else None
        workloads.append(job(f"w{i:02d}", name, rnd.randint(1, 4), priority=rnd.randint(0, 3), on=on, uid=f"u{i:02d}"))
    inventory = Inventory()
    inventory.flavors = {f: Flavor(f) for f in flavors}
    inventory.queues = {q.name: q for q in queues}
    for parent in ("c1", "c2"):
        inventory.queues[parent] = QueueSpec(parent, "root", defined=False)
    inventory.queues["root"] = QueueSpec("root", defined=False)
    inventory.workloads = {w.key: w for w in workloads}
    return inventory


def _decide(inventory: Inventory, config: Config) -> tuple[str, Any, dict[str, list[str]]]:
    registry = Registry(
        [
            ("priority", priority, None),
            ("cohort-reclaim", cohort_reclaim, None),
            ("min-runtime", min_runtime, None),
            (ff.NAME, ff, config),
        ]
    )
    decisions = run_session(Snapshot.build(inventory, now=NOW), registry, actions=("allocate", "preempt"))
    return decisions.to_json(), decisions.flavor_scans, decisions.explanations


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.booleans())
def test_putting_searches_off_decides_as_searching_every_flavor(seed: int, implicit: bool) -> None:
    """Admissions, victims, pending reasons and messages, and recorded scan positions are
    the same; each explanation line is the same but for a flavor left unsearched."""
    inventory = _random_cluster(seed)
    config = Config(implicit_preference_default=implicit)
    put_off = _decide(inventory, config)
    with pytest.MonkeyPatch.context() as patch:
        _searching_every_flavor(patch)
        every = _decide(inventory, config)
    assert put_off[:2] == every[:2]
    assert put_off[2].keys() == every[2].keys()
    for key, lines in put_off[2].items():
        wanted = every[2][key]
        assert len(lines) == len(wanted)
        for line, expected in zip(lines, wanted, strict=True):
            left = UNSEARCHED.fullmatch(line)
            if left is None:
                assert line == expected
            else:
                # The same flavor, which searching would have found to need victims.
                assert SEARCHED.fullmatch(expected) is not None
                assert expected.startswith(left.group(1) + ": ")
