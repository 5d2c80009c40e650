"""TensorDictModule: keys, outputs, keyword calls, selection and bad input."""

import warnings

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import (
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictModuleWrapper,
    WrapModule,
    dispatch,
    make_tensordict,
    set_skip_existing,
    skip_existing,
)


class Net(nn.Module):
    """The overview's Net: a LazyLinear returning logits and probabilities."""

    def __init__(self):
        super().__init__()
        self.linear = nn.LazyLinear(1)

    def forward(self, x):
        logits = self.linear(x)
        return logits, torch.sigmoid(logits)


def _overview_module():
    return TensorDictModule(
        Net(),
        in_keys=["input"],
        out_keys=[("outputs", "logits"), ("outputs", "probabilities")],
    )


class TestOverviewExample:
    def test_tensordict_call(self):
        module = _overview_module()
        tensordict = TensorDict({"input": torch.randn(32, 100)}, [32])
        out = module(tensordict)
        assert out is tensordict
        logits = tensordict["outputs", "logits"]
        probabilities = tensordict.get(("outputs", "probabilities"))
        assert logits.shape == (32, 1)
        torch.testing.assert_close(probabilities, torch.sigmoid(logits))

    def test_keyword_call_returns_tensordict(self):
        module = _overview_module()
        x = torch.randn(32, 100)
        out = module(input=x)
        assert isinstance(out, TensorDict)
        assert out.batch_size == torch.Size([32])
        assert out["input"] is x
        expected = module(TensorDict({"input": x}, [32]))
        assert (out == expected).all()

    def test_positional_tensor_call_returns_tensors(self):
        module = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
        out = module(torch.randn(5, 3))
        assert isinstance(out, torch.Tensor) and out.shape == (5, 4)
        two = TensorDictModule(lambda x: (x + 1, x - 1), in_keys=["x"], out_keys=["a", "b"])
        a, b = two(torch.zeros(2))
        assert (a == 1).all() and (b == -1).all()

    def test_keyword_calls_return_tensors_switch(self):
        from tensordict.nn import keyword_calls_return_tensors, set_keyword_calls_return_tensors

        module = TensorDictModule(lambda x: (x + 1, x - 1), in_keys=["x"], out_keys=["a", "b"])
        assert not keyword_calls_return_tensors()
        with set_keyword_calls_return_tensors(True):
            a, b = module(x=torch.zeros(2))
            assert (a == 1).all() and (b == -1).all()
        assert isinstance(module(x=torch.zeros(2)), TensorDict)
        switch = set_keyword_calls_return_tensors(True)
        switch.set()
        try:
            assert isinstance(module(x=torch.zeros(2)), tuple)
        finally:
            switch.unset()
        assert isinstance(module(x=torch.zeros(2)), TensorDict)


