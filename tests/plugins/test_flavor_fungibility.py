"""The flavor scan of KEP-582 (SEMANTICS §3): plugin ``flavor-fungibility``."""

from __future__ import annotations

import zlib
from dataclasses import replace

import pytest
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
    WhenCan,
    Workload,
)
from preemptd.framework.objects import Inventory, parse_objects
from preemptd.framework.run import run_session
from preemptd.framework.session import (
    FIT,
    NOCANDIDATES,
    NOFIT,
    PREEMPT,
    RECLAIM,
    Assignment,
    FlavorOption,
    Registry,
    Session,
)
from preemptd.framework.snapshot import Snapshot
from preemptd.plugins import cohort_reclaim, priority
from preemptd.plugins import flavor_fungibility as ff
from preemptd.plugins.flavor_fungibility import (
    BORROWING_OVER_PREEMPTION,
    CONTEXT_KEY,
    PREEMPTION_OVER_BORROWING,
    Config,
    preference_of,
    rank,
    stop_reason,
)

HOUR = 3_600_000
NOW = 1_767_225_600_000 + HOUR  # 2026-01-01T01:00:00Z
TRY: WhenCan = "TryNextFlavor"
STOP: WhenCan = "MayStopSearch"
LOWER = PreemptionPolicy(within_queue="LowerPriority")


# --- builders --------------------------------------------------------------------------------


def queue(
    name: str,
    flavors: dict[str, float],
    *,
    parent: str | None = None,
    borrow: WhenCan = STOP,
    preempt: WhenCan = TRY,
    preference: str | None = None,
    preemption: PreemptionPolicy = LOWER,
) -> QueueSpec:
    """A queue covering cpu with the given flavors, in order, and cpu nominal (cores) each."""
    quotas = tuple(FlavorQuotas(f, {"cpu": ResourceQuota(int(c * 1000))}) for f, c in flavors.items())
    return QueueSpec(
        name,
        parent,
        (ResourceGroup(("cpu",), quotas),),
        preemption=preemption,
        fungibility=FlavorFungibility(borrow, preempt, preference),  # type: ignore[arg-type]
    )


def job(
    name: str,
    queue_name: str,
    cpu: float,
    *,
    count: int = 1,
    priority: int = 0,
    on: str | None = None,
    admitted_at: int | None = None,
    scan: dict[str, dict[str, int]] | None = None,
    uid: str = "",
) -> Workload:
    """A one-podSet workload of ``count`` pods of ``cpu`` cores; ``on`` = admitted on that flavor."""
    admission = None if on is None else Admission(queue_name, (PodSetAdmission("main", count, {"cpu": on}),))
    return Workload(
        "ml",
        name,
        queue_name,
        (PodSet("main", count, {"cpu": int(cpu * 1000)}),),
        priority=priority,
        created=NOW - HOUR,
        uid=uid,
        admission=admission,
        admitted_at=admitted_at if admitted_at is not None else (NOW - HOUR if on else None),
        flavor_scan=scan or {},
    )


def session(
    queues: list[QueueSpec], workloads: list[Workload], *, config: Config | None = None, now: int = NOW
) -> Session:
    inventory = Inventory()
    names = {f.flavor for q in queues for g in q.resource_groups for f in g.flavors}
    inventory.flavors = {name: Flavor(name) for name in sorted(names)}
    inventory.queues = {q.name: q for q in queues}
    for parent in {q.parent for q in queues if q.parent and q.parent not in inventory.queues}:
        inventory.queues[parent] = QueueSpec(parent, defined=False)
    inventory.workloads = {w.key: w for w in workloads}
    registry = Registry(
        [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), (ff.NAME, ff, config or Config())]
    )
    opened = Session(Snapshot.build(inventory, now=now), registry)
    opened.open()
    return opened


def assign(s: Session, workload: Workload) -> Assignment:
    found = ff.assign_flavors(s, workload)
    assert found is not None
    return found


