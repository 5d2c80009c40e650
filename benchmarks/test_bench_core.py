"""td-core container costs next to the same operation on a plain dict of tensors.

Each case has a ``_td`` and a ``_dict`` function in the same benchmark group;
``benchmarks/report.py`` turns the JSON into ratios.
"""

import pytest
import torch

from tensordict import TensorDict

B = 1000
KEYS = [f"k{i}" for i in range(100)]
DEEP = tuple(f"l{i}" for i in range(20)) + ("leaf",)


def flat_source(n=100, batch=10):
    return {k: torch.zeros(batch, 3) for k in KEYS[:n]}


def nested_source(depth=20):
    d = {"leaf": torch.zeros(10, 3)}
    for i in reversed(range(depth)):
        d = {f"l{i}": d, f"x{i}": torch.zeros(10, 3)}
    return d


def dict_nested_copy(d):
    return {k: dict_nested_copy(v) if isinstance(v, dict) else v for k, v in d.items()}


def bench(group):
    return pytest.mark.benchmark(group=group)


# ---------------------------------------------------------------- construction
@bench("construct 100 flat keys")
def test_construct_flat_td(benchmark):
    src = flat_source()
    benchmark(TensorDict, src, batch_size=[10])


@bench("construct 100 flat keys")
def test_construct_flat_dict(benchmark):
    src = flat_source()

    def make():
        out = {}
        for k, v in src.items():
            if v.shape[:1] != (10,):
                raise RuntimeError
            out[k] = v
        return out

    benchmark(make)


@bench("construct 20-deep nested")
def test_construct_nested_td(benchmark):
    src = nested_source()
    benchmark(TensorDict, src, batch_size=[10])


@bench("construct 20-deep nested")
def test_construct_nested_dict(benchmark):
    src = nested_source()
    benchmark(dict_nested_copy, src)


# ---------------------------------------------------------------- get / set
@bench("get 100 keys")
def test_get_td(benchmark):
    td = TensorDict(flat_source(), [10])
    get = td.get
    benchmark(lambda: [get(k) for k in KEYS])


@bench("get 100 keys")
def test_get_dict(benchmark):
    d = flat_source()
    get = d.get
    benchmark(lambda: [get(k) for k in KEYS])


@bench("getitem 100 keys")
def test_getitem_td(benchmark):
    td = TensorDict(flat_source(), [10])
    benchmark(lambda: [td[k] for k in KEYS])


@bench("getitem 100 keys")
def test_getitem_dict(benchmark):
    d = flat_source()
    benchmark(lambda: [d[k] for k in KEYS])


@bench("set 100 keys")
def test_set_td(benchmark):
    td = TensorDict({}, [10])
    v = torch.zeros(10, 3)
    set_ = td.set

    def run():
        for k in KEYS:
            set_(k, v)

    benchmark(run)


@bench("set 100 keys")
def test_set_dict(benchmark):
    d = {}
    v = torch.zeros(10, 3)

    def run():
        for k in KEYS:
            if v.shape[:1] != (10,):
                raise RuntimeError
            d[k] = v

    benchmark(run)


@bench("setitem 100 keys")
def test_setitem_td(benchmark):
    td = TensorDict({}, [10])
    v = torch.zeros(10, 3)

    def run():
        for k in KEYS:
            td[k] = v

    benchmark(run)


@bench("setitem 100 keys")
def test_setitem_dict(benchmark):
    d = {}
    v = torch.zeros(10, 3)

    def run():
        for k in KEYS:
            if v.shape[:1] != (10,):
                raise RuntimeError
            d[k] = v

    benchmark(run)


@bench("nested get 21-name key")
def test_nested_get_td(benchmark):
    td = TensorDict(nested_source(), [10])
    benchmark(td.get, DEEP)


@bench("nested get 21-name key")
def test_nested_get_dict(benchmark):
    d = nested_source()

    def get():
        x = d
        for k in DEEP:
            x = x[k]
        return x

    benchmark(get)


@bench("nested set 21-name key")
def test_nested_set_td(benchmark):
    td = TensorDict(nested_source(), [10])
    v = torch.ones(10, 3)
    benchmark(td.set, DEEP, v)


@bench("nested set 21-name key")
def test_nested_set_dict(benchmark):
    d = nested_source()
    v = torch.ones(10, 3)

    def set_():
        x = d
        for k in DEEP[:-1]:
            x = x[k]
        if v.shape[:1] != (10,):
            raise RuntimeError
        x[DEEP[-1]] = v

    benchmark(set_)


@bench("set inplace 100 keys")
def test_set_inplace_td(benchmark):
    td = TensorDict(flat_source(), [10])
    v = torch.ones(10, 3)

    def run():
        for k in KEYS:
            td.set_(k, v)

    benchmark(run)


