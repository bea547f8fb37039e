"""The README's example of a plugin test runs and passes, so it keeps telling the truth."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "plugins" / "preemptd-example-plugin"
MARKER = "<!-- plugin-test-example -->"


def _example() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    after = readme.split(MARKER, 1)[1]
    found = re.match(r"\s*```python\n(.*?)```", after, re.DOTALL)
    assert found, f"README.md: no python block after {MARKER}"
    return found.group(1)


def test_readme_plugin_test_example_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test function of the README's example passes (and there are some)."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(_example(), "README.md", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_") and callable(value)]
    assert len(tests) == 2
    for test in tests:
        test()