def chosen(assignment: Assignment) -> list[str]:
    return [ps.flavors["cpu"] for ps in assignment.pod_sets]


def positions(assignment: Assignment) -> dict[str, dict[str, int]]:
    return {k: v for k, v in assignment.flavor_scan.items() if k != CONTEXT_KEY}


def option(mode: int, level: int = 0, flavor: str = "x") -> FlavorOption:
    return FlavorOption(flavor, mode, level=level)


def ordered(options: list[FlavorOption], preference: str) -> list[tuple[str, int]]:
    names = ("NoFit", "NoCandidates", "Preempt", "Reclaim", "Fit")
    return [(names[o.mode], o.level) for o in sorted(options, key=lambda o: rank(o, preference))]


ALL = [option(m, level) for m in (NOCANDIDATES, PREEMPT, RECLAIM, FIT) for level in (0, 1)]


# --- preference orders -----------------------------------------------------------------------


def test_borrowing_over_preemption_ranks_mode_first_then_borrowing_level() -> None:
    """BorrowingOverPreemption: higher mode first, then lower level; NoCandidates last."""
    assert [
        ("Fit", 0),
        ("Fit", 1),
        ("Reclaim", 0),
        ("Reclaim", 1),
        ("Preempt", 0),
        ("Preempt", 1),
        ("NoCandidates", 0),
        ("NoCandidates", 1),
    ] == ordered(ALL, BORROWING_OVER_PREEMPTION)


def test_preemption_over_borrowing_ranks_borrowing_level_first_then_mode() -> None:
    """PreemptionOverBorrowing: lower level first, then higher mode; NoCandidates still last."""
    assert [
        ("Fit", 0),
        ("Reclaim", 0),
        ("Preempt", 0),
        ("Fit", 1),
        ("Reclaim", 1),
        ("Preempt", 1),
        ("NoCandidates", 0),
        ("NoCandidates", 1),
    ] == ordered(ALL, PREEMPTION_OVER_BORROWING)


def test_no_candidates_ranks_below_a_borrowing_preemption_even_when_levels_come_first() -> None:
    """NoCandidates at level 0 loses to Preempt at level 2 under PreemptionOverBorrowing."""
    assert rank(option(PREEMPT, 2), PREEMPTION_OVER_BORROWING) < rank(option(NOCANDIDATES, 0), PREEMPTION_OVER_BORROWING)


def test_the_default_preference_is_borrowing_over_preemption() -> None:
    """Without a preference and without the implicit default, BorrowingOverPreemption is used."""
    assert BORROWING_OVER_PREEMPTION == preference_of(FlavorFungibility(TRY, TRY), Config())


def test_implicit_preference_default_picks_preemption_over_borrowing_when_borrowing_tries_next() -> None:
    """implicit_preference_default: whenCanBorrow TryNextFlavor and no preference → PreemptionOverBorrowing."""
    config = Config(implicit_preference_default=True)
    assert PREEMPTION_OVER_BORROWING == preference_of(FlavorFungibility(TRY, TRY), config)
    assert PREEMPTION_OVER_BORROWING == preference_of(FlavorFungibility(TRY, STOP), config)


def test_implicit_preference_default_leaves_may_stop_search_borrowing_alone() -> None:
    """implicit_preference_default has no effect when whenCanBorrow is MayStopSearch."""
    config = Config(implicit_preference_default=True)
    assert BORROWING_OVER_PREEMPTION == preference_of(FlavorFungibility(STOP, TRY), config)


def test_an_explicit_preference_wins_over_the_implicit_default() -> None:
    """A preference set on the queue is used as is, whatever the configuration says."""
    config = Config(implicit_preference_default=True)
    fungibility = FlavorFungibility(TRY, TRY, "BorrowingOverPreemption")
    assert BORROWING_OVER_PREEMPTION == preference_of(fungibility, config)


