"""TensorDictSequential: keys, sub-sequences, container API and bad input."""

from collections import OrderedDict

import pytest
import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import TensorDictModule as Mod
from tensordict.nn import TensorDictSequential as Seq
from tensordict.nn import WrapModule


class Net(nn.Module):
    def __init__(self, input_size=100, hidden_size=50, output_size=10):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.fc2 = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        return self.fc2(x)


class Masker(nn.Module):
    def forward(self, x, mask):
        return torch.softmax(x * mask, dim=1)


def _overview_sequence():
    net = Mod(Net(), in_keys=[("input", "x")], out_keys=[("intermediate", "x")])
    masker = Mod(Masker(), in_keys=[("intermediate", "x"), ("input", "mask")], out_keys=[("output", "probabilities")])
    return Seq(net, masker)


def _overview_input():
    return TensorDict(
        {
            "input": TensorDict(
                {"x": torch.rand(32, 100), "mask": torch.randint(2, size=(32, 10))},
                batch_size=[32],
            )
        },
        batch_size=[32],
    )


def _chain():
    return Seq(
        Mod(lambda a: a + 1, in_keys=["a"], out_keys=["b"]),
        Mod(lambda b: b * 2, in_keys=["b"], out_keys=["c"]),
        Mod(lambda a: a - 1, in_keys=["a"], out_keys=["d"]),
        Mod(lambda c, d: c + d, in_keys=["c", "d"], out_keys=["e"]),
    )


class TestOverviewExample:
    def test_runs(self):
        module = _overview_sequence()
        tensordict = module(_overview_input())
        intermediate_x = tensordict["intermediate", "x"]
        probabilities = tensordict["output", "probabilities"]
        assert intermediate_x.shape == (32, 10)
        torch.testing.assert_close(probabilities.sum(1), torch.ones(32))

    def test_keys(self):
        module = _overview_sequence()
        assert module.in_keys == [("input", "x"), ("input", "mask")]
        assert module.out_keys == [("intermediate", "x"), ("output", "probabilities")]

    def test_select_subsequence(self):
        module = _overview_sequence()
        sub = module.select_subsequence(out_keys=[("intermediate", "x")])
        assert len(sub) == 1 and sub[0] is module[0]
        sub = module.select_subsequence(in_keys=[("intermediate", "x"), ("input", "mask")])
        assert len(sub) == 1 and sub[0] is module[1]
        with pytest.raises(ValueError, match="no step is left"):
            module.select_subsequence(in_keys=[("intermediate", "x")])  # the mask is missing


class TestKeys:
    def test_in_keys_are_read_before_written(self):
        seq = _chain()
        assert seq.in_keys == ["a"]
        assert seq.out_keys == ["b", "c", "d", "e"]

    def test_run(self):
        td = _chain()(TensorDict(a=torch.zeros(3), batch_size=[3]))
        assert (td["e"] == 1).all()

    def test_keyword_call(self):
        out = _chain()(a=torch.zeros(3))
        assert out.batch_size == torch.Size([3]) and (out["e"] == 1).all()

    def test_selected_out_keys(self):
        seq = Seq(*_chain(), selected_out_keys=["e"])
        assert seq.out_keys == ["e"]
        td = seq(TensorDict(a=torch.zeros(3), c=torch.zeros(3), batch_size=[3]))
        assert sorted(td.keys()) == ["a", "c", "e"]  # "c" was in the input: kept
        seq.reset_out_keys()
        assert sorted(seq(TensorDict(a=torch.zeros(3), batch_size=[3])).keys()) == ["a", "b", "c", "d", "e"]

    def test_inplace_false(self):
        seq = Seq(*_chain(), inplace=False)
        td = TensorDict(a=torch.zeros(3), batch_size=[3])
        out = seq(td)
        assert out is not td and list(td.keys()) == ["a"] and "e" in out.keys()

    def test_tensordict_out(self):
        seq = _chain()
        dest = TensorDict({}, [3])
        out = seq(TensorDict(a=torch.zeros(3), batch_size=[3]), tensordict_out=dest)
        assert out is dest and sorted(dest.keys()) == ["b", "c", "d", "e"]


