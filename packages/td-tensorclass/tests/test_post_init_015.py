"""``@tensorclass(skip_post_init_on_rebuild=True)`` as tensordict 0.15.3 (issue 31):
``__post_init__`` runs in ``__init__`` and ``from_tensordict``, not on rebuilds; the
counts were read from the same calls on 0.15.3."""

import torch

from tensordict import tensorclass


def test_skip_post_init_on_rebuild():
    calls = []

    @tensorclass(skip_post_init_on_rebuild=True)
    class Counted:
        x: torch.Tensor

        def __post_init__(self):
            calls.append(1)

    c = Counted(x=torch.zeros(3), batch_size=[3])
    assert len(calls) == 1
    c[0], c.clone(), torch.stack([c, c]), c.to(torch.float64)
    assert len(calls) == 1
    Counted.from_tensordict(c._tensordict)
    assert len(calls) == 2
    assert Counted._skip_post_init_on_rebuild is True
