"""What the rounds make once instead of per head or per victim (``actions/allocate.py``,
``actions/books.py``, ``preemption/heads.py``, ``session/session.py``, ``session/statement.py``).

* The workload order keys of a queue are made in one loop (``Session.order_keys``), each
  the tuple ``workload_key`` gives and kept where it keeps it: every plugin's key asked
  once per workload and session, a key that raises counted once.
* Every head a kept head judges stores one copy of the kept head's flavor scan, made when
  the first of them is judged: the same content as a copy per head.
* A victim's node room is given back in one step (``Statement.give_rooms``), as one
  ``give_room`` per node would give it.
* A candidate collection sets ``session.defer_pods`` for the plugins and back through
  its slot, not the session's Python ``__setattr__`` (two per victim search).
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Workload
from preemptd.framework.preemption import heads
from preemptd.framework.run import run_session
from preemptd.framework.session import (
    NodeRoom,
    Registry,
    Session,
    Statement,
    VictimSearch,
    collect_runs,
    hookimpl,
)
from preemptd.framework.testing import inventory, queue, snapshot, workload

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_saturated

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

    def recording(self: heads.Kept, head: Workload, assignment: Any, session: Any) -> None:
        real(self, head, assignment, session)
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


# -- a victim's room given in one step ---------------------------------------------------------


def test_give_rooms_gives_each_nodes_room_as_give_room_does_and_nothing_for_no_room() -> None:
    objects = generate_saturated(1, queues=4, workloads=60)
    session = Session(snapshot(objects, NOW_MS), Registry([]))
    placements = session.placements
    assert placements is not None
    nodes = sorted(placements.free)[:3]
    room = (*(NodeRoom(node, {"cpu": 1000 * (i + 1)}) for i, node in enumerate(nodes)), NodeRoom(nodes[0], {"cpu": 7}))
    one = Statement(session.accounting.copy(), placements.copy())
    each = Statement(session.accounting.copy(), placements.copy())
    one.give_rooms(room)
    for held in room:
        each.give_room(held.node_name, held.requests)
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


# -- a collection's ``defer_pods`` ---------------------------------------------------------------


def test_a_collection_sets_defer_pods_for_the_plugins_and_back_without_the_sessions_setattr() -> None:
    seen: list[bool] = []

    def preemption_candidates(session: Session, preemptor: Workload, assignment: VictimSearch) -> list[object]:
        seen.append(session.defer_pods)
        return []

    plugin = SimpleNamespace(MEMO_SAFE=True, preemption_candidates=hookimpl(preemption_candidates))
    made = [workload("w", "q", 1)]
    session = Session(snapshot(inventory([queue("q", cpu=1)], made), 1_000), Registry([("p", plugin, None)]))
    session.open()
    (preemptor,) = session.snapshot.pending_by_queue["q"]
    leaf = session.snapshot.tree.leaves["q"]
    request = VictimSearch(preemptor, leaf, {}, frozenset())
    assigned: list[str] = []
    real = Session.__setattr__

    def setattr_(self: Session, name: str, value: object) -> None:
        assigned.append(name)
        real(self, name, value)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Session, "__setattr__", setattr_)
        collect_runs(session, preemptor, request, with_room=False, defer_pods=True)
        assert session.defer_pods is False
        collect_runs(session, preemptor, request, with_room=True)
    assert seen == [True, False]
    assert session.defer_pods is False
    assert assigned == []  # two per search, through the slot
    session.defer_pods = True  # still assignable the plain way, and nothing else is
    with pytest.raises(AttributeError):
        session.now = 0
