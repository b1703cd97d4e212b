"""Image transforms: PIL image -> normalised float tensor ``[C, H, W]`` (``[-1, 1]`` by default)."""
from __future__ import annotations

import math

import numpy as np
import torch
from PIL import Image, ImageFilter
from torchvision.transforms import v2

from crnn.data.easyocr_input import easyocr_resize

INTERPOLATIONS = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}
PAD_MODES = ("batch", "edge", "easyocr")
# Keep-ratio inference (crnn-predict, crnn-eval, the API, exported metadata): the widest resized line in pixels.
# Training caps widths at data.max_width (400 for the Chinese model, ~12 characters); at inference the width follows
# the image up to this cap, so that a long line keeps T = W/4 time steps for its characters.
INFER_MAX_WIDTH = 4096


class ResizeNormalize:
    """Resize a word crop to ``height`` and normalise as ``(pixel / 255 - mean) / std`` (default: ``[-1, 1]``).

    Fixed-width mode stretches every image to ``width``. ``keep_ratio`` keeps the aspect ratio:
    with ``pad="batch"`` the width becomes ``round(w * height / h)`` clamped to ``[min_width, max_width]`` and, with
    ``width_step`` > 1, rounded to the nearest multiple of it (the collate function pads a batch to a common width);
    ``width_scale`` multiplies that width before it is clamped and rounded (reading a line model wider than it trained:
    more time steps per character; ``data.read_width_scale``); with ``pad="edge"`` (clovaai's ``--PAD``)
    it becomes ``ceil(w * height / h)`` capped at ``width`` and the image is right-padded to ``width``
    by repeating its last column. ``pad="easyocr"`` is EasyOCR's recogniser input (see
    :mod:`crnn.data.easyocr_input`): OpenCV-style bilinear to ``height``, then ``interpolation`` (bicubic for
    EasyOCR) where that leaves another size, normalised as EasyOCR does and right-padded by repeating the last
    column to ``ceil(w / h) * height``; a crop that would be wider than ``max_width`` is squeezed to it.
    ``interpolation`` is the resize filter (bilinear | bicubic).
    ``augment`` adds light random colour/blur/affine jitter for training; leave it off for evaluation.
    """

    def __init__(self, height: int = 32, width: int = 100, keep_ratio: bool = False, max_width: int = 400,
                 channels: int = 1, augment: bool = False, min_width: int = 8, *, interpolation: str = "bilinear",
                 mean: float = 0.5, std: float = 0.5, pad: str = "batch", width_step: int = 1,
                 width_scale: float = 1.0) -> None:
        if channels not in (1, 3):
            raise ValueError(f"channels must be 1 (grayscale) or 3 (RGB), got {channels}")
        if height < 1 or width < 1 or min_width < 1 or max_width < min_width:
            raise ValueError(f"bad sizes: height={height} width={width} min_width={min_width} max_width={max_width}")
        if interpolation not in INTERPOLATIONS or pad not in PAD_MODES or not std > 0:
            raise ValueError(f"bad preprocessing: interpolation={interpolation!r} (bilinear | bicubic), "
                             f"pad={pad!r} (batch | edge | easyocr), std={std} (> 0)")
        if width_step < 1:
            raise ValueError(f"width_step must be >= 1, got {width_step}")
        if not width_scale > 0 or (width_scale != 1 and not (keep_ratio and pad == "batch")):
            raise ValueError(f"width_scale={width_scale}: must be > 0, and scales keep-ratio widths (keep_ratio=True, "
                             f"pad='batch') only")
        if pad == "easyocr" and not keep_ratio:
            raise ValueError("pad='easyocr' keeps the aspect ratio: pass keep_ratio=True")
        self.height, self.width = height, width
        self.keep_ratio, self.max_width, self.min_width = keep_ratio, max_width, min_width
        self.channels, self.width_step, self.width_scale = channels, width_step, width_scale
        self.mode = "L" if channels == 1 else "RGB"
        self.augment = light_augmentation() if augment else None
        self.interpolation, self.mean, self.std, self.pad = interpolation, mean, std, pad

    def target_width(self, w: int, h: int) -> int:
        """Resized width (before any edge padding) for an input of size ``w x h``."""
        if not self.keep_ratio:
            return self.width
        if self.pad == "edge":
            return max(1, min(self.width, math.ceil(w * self.height / h)))
        out = min(self.max_width, max(self.min_width, round(w * self.height / h * self.width_scale)))
        q = self.width_step
        return out if q == 1 else min(self.max_width, max(q, q * round(out / q)))

    def __call__(self, img: Image.Image) -> torch.Tensor:
        img = img.convert(self.mode) if img.mode != self.mode else img
        if self.pad == "easyocr":
            return self._easyocr(img)
        img = img.resize((self.target_width(*img.size), self.height), INTERPOLATIONS[self.interpolation])
        if self.augment is not None:
            img = self.augment(img)
        x = to_tensor(img, self.mean, self.std)  # (C, H, w)
        if self.keep_ratio and self.pad == "edge" and x.shape[-1] < self.width:
            x = torch.cat([x, x[..., -1:].expand(-1, -1, self.width - x.shape[-1])], dim=-1)  # (C, H, width)
        return x

    def _easyocr(self, img: Image.Image) -> torch.Tensor:
        """EasyOCR's two resizes, its normalisation and its right padding (the last column repeated)."""
        img, padded = easyocr_resize(img, self.height, INTERPOLATIONS[self.interpolation])
        if padded > self.max_width:  # longer than the cap: squeezed to max_width, as AlignCollate squeezes to imgW
            img, padded = img.resize((self.max_width, self.height), INTERPOLATIONS[self.interpolation]), self.max_width
        if self.augment is not None:
            img = self.augment(img)
        arr = np.asarray(img, dtype=np.float32)  # (H, w) or (H, w, C)
        arr = arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)  # (C, H, w)
        x = torch.from_numpy((np.ascontiguousarray(arr) / np.float32(255) - np.float32(self.mean))
                             / np.float32(self.std))  # torchvision's ToTensor, then sub_(mean).div_(std)
        if x.shape[-1] < padded:
            x = torch.cat([x, x[..., -1:].expand(-1, -1, padded - x.shape[-1])], dim=-1)  # (C, H, padded)
        return x

    def __repr__(self) -> str:
        size = f"keep_ratio, max_width={self.max_width}" if self.keep_ratio else f"width={self.width}"
        if self.keep_ratio and self.width_step > 1:
            size += f", width_step={self.width_step}"
        if self.width_scale != 1:
            size += f", width_scale={self.width_scale:g}"
        if self.pad == "easyocr":
            size = f"EasyOCR's resize and padding, max_width={self.max_width}"
        if self.keep_ratio and self.pad == "edge":
            size = f"keep_ratio, edge-padded to width={self.width}"
        return (f"ResizeNormalize(height={self.height}, {size}, channels={self.channels}, "
                f"{self.interpolation}, mean={self.mean}, std={self.std}, augment={self.augment is not None})")


def to_tensor(img: Image.Image, mean: float = 0.5, std: float = 0.5) -> torch.Tensor:
    """PIL ``L`` or ``RGB`` image -> float32 ``[C, H, W]`` as ``(pixel / 255 - mean) / std`` (default ``[-1, 1]``).

    The arithmetic runs in numpy: for crops this small torch's per-op (and thread-pool)
    overhead costs more than the work itself.
    """
    arr = np.asarray(img, dtype=np.float32)  # (H, W) or (H, W, C)
    arr = arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)  # (C, H, W)
    arr = np.ascontiguousarray(arr)
    if mean == 0.5 and std == 0.5:  # the default, computed exactly as it always was
        arr = arr * np.float32(1 / 127.5) - np.float32(1.0)
    else:
        arr = (arr / np.float32(255) - np.float32(mean)) / np.float32(std)
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
