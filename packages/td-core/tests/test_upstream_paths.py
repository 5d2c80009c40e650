"""Upstream tensordict's module map, switches and helpers, as downstream code uses them."""

import importlib
import logging
import pickle

import pytest
import torch

import tensordict
from tensordict import (
    MetaData,
    NonTensorData,
    TensorDict,
    capture_non_tensor_stack,
    is_leaf_nontensor,
    is_non_tensor,
    is_tensorclass,
    lazy_legacy,
    list_to_stack,
    set_capture_non_tensor_stack,
    set_lazy_legacy,
    set_list_to_stack,
)
from tensordict.utils import ModeSwitch

SWITCHES = [
    (set_lazy_legacy, lazy_legacy, True, False),
    (set_list_to_stack, list_to_stack, False, True),
    (set_capture_non_tensor_stack, capture_non_tensor_stack, True, False),
]


@pytest.mark.parametrize(("switch", "read", "value", "default"), SWITCHES)
class TestSwitches:
    def test_creation_changes_nothing(self, switch, read, value, default):
        switch(value)
        assert read() == default

    def test_context_manager(self, switch, read, value, default):
        with switch(value):
            assert read() == value
        assert read() == default

    def test_context_manager_restores_on_error(self, switch, read, value, default):
        with pytest.raises(ZeroDivisionError), switch(value):
            1 / 0  # noqa: B018
        assert read() == default

    def test_reentrant(self, switch, read, value, default):
        outer = switch(value)
        with outer:
            with switch(default):
                assert read() == default
            with outer:
                assert read() == value
            assert read() == value
        assert read() == default

    def test_decorator(self, switch, read, value, default):
        @switch(value)
        def inside():
            return read()

        assert inside() == value
        assert read() == default

    def test_decorator_generator(self, switch, read, value, default):
        @switch(value)
        def gen():
            yield read()
            yield read()

        it = gen()
        assert next(it) == value
        assert read() == default  # not while the consumer runs
        assert next(it) == value
        assert list(it) == []

    def test_set_unset(self, switch, read, value, default):
        s = switch(value)
        s.set()
        try:
            assert read() == value
        finally:
            s.unset()
        assert read() == default

    def test_unset_without_set(self, switch, read, value, default):
        with pytest.raises(RuntimeError, match="before set"):
            switch(value).unset()


def test_set_lazy_legacy_set_changes_torch_stack():
    tds = [TensorDict(a=torch.zeros(2), batch_size=[2]) for _ in range(2)]
    s = set_lazy_legacy(True)
    s.set()
    try:
        assert type(torch.stack(tds)).__name__ == "LazyStackedTensorDict"
    finally:
        s.unset()
    assert type(torch.stack(tds)) is TensorDict


def test_allow_none_reads_unset_options():
    assert capture_non_tensor_stack(allow_none=True) is None
    assert list_to_stack(allow_none=True) is None
    with set_list_to_stack(False):
        assert list_to_stack(allow_none=True) is False


def test_mode_switch_subclass_and_decorating_a_class_fails():
    class set_flag(ModeSwitch):  # noqa: N801
        value = 0

        def __init__(self, mode):
            super().__init__()
            self.mode = mode

        def _read(self):
            return set_flag.value

        def _write(self, value):
            set_flag.value = value

    with set_flag(3):
        assert set_flag.value == 3
    assert set_flag.value == 0
    with pytest.raises(TypeError, match="not classes"):
        set_flag(1)(int)
    assert repr(set_flag(2)) == "set_flag(2)"


# ---------------------------------------------------------------- module map
def test_upstream_modules_import():
    base = importlib.import_module("tensordict.base")
    assert base.TensorDictBase is tensordict.TensorDictBase
    assert base.is_tensor_collection(TensorDict())
    assert base.NO_DEFAULT is not None
    old = importlib.import_module("tensordict.tensordict")
    assert old.TensorDict is TensorDict
    assert old.LazyStackedTensorDict is tensordict.LazyStackedTensorDict
    functional = importlib.import_module("tensordict.functional")
    assert functional.pad_sequence is tensordict.pad_sequence
    testing = importlib.import_module("tensordict.testing")
    assert testing.assert_allclose_td is tensordict.assert_allclose_td


def test_utils_public_helpers():
    from tensordict import utils

    for name in ("NestedKey", "unravel_key", "unravel_key_list", "is_non_tensor", "is_tensorclass",
                 "is_seq_of_nested_key", "expand_as_right", "expand_right", "set_lazy_legacy",
                 "lazy_legacy", "logger", "Buffer", "print_directory_tree", "implement_for",
                 "capture_non_tensor_stack", "set_list_to_stack", "assert_close",
                 "parse_tensor_dict_string"):
        assert hasattr(utils, name), name
    assert isinstance(utils.logger, logging.Logger)
    assert utils.Buffer is torch.nn.Buffer
    assert utils.is_seq_of_nested_key(["a", ("b", "c")])
    assert utils.is_seq_of_nested_key([])
    assert not utils.is_seq_of_nested_key("a")
    assert not utils.is_seq_of_nested_key(["a", 1])
    assert utils.strtobool("on") and not utils.strtobool("False")
    with pytest.raises(ValueError, match="truth value"):
        utils.strtobool("maybe")


