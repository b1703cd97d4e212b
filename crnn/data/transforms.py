"""Image transforms: PIL image -> normalised float tensor ``[C, H, W]`` in ``[-1, 1]``."""
from __future__ import annotations

import numpy as np
import torch
from PIL import Image, ImageFilter
from torchvision.transforms import v2


class ResizeNormalize:
    """Resize a word crop to ``height`` and normalise to ``[-1, 1]``.

    Fixed-width mode stretches every image to ``width``. ``keep_ratio`` keeps the aspect
    ratio: the width becomes ``round(w * height / h)`` clamped to ``[min_width, max_width]``
    (the collate function pads a batch to a common width). ``augment`` adds light random
    colour/blur/affine jitter for training; leave it off for evaluation.
    """

    def __init__(self, height: int = 32, width: int = 100, keep_ratio: bool = False, max_width: int = 400,
                 channels: int = 1, augment: bool = False, min_width: int = 8) -> None:
        if channels not in (1, 3):
            raise ValueError(f"channels must be 1 (grayscale) or 3 (RGB), got {channels}")
        if height < 1 or width < 1 or min_width < 1 or max_width < min_width:
            raise ValueError(f"bad sizes: height={height} width={width} min_width={min_width} max_width={max_width}")
        self.height, self.width = height, width
        self.keep_ratio, self.max_width, self.min_width = keep_ratio, max_width, min_width
        self.channels = channels
        self.mode = "L" if channels == 1 else "RGB"
        self.augment = light_augmentation() if augment else None

    def target_width(self, w: int, h: int) -> int:
        """Output width for an input of size ``w x h``."""
        if not self.keep_ratio:
            return self.width
        return min(self.max_width, max(self.min_width, round(w * self.height / h)))

    def __call__(self, img: Image.Image) -> torch.Tensor:
        img = img.convert(self.mode) if img.mode != self.mode else img
        img = img.resize((self.target_width(*img.size), self.height), Image.BILINEAR)
        if self.augment is not None:
            img = self.augment(img)
        return to_tensor(img)

    def __repr__(self) -> str:
        size = f"keep_ratio, max_width={self.max_width}" if self.keep_ratio else f"width={self.width}"
        return (f"ResizeNormalize(height={self.height}, {size}, channels={self.channels}, "
                f"augment={self.augment is not None})")


def to_tensor(img: Image.Image) -> torch.Tensor:
    """PIL ``L`` or ``RGB`` image -> float32 ``[C, H, W]`` in ``[-1, 1]``.

    The arithmetic runs in numpy: for crops this small torch's per-op (and thread-pool)
    overhead costs more than the work itself.
    """
    arr = np.asarray(img, dtype=np.float32)  # (H, W) or (H, W, C)
    arr = arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)  # (C, H, W)
    arr = np.ascontiguousarray(arr) * np.float32(1 / 127.5) - np.float32(1.0)
    return torch.from_numpy(arr)


def light_augmentation() -> v2.Transform:
    """Small, label-preserving jitter applied to the resized PIL image."""
    return v2.Compose([
        v2.RandomApply([v2.ColorJitter(brightness=0.3, contrast=0.3, saturation=0.2)], p=0.5),
        v2.RandomApply([PilGaussianBlur(sigma=(0.1, 1.0))], p=0.2),
        v2.RandomApply([v2.RandomAffine(degrees=2, translate=(0.02, 0.05), scale=(0.95, 1.05),
                                        shear=(-8, 8))], p=0.5),
    ])


class PilGaussianBlur(torch.nn.Module):
    """Gaussian blur with a random sigma, done by PIL (v2.GaussianBlur on PIL input is ~50x slower)."""

    def __init__(self, sigma: tuple[float, float] = (0.1, 1.0)) -> None:
        super().__init__()
        self.sigma = sigma

    def forward(self, img: Image.Image) -> Image.Image:
        sigma = torch.empty(1).uniform_(*self.sigma).item()  # torch RNG: seeded per DataLoader worker
        return img.filter(ImageFilter.GaussianBlur(radius=sigma))
