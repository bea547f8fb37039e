"""Typed decoding of Nodes (private to :mod:`objects`); the design is :mod:`.typed`'s.

A Node item of a JSON list is kept as its text (``typed_workloads.text_entry``) and
decoded here straight into Structs; a Node given as a parsed mapping is converted into the
same Structs. The record of a plain, valid Node is built as its twin; anything else
returns ``None`` and the walker (``nodes.parse_node``) reads the object, so every located
error is the walker's. Taints are read by the walker's own reader, and any problem it
finds sends the whole Node to the walker.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..model import Node, Taint
from ..quantity import QuantityError
from .fields import Entry, Fields, Problem
from .nodes import parse_node
from .records import new_node
from .typed import RawObject, _intern, _NotPlain, _shared, _strings, typed_body
from .typed_workloads import _amounts, _walked

__all__ = ["fast_node", "read_node"]


class _NodeMeta(msgspec.Struct):
    labels: dict[str, str] | None = None


class _NodeSpec(msgspec.Struct):
    unschedulable: bool | None = None
    taints: Any = None


class _NodeStatus(msgspec.Struct):
    allocatable: dict[str, Any] | None = None


class _NodeDoc(msgspec.Struct):
    metadata: _NodeMeta | None = None
    spec: _NodeSpec | None = None
    status: _NodeStatus | None = None


def read_node(entry: Entry) -> tuple[Node, list[Problem]]:
    """A Node read the fast way when it is plain, else by the walker."""
    node = fast_node(entry)
    return (node, []) if node is not None else parse_node(entry)


def fast_node(entry: Entry) -> Node | None:
    """The Node record of a plain, valid Node object; ``None`` for the walker."""
    body = entry.body
    doc = typed_body(body, _NODE_TEXT, _NodeDoc)
    if doc is None:
        return None
    try:
        metadata = doc.metadata or _NodeMeta()
        spec = doc.spec or _NodeSpec()
        status = doc.status or _NodeStatus()
        taints: tuple[Taint, ...] = ()
        if spec.taints is not None:
            holder = {"taints": spec.taints}
            taints = _walked(entry, Fields.taints, holder, "taints", "")
        node = new_node(
            _intern(entry.name),
            _shared(_strings(metadata.labels)),
            _amounts(status.allocatable, drop_zero=False),
            bool(spec.unschedulable),
            taints,
        )
    except (QuantityError, _NotPlain):
        return None
    if type(body) is RawObject:
        body.raw = None
    return node


_NODE_TEXT = msgspec.json.Decoder(_NodeDoc)
