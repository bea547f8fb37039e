"""What the rounds make once instead of per head or per victim (``actions/allocate.py``,
``actions/books.py``, ``preemption/heads.py``, ``session/session.py``, ``session/statement.py``).

* The workload order keys of a queue are made in one loop (``Session.order_keys``), each
  the tuple ``workload_key`` gives and kept where it keeps it: every plugin's key asked
  once per workload and session, a key that raises counted once.
* Every head a kept head judges stores one copy of the kept head's flavor scan, made when
  the first of them is judged: the same content as a copy per head.
* The re-check of an entry with victims whose nodes were short places its pods, best fit,
  on the view without the session's victims it keeps (the victims' room given): the
  preemption then places nothing again, and the view ends as when the pods are counted
  there and placed once more afterwards.
* A victim's node room is given back in one step (``Statement.give_rooms``), as one
  ``give_room`` per node would give it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.actions import allocate, books
from preemptd.framework.model import Workload
from preemptd.framework.preemption import heads
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, Session, Statement, hookimpl
from preemptd.framework.session.statement import _TAKE as TAKE
from preemptd.framework.testing import inventory, queue, snapshot, workload

from benchmarks.bench_session import default_session
from benchmarks.generate import CONTENDED, NOW_MS, generate_saturated, generate_spec

# -- order keys ----------------------------------------------------------------------------


class _Keys:
    """A plugin whose ``workload_order`` key is ``(-priority, n)``, or raises for the
    workloads named in ``broken``; it lists the workloads it was asked about."""

    def __init__(self, broken: set[str], n: int) -> None:
        self.broken = broken
        self.n = n
        self.asked: list[str] = []

    def plugin(self) -> SimpleNamespace:
        def key(w: Workload) -> tuple[object, ...]:
            self.asked.append(w.key)
            if w.name in self.broken:
                raise RuntimeError("no key")
            return (-w.priority, self.n)

        def workload_order(session: Session) -> object:
            return key

        return SimpleNamespace(MEMO_SAFE=True, workload_order=hookimpl(workload_order))

    def part(self, w: Workload) -> tuple[object, ...]:
        return (1,) if w.name in self.broken else (0, -w.priority, self.n)


def _session(plugins: list[_Keys], workloads: list[Workload]) -> Session:
    registry = Registry([(f"p{i}", plugin.plugin(), None) for i, plugin in enumerate(plugins)])
    session = Session(snapshot(inventory([queue("q", cpu=1)], workloads), 1_000), registry)
    session.open()
    return session


@settings(max_examples=60, deadline=None)
@given(
    plugins=st.integers(min_value=0, max_value=3),
    rows=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 5), st.text("ab", max_size=2), st.booleans()),
        min_size=1,
        max_size=12,
    ),
)
def test_order_keys_are_the_plain_keys_asked_once_and_kept_for_workload_key(
    plugins: int, rows: list[tuple[int, int, str, bool]]
) -> None:
    broken = {f"w{i}" for i, row in enumerate(rows) if row[3]}
    parts = [_Keys(broken if p % 2 == 0 else set(), p) for p in range(plugins)]
    made = [
        replace(workload(f"w{i}", "q", 1, priority=priority, created=created), uid=uid)
        for i, (priority, created, uid, _) in enumerate(rows)
    ]
    session = _session(parts, made)
    listed = list(session.snapshot.pending_by_queue["q"])
    keys = session.order_keys(listed)
    # SEMANTICS §2's key written out: each plugin's (0, *key) or (1,), then the creation
    # time and (uid, namespace, name).
    assert keys == [(*(p.part(w) for p in parts), w.created, *w.tiebreak) for w in listed]
    # Kept: ``workload_key`` answers the same objects without asking a plugin again.
    assert all(session.workload_key(w) is k for w, k in zip(listed, keys, strict=True))
    for p in parts:
        assert sorted(p.asked) == sorted(w.key for w in listed)
    raising = [p for p in parts if p.broken]
    expected = sum(1 for w in listed if w.name in broken) * len(raising)
    assert sum(session.registry.failures.values()) == expected


def test_a_session_asks_each_order_key_once_per_workload() -> None:
    plugin = _Keys(set(), 0)
    made = [workload(f"w{i}", "q", 1, priority=i % 3, created=i) for i in range(8)]
    registry = Registry([("p", plugin.plugin(), None)])
    run_session(snapshot(inventory([queue("q", cpu=1)], made), 1_000), registry)
    assert sorted(plugin.asked) == sorted(w.key for w in made)


# -- flavor scans of judged heads ------------------------------------------------------------


def _saturated_with_scans() -> Any:
    return generate_saturated(1, queues=20, workloads=1500)


def test_heads_judged_by_one_kept_head_share_one_copy_of_its_flavor_scan() -> None:
    kept: list[heads.Kept] = []
    real = heads.Kept.__init__

    def recording(self: heads.Kept, head: Workload, assignment: Any) -> None:
        real(self, head, assignment)
        kept.append(self)

    actions, registry = default_session()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(heads.Kept, "__init__", recording)
        decisions = run_session(snapshot(_saturated_with_scans(), NOW_MS), registry(), actions=actions)
    heads_of = {k.head.key for k in kept}
    judged = {
        key: scan
        for key, scan in decisions.flavor_scans.items()
        if key not in heads_of and any(line.startswith("flavors as for ") for line in decisions.explain(key))
    }
    assert len(judged) > 100
    copies = {id(scan) for scan in judged.values()}
    scanned = [k for k in kept if k.assignment.flavor_scan]
    # One copy per kept head that judged someone, never one per head.
    assert 0 < len(copies) <= len(scanned) < len(judged)
    by_line = {k.tried: k for k in kept}
    for key, scan in judged.items():
        (line,) = [x for x in decisions.explain(key) if x.startswith("flavors as for ")]
        judge = by_line[line]
        assert scan == judge.assignment.flavor_scan
        assert scan is not judge.assignment.flavor_scan  # a copy, as each head stored before


# -- the re-check's placement on the view ----------------------------------------------------

CLUSTERS = {
    "contended-40-nodes": lambda: generate_spec(
        replace(CONTENDED, nodes=40, workloads=250, queues=10, leaves_per_cohort=5), "rounds-once/contended"
    ),
    "contended-80-nodes": lambda: generate_spec(
        replace(CONTENDED, nodes=80, workloads=500, queues=20, leaves_per_cohort=5), "rounds-once/contended-2"
    ),
    "saturated-10x300": lambda: generate_saturated(1, queues=10, workloads=300),
}


def _run_view(objects: Any, placed_again: bool, counts: dict[str, int]) -> tuple[Any, ...]:
    """Decisions, explanations, vetoes and the view without victims at the end; with
    ``placed_again`` the pods a re-check placed on the view are given back after it (the
    evictions stay kept) and placed by the preemption, as when the re-check counted them."""
    made: list[books.Books] = []
    original_books, original_still_fits = allocate.Books, allocate.still_fits
    original_pods_fit = Session.pods_fit

    def recording(session: Session) -> books.Books:
        made.append(original_books(session))
        return made[-1]

    def pods_fit(self: Session, targets: Any, *, statement: Statement | None = None) -> bool:
        if made and statement is not None and statement is made[0].own:
            counts["counted on the view"] += 1
        return original_pods_fit(self, targets, statement=statement)

    def still_fits(session: Session, view: books.Books, leaf: Any, assignment: Any) -> bool:
        at = view.own.checkpoint() if view.own is not None else 0
        fits = original_still_fits(session, view, leaf, assignment)
        if view.placed_own:
            counts["placed by the re-check"] += 1
            if placed_again:
                own = view.own
                assert own is not None
                # The pods' room was taken last, after the evictions.
                first = next(i for i in range(at, len(own.ops)) if own.ops[i][0] == TAKE)
                assert all(op[0] == TAKE for op in own.ops[first:])
                own.rollback(first)
                view.placed_own = False
        return fits

    actions, registry_of = default_session()
    registry: Registry = registry_of()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(allocate, "Books", recording)
        patch.setattr(allocate, "still_fits", still_fits)
        patch.setattr(Session, "pods_fit", pods_fit)
        decisions = run_session(snapshot(objects, NOW_MS), registry, actions=actions)
    (view,) = made
    own = view.own
    assert own is not None and not own.ops
    free = own.placements.free if own.placements is not None else None
    return json.loads(decisions.to_json()), decisions.explanations, dict(registry.vetoes), own.accounting.usage, free


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_the_recheck_places_a_preemptors_pods_on_the_view_once_and_ends_with_the_same_view(name: str) -> None:
    objects = CLUSTERS[name]()
    once: dict[str, int] = {"placed by the re-check": 0, "counted on the view": 0}
    again: dict[str, int] = {"placed by the re-check": 0, "counted on the view": 0}
    fast = _run_view(objects, False, once)
    plain = _run_view(objects, True, again)
    assert fast == plain
    assert once["placed by the re-check"] > 0
    assert once["placed by the re-check"] == again["placed by the re-check"]


def test_a_recheck_that_placed_its_pods_does_not_count_them_on_the_view_too() -> None:
    counts = {"placed by the re-check": 0, "counted on the view": 0}
    _run_view(generate_saturated(1, queues=10, workloads=300), False, counts)
    assert counts["placed by the re-check"] > 0
    assert counts["counted on the view"] == 0


# -- a victim's room given in one step ---------------------------------------------------------


def test_give_rooms_gives_each_nodes_room_as_give_room_does_and_nothing_for_no_room() -> None:
    objects = generate_saturated(1, queues=4, workloads=60)
    session = Session(snapshot(objects, NOW_MS), Registry([]))
    placements = session.placements
    assert placements is not None
    nodes = sorted(placements.free)[:3]
    room = (*((node, {"cpu": 1000 * (i + 1)}) for i, node in enumerate(nodes)), (nodes[0], {"cpu": 7}))
    one = Statement(session.accounting.copy(), placements.copy())
    each = Statement(session.accounting.copy(), placements.copy())
    one.give_rooms(room)
    for node, requests in room:
        each.give_room(node, requests)
    assert one.ops == each.ops
    assert one.placements is not None and each.placements is not None
    assert one.placements.free == each.placements.free
    one.commit()
    each.commit()
    assert one.node_epoch == each.node_epoch == 1
    quiet = Statement(session.accounting.copy(), placements.copy())
    quiet.give_rooms(())
    quiet.commit()
    assert quiet.node_epoch == 0 and not quiet.ops
