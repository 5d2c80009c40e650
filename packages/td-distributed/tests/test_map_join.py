"""TensorDict.map: per-row results with different keys come back as a lazy stack;
a generator seeds numpy's and Python's global generators in the workers too."""

import _jobs
import torch

from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack


def test_rows_with_different_keys_give_a_lazy_stack():
    td = lazy_stack([TensorDict({"0": torch.tensor(0)}, []), TensorDict({"1": torch.tensor(1)}, [])])
    out = td.map(_jobs.add_two, chunksize=0, num_workers=2, mp_start_method="spawn")
    assert isinstance(out, LazyStackedTensorDict)
    assert out[0]["0"] == 0 and out[1]["1"] == 1 and (out["2"] == 2).all()


def test_generator_seeds_numpy_and_random():
    td = TensorDict(n=torch.zeros(6, dtype=torch.long), p=torch.zeros(6, dtype=torch.long), batch_size=[6])
    outs = []
    for _ in range(2):
        g = torch.Generator().manual_seed(0)
        outs.append(td.map(_jobs.draw_numpy_and_random, num_workers=1, chunksize=1, generator=g, mp_start_method="spawn"))
    assert (outs[0]["n"] == outs[1]["n"]).all() and (outs[0]["p"] == outs[1]["p"]).all()