@bench("set inplace 100 keys")
def test_set_inplace_dict(benchmark):
    d = flat_source()
    v = torch.ones(10, 3)

    def run():
        for k in KEYS:
            d[k].copy_(v)

    benchmark(run)


@bench("keys nested")
def test_keys_nested_td(benchmark):
    td = TensorDict(nested_source(), [10])
    benchmark(lambda: list(td.keys(True, True)))


@bench("keys nested")
def test_keys_nested_dict(benchmark):
    d = nested_source()

    def walk(x, prefix=()):
        for k, v in x.items():
            if isinstance(v, dict):
                yield from walk(v, prefix + (k,))
            else:
                yield prefix + (k,) if prefix else k

    benchmark(lambda: list(walk(d)))


@bench("items nested")
def test_items_nested_td(benchmark):
    td = TensorDict(nested_source(), [10])
    benchmark(lambda: list(td.items(True, True)))


@bench("items nested")
def test_items_nested_dict(benchmark):
    d = nested_source()

    def walk(x, prefix=()):
        for k, v in x.items():
            if isinstance(v, dict):
                yield from walk(v, prefix + (k,))
            else:
                yield (prefix + (k,) if prefix else k), v

    benchmark(lambda: list(walk(d)))


# ---------------------------------------------------------------- indexing
def batch_source():
    return {f"k{i}": torch.randn(B, 4) for i in range(10)}


INDEXES = {
    "int": 7,
    "slice": slice(100, 600),
    "bool mask": torch.rand(B) > 0.5,
    "long tensor": torch.randint(B, (200,)),
}


@pytest.mark.parametrize("kind", list(INDEXES))
def test_index_td(benchmark, kind):
    benchmark.group = f"index {kind}"
    td = TensorDict(batch_source(), [B])
    idx = INDEXES[kind]
    benchmark(td.__getitem__, idx)


@pytest.mark.parametrize("kind", list(INDEXES))
def test_index_dict(benchmark, kind):
    benchmark.group = f"index {kind}"
    d = batch_source()
    idx = INDEXES[kind]
    benchmark(lambda: {k: v[idx] for k, v in d.items()})


@bench("setitem slice")
def test_setitem_slice_td(benchmark):
    td = TensorDict(batch_source(), [B])
    sub = td[:100].clone()

    def run():
        td[100:200] = sub

    benchmark(run)


@bench("setitem slice")
def test_setitem_slice_dict(benchmark):
    d = batch_source()
    sub = {k: v[:100].clone() for k, v in d.items()}

    def run():
        for k, v in sub.items():
            d[k][100:200] = v

    benchmark(run)


# ---------------------------------------------------------------- stack / split
@bench("stack 100")
def test_stack_td(benchmark):
    tds = [TensorDict({f"k{i}": torch.randn(4) for i in range(10)}, []) for _ in range(100)]
    benchmark(torch.stack, tds, 0)


@bench("stack 100")
def test_stack_dict(benchmark):
    ds = [{f"k{i}": torch.randn(4) for i in range(10)} for _ in range(100)]
    benchmark(lambda: {k: torch.stack([d[k] for d in ds], 0) for k in ds[0]})


@bench("cat 100")
def test_cat_td(benchmark):
    tds = [TensorDict({f"k{i}": torch.randn(2, 4) for i in range(10)}, [2]) for _ in range(100)]
    benchmark(torch.cat, tds, 0)


@bench("cat 100")
def test_cat_dict(benchmark):
    ds = [{f"k{i}": torch.randn(2, 4) for i in range(10)} for _ in range(100)]
    benchmark(lambda: {k: torch.cat([d[k] for d in ds], 0) for k in ds[0]})


@bench("unbind")
def test_unbind_td(benchmark):
    td = TensorDict({f"k{i}": torch.randn(16, 4) for i in range(10)}, [16])
    benchmark(td.unbind, 0)


@bench("unbind")
def test_unbind_dict(benchmark):
    d = {f"k{i}": torch.randn(16, 4) for i in range(10)}

    def run():
        cols = {k: v.unbind(0) for k, v in d.items()}
        return [{k: c[i] for k, c in cols.items()} for i in range(16)]

    benchmark(run)


@bench("split")
def test_split_td(benchmark):
    td = TensorDict(batch_source(), [B])
    benchmark(td.split, 100, 0)


@bench("split")
def test_split_dict(benchmark):
    d = batch_source()

    def run():
        cols = {k: v.split(100, 0) for k, v in d.items()}
        return [{k: c[i] for k, c in cols.items()} for i in range(10)]

    benchmark(run)


# ---------------------------------------------------------------- leaf-wise copies
@bench("to float64")
def test_to_td(benchmark):
    td = TensorDict(batch_source(), [B])
    benchmark(td.to, torch.float64)


