"""Leaf-wise math: every op checked against the same torch op applied leaf by leaf."""

import operator

import pytest
import torch

from tensordict import TensorDict


def make_td(device="cpu", dtype=torch.float32):
    g = torch.Generator().manual_seed(0)

    def rnd(*shape):
        return (torch.rand(*shape, generator=g) + 0.5).to(device=device, dtype=dtype)

    return TensorDict(
        {
            "a": rnd(3, 4),
            "b": {"c": rnd(3, 2), "d": {"e": rnd(3, 5, 1)}},
            "s": "text",
        },
        batch_size=[3],
        device=device,
    )


def tensor_items(td):
    return {k: v for k, v in td.items(True, True) if isinstance(v, torch.Tensor)}


def check_leafwise(out, td, fn, exact=True):
    """``out`` has td's structure, its non-tensor entries, and ``fn(leaf)`` as leaves."""
    assert out.batch_size == td.batch_size
    assert set(out.keys(True, True)) == set(td.keys(True, True))
    for key, value in tensor_items(td).items():
        expected = fn(key, value)
        assert out[key].dtype == expected.dtype, key
        if exact:
            torch.testing.assert_close(out[key], expected, rtol=0, atol=0, equal_nan=True)
        else:
            torch.testing.assert_close(out[key], expected, equal_nan=True)
    assert out["s"] == "text"


BINARY = [
    ("add", operator.add, torch.add),
    ("sub", operator.sub, torch.sub),
    ("mul", operator.mul, torch.mul),
    ("div", operator.truediv, torch.div),
    ("pow", operator.pow, torch.pow),
    ("floordiv", operator.floordiv, torch.floor_divide),
    ("mod", operator.mod, torch.remainder),
]


