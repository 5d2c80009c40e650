"""Pickle, torch.save, copies and pytree registration (tree_map, vmap)."""

import copy
import io
import pickle

import torch
import torch.utils._pytree as pytree

from tensordict import TensorClass, tensorclass


class Inner(TensorClass):
    x: torch.Tensor


class Sample(TensorClass):
    obs: torch.Tensor
    inner: Inner | None = None
    note: str = "n"


@tensorclass
class Decorated:
    y: torch.Tensor
    tag: str


def sample(n=3):
    return Sample(obs=torch.randn(n, 4), inner=Inner(x=torch.randn(n, 2), batch_size=[n]), note="hi", batch_size=[n])


def check_equal(a, b):
    assert type(a) is type(b) and type(a.inner) is type(b.inner)
    assert torch.equal(a.obs, b.obs) and torch.equal(a.inner.x, b.inner.x)
    assert a.note == b.note and a.batch_size == b.batch_size


def test_pickle_round_trip():
    s = sample()
    s._private = 5
    back = pickle.loads(pickle.dumps(s))
    check_equal(s, back)
    assert back._private == 5
    d = Decorated(y=torch.zeros(2), tag="t", batch_size=[2])
    d2 = pickle.loads(pickle.dumps(d))
    assert type(d2) is Decorated and d2.tag == "t" and d2.batch_size == (2,)
    back.obs = torch.zeros(3, 4)  # the copy is independent and writable
    assert not torch.equal(back.obs, s.obs)


def test_torch_save_round_trip(tmp_path):
    s = sample()
    path = tmp_path / "s.pt"
    torch.save({"sample": s, "list": [s[0], s[1]]}, path)
    loaded = torch.load(path, weights_only=False)
    check_equal(loaded["sample"], s)
    check_equal(loaded["list"][1], s[1])
    buf = io.BytesIO()
    torch.save(s, buf)
    buf.seek(0)
    check_equal(torch.load(buf, weights_only=False), s)


def test_deepcopy_copies_tensors():
    s = sample()
    d = copy.deepcopy(s)
    check_equal(s, d)
    assert d.obs.data_ptr() != s.obs.data_ptr()


def test_pytree_flatten_unflatten():
    s = sample()
    leaves, spec = pytree.tree_flatten(s)
    assert all(isinstance(leaf, torch.Tensor) for leaf in leaves) and len(leaves) == 2
    back = pytree.tree_unflatten(leaves, spec)
    check_equal(back, s)
    doubled = pytree.tree_map(lambda t: t * 2, s)
    assert type(doubled) is Sample and torch.equal(doubled.obs, s.obs * 2) and doubled.note == "hi"
    summed = pytree.tree_map(lambda t: t.sum(-1), s)
    assert summed.batch_size == (3,) and summed.obs.shape == (3,)


def test_vmap_over_tensorclass():
    s = sample(5)

    def fn(item):
        assert item.batch_size == ()
        assert item.obs.shape == (4,)
        return Sample(obs=item.obs * 2, inner=item.inner, note=item.note)

    out = torch.vmap(fn)(s)
    assert type(out) is Sample and out.batch_size == (5,)
    assert torch.equal(out.obs, s.obs * 2) and torch.equal(out.inner.x, s.inner.x)
    norms = torch.vmap(lambda item: item.obs.norm())(s)
    assert torch.allclose(norms, s.obs.norm(dim=-1))


def test_vmap_with_tensor_output_and_in_dims():
    s = sample(4)
    w = torch.randn(4)
    out = torch.vmap(lambda item, v: (item.obs @ v), in_dims=(0, None))(s, w)
    assert torch.allclose(out, s.obs @ w)
