import pytest
import torch

from tensordict.testing import available_devices

_DEVICES = available_devices()


@pytest.fixture(params=_DEVICES or [pytest.param("cuda", marks=pytest.mark.skip(reason="no GPU"))])
def device(request):
    return torch.device(request.param)