@bench("to float64")
def test_to_dict(benchmark):
    d = batch_source()
    benchmark(lambda: {k: v.to(torch.float64) for k, v in d.items()})


@bench("clone")
def test_clone_td(benchmark):
    td = TensorDict(batch_source(), [B])
    benchmark(td.clone)


@bench("clone")
def test_clone_dict(benchmark):
    d = batch_source()
    benchmark(lambda: {k: v.clone() for k, v in d.items()})


@bench("to float64, 100 flat keys")
def test_to_flat_td(benchmark):
    td = TensorDict(flat_source(), [10])
    benchmark(td.to, torch.float64)


@bench("to float64, 100 flat keys")
def test_to_flat_dict(benchmark):
    d = flat_source()
    benchmark(lambda: {k: v.to(torch.float64) for k, v in d.items()})


@bench("clone, 100 flat keys")
def test_clone_flat_td(benchmark):
    td = TensorDict(flat_source(), [10])
    benchmark(td.clone)


@bench("clone, 100 flat keys")
def test_clone_flat_dict(benchmark):
    d = flat_source()
    benchmark(lambda: {k: v.clone() for k, v in d.items()})


@bench("select")
def test_select_td(benchmark):
    td = TensorDict(flat_source(), [10])
    keys = KEYS[::2]
    benchmark(td.select, *keys)


@bench("select")
def test_select_dict(benchmark):
    d = flat_source()
    keys = KEYS[::2]
    benchmark(lambda: {k: d[k] for k in keys})


@bench("exclude")
def test_exclude_td(benchmark):
    td = TensorDict(flat_source(), [10])
    keys = KEYS[::2]
    benchmark(td.exclude, *keys)


@bench("exclude")
def test_exclude_dict(benchmark):
    d = flat_source()
    keys = set(KEYS[::2])
    benchmark(lambda: {k: v for k, v in d.items() if k not in keys})


@bench("flatten_keys")
def test_flatten_keys_td(benchmark):
    td = TensorDict(nested_source(), [10])
    benchmark(td.flatten_keys, ".")


@bench("flatten_keys")
def test_flatten_keys_dict(benchmark):
    d = nested_source()

    def flat(x, prefix, out):
        for k, v in x.items():
            if isinstance(v, dict):
                flat(v, prefix + k + ".", out)
            else:
                out[prefix + k] = v
        return out

    benchmark(lambda: flat(d, "", {}))


@bench("unflatten_keys")
def test_unflatten_keys_td(benchmark):
    td = TensorDict(nested_source(), [10]).flatten_keys(".")
    benchmark(td.unflatten_keys, ".")


@bench("unflatten_keys")
def test_unflatten_keys_dict(benchmark):
    def flat(x, prefix, out):
        for k, v in x.items():
            if isinstance(v, dict):
                flat(v, prefix + k + ".", out)
            else:
                out[prefix + k] = v
        return out

    d = flat(nested_source(), "", {})

    def unflat():
        out = {}
        for k, v in d.items():
            parts = k.split(".")
            node = out
            for p in parts[:-1]:
                node = node.setdefault(p, {})
            node[parts[-1]] = v
        return out

    benchmark(unflat)


@bench("update 50 into 100")
def test_update_td(benchmark):
    td = TensorDict(flat_source(), [10])
    other = TensorDict({k: torch.ones(10, 3) for k in KEYS[:50]}, [10])
    benchmark(td.update, other)


@bench("update 50 into 100")
def test_update_dict(benchmark):
    d = flat_source()
    other = {k: torch.ones(10, 3) for k in KEYS[:50]}

    def run():
        for k, v in other.items():
            if v.shape[:1] != (10,):
                raise RuntimeError
            d[k] = v

    benchmark(run)


SHAPE_OPS = {
    "reshape": (lambda td: td.reshape(-1), lambda t: t.reshape(-1, *t.shape[2:])),
    "view": (lambda td: td.view(-1), lambda t: t.view(-1, *t.shape[2:])),
    "permute": (lambda td: td.permute(1, 0), lambda t: t.permute(1, 0, *range(2, t.ndim))),
    "unsqueeze": (lambda td: td.unsqueeze(0), lambda t: t.unsqueeze(0)),
}


@pytest.mark.parametrize("op", list(SHAPE_OPS))
def test_shape_op_td(benchmark, op):
    benchmark.group = f"shape {op}"
    td = TensorDict({f"k{i}": torch.randn(10, 10, 4) for i in range(10)}, [10, 10])
    fn = SHAPE_OPS[op][0]
    benchmark(fn, td)


@pytest.mark.parametrize("op", list(SHAPE_OPS))
def test_shape_op_dict(benchmark, op):
    benchmark.group = f"shape {op}"
    d = {f"k{i}": torch.randn(10, 10, 4) for i in range(10)}
    fn = SHAPE_OPS[op][1]
    benchmark(lambda: {k: fn(v) for k, v in d.items()})


