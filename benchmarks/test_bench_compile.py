"""torch.compile over TensorDicts, next to the same compiled function over a plain dict
of the same tensors (goal: at most 1.05x), with the eager figures beside.

Cases (``compile_cases.py``): a 3-layer ``TensorDictSequential`` MLP on a batch of 256,
``td.apply(lambda x: x * 2 + 1)`` over 20 leaves, a PPO-style loss reading 6 keys and
writing 3. Each compiled case also checks that ``torch._dynamo.explain`` finds no
graph break. One intra-op thread, CPU time of the benchmark thread
(``time.thread_time``), so that other processes on the machine stay out of the figures.

First-call compile times (ours next to tensordict 0.15.3) come from ``compile_time.py``.
"""

import importlib.util
import time
from pathlib import Path

import pytest
import torch

_spec = importlib.util.spec_from_file_location("compile_cases", Path(__file__).with_name("compile_cases.py"))
_cases = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(_cases)  # type: ignore[union-attr]
CASES = _cases.CASES

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.benchmark(timer=time.thread_time),
]


@pytest.fixture(autouse=True, scope="module")
def _one_thread(one_thread):
    """One intra-op thread for every case of this module (``conftest.one_thread``)."""


def _run(benchmark, case, side, compiled):
    td_fn, td_in, dict_fn, dict_in = CASES[case]()
    fn, arg = (td_fn, td_in) if side == "td" else (dict_fn, dict_in)
    if compiled:
        torch._dynamo.reset()
        assert torch._dynamo.explain(fn)(arg).graph_break_count == 0
        fn = torch.compile(fn, fullgraph=True)
        fn(arg)  # compile outside the timing
    benchmark.group = f"{'compiled' if compiled else 'eager'}: {case}"
    benchmark.extra_info["compiled"] = compiled
    with torch.no_grad():
        benchmark.pedantic(fn, args=(arg,), rounds=100, iterations=5, warmup_rounds=3)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "eager"])
def test_compile_td(benchmark, case, compiled):
    _run(benchmark, case, "td", compiled)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "eager"])
def test_compile_dict(benchmark, case, compiled):
    _run(benchmark, case, "dict", compiled)
