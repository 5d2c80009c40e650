

def test_sequential_refuses_plain_module_without_keys():
    import pytest
    from torch import nn

    from tensordict.nn import TensorDictSequential

    with pytest.raises(TypeError, match="in_keys"):
        TensorDictSequential(nn.Linear(2, 2))