# ---------------------------------------------------------------- single get (absolute)
@bench("get single key (absolute, goal < 0.15 us)")
def test_get_single_key_absolute(benchmark):
    td = TensorDict(flat_source(), [10])
    benchmark(td.get, "k3")


# ---------------------------------------------------------------- per-call overheads (issue 21)
# One case per row of the per-call table: the TensorDict call next to the same thing
# written by hand. Where a TensorDict must validate (the batch-size check on a write), the
# baseline does the same check, so the ratio is the price of the container, not of safety.
@bench("construct empty, batch_size=[3, 4]")
def test_construct_empty_td(benchmark):
    benchmark(TensorDict, {}, batch_size=[3, 4])


@bench("construct empty, batch_size=[3, 4]")
def test_construct_empty_dict(benchmark):
    benchmark(dict)


@bench("construct 100 flat keys, batch_size=[]")
def test_construct_flat_nobatch_td(benchmark):
    src = flat_source()
    benchmark(TensorDict, src, batch_size=[])


@bench("construct 100 flat keys, batch_size=[]")
def test_construct_flat_nobatch_dict(benchmark):
    src = flat_source()
    benchmark(dict, src)


@bench("setitem single key, overwriting")
def test_setitem_single_td(benchmark):
    td = TensorDict(flat_source(), [10])
    v = torch.zeros(10, 3)

    def run():
        td["k7"] = v

    benchmark(run)


@bench("setitem single key, overwriting")
def test_setitem_single_dict(benchmark):
    d = flat_source()
    v = torch.zeros(10, 3)

    def run():
        if v.shape[:1] != (10,):
            raise RuntimeError
        d["k7"] = v

    benchmark(run)


@bench("set single key")
def test_set_single_td(benchmark):
    td = TensorDict(flat_source(), [10])
    v = torch.zeros(10, 3)
    benchmark(td.set, "k7", v)


@bench("set single key")
def test_set_single_dict(benchmark):
    d = flat_source()
    v = torch.zeros(10, 3)

    def set_(k, v):
        if v.shape[:1] != (10,):
            raise RuntimeError
        d[k] = v

    benchmark(set_, "k7", v)


@bench("lazy_stack 100")
def test_lazy_stack_td(benchmark):
    from tensordict import lazy_stack

    tds = [TensorDict({f"k{i}": torch.randn(4) for i in range(10)}, []) for _ in range(100)]
    benchmark(lazy_stack, tds, 0)


@bench("lazy_stack 100")
def test_lazy_stack_dict(benchmark):
    ds = [{f"k{i}": torch.randn(4) for i in range(10)} for _ in range(100)]
    benchmark(list, ds)


@bench("items 100 flat keys")
def test_items_flat_td(benchmark):
    td = TensorDict(flat_source(), [10])
    benchmark(lambda: list(td.items()))


@bench("items 100 flat keys")
def test_items_flat_dict(benchmark):
    d = flat_source()
    benchmark(lambda: list(d.items()))


def small_nested():
    return {"a": torch.zeros(3, 2), "b": {"c": torch.zeros(3), "d": torch.zeros(3, 4)}}


@bench("pytree flatten + unflatten, 3 leaves")
def test_pytree_roundtrip_td(benchmark):
    from torch.utils._pytree import tree_flatten, tree_unflatten

    td = TensorDict(small_nested(), [3])

    def run():
        leaves, spec = tree_flatten(td)
        return tree_unflatten(leaves, spec)

    benchmark(run)


@bench("pytree flatten + unflatten, 3 leaves")
def test_pytree_roundtrip_dict(benchmark):
    from torch.utils._pytree import tree_flatten, tree_unflatten

    d = small_nested()

    def run():
        leaves, spec = tree_flatten(d)
        return tree_unflatten(leaves, spec)

    benchmark(run)


@bench("set inplace 21-name key")
def test_nested_set_inplace_td(benchmark):
    td = TensorDict(nested_source(), [10])
    v = torch.ones(10, 3)
    benchmark(td.set_, DEEP, v)


@bench("set inplace 21-name key")
def test_nested_set_inplace_dict(benchmark):
    d = nested_source()
    v = torch.ones(10, 3)

    def set_():
        x = d
        for k in DEEP[:-1]:
            x = x[k]
        x[DEEP[-1]].copy_(v)

    benchmark(set_)


@bench("select 10 of 100")
def test_select_10_td(benchmark):
    td = TensorDict(flat_source(), [10])
    keys = KEYS[::10]
    benchmark(td.select, *keys)


@bench("select 10 of 100")
def test_select_10_dict(benchmark):
    d = flat_source()
    keys = KEYS[::10]
    benchmark(lambda: {k: d[k] for k in keys})
