"""Peer networks built from the published layer tables of three CRNN repositories (written here, for tests only).

meijieru/crnn.pytorch (and Sierkinhane/CRNN_Chinese_Characters_Rec, the same network + log_softmax): time-major
output [T, B, K]. clovaai/deep-text-recognition-benchmark None-VGG-BiLSTM-CTC: batch-first output [B, T, K].
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

WIDTHS = (64, 128, 256, 256, 512, 512, 512)


class TimeMajorBiLSTM(nn.Module):
    """meijieru's block: a time-major bidirectional LSTM, then ``embedding`` Linear(2h, out) on every step."""

    def __init__(self, n_in: int, hidden: int, n_out: int) -> None:
        super().__init__()
        self.rnn = nn.LSTM(n_in, hidden, bidirectional=True)
        self.embedding = nn.Linear(2 * hidden, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (T, B, n_in) -> (T, B, n_out)
        y, _ = self.rnn(x)
        t, b, h = y.shape
        return self.embedding(y.reshape(t * b, h)).reshape(t, b, -1)


class MeijieruCRNN(nn.Module):
    """CRNN(imgH=32, nc, nclass, nh): conv0-6 with bias, BN after conv 2/4/6; ``log_softmax`` = Sierkinhane's."""

    def __init__(self, nc: int, nclass: int, nh: int, log_softmax: bool = False) -> None:
        super().__init__()
        cnn = nn.Sequential()

        def conv_relu(i: int, bn: bool) -> None:
            k, p = (2, 0) if i == 6 else (3, 1)
            cnn.add_module(f"conv{i}", nn.Conv2d(nc if i == 0 else WIDTHS[i - 1], WIDTHS[i], k, 1, p))
            if bn:
                cnn.add_module(f"batchnorm{i}", nn.BatchNorm2d(WIDTHS[i]))
            cnn.add_module(f"relu{i}", nn.ReLU(True))

        conv_relu(0, False)
        cnn.add_module("pooling0", nn.MaxPool2d(2, 2))
        conv_relu(1, False)
        cnn.add_module("pooling1", nn.MaxPool2d(2, 2))
        conv_relu(2, True)
        conv_relu(3, False)
        cnn.add_module("pooling2", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
        conv_relu(4, True)
        conv_relu(5, False)
        cnn.add_module("pooling3", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
        conv_relu(6, True)
        self.cnn = cnn
        self.rnn = nn.Sequential(TimeMajorBiLSTM(512, nh, nh), TimeMajorBiLSTM(nh, nh, nclass))
        self.log_softmax = log_softmax

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, nc, 32, W) -> (T, B, nclass)
        conv = self.cnn(x)  # (B, 512, 1, T)
        assert conv.shape[2] == 1
        out = self.rnn(conv.squeeze(2).permute(2, 0, 1))  # (T, B, nclass)
        return F.log_softmax(out, dim=2) if self.log_softmax else out


class BatchFirstBiLSTM(nn.Module):
    """clovaai's block: a batch-first bidirectional LSTM, then ``linear`` Linear(2h, out)."""

    def __init__(self, n_in: int, hidden: int, n_out: int) -> None:
        super().__init__()
        self.rnn = nn.LSTM(n_in, hidden, bidirectional=True, batch_first=True)
        self.linear = nn.Linear(2 * hidden, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, n_in) -> (B, T, n_out)
        y, _ = self.rnn(x)
        return self.linear(y)


class VggExtractor(nn.Module):
    """clovaai's VGG_FeatureExtractor(input_channel, 512): BN only after conv 4/5, (2,1) pools, T = W/4 - 1."""

    def __init__(self, nc: int, out: int = 512) -> None:
        super().__init__()
        c = (out // 8, out // 4, out // 2, out)
        self.ConvNet = nn.Sequential(
            nn.Conv2d(nc, c[0], 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),
            nn.Conv2d(c[0], c[1], 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),
            nn.Conv2d(c[1], c[2], 3, 1, 1), nn.ReLU(True),
            nn.Conv2d(c[2], c[2], 3, 1, 1), nn.ReLU(True), nn.MaxPool2d((2, 1), (2, 1)),
            nn.Conv2d(c[2], c[3], 3, 1, 1, bias=False), nn.BatchNorm2d(c[3]), nn.ReLU(True),
            nn.Conv2d(c[3], c[3], 3, 1, 1, bias=False), nn.BatchNorm2d(c[3]), nn.ReLU(True),
            nn.MaxPool2d((2, 1), (2, 1)),
            nn.Conv2d(c[3], c[3], 2, 1, 0), nn.ReLU(True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ConvNet(x)


class ClovaModel(nn.Module):
    """None-VGG-BiLSTM-CTC: FeatureExtraction, height pooling, SequenceModeling (2 blocks), Prediction Linear."""

    def __init__(self, nc: int, num_class: int, hidden: int = 256, out: int = 512) -> None:
        super().__init__()
        self.FeatureExtraction = VggExtractor(nc, out)
        self.AdaptiveAvgPool = nn.AdaptiveAvgPool2d((None, 1))
        self.SequenceModeling = nn.Sequential(BatchFirstBiLSTM(out, hidden, hidden),
                                              BatchFirstBiLSTM(hidden, hidden, hidden))
        self.Prediction = nn.Linear(hidden, num_class)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, nc, 32, W) -> (B, T, num_class)
        f = self.FeatureExtraction(x)  # (B, 512, 1, T)
        f = self.AdaptiveAvgPool(f.permute(0, 3, 1, 2)).squeeze(3)  # (B, T, 512)
        return self.Prediction(self.SequenceModeling(f).contiguous())


def train_a_little(net: nn.Module, nc: int, num_classes: int, time_major: bool, steps: int = 2,
                   width: int = 32, batch: int = 2, seed: int = 0) -> nn.Module:
    """A few Adam steps of CTC on random images/labels (so BN statistics and every weight move); eval mode after."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    net.train()
    for _ in range(steps):
        x = torch.rand(batch, nc, 32, width, generator=gen) * 2 - 1
        out = net(x)
        lp = (out if time_major else out.transpose(0, 1)).log_softmax(2)  # (T, B, K)
        targets = torch.randint(1, num_classes, (batch, 4), generator=gen)
        loss = F.ctc_loss(lp, targets, torch.full((batch,), lp.shape[0], dtype=torch.long),
                          torch.full((batch,), 4, dtype=torch.long), zero_infinity=True)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()
