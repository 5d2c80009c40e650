"""TensorDict operations on tensorclasses: indexing, shape ops, device/dtype, apply,
math, comparisons, get/set, selection. Results keep the class."""


import pytest
import torch

from tensordict import TensorClass, TensorDict


class Inner(TensorClass):
    x: torch.Tensor


class Data(TensorClass):
    obs: torch.Tensor
    reward: torch.Tensor
    inner: Inner | None = None
    tag: str = "run"


def make(bs=(4, 3), device=None):
    return Data(
        obs=torch.randn(*bs, 5),
        reward=torch.randn(*bs),
        inner=Inner(x=torch.randn(*bs, 2), batch_size=bs),
        batch_size=bs,
        device=device,
    )


def assert_same_fields(a, b):
    assert type(a) is type(b)
    assert a.batch_size == b.batch_size
    assert torch.equal(a.obs, b.obs) and torch.equal(a.reward, b.reward)
    assert torch.equal(a.inner.x, b.inner.x)
    assert a.tag == b.tag


@pytest.mark.parametrize(
    "index",
    [0, -1, slice(1, 3), (slice(None), 1), torch.tensor([0, 2]), torch.tensor([True, False, True, False]), None],
)
def test_indexing_matches_fields(index, device):
    data = make(device=device)
    sub = data[index]
    assert type(sub) is Data and type(sub.inner) is Inner
    assert torch.equal(sub.obs, data.obs[index])
    assert torch.equal(sub.inner.x, data.inner.x[index])
    assert sub.batch_size == data.reward[index].shape
    assert sub.tag == "run"


def test_ellipsis_indexes_batch_dims_only():
    data = make()
    sub = data[..., 0]
    assert sub.batch_size == (4,)
    assert torch.equal(sub.obs, data.obs[:, 0]) and torch.equal(sub.inner.x, data.inner.x[:, 0])


def test_indexing_is_a_view_and_setitem_writes_through():
    data = make()
    view = data[1]
    view.obs.fill_(7.0)
    assert (data.obs[1] == 7).all()
    data[0] = make()[2]
    other = make()
    data[2:] = other[:2]
    assert torch.equal(data.obs[2:], other.obs[:2]) and torch.equal(data.inner.x[2:], other.inner.x[:2])
    data[:, 0] = 0.0
    assert (data.reward[:, 0] == 0).all() and (data.inner.x[:, 0] == 0).all()
    data[torch.tensor([1, 3])] = TensorDict(
        {"obs": torch.ones(2, 3, 5), "reward": torch.ones(2, 3), "inner": {"x": torch.ones(2, 3, 2)}}, [2, 3]
    )
    assert (data.obs[[1, 3]] == 1).all()


def test_setitem_with_differing_non_tensor_makes_a_stack():
    data = make((4,))
    other = make((4,))
    other.tag = "other"
    data[1] = other[1]
    assert data.tag == ["run", "other", "run", "run"]
    assert data[1].tag == "other" and data[0].tag == "run"


def test_string_indexing_reads_fields():
    data = make()
    assert data["obs"] is data.obs
    assert torch.equal(data["inner", "x"], data.inner.x)
    data["reward"] = torch.zeros(4, 3)
    assert (data.reward == 0).all()


@pytest.mark.parametrize(
    "op, check",
    [
        (lambda d: d.reshape(12), (12,)),
        (lambda d: d.reshape(-1, 2), (6, 2)),
        (lambda d: d.view(3, 4), (3, 4)),
        (lambda d: d.view(-1), (12,)),
        (lambda d: d.permute(1, 0), (3, 4)),
        (lambda d: d.transpose(0, 1), (3, 4)),
        (lambda d: d.unsqueeze(0), (1, 4, 3)),
        (lambda d: d.unsqueeze(-1).squeeze(-1), (4, 3)),
        (lambda d: d[:1].squeeze(0), (3,)),
        (lambda d: d[:, :1].expand(4, 6), (4, 6)),
        (lambda d: d.flatten(0, 1), (12,)),
        (lambda d: d.flatten().unflatten(0, (2, 6)), (2, 6)),
        (lambda d: d.repeat(2, 1), (8, 3)),
        (lambda d: d.flip(0), (4, 3)),
        (lambda d: d.roll(1, 0), (4, 3)),
        (lambda d: d.narrow(0, 1, 2), (2, 3)),
        (lambda d: d.movedim(0, 1), (3, 4)),
        (lambda d: d.repeat_interleave(2, dim=0), (8, 3)),
        (lambda d: d.gather(1, torch.zeros(4, 2, dtype=torch.long)), (4, 2)),
        (lambda d: torch.unsqueeze(d, 0), (1, 4, 3)),
        (lambda d: torch.squeeze(d[:1], 0), (3,)),
        (lambda d: torch.flatten(d), (12,)),
        (lambda d: torch.permute(d, (1, 0)), (3, 4)),
    ],
)
def test_shape_ops_keep_class_and_follow_fields(op, check):
    data = make()
    out = op(data)
    assert type(out) is Data and type(out.inner) is Inner
    assert out.batch_size == torch.Size(check)
    assert out.obs.shape == torch.Size((*check, 5))
    assert out.inner.x.shape == torch.Size((*check, 2))
    assert out.tag == "run"


