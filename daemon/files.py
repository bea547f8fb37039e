"""Snapshot files: YAML streams or JSON, read into ``(file, document)`` pairs.

A file may hold one object, several YAML documents, a list of objects, or a
``kind: List`` with ``items`` (what ``kubectl get -o yaml`` prints for more
than one object); each document is passed on as it is. A directory stands for
its ``*.yaml``, ``*.yml`` and ``*.json`` files in name order, ``-`` for
standard input.

Timestamps stay strings: PyYAML would turn an unquoted
``2026-01-01T00:00:00Z`` into a ``datetime``, which neither JSON input nor
``kubectl`` output ever produces, and which would not survive ``--apply``
unchanged. Whether an object is a valid Workload or Queue is not decided here
(see :mod:`preemptd.framework.objects`). A document that is neither an object
nor a list (a stray plain line, a number) is passed on as a
:class:`~preemptd.framework.objects.StrayDocument`: one bad document, reported
with its index and skipped, while the rest of the file is used. A file holding
nothing but such documents (notes passed by mistake) is not a snapshot: it is
rejected whole, as a file that is not YAML.

An integer too long for Python to convert (more than 4,300 digits) is kept as
its text, so the field holding it is reported as an error of that one object
rather than failing the file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from preemptd.framework.objects import StrayDocument, escape

__all__ = ["SNAPSHOT_SUFFIXES", "Document", "LoadError", "load_files", "parse_text"]

Document = dict[str, Any] | list[Any] | StrayDocument

SNAPSHOT_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "<stdin>"  # how problems name the file read from "-"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_SafeLoader):  # type: ignore[misc]
    """The safe loader without the implicit timestamp type."""


def _construct_int(loader: Any, node: Any) -> int | str:
    """A YAML integer; one too long to convert stays text (see the module docstring)."""
    try:
        value: int = loader.construct_yaml_int(node)
    except ValueError:
        text: str = loader.construct_scalar(node)
        return text
    return value


def _json_int(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != _TIMESTAMP]
    for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
}


class LoadError(Exception):
    """One or more snapshot files could not be read; one line per problem (exit 2).

    ``documents`` holds what the other files gave, for ``validate`` to check too.
    """

    def __init__(self, messages: Sequence[str], documents: Sequence[tuple[str, Document]] = ()) -> None:
        self.messages = list(messages)
        self.documents = list(documents)
        super().__init__("\n".join(self.messages))


def load_files(paths: Iterable[str | Path]) -> list[tuple[str, Document]]:
    """Every document of every file, in file order then document order.

    Reads every file before failing, so one :class:`LoadError` names all bad files.
    """
    documents: list[tuple[str, Document]] = []
    errors: list[str] = []
    for path in _expand(paths, errors):
        shown = escape(path)  # messages are one line each, whatever the file is called
        try:
            if path == STDIN:
                text = sys.stdin.read()
            else:
                text = Path(path).read_bytes().decode("utf-8-sig")
        except OSError as exc:
            errors.append(f"{shown}: cannot read: {exc.strerror or exc}")
            continue
        except UnicodeDecodeError:
            errors.append(f"{shown}: not YAML or JSON: not UTF-8 text")
            continue
        try:
            found = parse_text(text, json_only=path.endswith(".json"))
        except ValueError as exc:
            errors.append(f"{shown}{escape(str(exc))}")
            continue
        documents.extend((path, document) for document in found)
    if errors:
        raise LoadError(errors, documents)
    return documents


def _expand(paths: Iterable[str | Path], errors: list[str]) -> list[str]:
    files: list[str] = []
    for path in map(str, paths):
        if path == "-":
            files.append(STDIN)
        elif Path(path).is_dir():
            found = sorted(p for p in Path(path).iterdir() if p.suffix in SNAPSHOT_SUFFIXES)
            if not found:
                errors.append(
                    f"{escape(path)}: no {', '.join(SNAPSHOT_SUFFIXES)} files in this directory"
                )
            files.extend(str(p) for p in found if p.is_file())
        else:
            files.append(path)
    return files


def parse_text(text: str, *, json_only: bool = False) -> list[Document]:
    """The documents of one file's text: objects, lists of objects or ``kind: List``.

    Lists are not flattened here: :func:`~preemptd.framework.objects.parse_objects`
    walks them, so a bad item is reported with its path (``items[3].spec``) and
    isolated, and ``--apply`` writes each document back in its own shape.
    Raises ``ValueError`` whose message starts with ``:line:column`` or ``:`` so
    that the caller can put the file name in front of it.
    """
    documents: list[Any]
    if json_only or text.lstrip().startswith(("{", "[")):
        try:
            documents = [json.loads(text, parse_int=_json_int)]
        except json.JSONDecodeError as exc:
            if json_only:
                raise ValueError(f":{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
            documents = _yaml_documents(text)  # "[a, b]" or "{a: 1}" is YAML, not JSON
        except RecursionError:  # the YAML reader has its own limit; json's is the stack's
            raise ValueError(": not valid JSON: nested too deeply") from None
    else:
        documents = _yaml_documents(text)
    found: list[Document] = []
    strays: list[StrayDocument] = []
    for number, document in enumerate(documents, start=1):
        if isinstance(document, dict | list):
            found.append(document)
        elif document is not None:
            # Plain text is a valid YAML document: one string. Nobody means that.
            strays.append(StrayDocument(number, document))
            found.append(strays[-1])
    if strays and len(strays) == len(found):
        # Nothing but strays: not a snapshot at all (a README passed by mistake).
        value = strays[0].value
        kind = "plain text" if isinstance(value, str) else type(value).__name__
        raise ValueError(f": document {strays[0].index}: not YAML or JSON objects, got {kind}")
    return found


def _yaml_documents(text: str) -> list[Any]:
    try:
        return list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"{where}: not valid YAML: {problem}") from None
