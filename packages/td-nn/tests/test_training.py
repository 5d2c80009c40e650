"""A training loop through TensorDictSequential reduces the loss of a regression."""

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential


def test_regression_loss_decreases():
    torch.manual_seed(0)
    x = torch.randn(256, 4)
    target = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * torch.randn(256, 1)
    data = TensorDict(x=x, target=target, batch_size=[256])
    model = TensorDictSequential(
        TensorDictModule(nn.Sequential(nn.Linear(4, 16), nn.Tanh()), in_keys=["x"], out_keys=["hidden"]),
        TensorDictModule(nn.Linear(16, 1), in_keys=["hidden"], out_keys=["prediction"]),
    )
    loss_module = TensorDictModule(nn.MSELoss(), in_keys=["prediction", "target"], out_keys=["loss"], inplace=False)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(6):
        for batch in data.split(32):
            batch = model(batch)
            loss = loss_module(batch)["loss"]
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
    assert sum(losses[-4:]) / 4 < 0.25 * sum(losses[:4]) / 4
    initial = losses[0]
    final = loss_module(model(data.clone()))["loss"].item()
    assert final < 0.05 * initial, (initial, final)