def test_reshape_values_match_tensor_reshape():
    data = make()
    out = data.reshape(12)
    assert torch.equal(out.obs, data.obs.reshape(12, 5))
    assert torch.equal(data.permute(1, 0).reward, data.reward.permute(1, 0))


@pytest.mark.parametrize("method", ["unbind", "split", "chunk"])
def test_splitting(method):
    data = make()
    if method == "unbind":
        parts = data.unbind(1)
        assert len(parts) == 3 and parts[0].batch_size == (4,)
        assert torch.equal(parts[2].obs, data.obs[:, 2])
        assert all(torch.equal(a.inner.x, b.inner.x) for a, b in zip(parts, torch.unbind(data, 1)))
    elif method == "split":
        parts = data.split([1, 3], 0)
        assert [p.batch_size[0] for p in parts] == [1, 3]
        assert torch.equal(parts[1].obs, data.obs[1:])
    else:
        parts = data.chunk(2, 0)
        assert len(parts) == 2
    assert all(type(p) is Data and type(p.inner) is Inner and p.tag == "run" for p in parts)


def test_iteration_yields_instances():
    data = make((3,))
    items = list(data)
    assert len(items) == 3 and all(type(i) is Data and i.batch_size == () for i in items)
    with pytest.raises(TypeError, match="0-d"):
        iter(data[0])


def test_to_device_and_dtype(device):
    data = make()
    moved = data.to(device)
    assert type(moved) is Data and moved.device == device
    assert moved.obs.device.type == device.type and moved.inner.x.device.type == device.type
    as_double = data.to(torch.float64)
    assert as_double.obs.dtype == torch.float64 and as_double.inner.x.dtype == torch.float64
    assert data.double().reward.dtype == torch.float64
    assert data.cpu().device == torch.device("cpu")
    same = moved.to(device)
    assert same is moved


def test_clone_detach_contiguous_and_copy():
    data = make()
    data.obs.requires_grad_()
    clone = data.clone()
    assert type(clone) is Data and clone.obs.data_ptr() != data.obs.data_ptr()
    assert_same_fields(clone.detach(), data.detach())
    shallow = data.clone(recurse=False)
    assert shallow.obs is data.obs
    shallow.reward = torch.zeros(4, 3)
    assert not torch.equal(data.reward, shallow.reward)
    det = data.detach()
    assert not det.obs.requires_grad and det.obs.data_ptr() == data.obs.data_ptr()
    t = data.transpose(0, 1).contiguous()
    assert t.obs.is_contiguous()
    import copy

    c = copy.copy(data)
    assert c.obs is data.obs and c is not data
    d = copy.deepcopy(data)
    assert d.obs.data_ptr() != data.obs.data_ptr() and torch.equal(d.obs.detach(), data.obs.detach())


def test_apply_and_named_apply():
    data = make()
    plus = data.apply(lambda t: t + 1)
    assert type(plus) is Data and torch.equal(plus.obs, data.obs + 1)
    assert torch.equal(plus.inner.x, data.inner.x + 1) and plus.tag == "run"
    both = data.apply(lambda a, b: a - b, data)
    assert (both.obs == 0).all()
    data.apply_(lambda t: t.zero_())
    assert (data.obs == 0).all() and (data.inner.x == 0).all()