class TestKeys:
    def test_nested_in_and_out_keys(self):
        module = TensorDictModule(lambda a, b: a + b, in_keys=[("n", "a"), "b"], out_keys=[("o", "p", "q")])
        td = TensorDict({"n": {"a": torch.ones(3)}, "b": torch.ones(3)}, [3])
        module(td)
        assert (td["o", "p", "q"] == 2).all()
        assert module.in_keys == [("n", "a"), "b"]
        assert module.out_keys == [("o", "p", "q")]

    def test_str_keys_are_wrapped(self):
        module = TensorDictModule(torch.relu, in_keys="x", out_keys="y")
        assert module.in_keys == ["x"] and module.out_keys == ["y"]

    def test_dict_in_keys_tensordict_key_to_kwarg(self):
        def fn(x, *, scale):
            return x * scale

        module = TensorDictModule(fn, in_keys={"obs": "x", ("cfg", "s"): "scale"}, out_keys=["y"])
        td = TensorDict({"obs": torch.ones(2), "cfg": {"s": torch.full((2,), 3.0)}}, [2])
        assert (module(td)["y"] == 3).all()
        assert module.in_keys == ["obs", ("cfg", "s")]

    @pytest.mark.parametrize("out_to_in_map", [True, None])
    def test_dict_in_keys_kwarg_to_tensordict_key(self, out_to_in_map):
        def fn(x, scale):
            return x * scale

        module = TensorDictModule(fn, in_keys={"x": "obs", "scale": "s"}, out_keys=["y"], out_to_in_map=out_to_in_map)
        td = TensorDict({"obs": torch.ones(2), "s": torch.full((2,), 2.0)}, [2])
        assert (module(td)["y"] == 2).all()
        assert module.in_keys == ["obs", "s"]

    def test_underscore_out_key_discards(self):
        module = TensorDictModule(lambda x: (x + 1, x + 2), in_keys=["x"], out_keys=["_", "b"])
        td = module(TensorDict(x=torch.zeros(2), batch_size=[2]))
        assert set(td.keys()) == {"x", "b"}

    def test_dict_output(self):
        module = TensorDictModule(lambda x: {"a": x + 1, "b": x + 2}, in_keys=["x"], out_keys=["b", "a"])
        td = module(TensorDict(x=torch.zeros(2), batch_size=[2]))
        assert (td["a"] == 1).all() and (td["b"] == 2).all()

    def test_tensordict_output(self):
        module = TensorDictModule(lambda x: TensorDict(a=x + 1), in_keys=["x"], out_keys=["a"])
        assert (module(TensorDict(x=torch.zeros(2), batch_size=[2]))["a"] == 1).all()

    def test_setting_keys_rebuilds_plan(self):
        module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
        module.in_keys = ["z"]
        module.out_keys = ["w"]
        td = module(TensorDict(z=torch.zeros(2), batch_size=[2]))
        assert (td["w"] == 1).all() and "y" not in td.keys()

    def test_method_and_kwargs(self):
        class Two(nn.Module):
            def forward(self, x):
                return x

            def double(self, x, factor=1):
                return 2 * x * factor

        module = TensorDictModule(Two(), in_keys=["x"], out_keys=["y"], method="double", method_kwargs={"factor": 3})
        assert (module(TensorDict(x=torch.ones(2), batch_size=[2]))["y"] == 6).all()

    def test_strict_false_passes_none(self):
        module = TensorDictModule(lambda x, y: x if y is None else x + y, in_keys=["x", "y"], out_keys=["z"], strict=False)
        td = module(TensorDict(x=torch.ones(2), batch_size=[2]))
        assert (td["z"] == 1).all()

    def test_attribute_fallback_to_wrapped_module(self):
        module = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
        assert module.weight is module.module.weight
        assert module.in_features == 3


class TestInplace:
    def test_inplace_false_returns_new_tensordict(self):
        module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"], inplace=False)
        td = TensorDict(x=torch.zeros(3), batch_size=[3])
        out = module(td)
        assert out is not td
        assert "y" not in td.keys() and list(out.keys()) == ["y"]
        assert out.batch_size == torch.Size([])

    def test_inplace_empty_keeps_batch_size(self):
        module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"], inplace="empty")
        out = module(TensorDict(x=torch.zeros(3), batch_size=[3]))
        assert out.batch_size == torch.Size([3]) and list(out.keys()) == ["y"]

    def test_tensordict_out(self):
        module = TensorDictModule(lambda x: x + 1, in_keys=["x"], out_keys=["y"])
        td = TensorDict(x=torch.zeros(3), batch_size=[3])
        dest = TensorDict({}, [3])
        assert module(td, tensordict_out=dest) is dest
        assert "y" in dest.keys() and "y" not in td.keys()


class TestSelectOutKeys:
    def test_select_and_reset(self):
        mod = TensorDictModule(lambda x, y: (x + 2, y + 2), in_keys=["a", "b"], out_keys=["c", "d"])
        assert mod.select_out_keys("d") is mod
        assert mod.out_keys == ["d"] and mod.out_keys_source == ["c", "d"]
        td = mod(TensorDict(a=torch.zeros(()), b=torch.ones(())))
        assert sorted(td.keys()) == ["a", "b", "d"]
        mod.reset_out_keys()
        td = mod(TensorDict(a=torch.zeros(()), b=torch.ones(())))
        assert sorted(td.keys()) == ["a", "b", "c", "d"]

    def test_select_unknown_key(self):
        mod = TensorDictModule(lambda x: x, in_keys=["a"], out_keys=["b"])
        with pytest.raises(ValueError, match="Can't select non existent key 'zz'"):
            mod.select_out_keys("zz")

    def test_generic_subclass_selection_keeps_preexisting(self):
        class Two(TensorDictModuleBase):
            in_keys = ["x"]
            out_keys = ["y", "z"]

            def forward(self, td):
                td["y"] = td["x"] + 1
                td["z"] = td["x"] + 2
                return td

        mod = Two().select_out_keys("y")
        td = mod(TensorDict(x=torch.zeros(2), batch_size=[2]))
        assert sorted(td.keys()) == ["x", "y"]
        td = mod(TensorDict(x=torch.zeros(2), z=torch.zeros(2), batch_size=[2]))
        assert sorted(td.keys()) == ["x", "y", "z"]
        mod.reset_out_keys()
        assert sorted(mod(TensorDict(x=torch.zeros(2), batch_size=[2])).keys()) == ["x", "y", "z"]