class TestSubsequence:
    def test_out_keys(self):
        seq = _chain()
        assert seq.select_subsequence(out_keys=["c"]).out_keys == ["b", "c"]
        assert len(seq.select_subsequence(out_keys=["e"])) == 4
        assert seq.select_subsequence(out_keys=["d"]).out_keys == ["d"]

    def test_in_keys(self):
        seq = _chain()
        sub = seq.select_subsequence(in_keys=["b"])  # "e" also needs "d", which needs "a"
        assert sub.out_keys == ["c"] and sub.in_keys == ["b"]
        sub = seq.select_subsequence(in_keys=["b", "d"])
        assert sub.out_keys == ["c", "e"] and sub.in_keys == ["b", "d"]

    def test_both(self):
        sub = _chain().select_subsequence(in_keys=["b"], out_keys=["c"])
        assert sub.out_keys == ["c"]

    def test_modules_are_shared(self):
        seq = _chain()
        assert seq.select_subsequence(out_keys=["c"])[0] is seq[0]

    def test_unknown_out_key(self):
        with pytest.raises(ValueError, match="no step is left"):
            _chain().select_subsequence(out_keys=["zz"])

    def test_unknown_in_key(self):
        with pytest.raises(ValueError, match="no step is left"):
            _chain().select_subsequence(in_keys=["zz"])

    def test_disconnected(self):
        with pytest.raises(ValueError, match="no step is left"):
            _chain().select_subsequence(in_keys=["b"], out_keys=["d"])

    def test_nested_sequences_select_their_steps(self):
        flat = _chain()
        nested = Seq(Seq(flat[0], flat[1]), Seq(flat[2], flat[3]))
        for kwargs in ({"out_keys": ["c"]}, {"in_keys": ["b", "d"]}, {"in_keys": ["a"], "out_keys": ["d"]}):
            a, b = flat.select_subsequence(**kwargs), nested.select_subsequence(**kwargs)
            # the same steps, still inside their nested sequences (tensordict 0.15.3)
            assert all(isinstance(m, Seq) for m in b)
            assert list(a) == [step for sub in b for step in sub]

    def test_ordered_dict_keeps_names(self):
        seq = Seq(OrderedDict(
            layer0=Mod(lambda x: x + 1, in_keys=["x"], out_keys=["y"]),
            layer1=Mod(lambda x: x - 1, in_keys=["y"], out_keys=["z"]),
            layer2=Mod(lambda x, y: x + y, in_keys=["x", "y"], out_keys=["a"]),
        ))
        sub = seq.select_subsequence(out_keys=["a"])
        assert list(sub.module) == ["layer0", "layer2"]