def test_config_schema_defaults_to_the_kep_behaviour() -> None:
    """The TOML table is the dataclass Config, implicit_preference_default false by default."""
    assert Config is ff.plugin_config_schema()
    assert Config().implicit_preference_default is False


# --- stop rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "level", "borrow", "preempt", "stops"),
    [
        (NOFIT, 0, STOP, STOP, False),
        (NOCANDIDATES, 0, STOP, STOP, False),
        (FIT, 0, TRY, TRY, True),
        (FIT, 1, STOP, TRY, True),
        (FIT, 1, TRY, STOP, False),
        (PREEMPT, 0, STOP, TRY, False),
        (PREEMPT, 0, TRY, STOP, True),
        (RECLAIM, 0, TRY, STOP, True),
        (RECLAIM, 1, TRY, STOP, False),
        (PREEMPT, 1, STOP, STOP, True),
        (PREEMPT, 1, STOP, TRY, False),
    ],
)
def test_stop_rules(mode: int, level: int, borrow: WhenCan, preempt: WhenCan, stops: bool) -> None:
    """The scan goes on after NoFit/NoCandidates, after a preemption under whenCanPreempt
    TryNextFlavor and after borrowing under whenCanBorrow TryNextFlavor; otherwise it stops."""
    assert stops == (stop_reason(option(mode, level), FlavorFungibility(borrow, preempt)) is not None)


def _own_queue_preemption(**fungibility: object) -> tuple[Session, Workload]:
    """Queue q: a 4 (full with a low-priority job), b 4 (free); the pending job needs 4."""
    q = queue("q", {"a": 4, "b": 4}, **fungibility)  # type: ignore[arg-type]
    pending = job("high", "q", 4, priority=10)
    return session([q], [job("low", "q", 4, on="a"), pending]), pending


def test_preemption_tries_the_next_flavor_by_default() -> None:
    """whenCanPreempt TryNextFlavor: a needs preemption, so b (Fit) is taken; scanned to the end → -1."""
    s, pending = _own_queue_preemption()
    found = assign(s, pending)
    assert (["b"], FIT, {"main": {"cpu": -1}}) == (chosen(found), found.mode, positions(found))


def test_may_stop_search_preempts_in_the_first_flavor() -> None:
    """whenCanPreempt MayStopSearch: the scan stops at a (Preempt), recording index 0."""
    s, pending = _own_queue_preemption(preempt=STOP)
    found = assign(s, pending)
    assert (["a"], PREEMPT, ["ml/low"]) == (chosen(found), found.mode, [v.key for v in found.victims])
    assert {"main": {"cpu": 0}} == positions(found)


def _borrowing(**fungibility: object) -> tuple[Session, Workload]:
    """Cohort c: q (a 2, b 4) and lender r (a 4). The pending job needs 4: a borrows, b fits."""
    q = queue("q", {"a": 2, "b": 4}, parent="c", **fungibility)  # type: ignore[arg-type]
    pending = job("p", "q", 4)
    return session([q, queue("r", {"a": 4}, parent="c")], [pending]), pending


def test_borrowing_stops_the_scan_by_default() -> None:
    """whenCanBorrow MayStopSearch: a fits by borrowing (level 1) and is taken; index 0 recorded."""
    s, pending = _borrowing()
    found = assign(s, pending)
    assert (["a"], FIT, 1, {"main": {"cpu": 0}}) == (chosen(found), found.mode, found.level, positions(found))


def test_borrowing_tries_the_next_flavor_when_asked() -> None:
    """whenCanBorrow TryNextFlavor: a borrows, so the scan goes on to b, which fits at level 0."""
    s, pending = _borrowing(borrow=TRY)
    found = assign(s, pending)
    assert (["b"], 0, {"main": {"cpu": -1}}) == (chosen(found), found.level, positions(found))


