"""The floor for a whole ``preemptd cycle``: parse the same JSON file and touch each object once.

    python benchmarks/parse_floor.py FILE.json

Reads the file, decodes it with the standard library's ``json``, and visits every object
once (its kind, namespace and name, and its spec or status when it has one), counting
objects by kind. It prints the counts, so the work cannot be skipped. Nothing of preemptd
is imported: this is the least any program reading that file has to do, and
``benchmarks/bench_cycle.py`` compares the whole ``preemptd cycle`` process with this one.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any


def touch(objects: list[Any]) -> Counter[str]:
    """Visit every object once; how many there are of each kind, and how many have a body."""
    kinds: Counter[str] = Counter()
    for obj in objects:
        metadata = obj.get("metadata") or {}
        if metadata.get("name") and (obj.get("spec") is not None or obj.get("status") is not None):
            kinds["with a body"] += 1
        kinds[obj.get("kind", "?")] += 1
    return kinds


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python benchmarks/parse_floor.py FILE.json", file=sys.stderr)
        return 2
    with open(args[0], "rb") as source:
        data = json.loads(source.read())
    objects = data if isinstance(data, list) else data.get("items", [data])
    kinds = touch(objects)
    print(" ".join(f"{kind}={count}" for kind, count in sorted(kinds.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
