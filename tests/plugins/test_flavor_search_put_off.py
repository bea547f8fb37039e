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

import json
import random
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import (
    Admission,
    Flavor,
    FlavorFungibility,
    FlavorQuotas,
    PodSet,
    PodSetAdmission,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from preemptd.framework.objects import Inventory
from preemptd.framework.preemption import failures
from preemptd.framework.run import run_session
from preemptd.framework.session import FIT, PREEMPT, RECLAIM, Registry
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
from tests.scenarios.test_search_memo import JUDGED, NO_CANDIDATE, NO_SET


def test_a_flavor_before_the_one_the_scan_stops_at_is_not_searched() -> None:
    """a is full with a lower-priority job, b is free: b fits without borrowing and ends the
    scan, so whatever a's search would find, b is taken; a is not searched."""
    s, pending = _own_queue_preemption()
    found = assign(s, pending)
    assert (["b"], FIT, {"main": {"cpu": -1}}) == (chosen(found), found.mode, positions(found))
    assert "podSet main: flavor a: needs victims, not searched (the scan stopped at flavor b)" == found.tried[0]
    assert (0, 1) == (s.counters.searches, s.counters.left)


def test_may_stop_search_still_searches_the_first_flavor() -> None:
    """whenCanPreempt MayStopSearch: a's victims end the scan, so a is searched as it is met."""
    s, pending = _own_queue_preemption(preempt=STOP)
    found = assign(s, pending)
    assert (["a"], PREEMPT) == (chosen(found), found.mode)
    assert "podSet main: flavor a: Preempt (1 victim(s))" == found.tried[0]
    assert s.counters.searches >= 1


def test_a_flavor_that_cannot_beat_the_best_seen_is_not_searched() -> None:
    """Both TryNextFlavor, BorrowingOverPreemption: a fits by borrowing (level 1), b needs a
    victim at level 0. A fit ranks above any preemption by that preference: b is not searched,
    though it is the last flavor (a last flavor is searched at once only when no flavor seen
    fits, ``flavor_fungibility.LAST_AT_ONCE``)."""
    s, pending = _borrow_or_preempt(borrow=TRY, preempt=TRY)
    found = assign(s, pending)
    assert (["a"], FIT, 1) == (chosen(found), found.mode, found.level)
    assert (
        "podSet main: flavor b: needs victims, not searched (by BorrowingOverPreemption it cannot beat flavor a)"
        in found.tried
    )
    assert (0, 1) == (s.counters.searches, s.counters.left)


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
    assert 0 == s.counters.left


def _two_resources(flavor: str, cpu: int, gpu: int) -> FlavorQuotas:
    return FlavorQuotas(flavor, {"cpu": ResourceQuota(cpu * 1000), GPU: ResourceQuota(gpu)})


def _gpu_job(name: str, queue_name: str, cpu: int, gpu: int, on: str | None = None) -> Workload:
    admission = None
    if on is not None:
        admission = Admission(queue_name, (PodSetAdmission("main", 1, {"cpu": on, GPU: on}),))
    return Workload(
        "ml",
        name,
        queue_name,
        (PodSet("main", 1, {"cpu": cpu * 1000, GPU: gpu}),),
        created=NOW - 3_600_000,
        admission=admission,
        admitted_at=None if on is None else NOW - 3_600_000,
    )


def test_a_flavor_that_could_win_only_by_borrowing_waits_for_one_that_wins_without() -> None:
    """Cohort c: q (a: cpu 0, 4 GPUs; b: cpu 8, 4 GPUs) and r (a: cpu 8; b: nothing). r
    borrows q's GPUs of both flavors (ra on a, rb on b). p in q asks for 2 cpu and 4 GPUs.
    a: its cpu fits only by borrowing r's (level 1), its GPUs need victims; b: its cpu fits
    within nominal, its GPUs need victims. Neither fits, so the scan ends with two searches
    put off. b's is the more promising (level 0) and is run first: rb is reclaimed, within
    q's nominal (Reclaim, level 0), and no search of a, which borrows, can beat that: a is
    not searched. Searching both, b still wins: a finds no victim (p would borrow cpu on a,
    and ra, not reclaimable from a borrowing preemptor with borrowWithinCohort Never, may be
    taken only by one that ends within its nominal): NoCandidates at level 1."""
    policy = PreemptionPolicy(within_queue="LowerPriority", reclaim_within_cohort="Any")
    group = (ResourceGroup(("cpu", GPU), (_two_resources("a", 0, 4), _two_resources("b", 8, 4))),)
    q = QueueSpec("q", "c", group, preemption=policy)
    r = QueueSpec("r", "c", (ResourceGroup(("cpu", GPU), (_two_resources("a", 8, 0), _two_resources("b", 0, 0))),))
    pending = _gpu_job("p", "q", 2, 4)
    s = session([q, r], [_gpu_job("ra", "r", 0, 4, on="a"), _gpu_job("rb", "r", 0, 4, on="b"), pending])
    found = assign(s, pending)
    assert ("b", RECLAIM, 0, ["ml/rb"]) == (
        found.pod_sets[0].flavors["cpu"], found.mode, found.level, [v.key for v in found.victims]
    )
    assert [
        "podSet main: flavor a: needs victims, not searched (by BorrowingOverPreemption it cannot beat flavor b)",
        "podSet main: flavor b: Reclaim (1 victim(s))",
    ] == found.tried[:2]
    assert 1 == s.counters.left
    with pytest.MonkeyPatch.context() as patch:
        _searching_every_flavor(patch)
        s = session([q, r], [_gpu_job("ra", "r", 0, 4, on="a"), _gpu_job("rb", "r", 0, 4, on="b"), pending])
        every = assign(s, pending)
    assert every.tried[0].startswith("podSet main: flavor a: NoCandidates, borrowing level 1 (")
    assert ["ml/rb"] == [v.key for v in every.victims]


# --- put off against searched everywhere, on random clusters ----------------------------------


GPU = "nvidia.com/gpu"
UNSEARCHED = re.compile(r"(podSet \S+: flavor \S+): needs victims, not searched \(.*\)")
SEARCHED = re.compile(r"podSet \S+: flavor \S+: (NoCandidates|Preempt|Reclaim)\b.*")


def _searching_every_flavor(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ff.evaluate_flavor

    def eager(*args: Any, **kwargs: Any) -> Any:
        kwargs["defer"] = False
        return real(*args, **kwargs)

    monkeypatch.setattr(ff, "evaluate_flavor", eager)


def _random_cluster(seed: int) -> Inventory:
    """Queues of two or three flavors of cpu and GPUs under two cohorts, every fungibility
    setting and preference, with workloads admitted on random flavors and some pending.
    A flavor whose cpu fits only by borrowing while its GPUs need victims ranks below one
    whose cpu fits within nominal: the order the searches put off are run in matters."""
    rnd = random.Random(seed)
    flavors = ["a", "b", "c"]
    queues: list[QueueSpec] = []
    names = []
    for i in range(rnd.randint(2, 5)):
        own = flavors[: rnd.randint(2, 3)]
        quotas = tuple(_two_resources(f, rnd.choice([0, 2, 4, 8]), rnd.choice([0, 2, 4, 6])) for f in own)
        policy = PreemptionPolicy(
            within_queue=rnd.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
            reclaim_within_cohort=rnd.choice(["Never", "LowerPriority", "Any"]),
            borrow_within_cohort=rnd.choice(["Never", "LowerPriority"]),
        )
        fungibility = FlavorFungibility(
            rnd.choice([TRY, STOP]),
            rnd.choice([TRY, STOP]),
            rnd.choice([None, ff.BORROWING_OVER_PREEMPTION, PREEMPTION_OVER_BORROWING]),  # type: ignore[arg-type]
        )
        parent = rnd.choice(["c1", "c2"])
        queues.append(QueueSpec(f"q{i}", parent, (ResourceGroup(("cpu", GPU), quotas),), policy, fungibility))
        names.append((f"q{i}", own))
    workloads: list[Workload] = []
    for i in range(rnd.randint(2, 24)):
        name, own = rnd.choice(names)
        on = rnd.choice(own) if rnd.random() < 0.5 else None
        job = _gpu_job(f"w{i:02d}", name, rnd.randint(0, 3), rnd.randint(1, 4), on=on)
        workloads.append(replace(job, priority=rnd.randint(0, 3), uid=f"u{i:02d}"))
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
    the same; each explanation line is the same but for a flavor left unsearched.

    With failures kept to the state they were found in: a failure that lasts
    (``preemption/failures.py``) of a flavor searched only when searching every flavor
    may judge a head in a later state, whose message then names it (see the next test)."""
    inventory = _random_cluster(seed)
    config = Config(implicit_preference_default=implicit)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(failures, "lasting_here", lambda session: False)
        put_off = _decide(inventory, config)
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


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.booleans())
def test_putting_searches_off_with_lasting_failures_decides_as_searching_every_flavor(seed: int, implicit: bool) -> None:
    """Failures that last: the same admissions, victims, pending reasons and scan
    positions; a pending message differs only where one side's names the head it was
    judged with (the other's then is that head's answer, or one with fewer candidates)."""
    inventory = _random_cluster(seed)
    config = Config(implicit_preference_default=implicit)
    put_off = _decide(inventory, config)
    with pytest.MonkeyPatch.context() as patch:
        _searching_every_flavor(patch)
        every = _decide(inventory, config)
    assert put_off[1] == every[1]
    ours, theirs = json.loads(put_off[0]), json.loads(every[0])
    ours_pending, theirs_pending = ours.pop("pending"), theirs.pop("pending")
    assert ours == theirs
    assert len(ours_pending) == len(theirs_pending)
    for entry, other in zip(ours_pending, theirs_pending, strict=True):
        message, wanted = entry.pop("message"), other.pop("message")
        assert entry == other
        if JUDGED.search(message) is None and JUDGED.search(wanted) is None:
            assert message == wanted
        else:
            bases = {JUDGED.sub("", message).replace(NO_SET, NO_CANDIDATE), JUDGED.sub("", wanted).replace(NO_SET, NO_CANDIDATE)}
            assert len(bases) == 1