class TestBadInput:
    def test_missing_in_key(self):
        module = TensorDictModule(nn.Linear(3, 4), in_keys=["x", "missing"], out_keys=["y"])
        td = TensorDict(x=torch.randn(2, 3), batch_size=[2])
        before = td.clone()
        with pytest.raises(KeyError, match="missing") as info:
            module(td)
        assert "TensorDictModule(Linear" in str(info.value)
        assert set(td.keys()) == {"x"} and (td == before).all()

    def test_discard_marker_as_an_input_key_warns(self):
        with pytest.warns(UserWarning, match='key "_"'):
            TensorDictModule(lambda x: x, in_keys=["_"], out_keys=["y"])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            TensorDictModule(lambda x: x, in_keys=[("_", "")], out_keys=["_"])  # nested: no warning

    def test_optional_input_gets_none_when_missing_unless_strict(self):
        module = TensorDictModule(lambda x, y: x if y is None else x + y, in_keys=["x", "y"], out_keys=["z"])
        td = TensorDict(x=torch.ones(2), batch_size=[2])
        assert torch.equal(module(td)["z"], torch.ones(2))  # y missing: passed as None
        strict = TensorDictModule(lambda x, y: x, in_keys=["x", "y"], out_keys=["w"], strict=True)
        with pytest.raises(KeyError, match="'y'"):
            strict(td)
        assert "w" not in td.keys()

    def test_missing_input_that_breaks_the_call_is_a_key_error_and_the_call_error(self):
        def fn(x, y):
            return x + y

        module = TensorDictModule(fn, in_keys={"x": "1", "y": "2"}, out_keys=["a"], out_to_in_map=False)
        td = TensorDict({"1": torch.ones(1)}, [])
        with pytest.raises(KeyError, match="unexpected keyword argument '1'"):
            module(td)
        with pytest.raises(TypeError, match="reads the key 'x'"):  # upstream lets the TypeError through
            module(td)
        assert set(td.keys()) == {"1"}

    def test_missing_nested_in_key(self):
        module = TensorDictModule(lambda x: x, in_keys=[("a", "b")], out_keys=["y"])
        with pytest.raises(KeyError, match=r"\('a', 'b'\)"):
            module(TensorDict(a={"c": torch.zeros(2)}, batch_size=[2]))

    def test_out_keys_count_mismatch(self):
        module = TensorDictModule(lambda x: (x, x, x), in_keys=["x"], out_keys=["a", "b"])
        td = TensorDict(x=torch.zeros(2), batch_size=[2])
        with pytest.raises(ValueError, match=r"returned 3 output\(s\).*but 2 out_keys"):
            module(td)
        assert set(td.keys()) == {"x"}

    def test_single_tensor_for_two_out_keys(self):
        module = TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["a", "b"])
        with pytest.raises(ValueError, match=r"returned 1 output\(s\).*2 out_keys"):
            module(TensorDict(x=torch.zeros(2), batch_size=[2]))

    def test_output_breaks_batch_size(self):
        module = TensorDictModule(lambda x: x.sum(0), in_keys=["x"], out_keys=["y"])
        td = TensorDict(x=torch.zeros(4, 3), batch_size=[4])
        with pytest.raises(RuntimeError, match=r"'y'.*batch_size=\(4,\)"):
            module(td)
        assert "y" not in td.keys()

    def test_second_output_breaks_batch_size_nothing_written(self):
        module = TensorDictModule(lambda x: (x, x.sum(0)), in_keys=["x"], out_keys=["a", "b"])
        td = TensorDict(x=torch.zeros(4, 3), batch_size=[4])
        with pytest.raises(RuntimeError, match=r"'b' has shape \(3,\).*Nothing was written"):
            module(td)
        assert set(td.keys()) == {"x"}

    @pytest.mark.parametrize("bad", [torch.zeros(3), 3, "linear", None])
    def test_non_module(self, bad):
        with pytest.raises(TypeError, match="must be an nn.Module or a callable"):
            TensorDictModule(bad, in_keys=["x"], out_keys=["y"])

    @pytest.mark.parametrize("bad", [nn.Linear, int])
    def test_a_class_is_refused_with_the_error_types_of_both_conventions(self, bad):
        with pytest.raises(TypeError, match="must be an nn.Module or a callable"):
            TensorDictModule(bad, in_keys=["x"], out_keys=["y"])
        with pytest.raises(ValueError, match=r"Module .* is not callable"):  # tensordict 0.15's type
            TensorDictModule(bad, in_keys=["x"], out_keys=["y"])

    @pytest.mark.parametrize("keys", [None, 123, [123]])
    def test_bad_keys_raise_type_and_value_error(self, keys):
        for kwargs in ({"in_keys": keys, "out_keys": ["y"]}, {"in_keys": ["x"], "out_keys": keys}):
            with pytest.raises(ValueError, match="must be of type list, str or tuples of str"):
                TensorDictModule(torch.relu, **kwargs)
            with pytest.raises(TypeError):
                TensorDictModule(torch.relu, **kwargs)

    def test_bad_key_type(self):
        with pytest.raises(TypeError, match="in_keys"):
            TensorDictModule(torch.relu, in_keys=[1], out_keys=["y"])
        with pytest.raises(TypeError, match="out_keys"):
            TensorDictModule(torch.relu, in_keys=["x"], out_keys=5)

    def test_duplicated_out_keys(self):
        with pytest.raises(ValueError, match="duplicated"):
            TensorDictModule(lambda x: (x, x), in_keys=["x"], out_keys=["y", "y"])

    def test_bad_inplace(self):
        with pytest.raises(ValueError, match="inplace"):
            TensorDictModule(torch.relu, in_keys=["x"], out_keys=["y"], inplace="yes")

    def test_unknown_keyword(self):
        module = TensorDictModule(torch.relu, in_keys=["x"], out_keys=["y"])
        with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
            module(z=torch.zeros(2))