def test_every_name_in_all_resolves():
    for module_name in ("tensordict", "tensordict.utils", "tensordict.base", "tensordict.tensordict"):
        module = importlib.import_module(module_name)
        missing = []
        for name in module.__all__:
            try:
                getattr(module, name)
            except ImportError:
                continue  # a sibling that is not installed (names its distribution)
            except AttributeError:
                missing.append(name)
        assert not missing, (module_name, missing)


# ---------------------------------------------------------------- leaves
def test_leaf_predicates():
    assert is_leaf_nontensor(torch.Tensor)
    assert is_leaf_nontensor(NonTensorData)
    assert not is_leaf_nontensor(TensorDict)
    assert tensordict.default_is_leaf(torch.Tensor)
    assert not tensordict.default_is_leaf(TensorDict)
    td = TensorDict(a=torch.zeros(3), n=TensorDict(b=torch.ones(3), batch_size=[3]), batch_size=[3])
    td["s"] = NonTensorData("x", batch_size=[3])
    keys = set(td.keys(True, True, is_leaf=is_leaf_nontensor))
    assert keys == {"a", ("n", "b"), "s"}
    assert is_non_tensor(NonTensorData("x")) and not is_non_tensor(td.get("a"))
    assert not is_tensorclass(TensorDict) and not is_tensorclass(td)


def test_metadata_is_kept_whole():
    meta = MetaData({"padded": True}, batch_size=[4])
    assert isinstance(meta, NonTensorData)
    part = meta[1:3]
    assert type(part) is MetaData
    assert part.data == {"padded": True}
    assert part.batch_size == torch.Size([2])
    assert type(meta.clone()) is MetaData
    back = pickle.loads(pickle.dumps(meta))
    assert type(back) is MetaData and back.data == meta.data and back.batch_size == meta.batch_size
    assert repr(meta).startswith("MetaData(")


# ---------------------------------------------------------------- assertions
def test_assert_allclose_td():
    a = TensorDict(x=torch.ones(3), n=TensorDict(y=torch.zeros(3), batch_size=[3]), batch_size=[3])
    assert tensordict.assert_allclose_td(a, a.clone())
    assert tensordict.assert_close(a, a.clone())
    b = a.clone()
    b["n", "y"] += 1
    with pytest.raises(AssertionError, match="'y' does not match"):
        tensordict.assert_allclose_td(a, b)
    with pytest.raises(KeyError, match="keys mismatch"):
        tensordict.assert_allclose_td(a, a.exclude("x"))
    with pytest.raises(TypeError, match="TensorDict type"):
        tensordict.assert_allclose_td(a, torch.ones(3))
    assert tensordict.assert_close(torch.ones(2), torch.ones(2))


# ---------------------------------------------------------------- implement_for
def test_implement_for_picks_by_version():
    from tensordict.utils import implement_for

    @implement_for("torch", None, "1.0")
    def which():
        return "old"

    @implement_for("torch", "1.0")
    def which():  # noqa: F811
        return "new"

    @implement_for("torch", None, "0.1")
    def which():  # noqa: F811
        return "ancient"

    assert which() == "new"

    @implement_for("a_module_that_is_not_installed", "1.0")
    def absent():
        return 1

    with pytest.raises(ModuleNotFoundError, match="no implementation"):
        absent()


def test_print_directory_tree(tmp_path, capsys, caplog):
    import logging
    import os

    from tensordict.utils import print_directory_tree

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.bin").write_bytes(b"0123")
    (tmp_path / "top.txt").write_bytes(b"x")
    with caplog.at_level(logging.INFO, logger="tensordict"):
        tree = print_directory_tree(tmp_path)
    assert capsys.readouterr().out == ""  # logged, not printed (tensordict 0.15.3)
    assert [r.getMessage() for r in caplog.records] == tree.splitlines()
    entries = {"sub": ["    sub/", "        a.bin"], "top.txt": ["    top.txt"]}  # os.listdir order
    body = [line for name in os.listdir(tmp_path) for line in entries[name]]
    assert tree.splitlines() == ["Directory size: 5.00 B", f"{tmp_path.name}/", *body]
    inner = print_directory_tree(tmp_path / "sub", indent="> ", display_metadata=False)
    assert inner.splitlines() == ["> sub/", ">     a.bin"]
    with pytest.raises(FileNotFoundError):
        print_directory_tree(tmp_path / "nope")


