"""TensorDicts under torch.compile (fullgraph, no recompile for a TensorDict of the same
structure), torch.export with dynamic batch dims, and higher-order ops.

Compiling is slow on a small machine: the tests use the ``CompileCounter`` backend
(Dynamo only, no Inductor) and few, small functions.
"""

import warnings

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from tensordict import TensorDict, lazy_stack


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _td(seed: int = 0) -> TensorDict:
    g = torch.Generator().manual_seed(seed)
    return TensorDict(
        a=torch.randn(3, 2, generator=g), nested={"b": torch.randn(3, generator=g)}, batch_size=[3]
    )


def _once(fn, *inputs):
    """Runs ``fn`` compiled (fullgraph) on each input tuple; returns (outputs, frame count)."""
    cnt = CompileCounter()
    compiled = torch.compile(fn, fullgraph=True, backend=cnt)
    return [compiled(*args) for args in inputs], cnt.frame_count


def test_ops_one_graph_and_no_recompile():
    def fn(td):
        out = (td[:2] + 1).apply(lambda x: x * 2)
        missing = td.get("zzz", torch.zeros(()))
        built = TensorDict({"s": td["a"].sum(-1), "n": TensorDict(b=td["nested", "b"], batch_size=[3])}, [3])
        return out, missing, built

    (first, second), frames = _once(fn, (_td(0),), (_td(1),))
    assert frames == 1  # the second TensorDict (same keys, shapes, dtypes) reuses the graph
    for (out, missing, built), td in zip((first, second), (_td(0), _td(1))):
        torch.testing.assert_close(out["a"], (td["a"][:2] + 1) * 2)
        assert out.batch_size == torch.Size([2]) and missing.shape == ()
        torch.testing.assert_close(built["n", "b"], td["nested", "b"])


def test_lazy_stack_no_recompile():
    def fn(ls):
        return ls["a"] + 1, ls[0]["a"] * 2

    def make(seed):
        g = torch.Generator().manual_seed(seed)
        return lazy_stack([TensorDict(a=torch.randn(3, generator=g)), TensorDict(a=torch.randn(3, generator=g))])

    outs, frames = _once(fn, (make(0),), (make(1),))
    assert frames == 1
    torch.testing.assert_close(outs[1][0], make(1)["a"] + 1)


def test_locked_result_and_clear_refs():
    td = _td().lock_()

    def fn(td):
        return (td + td + 1).clear_refs_for_compile_()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (out,), frames = _once(fn, (td,))
    assert frames == 1 and out.is_locked
    assert any("Using lock_()" in str(w.message) for w in caught)  # the ancestor record is skipped
    assert td.clear_refs_for_compile_() is td


def test_nested_compile_region_takes_tensordicts():
    @torch.compiler.nested_compile_region
    def step(td):
        td = td.clone()
        td["a"] = td["a"] * 2
        return td

    def fn(td):
        for _ in range(2):
            td = step(td)
        return td["a"]

    td = _td()
    torch.testing.assert_close(torch.compile(fn, backend="eager")(td), td["a"] * 4)


def test_export_dynamic_batch_dims():
    class Mod(torch.nn.Module):
        def forward(self, x):
            return TensorDict({"x": x, "y": x * 2}, batch_size=[x.shape[0], x.shape[1]])

    batch = torch.export.Dim("batch", min=1)
    ep = torch.export.export(Mod(), (torch.randn(2, 6, 8),), dynamic_shapes=({0: batch},), strict=True)
    out = ep.module()(torch.randn(4, 6, 8))
    assert out.batch_size == torch.Size([4, 6])
    torch.testing.assert_close(out["y"], out["x"] * 2)

    class Scalar(torch.nn.Module):
        def forward(self, x):
            return TensorDict(x=x, batch_size=x.shape[0])  # a SymInt batch size

    ep = torch.export.export(Scalar(), (torch.zeros(2, 3),), dynamic_shapes=({0: batch},), strict=False)
    assert ep.module()(torch.zeros(5, 3)).batch_size == torch.Size([5])


def test_to_module_restores_parameter_order():
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    before = list(module.parameters())
    zeros = TensorDict.from_module(module).data.clone().zero_()
    with zeros.to_module(module, preserve_module_state=False):
        assert (module(torch.ones(1, 3)) == 0).all()
    assert all(p is q for p, q in zip(module.parameters(), before))


def test_built_and_mutated_inside_checkpoint():
    from torch.utils.checkpoint import checkpoint

    lin = torch.nn.Linear(3, 3)

    def inner(x):
        td = TensorDict(a=x, batch_size=[x.shape[0]])
        td["b"] = lin(td["a"]).relu()
        td["c"] = td["b"] * 2
        return td["c"].sum(-1)

    def fn(x):
        return checkpoint(inner, x, use_reentrant=False)

    x = torch.randn(4, 3, requires_grad=True)
    eager = fn(x)
    (grad,) = torch.autograd.grad(eager.sum(), x)
    compiled = torch.compile(fn, fullgraph=True, backend="eager")(x)
    torch.testing.assert_close(compiled, eager)
    torch.testing.assert_close(torch.autograd.grad(compiled.sum(), x)[0], grad)


def test_unbatched_leaf_cloned_inside_compile():
    from tensordict import UnbatchedTensor

    td = TensorDict({"a": torch.randn(4, 3), "u": UnbatchedTensor(torch.randn(5))}, batch_size=[4])
    (out,), frames = _once(lambda td: td.clone(), (td,))
    assert frames == 1
    u = out.get("u")
    assert isinstance(u, UnbatchedTensor) and u.batch_size == torch.Size([4])
    assert u.data_ptr() != td.get("u").data_ptr() and torch.equal(u, td.get("u"))