class TestSkipExisting:
    def test_skip_existing(self):
        calls = []

        def fn(x):
            calls.append(1)
            return x + 1

        module = TensorDictModule(fn, in_keys=["x"], out_keys=["y"])
        td = TensorDict(x=torch.zeros(2), y=torch.zeros(2), batch_size=[2])
        assert not skip_existing()
        with set_skip_existing(True):
            assert skip_existing()
            module(td)
        assert not calls and (td["y"] == 0).all()
        module(td)
        assert calls == [1]

    def test_decorator_with_mode(self):
        @set_skip_existing(True)
        def run():
            return skip_existing()

        assert run() and not skip_existing()


class TestDispatch:
    def test_dispatch_method(self):
        class MyModule(nn.Module):
            in_keys = [("a", "c"), "d"]
            out_keys = ["b"]

            @dispatch(auto_batch_size=False)
            def forward(self, tensordict):
                tensordict["b"] = tensordict["a", "c"] + tensordict["d"]
                return tensordict

        module = MyModule()
        b = module(a_c=torch.zeros(1, 2), d=torch.ones(1, 2))
        assert (b == 1).all()
        b = module(torch.zeros(1, 2), d=torch.ones(1, 2))
        assert (b == 1).all()
        td = module(TensorDict({"a": {"c": torch.zeros(1)}, "d": torch.ones(1)}, [1]))
        assert isinstance(td, TensorDict)
        with pytest.raises(RuntimeError, match="Duplicated argument"):
            module(torch.zeros(1, 2), a_c=torch.ones(1, 2))

    def test_dispatch_auto_batch_size(self):
        seen = []

        class M(nn.Module):
            in_keys = ["x"]
            out_keys = ["y", "z"]

            @dispatch
            def forward(self, td):
                seen.append(td.batch_size)
                td["y"] = td["x"] * 2
                td["z"] = td["x"] * 3
                return td

        y, z = M()(x=torch.ones(2, 3))
        assert seen == [torch.Size([2, 3])] and (z == 3).all() and (y == 2).all()

    def test_dispatch_function_with_source(self):
        @dispatch(source=["x"], dest=["y"])
        def fn(td):
            td["y"] = td["x"] + 1
            return td

        assert (fn(x=torch.zeros(2)) == 1).all()

    def test_make_tensordict(self):
        td = make_tensordict({"a": torch.zeros(3, 4)}, b=torch.zeros(3))
        assert td.batch_size == torch.Size([])  # tensordict 0.15.3: no batch size unless asked
        assert make_tensordict({"a": torch.zeros(3, 4)}, b=torch.zeros(3), auto_batch_size=True).batch_size == (3,)
        assert make_tensordict(a=torch.zeros(3, 4), batch_size=[3, 4]).batch_size == torch.Size([3, 4])


