"""MemoryMappedTensor.from_filename(mode=) as tensordict 0.15.3 (issue 31): "r" maps
copy-on-write, "r+" shared; checked with the same calls on 0.15.3."""

import pytest
import torch

from tensordict import MemoryMappedTensor


def test_from_filename_mode(tmp_path):
    path = str(tmp_path / "x.memmap")
    MemoryMappedTensor.from_tensor(torch.arange(6), filename=path)
    private = MemoryMappedTensor.from_filename(path, torch.int64, (2, 3), mode="r")
    private.fill_(7)
    assert MemoryMappedTensor.from_filename(path, torch.int64, (2, 3)).tolist() == [[0, 1, 2], [3, 4, 5]]
    shared = MemoryMappedTensor.from_filename(path, torch.int64, (2, 3), mode="r+")
    shared.fill_(3)
    assert MemoryMappedTensor.from_filename(path, torch.int64, (2, 3)).tolist() == [[3, 3, 3], [3, 3, 3]]
    default = MemoryMappedTensor.from_filename(path, torch.int64, (2, 3))  # writable file: shared
    default.fill_(1)
    assert MemoryMappedTensor.from_filename(path, torch.int64, (6,)).tolist() == [1] * 6
    with pytest.raises(ValueError, match="mode"):
        MemoryMappedTensor.from_filename(path, torch.int64, (2, 3), mode="w")
