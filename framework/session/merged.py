"""The stable merge of victim candidates' runs, made only as far as it is read."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from operator import index
from typing import Any, SupportsIndex

from .candidates import _BY_SORT_KEY, Candidate

__all__ = ["Merged"]

_list_len = list.__len__
_list_item = list.__getitem__
_list_extend = list.extend
_chained = chain.from_iterable
_FIRST_WINDOW = 32  # candidates per run the first stretch of a merge looks at


class Merged(list[Candidate]):
    """The stable merge of ``runs``, each already in victim order (sorted by ``sort_key``,
    stably), made only as far as it is read: what ``sort_candidates`` with the base order
    makes of the runs' concatenation, in the same order (a key that comes in several runs
    comes first from the earliest run, and in a run's own order).

    It is a list: the made part is its storage, and every use of a list (length, index,
    slice, iteration, comparison, search, copy, change) answers as the whole merged list
    would, making what it reads first (a change makes it all). A walk that reads the
    first tenth of its candidates makes little more than that tenth.

    Each stretch looks at a window of the next ``w`` units of each run (``w`` doubling):
    the first unit past a window that comes first in the merge — by key, then by run —
    bounds what is known; every unit of the windows before it is placed (those of its
    own run's window all are; of an earlier run, those with a key up to its key; of a
    later run, those with a smaller key), and those are the merge's next units, sorted
    stably in run order. Nothing past a window can come before that bound: its run's
    units are in order."""

    __slots__ = ("_at", "_runs", "_size", "_window")

    def __init__(self, runs: Sequence[list[Candidate]]) -> None:
        super().__init__()
        live = [run for run in runs if run]
        self._runs: list[list[Candidate]] | None = live or None  # None: all made
        self._at = [0] * len(live)
        self._size = sum(map(len, live))
        self._window = _FIRST_WINDOW

    def _more(self) -> bool:
        """Make the next stretch; ``False`` when everything is made."""
        runs = self._runs
        if runs is None:
            return False
        at = self._at
        live = [i for i, run in enumerate(runs) if at[i] < len(run)]
        if len(live) <= 1:
            for i in live:
                _list_extend(self, runs[i][at[i] :])
            self._runs = None
            return bool(live)
        window = self._window
        self._window = window * 2
        bound: tuple[Any, ...] | None = None
        first = -1
        ends = []
        for i in live:
            run = runs[i]
            end = at[i] + window
            if end < len(run):
                key = run[end].sort_key
                if bound is None or key < bound:
                    bound, first = key, i
            else:
                end = len(run)
            ends.append(end)
        stretch: list[Candidate] = []
        taking = 0
        for i, end in zip(live, ends, strict=True):
            start = at[i]
            if bound is not None and i != first:
                run = runs[i]
                place = bisect_right if i < first else bisect_left
                end = place(run, bound, start, end, key=_BY_SORT_KEY)
            if end > start:
                stretch.extend(runs[i][start:end])
                at[i] = end
                taking += 1
        if taking > 1:
            stretch.sort(key=_BY_SORT_KEY)
        _list_extend(self, stretch)
        if bound is None:
            self._runs = None
        return True

    def _make(self, size: int) -> None:
        """Make at least ``size`` units, or all."""
        while _list_len(self) < size and self._more():
            pass

    def _make_all(self) -> None:
        """Make every unit: the list is then a plain list."""
        while self._more():
            pass

    def __len__(self) -> int:
        return self._size if self._runs is not None else _list_len(self)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[Candidate]:
        # The units come through a C iterator; only each stretch resumes the generator.
        return _chained(self._stretches())

    def _stretches(self) -> Iterator[list[Candidate]]:
        """What is made, then each stretch as it is made, as lists."""
        done = 0
        while True:
            made = _list_len(self)
            if done < made:
                yield _list_item(self, slice(done, made))
                done = made
            elif not self._more():
                return

    def __getitem__(self, at: Any) -> Any:
        # A place already made (what a walk reading in order mostly asks) is read at once.
        if self._runs is not None and not (type(at) is int and 0 <= at < _list_len(self)):
            self._make_for(at)
        return _list_item(self, at)

    def _make_for(self, at: Any) -> None:
        """Make what reading ``at`` (a place or a slice) needs."""
        if isinstance(at, slice):
            whole = at.stop is None or at.stop < 0 or (at.start or 0) < 0 or (at.step or 1) < 0
            self._make(self._size if whole else at.stop)
        else:
            place = index(at)
            self._make(place + 1 if place >= 0 else self._size)

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return list, (list(self),)


def _making_all(name: str) -> Callable[..., Any]:
    """A list method that reads or changes the whole list: made all first (and the other
    operand too when it is a :class:`Merged`)."""
    plain = getattr(list, name)

    def method(self: Merged, *args: Any, **kwargs: Any) -> Any:
        self._make_all()
        for other in args:
            if type(other) is Merged:
                other._make_all()
        return plain(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in (
    "__contains__", "__reversed__", "__repr__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
    "__add__", "__mul__", "__rmul__", "__iadd__", "__imul__", "__setitem__", "__delitem__", "__sizeof__",
    "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "copy", "count", "index",
):
    setattr(Merged, _name, _making_all(_name))