class TestBaseAndWrappers:
    def test_subclass_keyword_call(self):
        class AddOne(TensorDictModuleBase):
            in_keys = [("a", "b")]
            out_keys = ["y"]

            def forward(self, tensordict):
                tensordict["y"] = tensordict["a", "b"] + 1
                return tensordict

        out = AddOne()(a_b=torch.zeros(4))
        assert out.batch_size == torch.Size([4]) and (out["y"] == 1).all()
        assert TensorDictModuleBase.is_tdmodule_compatible(AddOne())
        assert not TensorDictModuleBase.is_tdmodule_compatible(nn.Linear(1, 1))

    def test_wrap_module(self):
        wrap = WrapModule(lambda td: td.reshape(-1))
        out = wrap(TensorDict(x=torch.ones(3, 4), batch_size=[3, 4]))
        assert out.batch_size == torch.Size([12])
        wrap_inplace = WrapModule(lambda td: TensorDict(y=td["x"] + 1, batch_size=td.batch_size), inplace=True, out_keys=["y"])
        td = TensorDict(x=torch.ones(3), batch_size=[3])
        assert wrap_inplace(td) is td and (td["y"] == 2).all()
        assert wrap_inplace.out_keys == ["y"]
        with pytest.raises(TypeError, match="callable"):
            WrapModule(3)

    def test_module_wrapper(self):
        inner = TensorDictModule(nn.Linear(2, 3), in_keys=["x"], out_keys=["y"])
        wrapper = TensorDictModuleWrapper(inner)
        assert wrapper.in_keys == ["x"] and wrapper.out_keys == ["y"]
        assert wrapper.module is inner.module
        assert [n for n, _ in wrapper.named_parameters()] == ["td_module.module.weight", "td_module.module.bias"]
        td = wrapper(TensorDict(x=torch.randn(4, 2), batch_size=[4]))
        assert td["y"].shape == (4, 3)
        assert wrapper(x=torch.randn(4, 2))["y"].shape == (4, 3)
        with pytest.raises(TypeError):
            TensorDictModuleWrapper(lambda td: td)

    def test_reset_parameters_recursive(self):
        module = TensorDictModule(nn.Linear(3, 3), in_keys=["x"], out_keys=["y"])
        before = module.module.weight.detach().clone()
        module.reset_parameters_recursive()
        assert not torch.equal(before, module.module.weight)
        params = TensorDict.from_module(module).detach().clone()
        snapshot = params.clone()
        current = module.module.weight.detach().clone()
        assert module.reset_parameters_recursive(params) is params
        assert not torch.equal(params["module", "weight"], snapshot["module", "weight"])
        assert torch.equal(module.module.weight, current)

    def test_state_dict_round_trip(self):
        a = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
        b = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
        b.load_state_dict(a.state_dict())
        x = torch.randn(2, 3)
        assert torch.equal(a(x=x)["y"], b(x=x)["y"])

    def test_repr(self):
        module = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"])
        text = repr(module)
        assert "Linear(in_features=3" in text and "in_keys=['x']" in text

    def test_repr_of_a_callable_is_its_own_repr(self):
        def double(x):
            return 2 * x

        text = repr(TensorDictModule(double, in_keys=["x"], out_keys=["y"]))
        assert f"module={double!r}" in text and text.count("module=") == 1


def test_base_repr_lists_children_then_keys_not_plain_attributes():
    from tensordict.nn import TensorDictModuleBase

    class Scaled(TensorDictModuleBase):
        in_keys = ["a"]
        out_keys = [("out", "b")]

        def __init__(self):
            super().__init__()
            self.net = nn.Linear(3, 4)
            self.act = nn.Sequential(nn.ReLU())
            self.scale = 2.0

        def forward(self, tensordict):
            return tensordict

    assert repr(Scaled()).splitlines() == [
        "Scaled(",
        "    net=Linear(in_features=3, out_features=4, bias=True),",
        "    act=Sequential(",
        "      (0): ReLU()",
        "    ),",
        "    in_keys=['a'],",
        "    out_keys=[('out', 'b')])",
    ]


