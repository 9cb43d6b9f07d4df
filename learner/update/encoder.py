"""The pixel networks' front: a conv encoder, the trunk behind it, and random-shift augmentation.

DrQ-v2's encoder: stacked uint8 frames read as x / 255 - 0.5, `layers` 3x3 convs of `channels`
each (the first of stride 2, the rest of stride 1), ReLU after each, flattened. Each of the actor
and the critics puts a trunk of its own behind it (Linear -> LayerNorm -> tanh, `feature_dim`
wide); the encoder itself is trained by the critics' loss alone, the actor reads its output
detached. The layout is the wire's PolicyWeights arch "conv" (proto/herd.proto).

`random_shift` is DrQ's augmentation (pad 4 with the edge replicated, crop back at a random
offset per sample) as one gather over the uint8 pixels: fixed shapes, no host sync, so it runs
inside the captured update.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def _orthogonal_(module: nn.Module) -> None:
    """DrQ-v2's init: orthogonal weights (conv gain for ReLU), zero biases."""
    if isinstance(module, nn.Linear):
        nn.init.orthogonal_(module.weight.data)
        module.bias.data.fill_(0.0)
    elif isinstance(module, nn.Conv2d):
        nn.init.orthogonal_(module.weight.data, nn.init.calculate_gain("relu"))
        module.bias.data.fill_(0.0)


class Encoder(nn.Module):
    """[B, S*C, H, W] uint8 -> [B, repr_dim] conv features."""

    def __init__(self, in_channels: int, size: tuple[int, int], channels: int = 32, layers: int = 4,
                 strided: int = 1):
        """`strided`: how many of the first layers have stride 2 (DrQ-v2: 1)."""
        super().__init__()
        if not 1 <= strided <= layers:
            raise ValueError(f"strided layers {strided} must lie in 1..{layers} (the conv layers)")
        self.strides = [2] * strided + [1] * (layers - strided)
        self.convs = nn.ModuleList(
            nn.Conv2d(in_channels if i == 0 else channels, channels, 3, stride=s)
            for i, s in enumerate(self.strides))
        h, w = size
        for s in self.strides:
            h, w = (h - 3) // s + 1, (w - 3) // s + 1
        if h < 1 or w < 1:
            raise ValueError(f"frames of {size[0]}x{size[1]} are too small for {layers} conv layers")
        self.out_hw = (h, w)
        self.repr_dim = channels * h * w
        self.apply(_orthogonal_)

    channels_last = True
    """NHWC on CUDA: cuDNN's tensor-core convs take it without transposes."""
    pad_to = 8
    """On CUDA the first conv reads its input channels zero-padded to a multiple of this (3
    stacked RGB frames are 9 channels, which cuDNN's tensor-core kernels do not take); 1: none."""

    def forward(self, pixels: torch.Tensor, pad_to: int | None = None) -> torch.Tensor:
        pad = (-pixels.shape[1]) % (pad_to or (self.pad_to if pixels.is_cuda else 1))
        if pad:  # extra channels in, zero weights for them: the same convolution
            pixels = F.pad(pixels, (0, 0, 0, 0, 0, pad))
        if pixels.is_cuda and self.channels_last:
            pixels = pixels.contiguous(memory_format=torch.channels_last)
        x = pixels.float() / 255.0 - 0.5
        first, *rest = self.convs
        weight = F.pad(first.weight, (0, 0, 0, 0, 0, pad)) if pad else first.weight
        x = torch.relu(F.conv2d(x, weight, first.bias, first.stride))
        for conv in rest:
            x = torch.relu(conv(x))
        return x.flatten(1)


class Trunk(nn.Module):
    """Conv features -> Linear -> LayerNorm -> tanh: the `feature_dim` inputs of an MLP."""

    def __init__(self, repr_dim: int, feature_dim: int):
        super().__init__()
        self.linear = nn.Linear(repr_dim, feature_dim)
        self.norm = nn.LayerNorm(feature_dim)
        self.apply(_orthogonal_)

    def forward(self, h: torch.Tensor, detach_weights: bool = False) -> torch.Tensor:
        """`detach_weights`: the actor's loss reads the critics' trunk for dQ/da only."""
        lin, norm = self.linear, self.norm
        if detach_weights:
            x = F.linear(h, lin.weight.detach(), lin.bias.detach())
            x = F.layer_norm(x, norm.normalized_shape, norm.weight.detach(), norm.bias.detach())
        else:
            x = norm(lin(h))
        return torch.tanh(x)


def random_shift(pixels: torch.Tensor, pad: int) -> torch.Tensor:
    """Each image of [N, C, H, W] uint8 shifted by its own random (dy, dx) in [-pad, pad], the
    edge pixels repeated where it moved off (pad, replicate, random crop): one gather."""
    if pad <= 0:
        return pixels
    n, c, h, w = pixels.shape
    dev = pixels.device
    shift = torch.randint(0, 2 * pad + 1, (n, 2, 1), device=dev) - pad
    rows = (torch.arange(h, device=dev) + shift[:, 0]).clamp_(0, h - 1)  # [N, H]
    cols = (torch.arange(w, device=dev) + shift[:, 1]).clamp_(0, w - 1)  # [N, W]
    at = (rows.unsqueeze(2) * w + cols.unsqueeze(1)).view(n, 1, h * w).expand(n, c, h * w)
    return pixels.reshape(n, c, h * w).gather(2, at).view(n, c, h, w)
