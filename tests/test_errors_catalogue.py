"""The bad-input catalogue: every case raises its documented error, and docs/errors.md
is what ``tools/gen_errors_catalogue.py`` writes (regenerate it after changing a message)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_errors_catalogue", ROOT / "tools" / "gen_errors_catalogue.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


gen = _load_generator()


def test_at_least_60_cases_across_the_distributions():
    assert len(gen.CASES) >= 60
    assert {c.dist for c in gen.CASES} == set(gen.DISTS)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", gen.CASES, ids=[f"{c.dist}-{i}" for i, c in enumerate(gen.CASES)])
def test_bad_input_raises_the_documented_error(case):
    result = gen.run_case(case)
    if result.skipped:
        pytest.skip(result.skipped)
    got = type(result.error).__name__ if result.error is not None else "no error"
    assert result.ok, f"{case.input}: expected {case.expected.__name__}, got {got}: {result.message}"
    assert result.message.strip(), "the error has no message"


@pytest.mark.timeout(300)
def test_docs_errors_md_is_up_to_date():
    missing = [d for d in gen.DISTS if not gen.available(d)]
    if missing:
        pytest.skip(f"the catalogue covers every distribution; not installed: {missing}")
    expected = gen.render(gen.run_all())
    current = gen.OUTPUT.read_text() if gen.OUTPUT.exists() else ""
    assert current == expected, "docs/errors.md is stale: run `python tools/gen_errors_catalogue.py`"