def test_probabilistic_module_and_sequence_repr():
    from torch.distributions import Normal

    from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential

    prob = ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"], distribution_class=Normal)
    text = repr(prob)
    assert "in_keys=['loc', 'scale']" in text and "out_keys=['action']" in text
    assert f"distribution_class={Normal!r}" in text and "default_interaction_type=deterministic" in text
    head = TensorDictModule(nn.Linear(3, 4), in_keys=["obs"], out_keys=["loc", "scale"])
    seq = repr(ProbabilisticTensorDictSequential(head, prob))
    assert seq.startswith("ProbabilisticTensorDictSequential(\n    module=ModuleList(\n      (0): TensorDictModule(")
    assert seq.endswith("in_keys=['obs'],\n    out_keys=['loc', 'scale', 'action'])")


def test_device(device):
    module = TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["y"]).to(device)
    td = TensorDict(x=torch.randn(5, 3, device=device), batch_size=[5], device=device)
    out = module(td)
    assert out["y"].device.type == device.type


def test_backward_through_module():
    module = TensorDictModule(nn.Linear(3, 1), in_keys=["x"], out_keys=["y"])
    td = module(TensorDict(x=torch.randn(5, 3), batch_size=[5]))
    td["y"].sum().backward()
    assert module.module.weight.grad is not None


class TestAsTensorDictModule:
    def test_free_function_and_method(self):
        from tensordict.nn import as_tensordict_module

        @as_tensordict_module(in_keys=["a", ("n", "b")], out_keys=["s", "d"])
        def sum_diff(a, b):
            return a + b, a - b

        td = sum_diff(TensorDict({"a": torch.ones(2), "n": {"b": torch.ones(2)}}, [2]))
        assert (td["s"] == 2).all() and (td["d"] == 0).all()

        class Holder:
            scale = 3.0

            @as_tensordict_module(in_keys="x", out_keys="y")
            def forward(self, x):
                return x * self.scale

        assert (Holder().forward(TensorDict(x=torch.ones(2), batch_size=[2]))["y"] == 3).all()
        with pytest.raises(KeyError, match="n"):  # one tensor for two inputs: ("n", "b") is missing
            sum_diff(torch.ones(2))

    def test_called_with_tensors_as_015(self):
        # checked on tensordict 0.15.3: the decorated function is called as a TensorDictModule
        from tensordict.nn import as_tensordict_module

        @as_tensordict_module(in_keys=["x", ("n", "z")], out_keys=["y", "w"])
        def f(x, z):
            return x + 1, z * 2

        y, w = f(torch.ones(2), torch.ones(2))  # positional tensors: the outputs
        assert (y == 2).all() and (w == 2).all()
        # keyword tensors (nested keys joined by "_"): the outputs too, as upstream's docstring
        # shows (a TensorDictModule's keyword call returns the TensorDict here: recorded departure)
        y, w = f(x=torch.ones(2), n_z=torch.ones(2))
        assert (y == 2).all() and (w == 2).all()

        @as_tensordict_module(in_keys="c", out_keys="d")
        def add_one(c):
            return c + 1

        assert torch.equal(add_one(c=torch.zeros(2)), torch.ones(2))
        td = TensorDict(x=torch.ones(2), n={"z": torch.ones(2)})
        assert f(tensordict=td) is td and (td["w"] == 2).all()
        dest = TensorDict()
        assert f(td, tensordict_out=dest) is dest and set(dest.keys()) == {"y", "w"}
        with pytest.raises(TypeError):
            f(x=torch.ones(2), z=torch.ones(2))  # "z" is not a keyword of the TensorDict call
        with pytest.raises(KeyError):
            f(TensorDict(x=torch.ones(2)))

        class Scaled(nn.Module):
            @as_tensordict_module(in_keys=["x"], out_keys=["y"])
            def forward(self, x):
                return x * 3

        assert (Scaled()(torch.ones(2)) == 3).all()
        assert (Scaled()(TensorDict(x=torch.ones(2)))["y"] == 3).all()