def _borrow_or_preempt(config: Config | None = None, **fungibility: object) -> tuple[Session, Workload]:
    """Cohort c: q (a 2, b 4 used by a low-priority job) and lender r (a 4).
    The pending job (4) can borrow in a (Fit, level 1) or preempt in b (Preempt, level 0)."""
    q = queue("q", {"a": 2, "b": 4}, parent="c", **fungibility)  # type: ignore[arg-type]
    pending = job("high", "q", 4, priority=10)
    workloads = [job("low", "q", 4, on="b"), pending]
    return session([q, queue("r", {"a": 4}, parent="c")], workloads, config=config), pending


def test_stopping_at_a_preemption_takes_it_over_an_earlier_borrowing_flavor() -> None:
    """whenCanBorrow TryNextFlavor, whenCanPreempt MayStopSearch: the scan stops at b and takes it,
    although a (Fit, borrowing) ranks higher by BorrowingOverPreemption (KEP-582 story 2)."""
    s, pending = _borrow_or_preempt(borrow=TRY, preempt=STOP)
    found = assign(s, pending)
    assert (["b"], PREEMPT, 0) == (chosen(found), found.mode, found.level)


def test_full_scan_takes_the_best_by_borrowing_over_preemption() -> None:
    """Both TryNextFlavor, default preference: (Fit, level 1) in a beats (Preempt, level 0) in b."""
    s, pending = _borrow_or_preempt(borrow=TRY, preempt=TRY)
    found = assign(s, pending)
    assert (["a"], FIT, 1, {"main": {"cpu": -1}}) == (chosen(found), found.mode, found.level, positions(found))


def test_full_scan_takes_the_best_by_preemption_over_borrowing() -> None:
    """Both TryNextFlavor, PreemptionOverBorrowing: (Preempt, level 0) in b beats (Fit, level 1) in a."""
    s, pending = _borrow_or_preempt(borrow=TRY, preempt=TRY, preference=PREEMPTION_OVER_BORROWING)
    found = assign(s, pending)
    assert (["b"], PREEMPT, 0) == (chosen(found), found.mode, found.level)


def test_implicit_preference_default_switches_the_full_scan_to_preemption() -> None:
    """With implicit_preference_default and no preference, the same queue preempts in b."""
    s, pending = _borrow_or_preempt(Config(implicit_preference_default=True), borrow=TRY, preempt=TRY)
    assert ["b"] == chosen(assign(s, pending))


def test_equal_rank_goes_to_the_earlier_flavor() -> None:
    """Both TryNextFlavor and a, b both borrow at level 1: the earlier flavor a is taken."""
    q = queue("q", {"a": 0, "b": 0}, parent="c", borrow=TRY, preempt=TRY)
    pending = job("p", "q", 2)
    s = session([q, queue("r", {"a": 4, "b": 4}, parent="c")], [pending])
    found = assign(s, pending)
    assert (["a"], 1) == (chosen(found), found.level)


# --- NoCandidates -----------------------------------------------------------------------------


def _no_candidates_first(second: float, **fungibility: object) -> tuple[Session, Workload]:
    """Queue q in cohort c: a 4 is full with a higher-priority job (no candidates);
    b has nominal ``second`` and lender r offers b 4."""
    q = queue("q", {"a": 4, "b": second}, parent="c", **fungibility)  # type: ignore[arg-type]
    pending = job("p", "q", 4, priority=10)
    workloads = [job("top", "q", 4, priority=20, on="a"), pending]
    return session([q, queue("r", {"b": 4}, parent="c")], workloads), pending


def test_no_candidates_ranks_below_a_borrowing_fit_under_preemption_over_borrowing() -> None:
    """PreemptionOverBorrowing: a is NoCandidates (level 0), b fits by borrowing (level 1): b wins."""
    s, pending = _no_candidates_first(0, borrow=TRY, preempt=TRY, preference=PREEMPTION_OVER_BORROWING)
    found = assign(s, pending)
    assert (["b"], FIT, 1) == (chosen(found), found.mode, found.level)
    assert any("flavor a: NoCandidates" in line for line in found.tried)


