"""swapaxes/swapdims, fliplr/flipud, rot90, tile, broadcast_to, atleast_*d and the
F.*_loss functions on TensorDicts, each against the same torch op on a leaf."""

import pytest
import torch
import torch.nn.functional as F  # noqa: N812

from tensordict import TensorDict


def make():
    return TensorDict(
        {"a": torch.arange(24.0).view(2, 3, 4), "n": TensorDict({"b": torch.randn(2, 3, 5, 2)}, [2, 3, 5])}, [2, 3]
    )


CASES = [
    ("swapaxes", lambda x: x.swapaxes(0, 1), lambda t: t.swapaxes(0, 1)),
    ("torch.swapdims", lambda x: torch.swapdims(x, -1, -2), lambda t: t.transpose(0, 1)),
    ("fliplr", lambda x: x.fliplr(), lambda t: t.flip(1)),
    ("torch.flipud", torch.flipud, lambda t: t.flip(0)),
    ("rot90", lambda x: x.rot90(), lambda t: torch.rot90(t, 1, (0, 1))),
    ("torch.rot90-3", lambda x: torch.rot90(x, 3, (1, 0)), lambda t: torch.rot90(t, 3, (1, 0))),
    ("tile", lambda x: x.tile((2, 1)), lambda t: t.repeat(2, 1, *([1] * (t.ndim - 2)))),
    ("torch.tile-short", lambda x: torch.tile(x, (2,)), lambda t: t.repeat(1, 2, *([1] * (t.ndim - 2)))),
    ("broadcast_to", lambda x: torch.broadcast_to(x, (4, 2, 3)), lambda t: t.expand(4, *t.shape)),
    ("atleast_3d", torch.atleast_3d, lambda t: t.unsqueeze(0)),
]


@pytest.mark.parametrize("name,td_op,leaf_op", CASES, ids=[c[0] for c in CASES])
def test_alias_matches_leaf_op(name, td_op, leaf_op):
    td = make()
    out = td_op(td)
    assert torch.equal(out["a"], leaf_op(td["a"]))
    assert torch.equal(out["n", "b"], leaf_op(td["n", "b"]))
    assert out["n"].batch_size == out["n", "b"].shape[:-1]


def test_atleast_identity_and_errors():
    td = make()
    assert td.atleast_1d() is td and td.atleast_2d() is td
    assert td[0, 0].atleast_1d().batch_size == (1,)
    assert td[0].atleast_2d().batch_size == (1, 3)
    with pytest.raises(RuntimeError, match="requires at least 2"):
        td[0].fliplr()
    with pytest.raises(RuntimeError, match="requires at least 2"):
        td[0].rot90()


@pytest.mark.parametrize("fn", [F.l1_loss, F.mse_loss, F.smooth_l1_loss])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_losses(fn, reduction):
    td, other = make(), make().apply(torch.randn_like)
    out = fn(td, other, reduction=reduction)
    for key in ("a", ("n", "b")):
        assert torch.allclose(out[key], fn(td[key], other[key], reduction=reduction))
    assert out.batch_size == (td.batch_size if reduction == "none" else ())
    assert torch.allclose(fn(td, 1.0, reduction="none")["a"], fn(td["a"], torch.ones(()).expand_as(td["a"]), reduction="none"))
    with pytest.raises(ValueError, match="reduction"):
        fn(td, other, reduction="avg")
