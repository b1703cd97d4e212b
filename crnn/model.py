"""CRNN (Shi, Bai & Yao, 2015): CNN backbone -> batch-first sequence -> 2-layer BiLSTM -> per-step logits.

Shapes (B = batch, C = channels, H = 32, W = width, T = time steps, K = classes incl. blank 0):
    images [B, C_in, H, W] -> cnn -> [B, C, 1, T] -> [B, T, C] -> BiLSTM x2 -> [B, T, 2*hidden] -> head -> [B, T, K]

The output is batch-first on purpose: ``nn.DataParallel`` gathers along dim 0, which must be the sample dim.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn

__all__ = ["CRNN", "ResBlock", "VARIANTS", "build_model", "build_model_from", "count_parameters", "scaled_widths"]


@dataclass(frozen=True)
class VggSpec:
    """Channel widths of the seven paper conv layers and the LSTM hidden size."""

    channels: tuple[int, int, int, int, int, int, int]
    hidden: int


VGG_SPECS = {
    "vgg": VggSpec((64, 128, 256, 256, 512, 512, 512), 256),  # the paper's model, ~8.3 M params
    "vgg_small": VggSpec((32, 64, 128, 128, 256, 256, 256), 128),  # ~2.1 M params, for CPU training
}


def _conv(cin: int, cout: int, k: int = 3, p: int = 1, bn: bool = False) -> list[nn.Module]:
    """Conv (+ BatchNorm) + ReLU."""
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, 1, p, bias=not bn)]
    if bn:
        layers.append(nn.BatchNorm2d(cout))
    layers.append(nn.ReLU(inplace=True))
    return layers


class ResBlock(nn.Module):
    """A residual block at one stage's width and resolution: ``x + BN(conv3x3(ReLU(BN(conv3x3(x)))))``.

    The last BatchNorm starts with gamma = beta = 0 (without BatchNorm: the second convolution starts at zero), so a
    block is an exact identity until it trains: inserted into a trained network it changes nothing at first, in train
    and eval mode alike, and a new network starts from its plain path (zero-init residuals, Goyal et al. 2017)."""

    def __init__(self, channels: int, batch_norm: bool = True) -> None:
        super().__init__()
        norm = (lambda: nn.BatchNorm2d(channels)) if batch_norm else nn.Identity
        self.conv1 = nn.Conv2d(channels, channels, 3, 1, 1, bias=not batch_norm)
        self.bn1 = norm()
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=not batch_norm)
        self.bn2 = norm()
        last = self.bn2 if batch_norm else self.conv2
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, C, H, W) -> (B, C, H, W)
        return x + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))


def vgg_backbone(in_channels: int, ch: tuple[int, ...], batch_norm: bool = True, stride8: bool = False,
                 res_blocks: int = 0) -> nn.Sequential:
    """The paper's 7-conv CNN: BN on conv 3/5/7, 2x2 pools then (2,1)-stride pools; H 32 -> 1, W -> W/4 + 1.

    Shapes below for an input [B, C_in, H, W]; H is 32 (the paper's) or 48 (the 48 px candidates, issues 57/60: the
    last convolution leaves H' = 2, which ``CRNN.features`` averages).

    ``stride8``: the third pool also halves the width (W -> W/8, conv 5-7 at half the width): text lines whose
    characters are about as wide as tall (Chinese) get ~4 time steps per character instead of ~8, which halves the
    sequence model, the output layer and CTC - the costly part with thousands of classes.
    ``res_blocks``: that many :class:`ResBlock` after each of the second, third and fourth pools (identities at
    start); 0 keeps the paper's layout, module for module (the layers' indices are those of every vgg checkpoint)."""
    bn = batch_norm
    pool3 = nn.MaxPool2d(2, 2) if stride8 else nn.MaxPool2d((2, 2), (2, 1), (0, 1))
    res = lambda c: [ResBlock(c, bn) for _ in range(res_blocks)]  # noqa: E731
    return nn.Sequential(
        *_conv(in_channels, ch[0]), nn.MaxPool2d(2, 2),  # [B, c0, H/2, W/2]
        *_conv(ch[0], ch[1]), nn.MaxPool2d(2, 2), *res(ch[1]),  # [B, c1, H/4, W/4]
        *_conv(ch[1], ch[2], bn=bn),
        *_conv(ch[2], ch[3]), pool3, *res(ch[3]),  # [B, c3, H/8, W/4+1] (stride8: W/8)
        *_conv(ch[3], ch[4], bn=bn),
        *_conv(ch[4], ch[5]), nn.MaxPool2d((2, 2), (2, 1), (0, 1)), *res(ch[5]),  # [B, c5, H/16, W/4+2] (w8: W/8+1)
        *_conv(ch[5], ch[6], k=2, p=0, bn=bn),  # [B, c6, H/16-1, W/4+1] (stride8: W/8)
    )


def scaled_widths(channels: tuple[int, ...], factor: float) -> tuple[int, ...]:
    """Convolution widths times ``factor``, each rounded to a multiple of 8 (vgg_small x 2 = the paper's vgg)."""
    return tuple(max(8, round(c * factor / 8) * 8) for c in channels)


def vgg_clova_backbone(in_channels: int, batch_norm: bool = True, out: int = 512) -> nn.Sequential:
    """clovaai's None-VGG-BiLSTM-CTC CNN: biased conv 1-4 and 7, BN on conv 5/6, (2,1) pools; W -> W/4 - 1.

    Widths out/8, out/4, out/2, out/2, out, out, out (their ``--output_channel``: 512; EasyOCR's g2 models: 256).
    Its module indices equal clovaai's ``FeatureExtraction.ConvNet`` ones, so its weights map key for key.
    With a 64 px input the last conv leaves H' = 3, which ``CRNN.features`` averages (their AdaptiveAvgPool).
    """
    bn = batch_norm
    c = (out // 8, out // 4, out // 2, out)
    return nn.Sequential(
        *_conv(in_channels, c[0]), nn.MaxPool2d(2, 2),  # [B, c0, H/2, W/2]
        *_conv(c[0], c[1]), nn.MaxPool2d(2, 2),  # [B, c1, H/4, W/4]
        *_conv(c[1], c[2]), *_conv(c[2], c[2]), nn.MaxPool2d((2, 1), (2, 1)),  # [B, c2, H/8, W/4]
        *_conv(c[2], c[3], bn=bn), *_conv(c[3], c[3], bn=bn), nn.MaxPool2d((2, 1), (2, 1)),  # [B, c3, H/16, W/4]
        *_conv(c[3], c[3], k=2, p=0),  # [B, c3, H/16 - 1, W/4 - 1]
    )


def resnet18_backbone(in_channels: int, batch_norm: bool = True) -> nn.Sequential:
    """torchvision ResNet-18 with layers 2-4 striding only in height, so T = ceil(ceil(W/2)/2) ~ W/4."""
    from torchvision.models import resnet18

    net = resnet18(weights=None, norm_layer=None if batch_norm else (lambda c: nn.Identity()))
    if in_channels != 3:
        net.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
    for layer in (net.layer2, net.layer3, net.layer4):
        block = layer[0]
        block.conv1.stride = (2, 1)
        block.downsample[0].stride = (2, 1)
    # [B, 64, 16, W/2] -> maxpool [B, 64, 8, W/4] -> layer2..4 [B, 512, 1, W/4]
    return nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool, net.layer1, net.layer2, net.layer3, net.layer4)


def _vgg_length(width: int) -> int:
    return width // 2 // 2 + 1


def _vgg8_length(width: int) -> int:
    return width // 2 // 2 // 2


def _clova_length(width: int) -> int:
    return width // 2 // 2 - 1


def _resnet_length(width: int) -> int:
    half = (width + 1) // 2
    return (half + 1) // 2


@dataclass(frozen=True)
class Variant:
    """How to build one named model variant."""

    backbone: Callable[[int, bool], nn.Module]
    feat_channels: int
    hidden: int
    length: Callable[[int], int]
    head_proj: bool = False  # the second BiLSTM projects to `hidden` before the head (clovaai/EasyOCR's layout)
    vgg: VggSpec | None = None  # the paper's VGG family: its widths (model.cnn_width scales them) and hidden size
    stride8: bool = False  # VGG family: T = W/8


def _vgg_variant(spec: str, stride8: bool = False) -> Variant:
    """A member of the paper's VGG family, built from its widths (which model.cnn_width and model.res_blocks change)."""
    s = VGG_SPECS[spec]
    return Variant(lambda c, bn: vgg_backbone(c, s.channels, bn, stride8), s.channels[-1], s.hidden,
                   _vgg8_length if stride8 else _vgg_length, vgg=s, stride8=stride8)


VARIANTS: dict[str, Variant] = {
    "vgg": _vgg_variant("vgg"),
    "vgg_small": _vgg_variant("vgg_small"),
    # text lines (Chinese): T = W/8, about 4 steps per square character; same weights as vgg / vgg_small
    "vgg_w8": _vgg_variant("vgg", stride8=True),
    "vgg_small_w8": _vgg_variant("vgg_small", stride8=True),
    "resnet18": Variant(resnet18_backbone, 512, 256, _resnet_length),
    "vgg_clova": Variant(vgg_clova_backbone, 512, 256, _clova_length),  # clovaai deep-text-recognition-benchmark
    # EasyOCR's generation-2 recogniser (english_g2, latin_g2, zh_sim_g2, ...): clovaai's VGG at width 256, both
    # BiLSTM blocks with their projection, then the head Linear(hidden, K); key for key, nothing fused
    "vgg_easyocr": Variant(lambda c, bn: vgg_clova_backbone(c, bn, 256), 256, 256, _clova_length, head_proj=True),
}

MIN_WIDTH = 8


class BiLSTM(nn.Module):
    """One bidirectional LSTM layer followed by a linear projection (the paper's 'deep BiLSTM' building block)."""

    def __init__(self, in_size: int, hidden: int, out_size: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(in_size, hidden, bidirectional=True, batch_first=True)
        self.proj = nn.Linear(2 * hidden, out_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, in) -> (B, T, out)
        y, _ = self.lstm(x)  # (B, T, 2*hidden)
        return self.proj(y)


class CRNN(nn.Module):
    """CRNN returning batch-first logits ``[B, T, num_classes]`` (blank = class 0)."""

    def __init__(self, variant: str, in_channels: int, num_classes: int, hidden: int | None = None,
                 batch_norm: bool = True, cnn_width: float = 1.0, res_blocks: int = 0) -> None:
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"unknown model variant {variant!r}; choose one of {sorted(VARIANTS)}")
        if in_channels not in (1, 3):
            raise ValueError(f"in_channels must be 1 (grayscale) or 3 (RGB), got {in_channels}")
        spec = VARIANTS[variant]
        self.variant = variant
        self.in_channels = in_channels
        self.num_classes = num_classes
        self.hidden = hidden or spec.hidden
        self.batch_norm = batch_norm
        self.cnn_width, self.res_blocks = float(cnn_width), int(res_blocks)
        if self.cnn_width <= 0 or self.res_blocks < 0:
            raise ValueError(f"model.cnn_width must be > 0 and model.res_blocks >= 0, got {cnn_width:g} and "
                             f"{res_blocks}")
        if spec.vgg is None:
            if (self.cnn_width, self.res_blocks) != (1.0, 0):
                raise ValueError(f"model.cnn_width and model.res_blocks apply to the VGG variants "
                                 f"({', '.join(k for k, v in VARIANTS.items() if v.vgg)}), not {variant!r}")
            self.cnn, feat = spec.backbone(in_channels, batch_norm), spec.feat_channels
        else:  # the VGG family from its widths (at cnn_width 1 and no blocks: the variant's own layers, key for key)
            widths = scaled_widths(spec.vgg.channels, self.cnn_width)
            self.cnn = vgg_backbone(in_channels, widths, batch_norm, spec.stride8, self.res_blocks)
            feat = widths[-1]
        self.rnn1 = BiLSTM(feat, self.hidden, self.hidden)
        if spec.head_proj:  # rnn2.lstm + rnn2.proj Linear(2h, h), head Linear(h, K)
            self.rnn2: nn.Module = BiLSTM(self.hidden, self.hidden, self.hidden)
            self.head = nn.Linear(self.hidden, num_classes)
        else:
            self.rnn2 = nn.LSTM(self.hidden, self.hidden, bidirectional=True, batch_first=True)
            self.head = nn.Linear(2 * self.hidden, num_classes)
        self.weights_dtype: torch.dtype | None = None  # hold_weights_in: reading with weights in another dtype

    def hold_weights_in(self, dtype: torch.dtype) -> "CRNN":
        """Hold every weight in ``dtype`` for reading (bfloat16 on a CPU with native bf16 kernels: no per-call casts,
        unlike autocast); ``forward`` casts the images to it and returns float32 logits. ``torch.float32`` undoes it.
        For inference only: training keeps float32 weights (autocast, ``train.amp``)."""
        if not dtype.is_floating_point:
            raise ValueError(f"weights must be a floating-point dtype, got {dtype}")
        self.to(dtype)
        self.weights_dtype = None if dtype == torch.float32 else dtype
        return self

    def output_length(self, width: int | torch.Tensor) -> int | torch.Tensor:
        """Number of time steps T produced for an input of the given width (works on ints and int tensors)."""
        return VARIANTS[self.variant].length(width)

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """CNN part: images [B, C_in, H, W] -> sequence [B, T, C] (batch-first)."""
        if images.shape[-1] < MIN_WIDTH:
            raise ValueError(f"input width {images.shape[-1]} is below the minimum of {MIN_WIDTH} pixels")
        f = self.cnn(images)  # (B, C, H', T)
        if f.shape[2] != 1:
            f = f.mean(dim=2, keepdim=True)  # inputs taller than 32 px: average the leftover height
        return f.squeeze(2).transpose(1, 2)  # (B, T, C)

    def sequence(self, seq: torch.Tensor) -> torch.Tensor:
        """Sequence part: [B, T, C] -> logits [B, T, K]."""
        seq = seq.to(self.head.weight.device)  # no-op unless model-parallel placed the parts on two devices
        y = self.rnn1(seq)  # (B, T, hidden)
        y = self.rnn2(y) if isinstance(self.rnn2, BiLSTM) else self.rnn2(y)[0]  # (B, T, hidden or 2*hidden)
        return self.head(y)  # (B, T, K)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if self.weights_dtype is not None:  # hold_weights_in: low-precision weights, float32 logits
            return self.sequence(self.features(images.to(self.weights_dtype))).float()
        return self.sequence(self.features(images))

    def place(self, cnn_device: torch.device | str, seq_device: torch.device | str) -> "CRNN":
        """Model parallelism: CNN on one device, the recurrent part and head on another."""
        self.cnn.to(cnn_device)
        self.rnn1.to(seq_device)
        self.rnn2.to(seq_device)
        self.head.to(seq_device)
        return self


def build_model(variant: str, in_channels: int, num_classes: int, hidden: int | None = None,
                batch_norm: bool = True, cnn_width: float = 1.0, res_blocks: int = 0) -> CRNN:
    """Build a named CRNN variant (``vgg``, ``vgg_small``, ``resnet18``, ``vgg_clova``, ``vgg_easyocr``);
    ``batch_norm=False`` drops every BN layer; ``cnn_width`` scales a VGG variant's convolution widths and
    ``res_blocks`` inserts that many identity-at-start residual blocks after its middle stages."""
    return CRNN(variant, in_channels, num_classes, hidden, batch_norm, cnn_width, res_blocks)


def build_model_from(m, num_classes: int) -> CRNN:
    """The network a config's ``model`` section describes (a ``crnn.config.ModelConfig``), for ``num_classes``."""
    return build_model(m.variant, m.in_channels, num_classes, m.hidden or None, m.batch_norm, m.cnn_width,
                       m.res_blocks)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)