def test_no_candidates_beats_no_fit_and_is_reported_as_such() -> None:
    """a is NoCandidates and b (nominal 0, borrowing needed, lender gone) is NoFit: a is kept, mode NoCandidates."""
    q = queue("q", {"a": 4, "b": 0}, borrow=TRY, preempt=TRY)
    pending = job("p", "q", 4, priority=10)
    s = session([q], [job("top", "q", 4, priority=20, on="a"), pending])
    found = assign(s, pending)
    assert (["a"], NOCANDIDATES, {"main": {"cpu": -1}}) == (chosen(found), found.mode, positions(found))


def test_no_candidates_pending_reason_and_recorded_scan() -> None:
    """Through the allocate action: pending PreemptionNoCandidates, its flavorScan written to the decisions."""
    q = queue("q", {"a": 4})
    pending = job("p", "q", 4, priority=10)
    s = session([q], [job("top", "q", 4, priority=20, on="a"), pending])
    decisions = run_session(s.snapshot, s.registry)
    assert [("ml/p", "PreemptionNoCandidates")] == [(p.workload, p.reason) for p in decisions.pending]
    assert {"main": {"cpu": -1}} == decisions.flavor_scans["ml/p"]


def test_a_scan_to_resume_from_carries_its_context_and_one_that_starts_over_does_not() -> None:
    """Index 0 needs the context entry to be checked later; -1 everywhere starts over anyway."""
    s, pending = _own_queue_preemption(preempt=STOP)
    assert CONTEXT_KEY in assign(s, pending).flavor_scan
    s, pending = _own_queue_preemption()
    assert CONTEXT_KEY not in assign(s, pending).flavor_scan


# --- podSets ---------------------------------------------------------------------------------


def test_later_podsets_see_the_usage_of_earlier_ones() -> None:
    """Two podSets of 3 cpu, flavors a 4 and b 4: the first takes a, the second (3 + 3 > 4) takes b."""
    q = queue("q", {"a": 4, "b": 4})
    two = Workload(
        "ml", "two", "q", (PodSet("first", 1, {"cpu": 3000}), PodSet("second", 1, {"cpu": 3000})), created=NOW - HOUR
    )
    found = assign(session([q], [two]), two)
    assert ["a", "b"] == chosen(found)
    assert {"first": {"cpu": 0}, "second": {"cpu": -1}} == positions(found)
    assert {("a", "cpu"): 3000, ("b", "cpu"): 3000} == found.usage


def test_a_podset_without_a_flavor_makes_the_workload_no_fit_and_restarts_its_scan() -> None:
    """A podSet every flavor rejects: NoFit, naming each flavor; its position is -1 (start over)."""
    q = queue("q", {"a": 4, "b": 2})
    big = job("big", "q", 5, scan={"main": {"cpu": 0}})
    found = assign(session([q], [big]), big)
    assert (NOFIT, {"main": {"cpu": -1}}) == (found.mode, positions(found))
    assert "flavor b" in found.message


def test_an_uncovered_resource_is_no_fit_naming_it() -> None:
    """A request for a resource no group covers: NoFit 'resource gpu is not covered by queue q'."""
    q = queue("q", {"a": 4})
    odd = Workload("ml", "odd", "q", (PodSet("main", 1, {"cpu": 1000, "gpu": 1}),), created=NOW - HOUR)
    found = assign(session([q], [odd]), odd)
    assert (NOFIT, "resource gpu is not covered by queue q") == (found.mode, found.message)


# --- resumption ------------------------------------------------------------------------------


def _three_flavors(scan: dict[str, dict[str, int]] | None, **fungibility: object) -> tuple[Session, Workload]:
    """Queue q: a, b, c of 4 cpu each, all free; the pending job needs 1."""
    q = queue("q", {"a": 4, "b": 4, "c": 4}, **fungibility)  # type: ignore[arg-type]
    pending = job("p", "q", 1, scan=scan)
    return session([q], [pending]), pending


