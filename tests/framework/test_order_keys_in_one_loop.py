"""The session's order keys of a queue's workloads made in one loop (``orderkeys.keys_of``).

With one plugin's ``workload_order`` key (the default configuration), ``keys_of`` makes
each missing key in its own loop, as ``one_part`` makes it, instead of calling
``one_part`` per workload; and the plugin's part is prefixed with ``0`` by adding
tuples when the plugin answers a tuple. These tests hold both to the plain path, the
composed key called per workload: the same keys, the same cache, the plugin's key called
once per workload without a key, in the same order, and its failures (a raise, an answer
that is no sequence) recorded alike.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import PodSet, Workload
from preemptd.framework.session.orderkeys import composed_key, keys_of
from preemptd.framework.session.registry import Registry


def _workloads(n: int) -> list[Workload]:
    pod_sets = (PodSet("main", 1, {"cpu": 1000}),)
    return [Workload("ns", f"w{i}", "q", pod_sets, priority=i % 3, created=100 - i, uid=f"u{i}") for i in range(n)]


class _Pair(NamedTuple):  # a tuple of another type: prefixed by unpacking it
    first: int
    second: int


class _Key:
    """A plugin's key answering by a plan per workload; it notes every call."""

    def __init__(self, plan: dict[str, str]) -> None:
        self.plan = plan
        self.calls: list[str] = []

    def __call__(self, w: Workload) -> Any:
        self.calls.append(w.key)
        how = self.plan.get(w.key, "tuple")
        if how == "raise":
            raise ValueError(f"no key for {w.key}")
        if how == "list":
            return [-w.priority, w.created]
        if how == "named":
            return _Pair(-w.priority, w.created)
        if how == "int":
            return w.priority  # no sequence: ``(0, *part)`` raises
        return (-w.priority, w.created)


def _both(plan: dict[str, str], workloads: list[Workload], cached: list[Workload]) -> None:
    """``keys_of`` with the composed key as it is, and with the same key called per
    workload (``plain``: a function ``keys_of`` knows nothing of), each on a fresh
    registry and cache."""
    in_loop, plain = Registry(), Registry()
    key_l, key_p = _Key(plan), _Key(plan)
    make_l = composed_key([("p", key_l)], in_loop)
    make_p = composed_key([("p", key_p)], plain)
    cache_l = {w.key: make_l(w) for w in cached}
    cache_p = {w.key: make_p(w) for w in cached}
    got = keys_of(cache_l, make_l, workloads)
    expected = keys_of(cache_p, lambda w: make_p(w), workloads)
    assert got == expected
    assert [type(k[0]) for k in got] == [type(k[0]) for k in expected]
    assert list(cache_l.items()) == list(cache_p.items())
    assert key_l.calls == key_p.calls
    assert in_loop.failures == plain.failures
    assert [(e.plugin, e.hook, e.message, e.count) for e in in_loop.errors] == [
        (e.plugin, e.hook, e.message, e.count) for e in plain.errors
    ]


def test_keys_made_in_one_loop_are_the_plugins_part_then_creation_and_tiebreak() -> None:
    workloads = _workloads(3)
    make = composed_key([("p", lambda w: (-w.priority, w.created))], Registry())
    cache: dict[str, tuple[Any, ...]] = {}
    keys = keys_of(cache, make, workloads)
    # By hand (SEMANTICS §2): ((0, *the plugin's key), created, uid, namespace, name).
    assert keys == [
        ((0, 0, 100), 100, "u0", "ns", "w0"),
        ((0, -1, 99), 99, "u1", "ns", "w1"),
        ((0, -2, 98), 98, "u2", "ns", "w2"),
    ]
    assert cache == {"ns/w0": keys[0], "ns/w1": keys[1], "ns/w2": keys[2]}
    assert [make(w) for w in workloads] == keys  # the composed key itself, per workload


def test_a_raising_key_is_recorded_once_per_workload_and_sorts_last() -> None:
    workloads = _workloads(5)
    registry = Registry()
    key = _Key({"ns/w1": "raise", "ns/w3": "raise"})
    keys = keys_of({}, composed_key([("p", key)], registry), workloads)
    assert [k[0] for k in keys] == [(0, 0, 100), (1,), (0, -2, 98), (1,), (0, -1, 96)]
    assert registry.failures["p"] == 2
    assert key.calls == [w.key for w in workloads]  # each once, in order


def test_answers_that_are_no_tuple_are_prefixed_or_recorded_as_before() -> None:
    _both({"ns/w0": "int", "ns/w1": "named", "ns/w2": "list", "ns/w3": "raise"}, _workloads(5), [])


def test_workloads_with_a_key_already_or_twice_are_not_asked_again() -> None:
    workloads = _workloads(4)
    _both({}, workloads, workloads[1:2])
    _both({}, [*workloads, workloads[2]], [])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["tuple", "tuple", "named", "list", "raise", "int"]), max_size=10),
    st.sets(st.integers(0, 9), max_size=3),
    st.lists(st.integers(0, 9), max_size=2),
)
def test_keys_made_in_one_loop_match_the_composed_key_per_workload(
    plans: list[str], cached: set[int], twice: list[int]
) -> None:
    workloads = _workloads(len(plans))
    plan = {w.key: how for w, how in zip(workloads, plans, strict=True)}
    listed = [*workloads, *(workloads[i] for i in twice if i < len(workloads))]
    _both(plan, listed, [workloads[i] for i in sorted(cached) if i < len(workloads)])
