"""``parse_tensor_dict_string`` on hostile input runs in linear time (issue 19, item 11)."""

from __future__ import annotations

import time

import pytest

from tensordict import parse_tensor_dict_string

_FIELD = "k{}: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=False), "


def _one_line(n: int) -> str:
    body = "".join(_FIELD.format(i) for i in range(n))
    return "TensorDict(\n    fields={" + body + "},\n    batch_size=torch.Size([2]),\n    device=None,\n    is_shared=False)"


def _elapsed(text: str) -> float:
    start = time.perf_counter()
    try:
        parse_tensor_dict_string(text)
    except ValueError:
        pass
    return time.perf_counter() - start


def test_many_fields_on_one_line_scale_linearly():
    assert len(parse_tensor_dict_string(_one_line(50)).keys()) == 50
    small, large = _elapsed(_one_line(1000)), _elapsed(_one_line(4000))
    assert large < 4 * small * 2.5 + 0.05, (small, large)  # 4x the input: well under 16x the time


@pytest.mark.parametrize(
    "text",
    [
        # many candidate tails for the data of a NonTensorData, none complete
        "TensorDict(\n    fields={\n        a: NonTensorData(data=x" + ", batch_size=torch.Size([1" * 20000 + "\n}",
        # a candidate tail full of digits that never closes
        "TensorDict(\n    fields={\n        a: NonTensorData(data=x"
        + (", batch_size=torch.Size([" + "1, " * 600) * 300 + "\n}",
        "TensorDict(\n    fields={" + " " * 500_000,
        "TensorDict(\n    fields={\n        a: " * 20_000,
        "TensorDict(\n    fields={\n        a: Tensor(shape=torch.Size([" + "1, " * 200_000,
    ],
)
def test_hostile_strings_fail_fast(text):
    assert len(text) > 100_000
    with pytest.raises(ValueError):
        parse_tensor_dict_string(text)
    assert _elapsed(text) < 2.0


def test_long_non_tensor_data_is_kept_whole():
    data = "x, batch_size=torch.Size([" * 3 + "y" * 100_000
    text = ("TensorDict(\n    fields={\n        a: NonTensorData(data=" + data
            + ", batch_size=torch.Size([]), device=None)},\n    batch_size=torch.Size([]),\n    device=None,\n"
            "    is_shared=False)")
    start = time.perf_counter()
    td = parse_tensor_dict_string(text)
    assert time.perf_counter() - start < 2.0
    assert td["a"] == data


def test_sizes_beyond_int64_are_refused():
    text = ("TensorDict(\n    fields={},\n    batch_size=torch.Size([" + str(2**70) + "]),\n    device=None,\n"
            "    is_shared=False)")
    with pytest.raises(ValueError, match="int64"):
        parse_tensor_dict_string(text)