class TestCallExtras:
    def test_extra_keyword_goes_to_the_module(self):
        class TakesC(nn.Module):
            def forward(self, x, c):
                return x + c

        module = TensorDictModule(TakesC(), in_keys=["a"], out_keys=["b"])
        out = module(a=torch.zeros(2), c=1)
        assert (out["b"] == 1).all()

    def test_dispatch_extra_positional(self):
        from tensordict.nn import dispatch

        class WithOther(nn.Module):
            in_keys = [("a", "c"), "d"]
            out_keys = ["b"]

            @dispatch(separator="_")
            def forward(self, tensordict, other):
                tensordict["b"] = tensordict["a", "c"] + tensordict["d"] + other
                return tensordict

        (b,) = WithOther()(torch.zeros(1, 2), torch.ones(1, 2), 1)
        assert (b == 2).all()

    def test_dispatch_switched_off(self):
        from tensordict.nn.utils import _set_dispatch_td_nn_modules

        module = TensorDictModule(nn.Linear(1, 1), ["a"], ["b"])
        with _set_dispatch_td_nn_modules(False), pytest.raises(TypeError, match="missing 1 required positional argument"):
            module(a=torch.zeros(1, 1))
        assert isinstance(module(a=torch.zeros(1, 1)), TensorDict)


class TestSkipExistingDecorator:
    def test_decorated_forward_skips_when_outputs_exist(self):
        from tensordict.nn import TensorDictModuleBase, set_skip_existing

        class Writes(TensorDictModuleBase):
            in_keys = []
            out_keys = ["out"]

            @set_skip_existing()
            def forward(self, tensordict):
                tensordict.set("out", torch.ones(()))
                return tensordict

        assert (Writes()(TensorDict({"out": torch.zeros(())}, []))["out"] == 0).all()
        assert (Writes()(TensorDict())["out"] == 1).all()

    def test_none_is_not_a_context_manager(self):
        from tensordict.nn import set_skip_existing, skip_existing

        with pytest.raises(RuntimeError, match="It seems"):
            with set_skip_existing(None):
                pass
        assert skip_existing() is False

    def test_missing_key_message(self):
        module = TensorDictModule(nn.Linear(2, 3), in_keys=["a"], out_keys=["b"])
        with pytest.raises(KeyError, match="may not have not been found in the input tensordict"):
            module(TensorDict({"c": torch.randn(())}, []))


def test_construction_and_reset_warnings():
    import warnings as _w

    with pytest.warns(UserWarning, match="out_to_in_map is not None but is only used when in_key is a dictionary"):
        TensorDictModule(lambda x: x, in_keys=["x"], out_keys=["a"], out_to_in_map=False)
    module = TensorDictModule(nn.ModuleList([nn.Tanh(), nn.ReLU()]), in_keys=["in"], out_keys=["out"])
    with pytest.warns(UserWarning, match="did not find any parameters to reset"):
        module.reset_parameters_recursive()
    with _w.catch_warnings():
        _w.simplefilter("error")
        TensorDictModule(nn.Linear(1, 1), in_keys=["in"], out_keys=["out"]).reset_parameters_recursive()


def test_wrapper_selects_the_wrapped_outputs():
    inner = TensorDictModule(lambda x, y: (x + 2, y + 2, x), in_keys=["a", "b"], out_keys=["c", "d", "e"])
    wrapper = TensorDictModuleWrapper(inner)
    assert wrapper.select_out_keys("d") is wrapper
    assert wrapper.out_keys == ["d"] and inner.out_keys == ["d"]
    assert (wrapper(torch.zeros(()), torch.ones(())) == 3).all()
    assert wrapper.reset_out_keys() is wrapper and wrapper.out_keys == ["c", "d", "e"]


def test_device_is_deprecated_and_settable():
    module = TensorDictModule(nn.Linear(3, 4), in_keys=["a"], out_keys=["b"])
    with pytest.warns(DeprecationWarning, match=r"removed in TensorDict 0\.17"):
        assert module.device == torch.device("cpu")
    module.device = "meta"
    assert module.device == "meta"


def test_reset_with_batched_parameters_raises():
    module = TensorDictModule(nn.Linear(1, 1), in_keys=["in"], out_keys=["out"])
    params = TensorDict.from_module(module).expand(2).clone()
    with pytest.raises(RuntimeError, match="batch_size=\\[\\]"):
        module.reset_parameters_recursive(params)