def test_math_operators_and_methods():
    data = make()
    out = data + 1
    assert type(out) is Data and torch.equal(out.obs, data.obs + 1) and torch.equal(out.inner.x, data.inner.x + 1)
    assert torch.equal((data * 2).reward, data.reward * 2)
    assert torch.equal((2 * data).reward, data.reward * 2)
    assert torch.equal((data - data).obs, torch.zeros_like(data.obs))
    assert torch.equal((-data).obs, -data.obs)
    assert torch.equal(abs(data).obs, data.obs.abs())
    assert torch.equal(data.abs().obs, data.obs.abs())
    assert torch.equal(data.clamp(-0.1, 0.1).obs, data.obs.clamp(-0.1, 0.1))
    before = data.obs.clone()
    ref = data
    data += 1
    assert data is ref and torch.equal(data.obs, before + 1)
    data.mul_(0)
    assert (data.obs == 0).all()
    summed = make().sum(dim=0)
    assert type(summed) is Data and summed.batch_size == (3,)


def test_comparisons():
    a = make()
    b = a.clone()
    eq = a == b
    assert type(eq) is Data and eq.obs.dtype == torch.bool
    assert eq.all() and not (a != b).any()
    b.obs[0] += 1
    assert not (a == b).all()
    assert (a < a + 1).all()
    assert torch.eq(a, b).obs.dtype == torch.bool
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(a)


def test_get_set_and_nested_keys():
    data = make()
    assert data.get("obs") is data.obs
    assert data.get("tag") == "run"
    assert data.get(("inner", "x")) is data.inner.x
    assert data.get("missing", "default") == "default"
    with pytest.raises(KeyError, match="Data has no field 'missing'"):
        data.get("missing")
    new = torch.zeros(4, 3, 2)
    assert data.set(("inner", "x"), new) is data
    assert data.inner.x is new
    data.set("reward", torch.ones(4, 3), inplace=True)
    assert (data.reward == 1).all()
    data.set("tag", "changed")
    assert data.tag == "changed" and data[0].tag == "changed"
    with pytest.raises(KeyError, match="Cannot set the attribute 'bogus': Data has no such field"):
        data.set("bogus", torch.zeros(4, 3))
    with pytest.raises(AttributeError):  # tensordict 0.15's type
        data.set("bogus", torch.zeros(4, 3))


def test_select_exclude_update():
    data = make()
    sel = data.select("obs")
    assert type(sel) is Data and sel.reward is None and sel.obs is data.obs
    exc = data.exclude("obs")
    assert exc.obs is None and exc.reward is data.reward
    other = make()
    other.tag = "other"
    assert data.update(other) is data
    assert data.obs is other.obs and data.tag == "other"
    data.update({"reward": torch.zeros(4, 3)})
    assert (data.reward == 0).all()
    with pytest.raises(KeyError, match="not fields of Data"):
        data.update({"nope": torch.zeros(4, 3)})


def test_forwarded_tensordict_methods():
    data = make()
    assert sorted(data.keys()) == ["inner", "obs", "reward"]
    assert not data.is_locked
    data.lock_()
    assert data.is_locked
    with pytest.raises(RuntimeError, match="locked"):
        data.obs = torch.zeros(4, 3, 5)
    data.unlock_()
    data.obs = torch.zeros(4, 3, 5)
    data.zero_()
    assert (data.reward == 0).all()
    masked = data.masked_fill(torch.ones(4, 3, dtype=torch.bool), 1.0)
    assert type(masked) is Data and (masked.reward == 1).all()
    assert data.is_empty() is False


def test_batch_size_setter_and_names():
    data = make((4, 3))
    data.batch_size = [4]
    assert data.batch_size == (4,) and data[0].obs.shape == (3, 5)
    data.names = ["time"]
    assert data.names == ["time"]
    with pytest.raises(RuntimeError):
        data.batch_size = [5]
    with pytest.raises(RuntimeError, match="cannot be set"):
        data.device = "cpu"


def test_zeros_like_and_torch_functions():
    data = make()
    z = torch.zeros_like(data)
    assert type(z) is Data and (z.obs == 0).all() and z.tag == "run"
    parts = torch.split(data, 2, 0)
    assert all(type(p) is Data for p in parts)