class TestContainer:
    def test_len_index_slice_iter(self):
        seq = _chain()
        assert len(seq) == 4
        assert isinstance(seq[0], Mod)
        sub = seq[1:3]
        assert isinstance(sub, Seq) and len(sub) == 2 and sub.in_keys == ["b", "a"]
        assert list(seq) == [seq[i] for i in range(4)]

    def test_setitem_append_insert(self):
        seq = Seq(Mod(lambda a: a + 1, in_keys=["a"], out_keys=["b"]))
        seq.append(Mod(lambda b: b + 1, in_keys=["b"], out_keys=["c"]))
        assert seq.out_keys == ["b", "c"]
        seq.insert(0, Mod(lambda z: z, in_keys=["z"], out_keys=["a"]))
        assert seq.in_keys == ["z"]
        seq[2] = Mod(lambda b: b * 10, in_keys=["b"], out_keys=["f"])
        assert seq.out_keys == ["a", "b", "f"]
        assert (seq(TensorDict(z=torch.ones(2), batch_size=[2]))["f"] == 20).all()

    def test_nested_sequences(self):
        inner = _chain()
        outer = Seq(inner, Mod(lambda e: e * 3, in_keys=["e"], out_keys=["f"]))
        assert outer.in_keys == ["a"] and outer.out_keys[-1] == "f"
        assert (outer(TensorDict(a=torch.zeros(2), batch_size=[2]))["f"] == 3).all()
        sub = outer.select_subsequence(out_keys=["f"])  # the nested steps stay nested (0.15.3)
        assert len(sub) == 2 and isinstance(sub[0], Seq) and len(sub[0]) == 4

    def test_callables_are_wrapped(self):
        seq = Seq(Mod(lambda x: x * 2, in_keys=["x"], out_keys=["y"]), lambda td: td.reshape(-1))
        assert isinstance(seq[1], WrapModule)
        out = seq(TensorDict(x=torch.ones(3, 4), batch_size=[3, 4]))
        assert out.batch_size == torch.Size([12]) and (out["y"] == 2).all()

    def test_ordered_dict(self):
        seq = Seq(OrderedDict(first=Mod(lambda a: a + 1, in_keys=["a"], out_keys=["b"]), second=Mod(lambda b: b + 1, in_keys=["b"], out_keys=["c"])))
        assert seq["first"] is seq[0]
        assert (seq(TensorDict(a=torch.zeros(2), batch_size=[2]))["c"] == 2).all()
        assert [n for n, _ in seq.named_modules()][:3] == ["", "module", "module.first"]

    def test_parameters_are_registered(self):
        seq = Seq(Mod(nn.Linear(2, 3), in_keys=["x"], out_keys=["h"]), Mod(nn.Linear(3, 1), in_keys=["h"], out_keys=["y"]))
        assert len(list(seq.parameters())) == 4

    def test_repr(self):
        assert "TensorDictSequential(" in repr(_chain())


class TestPartialTolerant:
    def test_skips_modules_with_missing_inputs(self):
        seq = Seq(
            Mod(lambda a: a + 1, in_keys=["a"], out_keys=["b"]),
            Mod(lambda z: z + 1, in_keys=["z"], out_keys=["w"]),
            partial_tolerant=True,
        )
        td = seq(TensorDict(a=torch.zeros(2), batch_size=[2]))
        assert sorted(td.keys()) == ["a", "b"]

    def test_lazy_stack(self):
        from tensordict import lazy_stack

        seq = Seq(Mod(lambda z: z + 1, in_keys=["z"], out_keys=["w"]), partial_tolerant=True)
        tds = [TensorDict(z=torch.zeros(2), batch_size=[2]), TensorDict(a=torch.zeros(2), batch_size=[2])]
        stacked = lazy_stack(tds, 0)
        seq(stacked)
        assert "w" in tds[0].keys() and "w" not in tds[1].keys()


class TestBadInput:
    def test_missing_key_with_strict_steps_leaves_input_unchanged(self):
        seq = Seq(
            Mod(nn.Linear(3, 4), in_keys=["x"], out_keys=["h"], strict=True),
            Mod(lambda h, m: h * m, in_keys=["h", "mask"], out_keys=["y"], strict=True),
        )
        td = TensorDict(x=torch.randn(5, 3), batch_size=[5])
        with pytest.raises(KeyError, match="mask") as info:
            seq(td)
        assert "in_keys=['h', 'mask']" in str(info.value)
        assert list(td.keys()) == ["x"]  # checked before any step ran

    def test_missing_key_by_default_fails_at_its_step_as_upstream(self):
        # strict=False (the default): the step gets None for "mask" and fails; the earlier
        # step's output stays, as in tensordict 0.15 (nothing that was there is lost)
        seq = Seq(
            Mod(nn.Linear(3, 4), in_keys=["x"], out_keys=["h"]),
            Mod(lambda h, m: h * m, in_keys=["h", "mask"], out_keys=["y"]),
        )
        td = TensorDict(x=torch.randn(5, 3), batch_size=[5])
        with pytest.raises(KeyError, match="mask"):
            seq(td)
        assert list(td.keys()) == ["x", "h"]

    def test_non_module_step(self):
        with pytest.raises(TypeError, match="nn.Module or a callable"):
            Seq(Mod(torch.relu, in_keys=["x"], out_keys=["y"]), 3)

    def test_in_keys_cannot_be_set(self):
        with pytest.raises(AttributeError):
            _chain().in_keys = ["x"]


