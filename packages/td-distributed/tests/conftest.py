import os
import sys

import pytest
import torch

from tensordict.testing import available_devices

# the helper modules next to the tests (_dist_harness, _jobs) are imported by name,
# also in the spawned/forked rank processes
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

_DEVICES = available_devices()


@pytest.fixture(params=_DEVICES or [pytest.param("cuda", marks=pytest.mark.skip(reason="no GPU"))])
def device(request):
    return torch.device(request.param)