# ---------------------------------------------------------------- private compat names
def test_compat_private_names():
    from tensordict.base import _NESTED_TENSORS_AS_LISTS, _default_is_leaf, _is_leaf_nontensor
    from tensordict.utils import (
        _getitem_batch_size,
        _maybe_correct_neg_dim,
        _unravel_key_to_tuple,
        _zip_strict,
    )

    assert list(_zip_strict([1, 2], "ab")) == [(1, "a"), (2, "b")]
    with pytest.raises(ValueError):
        list(_zip_strict([1, 2], "a"))
    assert _getitem_batch_size(torch.Size([4, 5]), (slice(1, 3), None, 0)) == torch.Size([2, 1])
    assert _getitem_batch_size([4, 5], torch.tensor([0, 0, 1])) == torch.Size([3, 5])
    assert _getitem_batch_size([4, 5], torch.ones(4, dtype=torch.bool)) == torch.Size([4, 5])
    t = torch.zeros(4, 5, 6)
    mask = torch.tensor([True, False, True, False, True])
    for index in [(slice(None), mask), torch.ones(4, 5, dtype=torch.bool), (..., 0), ([0, 1], [1, 2]), (None, ..., None)]:
        assert _getitem_batch_size(t.shape, index) == t[index].shape, index
    assert _maybe_correct_neg_dim(-1, torch.Size([2, 3])) == 1
    with pytest.raises(IndexError):
        _maybe_correct_neg_dim(2, torch.Size([2, 3]))
    assert _unravel_key_to_tuple(("a", ("b",))) == ("a", "b")
    assert _unravel_key_to_tuple(1) == ()
    assert _is_leaf_nontensor is is_leaf_nontensor
    assert _NESTED_TENSORS_AS_LISTS(torch.Tensor) and not _NESTED_TENSORS_AS_LISTS(TensorDict)
    assert _default_is_leaf(torch.Tensor)
    from tensordict._tensorcollection import TensorCollection

    assert isinstance(TensorDict(), TensorCollection)
    assert not isinstance(torch.zeros(()), TensorCollection)
    assert issubclass(TensorDict, TensorCollection)


def test_expand_right_of_a_scalar():
    # TorchRL's writers expand a 0-d index tensor onto a TensorDict with batch_size []
    from tensordict.utils import expand_as_right, expand_right

    assert expand_as_right(torch.tensor(3), TensorDict()).shape == torch.Size([])
    assert expand_right(torch.tensor(2), ()).shape == torch.Size([])
    assert expand_as_right(torch.tensor(3), torch.zeros(2, 4)).shape == torch.Size([2, 4])


def test_accepted_classes():
    from tensordict.base import _ACCEPTED_CLASSES

    assert isinstance(torch.zeros(()), _ACCEPTED_CLASSES)
    assert isinstance(TensorDict(), _ACCEPTED_CLASSES)
    assert isinstance(NonTensorData("x"), _ACCEPTED_CLASSES)


def test_nested_key_isinstance():
    from tensordict import NestedKey

    assert isinstance("a", NestedKey)
    assert isinstance(("a", ("b", "c")), NestedKey)
    assert not isinstance(("a", 1), NestedKey)
    assert not isinstance((), NestedKey)
    assert not isinstance(["a"], NestedKey)


def test_get_with_lazy_stack_options():
    from tensordict import lazy_stack

    stack = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(3))])
    td = TensorDict(n=stack, x=torch.zeros(2, 3), batch_size=[2])
    padded = td.get(("n", "a"), as_padded_tensor=True)
    assert torch.equal(padded, torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]))
    assert td.get("x", as_padded_tensor=True) is td["x"]  # dense leaves as they are
    assert td.get("missing", None, as_padded_tensor=True) is None
    assert [t.shape for t in td.get(("n", "a"), as_list=True)] == [torch.Size([2]), torch.Size([3])]


def test_convert_ellipsis_to_idx():
    from tensordict.utils import convert_ellipsis_to_idx

    full = slice(None)
    assert convert_ellipsis_to_idx((0, ..., 1), (2, 3, 4, 5)) == (0, full, full, 1)
    assert convert_ellipsis_to_idx(..., (2, 3)) == (full, full)
    assert convert_ellipsis_to_idx((None, ..., 0), (2, 3)) == (None, full, 0)
    assert convert_ellipsis_to_idx((0, 1), (2, 3)) == (0, 1)
    with pytest.raises(RuntimeError, match="one Ellipsis"):
        convert_ellipsis_to_idx((..., ...), (2,))
    t = torch.zeros(2, 3, 4, 5)
    idx = (0, ..., 1)
    assert torch.equal(t[idx], t[convert_ellipsis_to_idx(idx, t.shape)])


def test_numpy_to_torch_dtype_dict():
    np = pytest.importorskip("numpy")
    from tensordict.utils import NUMPY_TO_TORCH_DTYPE_DICT

    assert NUMPY_TO_TORCH_DTYPE_DICT[np.dtype("float32")] is torch.float32
    assert NUMPY_TO_TORCH_DTYPE_DICT[np.dtype("bool")] is torch.bool
    assert NUMPY_TO_TORCH_DTYPE_DICT[np.dtype("int64")] is torch.int64