def test_device(device):
    seq = Seq(Mod(nn.Linear(3, 4), in_keys=["x"], out_keys=["h"]), Mod(nn.ReLU(), in_keys=["h"], out_keys=["y"])).to(device)
    td = seq(TensorDict(x=torch.randn(2, 3, device=device), batch_size=[2]))
    assert td["y"].device.type == device.type and (td["y"] >= 0).all()


class TestInplaceModes:
    @pytest.mark.parametrize("inplace", [True, False, None])
    @pytest.mark.parametrize("module_inplace", [True, False])
    def test_output_identity(self, inplace, module_inplace):
        seq = Seq(
            Mod(lambda x: (x + 1, x - 1), in_keys=["input"], out_keys=[("mid", "0"), ("mid", "1")], inplace=module_inplace),
            Mod(lambda a, b: a * b, in_keys=[("mid", "0"), ("mid", "1")], out_keys=["output"], inplace=module_inplace),
            inplace=inplace,
        )
        inp = TensorDict(input=torch.zeros(()))
        out = seq(inp)
        same = inplace is True or (inplace is None and module_inplace)
        assert (out is inp) == same
        assert ("input" in out.keys()) == same
        assert "output" in out.keys()


def test_keys_are_unravelled_on_assignment():
    from tensordict.nn import TensorDictModuleBase

    class Keys(TensorDictModuleBase):
        def __init__(self):
            self.in_keys = ["a", ("b",), ("c", ("d",))]
            self.out_keys = [("e",)]
            super().__init__()

    module = Keys()
    assert module.in_keys == ["a", "b", ("c", "d")] and module.out_keys == ["e"]


def test_delitem_updates_keys():
    seq = _chain()
    del seq[3]
    assert len(seq) == 3 and seq.out_keys == ["b", "c", "d"]
    named = Seq(OrderedDict(first=Mod(lambda a: a + 1, in_keys=["a"], out_keys=["b"]),
                            second=Mod(lambda b: b + 1, in_keys=["b"], out_keys=["c"])))
    del named["second"]
    assert list(named.module) == ["first"] and named.out_keys == ["b"]


def test_tensordict_out_leaves_the_input_alone():
    seq = _chain()
    inp = TensorDict(a=torch.zeros(2), batch_size=[2])
    out = TensorDict(batch_size=[2])
    assert seq(inp, tensordict_out=out) is out
    assert set(inp.keys()) == {"a"} and set(out.keys()) == {"b", "c", "d", "e"}


def test_out_keys_follow_the_last_write_of_each_key():
    seq = Seq(
        Mod(lambda x: (x + 1, x + 2), in_keys=["x"], out_keys=["a", "b"]),
        Mod(lambda b: b * 2, in_keys=["b"], out_keys=["a"]),
        Mod(lambda a: a - 1, in_keys=["a"], out_keys=["c"]),
    )
    assert seq.out_keys == ["b", "a", "c"]  # "a" was written again after "b"
    nested = Seq(seq, Mod(lambda c: c, in_keys=["c"], out_keys=["b"]))
    assert nested.out_keys == ["a", "c", "b"]
    out = seq(TensorDict(x=torch.zeros(2), batch_size=[2]))
    assert out["a"].tolist() == [4.0, 4.0] and out["c"].tolist() == [3.0, 3.0]
