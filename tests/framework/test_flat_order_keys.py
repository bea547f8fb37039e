"""Flat workload order keys (``session/orderkeys.py``): when every ``workload_order`` key
says how many items it answers (``fixed_length``), the session's key holds the plugins'
items unnested, and orders workloads exactly as SEMANTICS §2's nested key does: each
plugin's ``(0, *key)`` or ``(1,)`` (a key that raised, or answered another length than
it says), then the creation time and the tie-break key ``(uid, namespace, name)``.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Workload
from preemptd.framework.session import Registry, Session, hookimpl
from preemptd.framework.testing import inventory, queue, snapshot, workload
from preemptd.plugins import priority

# Per workload name, what a plugin's key answers: a tuple of items, or None to raise.
Answers = dict[str, tuple[int, ...] | None]


class _Plugin:
    """A plugin whose ``workload_order`` key answers ``answers[w.name]`` (raising for None),
    saying ``fixed_length`` when ``length`` is given."""

    def __init__(self, answers: Answers, length: int | None) -> None:
        self.answers = answers
        self.length = length

    def plugin(self) -> SimpleNamespace:
        answers = self.answers

        def key(w: Workload) -> tuple[int, ...]:
            found = answers[w.name]
            if found is None:
                raise RuntimeError("no key")
            return found

        if self.length is not None:
            key.fixed_length = self.length  # type: ignore[attr-defined]

        def workload_order(session: Session) -> object:
            return key

        return SimpleNamespace(MEMO_SAFE=True, workload_order=hookimpl(workload_order))

    def nested(self, w: Workload) -> tuple[int, ...]:
        """SEMANTICS §2's part, written out: ``(1,)`` for a key that raised or (when it
        says its length) answered another one."""
        found = self.answers[w.name]
        if found is None or (self.length is not None and len(found) != self.length):
            return (1,)
        return (0, *found)

    def failures(self, workloads: list[Workload]) -> int:
        return sum(1 for w in workloads if self.nested(w) == (1,))


def _session(plugins: list[_Plugin], workloads: list[Workload]) -> Session:
    registry = Registry([(f"p{i}", plugin.plugin(), None) for i, plugin in enumerate(plugins)])
    session = Session(snapshot(inventory([queue("q", cpu=1)], workloads), 1_000), registry)
    session.open()
    return session


def _nested_key(plugins: list[_Plugin], w: Workload) -> tuple[Any, ...]:
    return (*(p.nested(w) for p in plugins), w.created, *w.tiebreak)


_ITEMS = st.lists(st.integers(0, 2), min_size=0, max_size=3).map(tuple)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    count=st.integers(1, 10),
    lengths=st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=1, max_size=3),
)
def test_flat_keys_order_workloads_as_the_nested_keys(
    data: st.DataObject, count: int, lengths: list[int | None]
) -> None:
    made = [
        replace(
            workload(f"w{i}", "q", 1, created=data.draw(st.integers(0, 2))),
            uid=data.draw(st.text("ab", max_size=1)),
        )
        for i in range(count)
    ]
    plugins = []
    for length in lengths:
        # Mostly answers of the length said, some of another length, some raising.
        fitting = _ITEMS if length is None else st.lists(st.integers(0, 2), min_size=length, max_size=length).map(tuple)
        answer = st.one_of(fitting, fitting, fitting, _ITEMS, st.none())
        plugins.append(_Plugin({w.name: data.draw(answer) for w in made}, length))
    session = _session(plugins, made)
    listed = list(session.snapshot.pending_by_queue["q"])
    keys = session.order_keys(listed)
    expected = sorted(listed, key=lambda w: _nested_key(plugins, w))
    assert [w.key for w in sorted(listed, key=dict(zip(listed, keys, strict=True)).__getitem__)] == [
        w.key for w in expected
    ]
    if all(p.length is not None for p in plugins):
        # Flat: the nested parts' items in order, then the creation time and the tie-break.
        assert keys == [
            (*(item for p in plugins for item in p.nested(w)), w.created, *w.tiebreak) for w in listed
        ]
    else:
        assert keys == [_nested_key(plugins, w) for w in listed]
    assert sum(session.registry.failures.values()) == sum(p.failures(listed) for p in plugins)


def test_a_key_of_another_length_than_it_says_sorts_as_one_that_raised() -> None:
    made = [workload(name, "q", 1, created=created) for name, created in (("a", 3), ("b", 1), ("c", 2))]
    # b answers one item where two are said: it is broken, and goes after a and c (created
    # 3 and 2, both answering (0, 0)); c before a, being older.
    plugin = _Plugin({"a": (0, 0), "b": (0,), "c": (0, 0)}, 2)
    session = _session([plugin], made)
    listed = list(session.snapshot.pending_by_queue["q"])
    keys = dict(zip([w.name for w in listed], session.order_keys(listed), strict=True))
    assert sorted(keys, key=keys.__getitem__) == ["c", "a", "b"]
    assert keys["b"] == (1, 1, *made[1].tiebreak)
    assert session.registry.failures == {"p0": 1}


def test_a_prefix_key_without_a_length_said_sorts_first_as_nested() -> None:
    # Without ``fixed_length`` the parts stay nested: (0, 5) before (0, 5, 0) whatever the
    # creation times, which a flat key would compare with the later one's third item.
    made = [workload("long", "q", 1, created=0), workload("short", "q", 1, created=9)]
    plugin = _Plugin({"long": (5, 0), "short": (5,)}, None)
    session = _session([plugin], made)
    listed = list(session.snapshot.pending_by_queue["q"])
    keys = dict(zip([w.name for w in listed], session.order_keys(listed), strict=True))
    assert sorted(keys, key=keys.__getitem__) == ["short", "long"]


def test_the_priority_plugin_key_is_flat_higher_priority_then_older_first() -> None:
    assert priority._order.fixed_length == 2  # type: ignore[attr-defined]
    made = [
        workload("old-low", "q", 1, priority=1, created=1),
        workload("new-high", "q", 1, priority=5, created=9),
        workload("old-high", "q", 1, priority=5, created=2),
    ]
    registry = Registry([("priority", priority, None)])
    session = Session(snapshot(inventory([queue("q", cpu=1)], made), 1_000), registry)
    session.open()
    listed = list(session.snapshot.pending_by_queue["q"])
    keys = dict(zip([w.name for w in listed], session.order_keys(listed), strict=True))
    assert keys["old-high"] == (0, -5, 2, 2, *made[2].tiebreak)
    assert sorted(keys, key=keys.__getitem__) == ["old-high", "new-high", "old-low"]
