"""Typed decoding: the common, valid object read in one step (private to :mod:`objects`).

Most objects of a large cluster are Pods written by a controller, all alike and all
valid. For them the located-field walker (:mod:`fields`) does far more than needed: it
builds a path string for every field it reads in case it has to report one. Here such an
object is converted by msgspec into a typed record (a Struct per section, unknown fields
ignored as the walker ignores them), then the few checks the types cannot express are
made (integer range, quantities, timestamps, non-empty keys).

The fast reader never reports anything: it returns ``None`` for an object it is not sure
about (a field of an unexpected type, a malformed quantity, anything), and the walker
reads that object instead, so every located error is exactly the walker's. On what it
accepts, its record equals the walker's (``tests/framework/test_typed_decoding.py``
holds the two readers to that over the examples, the bad-input corpus and the generated
clusters).

Repeated texts are shared: namespaces, node names and label keys and values are
interned, and identical request maps and label maps are one object, which is most of
the memory a Pod record takes.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from ..model import FrozenDict, Pod
from ..quantity import MAX_AMOUNT, forget_parsed
from .fields import Entry, Problem
from .known import SCHEMAS, Schema, unknown_fields

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

__all__ = [
    "RawItems",
    "RawObject",
    "decode_items",
    "decode_json",
    "find_unknown_fields",
    "forget_read_memos",
    "typed_body",
]

_intern = sys.intern
_Doc = TypeVar("_Doc")


class _NotPlain(Exception):
    """The object needs the walker (a check below failed)."""


# One shared record per distinct map: pods of one workload carry the same requests and
# the same labels, so a cluster of 100k pods holds a few thousand distinct maps.
_SHARED_BOUND = 65_536
_SHARED: dict[tuple[tuple[str, Any], ...], FrozenDict[str, Any]] = {}


# Memos whose records hold shared maps (``sharing``): emptied with the shared maps,
# so that what a memo gives is always made of the maps shared now, and two equal maps read
# apart are still one record.
_SHARING: list[dict[Any, Any]] = []


def _shared(items: Sequence[tuple[str, Any]]) -> FrozenDict[str, Any]:
    key = tuple(items)
    found = _SHARED.get(key)
    if found is None:
        if len(_SHARED) >= _SHARED_BOUND:
            _forget_shared()
        found = _SHARED[key] = FrozenDict(items)
    return found


def sharing(memo: dict[Any, Any]) -> dict[Any, Any]:
    """``memo``, to be emptied whenever the shared maps are let go (its records hold them)."""
    _SHARING.append(memo)
    return memo


def _forget_shared() -> None:
    _SHARED.clear()
    for memo in _SHARING:
        memo.clear()


def forget_read_memos() -> None:
    """Let go of everything kept to read objects faster: the shared maps' memo (with the
    memos holding shared maps) and the memos of parsed quantities and timestamps. For a
    program that reads no more objects (a command, once its snapshot is built): the
    records keep the maps they share, and the session then has the memory back."""
    _forget_shared()
    forget_parsed()


def _text(value: str | None) -> str:
    """A required, non-empty text field."""
    if not value:
        raise _NotPlain
    return value


def _count(value: int | None) -> int | None:
    """An optional integer of at least 1 that fits 64 bits."""
    if value is not None and not 1 <= value <= MAX_AMOUNT:
        raise _NotPlain
    return value


def _strings(mapping: dict[str, str] | None) -> list[tuple[str, str]]:
    """A label or annotation map, sorted and interned, as ``Fields.string_map`` reads it."""
    if not mapping:
        return []
    items = sorted(mapping.items())
    if not items[0][0]:
        raise _NotPlain  # an empty key sorts first
    return [(_intern(key), _intern(value)) for key, value in items]


# --- straight from JSON text ---------------------------------------------------------


def _json_int(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


def decode_json(text: str | ReadableBuffer) -> Any:
    """One JSON value: msgspec's decoder, else the standard one for its exact answer.

    msgspec reads a valid document into the same values as ``json.loads`` in a fraction
    of the time. Whatever it refuses (malformed text, ``NaN``, an integer of thousands of
    digits, a lone surrogate) goes to ``json.loads``, which either reads it the way the
    files backend always has (an integer too long to convert stays text) or raises the
    error that is reported.
    """
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        # json reads str, bytes and bytearray; any other buffer is read as its bytes.
        readable = text if isinstance(text, str | bytes | bytearray) else bytes(text)
        return json.loads(readable, parse_int=_json_int)


class _Envelope(msgspec.Struct):
    """A ``kind: ...List`` document, its items left undecoded."""

    kind: str
    items: list[msgspec.Raw]


@dataclass(frozen=True, slots=True)
class RawItems:
    """The objects of a JSON list document, each still its text.

    ``at`` is where the list is in the document: ``""`` for a top-level list,
    ``"items"`` for a ``kind: List``. See :func:`decode_items`. The items are read
    once: :meth:`take` hands them over and lets go of them, so that the file's text
    they point into is freed as soon as the objects are read.

    ``read_past``, when the text's owner can give its memory back piece by piece, is
    called as the items are read with a length of text they span at least: the items
    read so far all lie before that offset and nothing reads them again (what the
    intake keeps of an item is a copy), so the text before it may be dropped.
    """

    at: str
    items: list[msgspec.Raw]
    read_past: Callable[[int], object] | None = None

    def take(self) -> list[msgspec.Raw]:
        items = self.items[:]
        self.items.clear()
        return items


def decode_items(text: str | ReadableBuffer) -> Any:
    """A JSON document whose objects are left as text when it is a list of them.

    A top-level list, or a ``kind: ...List`` with an ``items`` list, becomes
    :class:`RawItems`; anything else is decoded whole by :func:`decode_json`. The
    intake (``objects._Intake``) reads a plain Pod item as a typed record without ever
    building its dict, and decodes every other item with :func:`decode_json`. ``text``
    may be any buffer of the bytes (a file's mapping, as the files backend passes it).
    """
    try:
        found = msgspec.json.decode(text, type=list[msgspec.Raw] | _Envelope)
    except (msgspec.DecodeError, RecursionError):
        return decode_json(text)
    if isinstance(found, list):
        return RawItems("", found)
    if found.kind and found.kind.endswith("List"):
        return RawItems("items", found.items)
    return decode_json(text)


class RawObject(Mapping[str, Any]):
    """An object kept as its JSON text, with its record when it was plain (``pod``);
    read as a mapping, it is decoded on first use (by the walker, when it was not)."""

    __slots__ = ("_decoded", "pod", "raw")

    def __init__(self, raw: msgspec.Raw | None, pod: Pod | None) -> None:
        self.raw = raw  # None once the record is read: nothing will decode it
        self.pod = pod
        self._decoded: dict[str, Any] | None = None

    def _mapping(self) -> dict[str, Any]:
        if self._decoded is None:
            value = decode_json(bytes(self.raw)) if self.raw is not None else {}
            self._decoded = value if isinstance(value, dict) else {}
        return self._decoded

    def __getitem__(self, key: str) -> Any:
        return self._mapping()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping())

    def __len__(self) -> int:
        return len(self._mapping())


def typed_body(body: Any, text: msgspec.json.Decoder[Any], doc: type[_Doc]) -> _Doc | None:
    """An object's body as the Structs ``doc``: decoded from its kept text (``text``, the
    decoder of a JSON list's item, whose Structs are ``doc`` or extend it) or converted
    from a parsed mapping; ``None`` when it is neither or does not fit them (the walker
    reads it)."""
    try:
        if type(body) is RawObject and body.raw is not None:
            decoded: _Doc = text.decode(body.raw)
            return decoded
        if type(body) is dict:
            return msgspec.convert(body, doc)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    return None


def intake_key(item: Any, kind: str, group: str, last: str = "") -> tuple[str, str] | None:
    """(namespace, name) under which the intake takes a decoded item of ``kind`` in API
    group ``group`` ("" for the core group) as it is; ``None`` for one it would report or
    skip (another kind or group, no name, a namespace that is not a string). The namespace
    is interned; an empty or missing one is ``default``. ``last``: an interned namespace,
    given for a namespace equal to it (the last item's, mostly) without interning it."""
    if item.kind != kind or item.metadata is None:
        return None
    api_version = item.apiVersion
    if api_version is not None and not (
        isinstance(api_version, str)
        # The group is what comes before the last "/": none without one ("v1", no copy made).
        and (api_version.rpartition("/")[0] == group if "/" in api_version else not group)
    ):
        return None
    name, namespace = item.metadata.name, item.metadata.namespace
    if not isinstance(name, str) or not name:
        return None
    if namespace is None or namespace == "":
        namespace = "default"
    elif not isinstance(namespace, str):
        return None
    return last if namespace == last else _intern(namespace), name


# --- unknown fields, from JSON text ----------------------------------------------------


def _known_struct(name: str, schema: Schema, *, text: bool) -> type:
    """A Struct that accepts exactly the fields of ``schema`` and does not look into their
    values: skipped over in JSON text (``text``), taken as they are from a parsed dict."""
    fields: list[tuple[str, Any, Any]] = []
    for key, inner in schema.items():
        if inner is None:
            fields.append((key, msgspec.Raw, msgspec.Raw(b"null")) if text else (key, Any, None))
        else:
            below = _known_struct(f"{name}_{key}", inner, text=text)
            fields.append((key, below | list[below] | None, None))  # type: ignore[valid-type]
    return msgspec.defstruct(name, fields, forbid_unknown_fields=True)


_KNOWN_FIELDS: dict[str, msgspec.json.Decoder[Any]] = {
    kind: msgspec.json.Decoder(_known_struct(f"_Known{kind}", schema, text=True))
    for kind, schema in SCHEMAS.items()
}
_KNOWN_MAPPINGS = {kind: _known_struct(f"_Known{kind}", schema, text=False) for kind, schema in SCHEMAS.items()}


def find_unknown_fields(entry: Entry) -> list[Problem]:
    """:func:`~.known.unknown_fields` of ``entry``, found the cheapest way its body allows.

    * A parsed mapping: one strict conversion; walked only when that fails, to say where.
    * A Workload kept as its JSON text that nothing decoded: the typed reader, which
      refuses unknown fields, read it (``typed_workloads``); there is nothing to check.
      Hence this is asked once the objects are read (``parse_objects`` does).
    * Any other object kept as text: one strict pass over the text that skips the values;
      decoded only to say where.
    """
    body = entry.body
    if entry.kind not in SCHEMAS:
        return []
    if type(body) is dict:
        try:
            msgspec.convert(body, _KNOWN_MAPPINGS[entry.kind])
            return []
        except msgspec.ValidationError:
            return unknown_fields(entry)  # where (or a value of another type: not ours to say)
    if type(body) is not RawObject or body._decoded is not None:
        return unknown_fields(entry)  # read as a mapping already
    if body.raw is None or entry.kind in _READ_STRICTLY:
        return []
    try:
        _KNOWN_FIELDS[entry.kind].decode(body.raw)
        return []
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    return unknown_fields(dataclasses.replace(entry, body=decode_json(bytes(body.raw))))


_READ_STRICTLY = frozenset({"Workload"})
"""Kinds whose typed reader refuses unknown fields (see :func:`find_unknown_fields`)."""