@pytest.mark.parametrize("name,op,torch_op", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("kind", ["scalar", "0d", "batch_tensor", "td"])
def test_binary_operators(device, name, op, torch_op, kind):
    td = make_td(device)
    if kind == "scalar":
        other = 1.5

        def rhs(key, leaf):
            return other

    elif kind == "0d":
        other = torch.tensor(1.5, device=device)

        def rhs(key, leaf):
            return other

    elif kind == "batch_tensor":
        other = torch.tensor([1.0, 2.0, 3.0], device=device)

        def rhs(key, leaf):
            return other.reshape(3, *([1] * (leaf.ndim - 1)))

    else:
        other = make_td(device) * 0.5 + 0.75

        def rhs(key, leaf):
            return other[key]

    out = op(td, other)
    check_leafwise(out, td, lambda k, v: torch_op(v, rhs(k, v)))
    # reflected: other <op> td
    if kind != "td":
        out = op(other, td)
        check_leafwise(
            out, td, lambda k, v: torch_op(rhs(k, v), v) if kind != "scalar" else op(other, v)
        )


@pytest.mark.parametrize(
    "name,op",
    [
        ("add", operator.iadd),
        ("sub", operator.isub),
        ("mul", operator.imul),
        ("div", operator.itruediv),
        ("pow", operator.ipow),
        ("floordiv", operator.ifloordiv),
        ("mod", operator.imod),
    ],
)
@pytest.mark.parametrize("kind", ["scalar", "batch_tensor", "td"])
def test_inplace_operators_keep_storage(device, name, op, kind):
    td = make_td(device)
    ref = td.clone()
    ptrs = {k: v.data_ptr() for k, v in tensor_items(td).items()}
    if kind == "scalar":
        other = 2.0
        rhs = {k: 2.0 for k in ptrs}
    elif kind == "batch_tensor":
        other = torch.tensor([1.0, 2.0, 3.0], device=device)
        rhs = {k: other.reshape(3, *([1] * (v.ndim - 1))) for k, v in tensor_items(td).items()}
    else:
        other = make_td(device) + 1
        rhs = {k: other[k] for k in ptrs}
    res = op(td, other)
    assert res is td
    plain = {
        "add": operator.add,
        "sub": operator.sub,
        "mul": operator.mul,
        "div": operator.truediv,
        "pow": operator.pow,
        "floordiv": operator.floordiv,
        "mod": operator.mod,
    }[name]
    for key, ptr in ptrs.items():
        assert td[key].data_ptr() == ptr
        # exact on the CPU; an accelerator's in-place (foreach) kernel may round pow differently
        exact = {"rtol": 0, "atol": 0} if td[key].device.type == "cpu" else {}
        torch.testing.assert_close(td[key], plain(ref[key], rhs[key]), **exact)


@pytest.mark.parametrize(
    "method",
    ["add_", "sub_", "mul_", "div_", "pow_", "maximum_", "minimum_", "clamp_min_", "clamp_max_"],
)
def test_named_inplace_methods(method):
    td = make_td()
    ref = td.clone()
    a = td["a"]
    assert getattr(td, method)(1.2) is td
    expected = getattr(ref["a"].clone(), method)(1.2) if hasattr(torch.Tensor, method) else None
    if expected is None:
        expected = getattr(torch, method[:-1])(ref["a"], torch.tensor(1.2))
    torch.testing.assert_close(a, expected, rtol=0, atol=0)


def test_add_sub_alpha_and_default():
    td = make_td()
    other = make_td() * 2
    torch.testing.assert_close(td.add(other, alpha=3)["a"], torch.add(td["a"], other["a"], alpha=3))
    torch.testing.assert_close(
        td.sub(other, alpha=0.5)["b", "c"], torch.sub(td["b", "c"], other["b", "c"], alpha=0.5)
    )
    torch.testing.assert_close(td.add(2.0, alpha=3)["a"], td["a"] + 6)
    torch.testing.assert_close(td.clone().add_(other, alpha=2)["a"], td["a"] + 2 * other["a"])
    partial = other.exclude(("b", "c"))
    with pytest.raises(KeyError, match=r"\('b', 'c'\)"):
        td + partial
    with pytest.raises(KeyError, match=r"\('b', 'c'\)"):
        partial + td
    inter = td.add(partial, default="intersection")
    assert ("b", "c") not in inter.keys(True)
    torch.testing.assert_close(inter["a"], td["a"] + other["a"])
    filled = td.mul(partial, default=torch.tensor(0.0))
    torch.testing.assert_close(filled["b", "c"], torch.zeros(3, 2))
    with pytest.raises(ValueError, match="intersection"):
        td.add(partial, default="union")


UNARY = [
    "abs",
    "neg",
    "exp",
    "log",
    "log1p",
    "sqrt",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "sign",
    "floor",
    "ceil",
    "round",
    "reciprocal",
    "expm1",
    "log2",
    "log10",
    "trunc",
    "frac",
    "rsqrt",
    "erf",
    "atan",
    "sinh",
    "cosh",
    "tan",
    "lgamma",
    "erfc",
    "asin",
    "acos",
]


@pytest.mark.parametrize("name", UNARY)
def test_unary_methods(device, name):
    td = make_td(device)
    fn = getattr(torch, name)
    check_leafwise(getattr(td, name)(), td, lambda k, v: fn(v))
    # torch.<name>(td) dispatches to the method
    check_leafwise(fn(td), td, lambda k, v: fn(v))
    ref = td.clone()
    ptr = td["a"].data_ptr()
    assert getattr(td, name + "_")() is td
    assert td["a"].data_ptr() == ptr
    check_leafwise(td, ref, lambda k, v: fn(v))


def test_unary_operators():
    td = make_td() - 1
    check_leafwise(-td, td, lambda k, v: -v)
    check_leafwise(abs(td), td, lambda k, v: v.abs())
    assert +td is td
    mask = td.exclude("s") > 0
    inverted = ~mask
    for key, value in tensor_items(mask).items():
        assert torch.equal(inverted[key], ~value)


@pytest.mark.parametrize("name", ["isnan", "isfinite", "isinf", "signbit", "square", "relu"])
def test_loop_unary(name):
    td = make_td()
    td["a"][0, 0] = float("nan")
    td["b", "c"][1, 0] = float("inf")
    fn = getattr(torch, name)
    check_leafwise(getattr(td, name)(), td, lambda k, v: fn(v))


def test_integer_and_bool_leaves_follow_torch_promotion():
    td = TensorDict({"i": torch.arange(4), "b": torch.tensor([True, False, True, False])}, [4])
    out = td + 1.5
    assert out["i"].dtype == torch.float32 and out["b"].dtype == torch.float32
    out = td + 1
    assert out["i"].dtype == torch.int64 and out["b"].dtype == torch.int64
    assert (td["i"] / 2).dtype == (td / 2)["i"].dtype == torch.float32
    torch.testing.assert_close((td // 2)["i"], td["i"] // 2)
    with pytest.raises(RuntimeError, match="can't be cast"):
        td.exclude("b").add_(1.5)


def test_readme_iadd_example():
    td = TensorDict.fromkeys(["a", "b", "c"], 0)
    td += 1
    assert (td == 1).all()


def test_clamp_lerp_addcmul_addcdiv_maximum_minimum(device):
    td = make_td(device)
    other = make_td(device) * 2
    check_leafwise(td.clamp(0.7, 1.2), td, lambda k, v: v.clamp(0.7, 1.2))
    check_leafwise(td.clamp(min=0.8), td, lambda k, v: v.clamp(min=0.8))
    check_leafwise(td.clamp(max=0.8), td, lambda k, v: v.clamp(max=0.8))
    check_leafwise(td.clamp_min(other * 0.4), td, lambda k, v: torch.clamp_min(v, other[k] * 0.4))
    check_leafwise(td.clamp_max(1.0), td, lambda k, v: torch.clamp_max(v, 1.0))
    check_leafwise(td.maximum(other * 0.5), td, lambda k, v: torch.maximum(v, other[k] * 0.5))
    check_leafwise(td.minimum(other * 0.5), td, lambda k, v: torch.minimum(v, other[k] * 0.5))
    check_leafwise(
        td.maximum(1.0), td, lambda k, v: torch.maximum(v, torch.tensor(1.0, device=device))
    )
    check_leafwise(td.lerp(other, 0.3), td, lambda k, v: torch.lerp(v, other[k], 0.3), exact=False)
    check_leafwise(
        td.lerp(other, other * 0.1),
        td,
        lambda k, v: torch.lerp(v, other[k], other[k] * 0.1),
        exact=False,
    )
    check_leafwise(
        td.addcmul(other, td, value=0.5), td, lambda k, v: torch.addcmul(v, other[k], v, value=0.5)
    )
    check_leafwise(
        td.addcdiv(other, td, value=2), td, lambda k, v: torch.addcdiv(v, other[k], v, value=2)
    )
    with pytest.raises(ValueError, match="min"):
        td.clamp()
    ref = td.clone()
    assert td.clamp_(0.7, 1.0) is td
    check_leafwise(td, ref, lambda k, v: v.clamp(0.7, 1.0))
    ref = td.clone()
    td.lerp_(other, 0.5)
    check_leafwise(td, ref, lambda k, v: torch.lerp(v, other[k], 0.5), exact=False)
    ref = td.clone()
    td.addcmul_(other, other, value=2)
    check_leafwise(td, ref, lambda k, v: torch.addcmul(v, other[k], other[k], value=2))
    ref = td.clone()
    td.addcdiv_(other, other)
    check_leafwise(td, ref, lambda k, v: torch.addcdiv(v, other[k], other[k]))


def test_masked_fill_and_select(device):
    td = make_td(device)
    mask = torch.tensor([True, False, True], device=device)
    check_leafwise(
        td.masked_fill(mask, -1.0),
        td,
        lambda k, v: v.masked_fill(mask.reshape(3, *([1] * (v.ndim - 1))), -1.0),
    )
    ref = td.clone()
    a = td["a"]
    assert td.masked_fill_(mask, 0.0) is td
    assert (a[0] == 0).all() and (a[1] == ref["a"][1]).all()
    sel = ref.masked_select(mask)
    assert sel.batch_size == torch.Size([2])
    torch.testing.assert_close(sel["b", "d", "e"], ref["b", "d", "e"][mask])
    assert sel["s"] == "text"
    td2 = TensorDict({"x": torch.arange(6).view(2, 3)}, [2, 3])
    m2 = torch.tensor([[True, False, True], [False, True, False]])
    sel = td2.masked_select(m2)
    assert sel.batch_size == torch.Size([3]) and sel["x"].tolist() == [0, 2, 4]
    with pytest.raises(RuntimeError, match=r"mask has shape \(4,\)"):
        td.masked_fill(torch.ones(4, dtype=torch.bool), 0)
    with pytest.raises(RuntimeError, match="batch_size"):
        td.masked_select(torch.ones(2, dtype=torch.bool))


def test_where(device):
    td = make_td(device)
    other = make_td(device) * -1
    cond = torch.tensor([True, False, True], device=device)

    def expected(k, v, o):
        return torch.where(cond.reshape(3, *([1] * (v.ndim - 1))), v, o)

    check_leafwise(td.where(cond, other), td, lambda k, v: expected(k, v, other[k]))
    check_leafwise(torch.where(cond, td, other), td, lambda k, v: expected(k, v, other[k]))
    check_leafwise(torch.where(cond, td, 0.0), td, lambda k, v: expected(k, v, torch.zeros_like(v)))
    check_leafwise(torch.where(cond, 0.0, td), td, lambda k, v: expected(k, torch.zeros_like(v), v))
    check_leafwise(
        td.where(cond, torch.zeros(3, device=device)),
        td,
        lambda k, v: expected(k, v, torch.zeros_like(v)),
    )
    out = td.clone() * 0
    res = td.where(cond, other, out=out)
    assert res is out
    torch.testing.assert_close(out["a"], expected("a", td["a"], other["a"]))
    partial = other.exclude("a")
    with pytest.raises(KeyError, match="'a'"):
        td.where(cond, partial)
    padded = td.where(cond, partial, pad=0.0)
    torch.testing.assert_close(padded["a"], expected("a", td["a"], torch.zeros_like(td["a"])))


def test_ops_use_foreach_kernels():
    td = TensorDict({f"k{i}": torch.randn(4) for i in range(10)}, [4])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        td + 1
        td * td
        td.exp()
        td.add_(td)
    names = {e.name for e in prof.events()}
    for kernel in (
        "aten::_foreach_add",
        "aten::_foreach_mul",
        "aten::_foreach_exp",
        "aten::_foreach_add_",
    ):
        assert kernel in names, kernel
    assert "aten::add" not in {e.name for e in prof.events() if e.cpu_parent is None}


def test_ops_inside_vmap_fall_back_to_loops():
    def fn(x):
        td = TensorDict({"a": x, "b": {"c": x * 2}}, [])
        out = (td + 1) * td
        out = out.exp().clamp(max=10.0)
        return out["b", "c"]

    x = torch.randn(5, 3)
    expected = (((x * 2) + 1) * (x * 2)).exp().clamp(max=10.0)
    torch.testing.assert_close(torch.vmap(fn)(x), expected)


def test_autograd_through_foreach_ops():
    x = torch.randn(3, requires_grad=True)
    y = torch.randn(3, 2, requires_grad=True)
    td = TensorDict({"x": x, "n": {"y": y}}, [3])
    out = (td * td + 1).exp()
    (out["x"].sum() + out["n", "y"].sum()).backward()
    torch.testing.assert_close(x.grad, (x * x + 1).exp() * 2 * x)


def test_unsupported_operand():
    td = make_td()
    with pytest.raises(TypeError):
        td + "abc"
    with pytest.raises(TypeError, match="unsupported operand"):
        td.mul(object())
    with pytest.raises(TypeError, match="unsupported operand"):
        td.add_(object())


def test_dict_operand_is_matched_by_key():
    td = TensorDict({"a": torch.ones(2), "b": torch.ones(2)}, [2])
    out = td + {"a": torch.tensor(1.0), "b": torch.tensor(2.0)}
    torch.testing.assert_close(out["b"], torch.full((2,), 3.0))


def test_torch_function_entry_points():
    td = make_td()
    torch.testing.assert_close(torch.add(td, 1)["a"], td["a"] + 1)
    torch.testing.assert_close(torch.mul(td, td)["a"], td["a"] * td["a"])
    torch.testing.assert_close(torch.add(torch.ones(3), td)["a"], td["a"] + 1)
    torch.testing.assert_close(torch.clamp(td, 0.7, 0.9)["a"], td["a"].clamp(0.7, 0.9))
    assert torch.isnan(td)["a"].dtype == torch.bool
    torch.testing.assert_close(
        torch.masked_fill(td, torch.tensor([True, False, False]), 0.0)["a"][0], torch.zeros(4)
    )


def test_empty_and_non_tensor_only():
    td = TensorDict({"s": "x"}, [2])
    out = td + 1
    assert out["s"] == "x" and out.batch_size == td.batch_size
    assert td.add_(1) is td
    assert (td * 2).batch_size == torch.Size([2])


def test_tensorclass_values_are_walked():
    tc_mod = pytest.importorskip("tensordict.tensorclass")

    @tc_mod.tensorclass
    class Point:
        x: torch.Tensor
        label: str

    p = Point(x=torch.ones(3, 2), label="p", batch_size=[3])
    td = TensorDict({"p": p, "a": torch.zeros(3)}, [3])
    out = td * 3 + 1
    assert isinstance(out["p"], Point) and out["p"].label == "p"
    torch.testing.assert_close(out["p"].x, torch.full((3, 2), 4.0))
    torch.testing.assert_close((td * td)["p"].x, torch.ones(3, 2))
    torch.testing.assert_close(td.apply(lambda t: t - 1)["p"].x, torch.zeros(3, 2))
    torch.testing.assert_close(td.apply(lambda t, u: t + u, td)["p"].x, torch.full((3, 2), 2.0))
    torch.testing.assert_close(td.sum(dim=0)["p"].x, torch.full((2,), 3.0))
    torch.testing.assert_close(td.max()["p"].x, torch.tensor(1.0))
    td += 1
    torch.testing.assert_close(p.x, torch.full((3, 2), 2.0))
