"""The demo's data: the ``Digit`` tensorclass and loading images and labels.

``Digit`` lives in an importable module (not in the script run as ``__main__``) so that
the name td-memmap records for it in the store, ``_demo_data.Digit``, resolves in
every process that loads the store.
"""

from __future__ import annotations

import argparse

import torch

from tensordict import PersistentTensorDict, tensorclass

__all__ = ["Digit", "load_data"]


@tensorclass
class Digit:
    """One sample (or, with a batch size, many): the raw image, its label, the model input.

    Attributes:
        image (torch.Tensor): ``[*B, H, W]`` float32 raw intensities.
        label (torch.Tensor): ``[*B]`` int64 class.
        pixels (torch.Tensor): ``[*B, H * W]`` float32, standardised in step 2.
    """

    image: torch.Tensor
    label: torch.Tensor
    pixels: torch.Tensor




def load_data(args: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor, str]:
    """``(images [N, H, W] float32, labels [N] int64, description)``."""
    if args.data is None:
        from sklearn.datasets import load_digits

        digits = load_digits()
        images = torch.as_tensor(digits.images, dtype=torch.float32)
        labels = torch.as_tensor(digits.target, dtype=torch.int64)
        source = "scikit-learn digits"
    else:
        with PersistentTensorDict.from_h5(args.data, mode="r") as h5:
            missing = [k for k in ("images", "labels") if k not in h5.keys()]
            if missing:
                raise ValueError(f"{args.data} lacks the dataset(s) {missing}; it needs 'images' and 'labels'.")
            images = h5.get("images").to(torch.float32)
            labels = h5.get("labels").to(torch.int64)
        if images.ndim == 2:
            side = int(round(images.shape[1] ** 0.5))
            images = images.reshape(len(images), side, -1) if side * side == images.shape[1] else images[:, None]
        if images.ndim != 3 or labels.shape != images.shape[:1] or labels.min() < 0:
            raise ValueError(f"{args.data}: expected images [N, H, W] and labels [N] >= 0, "
                             f"got {list(images.shape)} and {list(labels.shape)}.")
        source = f"{args.data}"
    generator = torch.Generator().manual_seed(args.seed)
    order = torch.randperm(len(labels), generator=generator)
    if args.subset:
        order = order[: args.subset]
    return images[order], labels[order], source