def test_scan_resumes_after_the_last_tried_index() -> None:
    """flavorScan {main: {cpu: 0}}: a is not tried again; b fits and is taken (index 1 recorded)."""
    s, pending = _three_flavors({"main": {"cpu": 0}})
    found = assign(s, pending)
    assert (["b"], {"main": {"cpu": 1}}) == (chosen(found), positions(found))
    assert not any("flavor a:" in line for line in found.tried)


def test_scan_from_the_second_to_last_ends_at_the_last_and_records_minus_one() -> None:
    """flavorScan 1 of [a, b, c]: the scan starts at c; stopping at the last flavor records -1."""
    s, pending = _three_flavors({"main": {"cpu": 1}})
    found = assign(s, pending)
    assert (["c"], {"main": {"cpu": -1}}) == (chosen(found), positions(found))


@pytest.mark.parametrize("last", [-1, 2, 7])
def test_scan_starts_at_the_first_flavor_after_minus_one_the_last_index_or_a_stale_one(last: int) -> None:
    """-1, the last index (2 of 3) and an index beyond the list all start the scan at a."""
    s, pending = _three_flavors({"main": {"cpu": last}})
    found = assign(s, pending)
    assert (["a"], {"main": {"cpu": 0}}) == (chosen(found), positions(found))


def test_a_resumed_scan_does_not_wrap_around() -> None:
    """Resuming after a with b and c full (no candidates), the free a is not tried again:
    NoCandidates in b this time, and -1 so that the next session starts at a."""
    q = queue("q", {"a": 4, "b": 4, "c": 4}, preemption=PreemptionPolicy())
    pending = job("p", "q", 4, scan={"main": {"cpu": 0}})
    workloads = [job("x", "q", 4, on="b"), job("y", "q", 4, on="c"), pending]
    found = assign(session([q], workloads), pending)
    assert (["b"], NOCANDIDATES, {"main": {"cpu": -1}}) == (chosen(found), found.mode, positions(found))
    assert not any("flavor a:" in line for line in found.tried)


def test_renomination_in_the_same_session_starts_where_the_first_one_started() -> None:
    """The start is fixed by the first nomination of the session (SEMANTICS §2.5)."""
    s, pending = _three_flavors({"main": {"cpu": 0}})
    assign(s, pending)
    again = assign(s, replace(pending, flavor_scan={}))
    assert ["b"] == chosen(again)


def test_the_tried_lines_name_every_flavor_examined_and_why_the_scan_stopped() -> None:
    """Assignment.tried: one line per flavor examined and one for the stop (for `preemptd explain`);
    a's search, which cannot change the flavor taken, is not run (test_flavor_search_put_off.py)."""
    s, pending = _own_queue_preemption()
    found = assign(s, pending)
    assert [
        "podSet main: flavor a: needs victims, not searched (the scan stopped at flavor b)",
        "podSet main: flavor b: Fit",
        "podSet main: stopped the scan at flavor b: it fits without borrowing",
    ] == found.tried


# --- the context entry ---------------------------------------------------------------------


QUOTA_TEXT = "q<>[cpu]a(cpu=4000/-/-)b(cpu=4000/-/-)c(cpu=4000/-/-)"


def test_the_context_entry_fingerprints_quota_and_admitted_workloads() -> None:
    """The context holds since = now, crc32 of the quota text and of the admitted workloads."""
    q = queue("q", {"a": 4, "b": 4, "c": 4})
    pending = job("p", "q", 1)
    early = job("early", "q", 1, on="a", uid="u1", admitted_at=NOW - 10)
    found = assign(session([q], [early, pending]), pending)
    expected = {"since": NOW, "quota": zlib.crc32(QUOTA_TEXT.encode()), "admitted": zlib.crc32(b"ml/early#u1#1")}
    assert expected == found.flavor_scan[CONTEXT_KEY]


