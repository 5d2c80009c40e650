"""``unsqueeze``/``squeeze`` of a PersistentTensorDict under ``set_lazy_legacy(True)``."""

from __future__ import annotations

import torch

from tensordict import PersistentTensorDict, TensorDict, set_lazy_legacy


def test_legacy_unsqueeze_is_a_live_view_that_writes_into_the_file(tmp_path):
    td = TensorDict({"a": torch.zeros(4, 3, 2)}, [4, 3])
    ptd = PersistentTensorDict.from_dict(td, filename=str(tmp_path / "f.h5"))
    try:
        with set_lazy_legacy(True):
            view = ptd.unsqueeze(0)
            assert view.batch_size == (1, 4, 3)
            view.set("a", torch.ones(1, 4, 3, 2))
            assert (ptd["a"] == 1).all()
            assert view.squeeze(0) is ptd
            assert ptd.squeeze(-1) is ptd  # no dim of size 1
        # outside legacy mode the index-based views are kept
        assert isinstance(ptd.unsqueeze(0), PersistentTensorDict)
    finally:
        ptd.close()
