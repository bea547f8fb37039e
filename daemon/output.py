"""``-o/--output`` for the read commands, the way kubectl spells it.

Every command that reports something (``cycle``, ``explain``, ``validate``,
``plugins``, ...) takes ``-o json|yaml|wide|name`` besides its default table, with one
meaning throughout:

* ``table`` (the default) — for eyes, laid out for the terminal;
* ``wide`` — the table with every column and nothing folded, one row per line, for
  a wide terminal or ``grep``;
* ``json`` / ``yaml`` — the whole answer as data; the two hold the same data, keys in
  the same order, and are byte-identical for identical input;
* ``name`` — one ``type/name`` per line, for ``xargs`` and ``while read``.

A command builds its answer once as plain data (:class:`Answer`) and hands it to
:func:`write_output`; nothing here knows about any one command. A command whose JSON
is a contract of its own (``cycle``'s decisions, CONTRACT §3) passes its exact text.
A new read command needs two lines besides its own::

    add_output_option(sub)                      # where the command is registered
    write_output(Answer(data=..., names=..., table=...), args.output)   # in its handler
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # rich and PyYAML are imported when a table or YAML is written
    from rich.console import Console

__all__ = ["FORMATS", "Answer", "add_output_option", "console", "write_output"]

FORMATS = ("table", "wide", "json", "yaml", "name")

WIDE_COLUMNS = 1000
"""The width ``-o wide`` lays tables out for: no row is folded."""


def add_output_option(parser: argparse.ArgumentParser, *, default: str = "table") -> None:
    """Add ``-o/--output FORMAT`` to a command."""
    parser.add_argument(
        "-o",
        "--output",
        choices=FORMATS,
        default=default,
        metavar="FORMAT",
        help=f"{'|'.join(FORMATS)} (default: {default})",
    )


@dataclass(frozen=True, slots=True)
class Answer:
    """What a command reports, in every form it can take.

    ``data`` is the answer as JSON-able data (json, yaml); ``names`` its ``type/name``
    lines (name); ``table(console, wide)`` prints it for people (table, wide). ``text``,
    when given, is the exact JSON text to print instead of ``data`` (a contract's bytes),
    in pieces written one after another.
    """

    data: Callable[[], Any]
    names: Callable[[], Iterable[str]]
    table: Callable[[Console, bool], None]
    text: Callable[[], Iterable[str]] | None = None


def console(stream: TextIO | None = None, *, wide: bool = False) -> Console:
    """The console tables are printed on (stdout by default)."""
    from rich.console import Console

    out = stream if stream is not None else sys.stdout
    if wide:
        return Console(file=out, highlight=False, width=WIDE_COLUMNS, soft_wrap=True)
    return Console(file=out, highlight=False)


def write_output(answer: Answer, output: str, stream: TextIO | None = None) -> None:
    """Print ``answer`` as ``output`` (one of :data:`FORMATS`) on ``stream`` (stdout)."""
    out = stream if stream is not None else sys.stdout
    if output == "json":
        out.writelines(answer.text() if answer.text is not None else [dumps_json(answer.data())])
    elif output == "yaml":
        import yaml

        data = json.loads("".join(answer.text())) if answer.text is not None else answer.data()
        out.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000))
    elif output == "name":
        out.writelines(f"{name}\n" for name in answer.names())
    else:
        answer.table(console(out, wide=output == "wide"), output == "wide")


def dumps_json(data: Any) -> str:
    """JSON as every command prints it: two-space indents, keys in the order built."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
