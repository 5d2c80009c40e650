"""Test helpers shared by the sibling test suites (importable in ``--import-mode=importlib``).

``available_devices()`` is what every package's ``device`` fixture iterates over:
``cpu`` always, ``cuda`` when a GPU is present. The nox test sessions set
``TD_TEST_DEVICE`` to ``cpu`` or ``cuda`` so that each session runs one device.

``assert_allclose_td`` and ``assert_close`` compare TensorDicts leaf by leaf (upstream
tensordict's ``tensordict.testing`` names; also importable from ``tensordict``).

:mod:`tensordict.testing.strategies` holds the hypothesis strategies and profiles of the
property tests (it imports ``hypothesis``; this package does not).
"""

from __future__ import annotations

import os
import socket

import torch

from tensordict._assert import assert_allclose_td, assert_close

__all__ = ["assert_allclose_td", "assert_close", "available_devices", "free_port"]


def available_devices() -> list[str]:
    """Devices to run device-aware tests on (honours ``TD_TEST_DEVICE``).

    A GPU is named with its index (``"cuda:0"``, the current device), as a TensorDict
    records it: ``TensorDict(device="cuda").device == torch.device("cuda:0")``.
    """
    wanted = os.environ.get("TD_TEST_DEVICE")
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices.append(f"cuda:{torch.cuda.current_device()}")
    if wanted:
        return [d for d in devices if d == wanted or d.split(":")[0] == wanted]
    return devices


def free_port() -> int:
    """A free TCP port on 127.0.0.1, chosen at run time."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def __getattr__(name: str) -> object:
    # test classes that live in sibling distributions (imported on first use)
    if name == "MyDistData":
        try:
            from tensordict.tensorclass.testing import MyDistData
        except ImportError as err:
            msg = "tensordict.testing.MyDistData is provided by td-tensorclass: pip install td-tensorclass"
            raise ImportError(msg) from err
        return MyDistData
    msg = f"module 'tensordict.testing' has no attribute {name!r}"
    raise AttributeError(msg)
