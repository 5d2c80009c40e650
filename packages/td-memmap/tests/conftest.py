import os

import pytest
import torch

from tensordict.testing import available_devices

_DEVICES = available_devices()


@pytest.fixture(params=_DEVICES or [pytest.param("cuda", marks=pytest.mark.skip(reason="no GPU"))])
def device(request):
    return torch.device(request.param)


def rss_kib() -> int:
    """Resident set size of this process, from /proc/self/status (KiB)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def allocated_bytes(path) -> int:
    """Disk blocks actually allocated for a file (sparse files allocate none)."""
    return os.stat(path).st_blocks * 512
