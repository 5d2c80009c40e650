"""Fixtures shared by the benchmark suites."""

import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """Runs a module's cases on one intra-op thread (restored afterwards)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
