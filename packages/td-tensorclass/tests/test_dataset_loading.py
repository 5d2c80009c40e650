"""A tensorclass as a map-style dataset (the tensorclass_fashion / tensorclass_imagenet tutorials)."""

import torch
from torch import nn
from torch.utils.data import DataLoader

from tensordict import TensorDict, tensorclass


@tensorclass
class Images:
    images: torch.Tensor
    targets: torch.Tensor


def _images(n=10):
    return Images(images=torch.arange(n * 4.0).view(n, 2, 2), targets=torch.arange(n), batch_size=[n])


def test_getitems_reads_a_list_of_indices_as_one_instance():
    data = _images()
    batch = data.__getitems__([3, 1, 4])
    assert type(batch) is Images and batch.batch_size == (3,)
    assert batch.targets.tolist() == [3, 1, 4]


def test_dataloader_with_identity_collate_yields_batched_instances():
    data = _images(10)
    loader = DataLoader(data, batch_size=4, collate_fn=lambda x: x)
    batches = list(loader)
    assert [type(b) for b in batches] == [Images] * 3
    assert [b.batch_size[0] for b in batches] == [4, 4, 2]
    assert torch.equal(torch.cat([b.targets for b in batches]), data.targets)
    model = nn.Sequential(nn.Flatten(), nn.Linear(4, 3))
    assert model(batches[0].images).shape == (4, 3)


def test_setitem_of_an_item_with_a_leading_unit_dim_fills_the_row():
    # ``ToTensor()`` images are (1, 28, 28); the storage is (N, 28, 28) (``dataset[0][0].squeeze().shape``)
    data = Images(images=torch.zeros(3, 2, 2), targets=torch.zeros(3, dtype=torch.long), batch_size=[3])
    image = torch.full((1, 2, 2), 7.0)
    data[1] = Images(images=image, targets=torch.tensor(5), batch_size=[])
    assert torch.equal(data.images[1], image[0]) and data.targets[1] == 5
    assert (data.images[0] == 0).all() and (data.images[2] == 0).all()
    td = TensorDict(images=torch.zeros(3, 2, 2), targets=torch.zeros(3, dtype=torch.long), batch_size=[3])
    td[2] = TensorDict({"images": image, "targets": 4}, [])
    assert torch.equal(td["images"][2], image[0]) and td["targets"][2] == 4