def _resumed(scan: dict[str, dict[str, int]], workloads: list[Workload], flavors: dict[str, float] | None = None) -> Assignment:
    q = queue("q", flavors or {"a": 4, "b": 4, "c": 4})
    pending = job("p", "q", 1, scan=scan)
    return assign(session([q], [*workloads, pending]), pending)


def _context(admitted: bytes = b"", since: int = NOW - HOUR) -> dict[str, int]:
    return {"since": since, "quota": zlib.crc32(QUOTA_TEXT.encode()), "admitted": zlib.crc32(admitted)}


def test_a_matching_context_keeps_the_position() -> None:
    """Same quota, same admitted workloads: the scan resumes at b."""
    assert ["b"] == chosen(_resumed({"main": {"cpu": 0}, CONTEXT_KEY: _context()}, []))


def test_a_quota_change_forgets_the_position() -> None:
    """The context was recorded with c at 4 cpu; c now has 8: the scan starts over at a."""
    found = _resumed({"main": {"cpu": 0}, CONTEXT_KEY: _context()}, [], {"a": 4, "b": 4, "c": 8})
    assert ["a"] == chosen(found)
    assert found.tried[0].startswith("flavorScan forgotten: the quota of queue q's tree changed")


def test_a_workload_leaving_the_queue_forgets_the_position() -> None:
    """Recorded with ml/gone#u9#1 admitted; it is gone now: the scan starts over at a."""
    found = _resumed({"main": {"cpu": 0}, CONTEXT_KEY: _context(b"ml/gone#u9#1")}, [])
    assert ["a"] == chosen(found)
    assert "left it" in found.tried[0]


def test_a_workload_admitted_after_the_context_keeps_the_position() -> None:
    """A workload admitted after `since` is not part of the fingerprint: the scan resumes at b."""
    late = job("late", "q", 1, on="c", admitted_at=NOW - 10)
    assert ["b"] == chosen(_resumed({"main": {"cpu": 0}, CONTEXT_KEY: _context()}, [late]))


def test_a_flavor_scan_without_a_context_is_trusted() -> None:
    """A hand-written flavorScan (no context entry) resumes as it says."""
    assert ["b"] == chosen(_resumed({"main": {"cpu": 0}}, []))


def test_an_incomplete_context_forgets_the_position() -> None:
    """A context without its fingerprints cannot be checked: the scan starts over at a."""
    assert ["a"] == chosen(_resumed({"main": {"cpu": 0}, CONTEXT_KEY: {"since": 1}}, []))


def test_the_objects_layer_reads_a_flavor_scan_with_its_context() -> None:
    """status.flavorScan with the context entry is a valid Workload (no problem reported)."""
    flavor = {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "a"}}
    quota = {"name": "a", "resources": [{"name": "cpu", "nominalQuota": "4"}]}
    queue_document = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [quota]}]},
    }
    document = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1"}}]},
        "status": {"flavorScan": {"main": {"cpu": 0}, CONTEXT_KEY: _context()}},
    }
    inventory = parse_objects([("s.yaml", d) for d in (flavor, queue_document, document)])
    assert [] == inventory.problems
    assert _context() == dict(inventory.workloads["ml/p"].flavor_scan[CONTEXT_KEY])


def test_no_candidates_flavors_are_passed_over_even_under_may_stop_search() -> None:
    """whenCanPreempt MayStopSearch: a and b (full with higher priority) have no candidates; c fits."""
    q = queue("q", {"a": 4, "b": 4, "c": 4}, preempt=STOP)
    pending = job("p", "q", 4, priority=10)
    workloads = [job(f"top-{f}", "q", 4, priority=20, on=f) for f in ("a", "b")] + [pending]
    s = session([q], workloads)
    decisions = run_session(s.snapshot, s.registry)
    assert [("ml/p", "c")] == [(a.workload, a.pod_sets[0].flavors["cpu"]) for a in decisions.admitted]
