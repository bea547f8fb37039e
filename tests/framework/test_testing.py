"""framework.testing: what tests and third-party plugin authors open sessions with."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml
from preemptd.daemon.cli import main
from preemptd.framework.testing import decide, open_session
from preemptd.plugins import cohort_reclaim, flavor_fungibility, gpu_victims, min_runtime, priority

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart.yaml"
NOW = "2026-01-01T12:00:00Z"
BUILT_IN = [
    ("priority", priority, None),
    ("cohort-reclaim", cohort_reclaim, None),
    ("flavor-fungibility", flavor_fungibility, flavor_fungibility.Config()),
    ("min-runtime", min_runtime, min_runtime.Config()),
    ("gpu-victims", gpu_victims, None),
]


def test_decide_gives_the_decisions_preemptd_cycle_prints() -> None:
    """open_session + decide over the quickstart, with the built-in plugins in their
    default order and configuration, decide what ``preemptd cycle`` prints for it."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert 0 == main(["cycle", str(QUICKSTART), "--output", "json", "--now", NOW])
    objects = list(yaml.safe_load_all(QUICKSTART.read_text(encoding="utf-8")))
    decisions = decide(open_session(objects, BUILT_IN, NOW))
    assert json.loads(out.getvalue()) == json.loads(decisions.to_json())


def test_open_session_refuses_invalid_objects_naming_object_and_field() -> None:
    """A test must not run on half its input: an invalid object is an error that names
    the object and the field."""
    queue = {"apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"}, "spec": {"resourceGroups": 3}}
    with pytest.raises(ValueError, match=r"Queue/q: spec\.resourceGroups: "):
        open_session([queue], [], NOW)


def test_open_session_takes_now_as_rfc3339_or_milliseconds() -> None:
    """``now`` may be written either way; the session's clock is the same."""
    assert open_session([], [], NOW).now == open_session([], [], 1_767_268_800_000).now == 1_767_268_800_000
