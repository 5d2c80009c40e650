"""docs/compatibility.md is what ``tools/gen_compat_page.py`` writes from the kept summary
of the last conformance run and the departures table of docs/design.md."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_compat_page", ROOT / "tools" / "gen_compat_page.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_compatibility_page_is_up_to_date():
    gen = _generator()
    summary = json.loads(gen.SUMMARY.read_text())
    assert gen.PAGE.read_text() == gen.render(summary), (
        "docs/compatibility.md is stale: run `python tools/gen_compat_page.py --summary` "
        "(or give it new conformance results)"
    )


def test_every_summarised_file_has_consistent_counts():
    gen = _generator()
    summary = json.loads(gen.SUMMARY.read_text())
    assert summary["files"], "the summary lists no conformance file"
    for name, figures in summary["files"].items():
        assert 0 <= figures["passed"] <= figures["of"], name
