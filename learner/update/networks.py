"""SAC networks: a tanh-Gaussian actor and n_q critics evaluated as one batched matmul each.

Two layouts, chosen per network in LearnerConfig (actor_arch, critic_arch):
- 'mlp': Linear + ReLU layers (hidden_sizes), the plain SAC networks;
- 'residual': Linear in -> blocks of x + fc2(relu(fc1(LayerNorm(x)))) -> LayerNorm -> head
  (the pre-norm residual MLP of SimBa / BRO; the norms keep features bounded as the critic
  grows wide and deep, which plain MLPs need target tricks for).

Feature widths that reach a matmul are padded to multiples of 8 (obs 348 -> 352, critic
input 352 + 17 -> 376, actor head 34 -> 40): cuBLAS falls back to slow align-1 kernels for
bf16 rows that are not 16-byte aligned. Pad weights start at zero and, fed zeros, stay
there; `wire_tensors` slices them off, so the actors see the unpadded layout.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from herd.learner.replay.row_layout import pad8


def _uniform_(t: torch.Tensor, fan_in: int) -> torch.Tensor:
    """nn.Linear's default init, on the true (unpadded) fan-in."""
    bound = 1 / math.sqrt(fan_in)
    return t.uniform_(-bound, bound)


class Actor(nn.Module):
    """obs -> (mean, log_std); the layouts the wire contract (PolicyWeights.arch) describes."""

    def __init__(self, obs_dim, action_dim, hidden, action_low, action_high, log_std_range,
                 arch: str = "mlp", width: int = 256, blocks: int = 1, expansion: int = 2):
        super().__init__()
        self.obs_dim, self.action_dim, self.in_dim = obs_dim, action_dim, pad8(obs_dim)
        self.arch = arch
        out = pad8(2 * action_dim)
        if arch == "mlp":
            sizes = (self.in_dim, *hidden)
            self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(sizes))
            self.head = nn.Linear(sizes[-1], out)
        else:
            self.inp = nn.Linear(self.in_dim, width)
            self.blocks = nn.ModuleList(
                nn.ModuleDict({"norm": nn.LayerNorm(width), "fc1": nn.Linear(width, expansion * width),
                               "fc2": nn.Linear(expansion * width, width)})
                for _ in range(blocks)
            )
            self.out_norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, out)
        with torch.no_grad():  # the true fan-in for the first layer; pads at zero
            first = self.layers[0] if arch == "mlp" else self.inp
            _uniform_(first.weight, obs_dim)
            _uniform_(first.bias, obs_dim)
            first.weight[:, obs_dim:] = 0
            self.head.weight[2 * action_dim :] = 0
            self.head.bias[2 * action_dim :] = 0
        low = torch.as_tensor(np.asarray(action_low, np.float32))
        high = torch.as_tensor(np.asarray(action_high, np.float32))
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("bias", (high + low) / 2)
        # Constant part of the log-density, folded once here instead of on every update:
        # the Gaussian normaliser and the affine rescale of the squashed action.
        const = -0.5 * math.log(2 * math.pi) * low.numel() - torch.log((high - low) / 2).sum()
        self.register_buffer("log_prob_const", const.reshape(()))
        self.log_std_min, self.log_std_max = log_std_range

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        if self.arch == "mlp":
            x = obs
            for layer in self.layers:
                x = torch.relu(layer(x))
            return x
        x = self.inp(obs)
        for b in self.blocks:
            x = x + b["fc2"](torch.relu(b["fc1"](b["norm"](x))))
        return self.out_norm(x)

    def forward(self, obs: torch.Tensor):
        if obs.shape[-1] != self.in_dim:  # unpadded callers (the learner passes padded rows)
            obs = F.pad(obs, (0, self.in_dim - obs.shape[-1]))
        out = self.head(self.features(obs)).float()
        a = self.action_dim
        return out[..., :a], out[..., a : 2 * a].clamp(self.log_std_min, self.log_std_max)

    def sample(self, obs: torch.Tensor):
        """Reparameterised tanh-Gaussian sample and its log-probability, for any leading shape
        (the update passes [batch, 2, obs_dim]).
        """
        mean, log_std = self(obs)
        noise = torch.randn_like(mean)
        pre = mean + log_std.exp() * noise
        # Gaussian log-density plus the tanh change of variables in the stable softplus form:
        # log(1 - tanh(x)^2) = 2 * (log 2 - x - softplus(-2x)). One sum instead of three.
        per_dim = -0.5 * noise.square() - log_std - 2 * (
            math.log(2) - pre - nn.functional.softplus(-2 * pre)
        )
        log_prob = per_dim.sum(-1) + self.log_prob_const
        return torch.tanh(pre) * self.scale + self.bias, log_prob

    def wire_tensors(self) -> dict[str, np.ndarray]:
        """Weights by the wire names of PolicyWeights (herd.proto), pads sliced off."""
        def arr(t):
            return t.detach().float().cpu().numpy().copy()

        out = {}
        a2 = 2 * self.action_dim
        if self.arch == "mlp":
            for i, layer in enumerate(self.layers):
                w = layer.weight[:, : self.obs_dim] if i == 0 else layer.weight
                out[f"l{i}.weight"], out[f"l{i}.bias"] = arr(w), arr(layer.bias)
            n = len(self.layers)
            out[f"l{n}.weight"], out[f"l{n}.bias"] = arr(self.head.weight[:a2]), arr(self.head.bias[:a2])
            return out
        out["in.weight"], out["in.bias"] = arr(self.inp.weight[:, : self.obs_dim]), arr(self.inp.bias)
        for i, b in enumerate(self.blocks):
            for part in ("norm", "fc1", "fc2"):
                out[f"b{i}.{part}.weight"] = arr(b[part].weight)
                out[f"b{i}.{part}.bias"] = arr(b[part].bias)
        out["out_norm.weight"], out["out_norm.bias"] = arr(self.out_norm.weight), arr(self.out_norm.bias)
        out["head.weight"], out["head.bias"] = arr(self.head.weight[:a2]), arr(self.head.bias[:a2])
        return out


class StackedLinear(nn.Module):
    """n_q independent Linear layers as one [n_q, in, out] weight: one baddbmm for all."""

    def __init__(self, n_q: int, fan_in: int, fan_out: int, true_fan_in: int | None = None):
        super().__init__()
        fan = true_fan_in or fan_in
        self.weight = nn.Parameter(_uniform_(torch.empty(n_q, fan_in, fan_out), fan))
        self.bias = nn.Parameter(_uniform_(torch.empty(n_q, 1, fan_out), fan))

    def forward(self, x: torch.Tensor, detach: bool = False) -> torch.Tensor:
        w, b = (self.weight.detach(), self.bias.detach()) if detach else (self.weight, self.bias)
        return torch.baddbmm(b, x, w)  # autocast picks the dtype


class StackedLayerNorm(nn.Module):
    """LayerNorm over the last dim with a gain and bias per stacked network."""

    def __init__(self, n_q: int, width: int):
        super().__init__()
        self.width = width
        self.weight = nn.Parameter(torch.ones(n_q, 1, width))
        self.bias = nn.Parameter(torch.zeros(n_q, 1, width))

    def forward(self, x: torch.Tensor, detach: bool = False) -> torch.Tensor:
        w, b = (self.weight.detach(), self.bias.detach()) if detach else (self.weight, self.bias)
        return F.layer_norm(x, (self.width,)) * w + b


class Critic(nn.Module):
    """n_q Q-networks (twin by default) of one layout, each output `out_dim` wide
    (1: a Q-value; num_atoms: the logits of a categorical return distribution)."""

    def __init__(self, obs_dim, action_dim, hidden, n_q: int = 2, out_dim: int = 1,
                 arch: str = "mlp", width: int = 512, blocks: int = 2, expansion: int = 2):
        super().__init__()
        self.obs_dim, self.obs_in = obs_dim, pad8(obs_dim)
        cat = self.obs_in + action_dim
        self.in_dim = pad8(cat)
        self.tail = self.in_dim - cat
        self.register_buffer("zeros", torch.zeros(1, max(self.tail, self.obs_in - obs_dim, 1)))
        self.n_q, self.out_dim, self.arch = n_q, out_dim, arch
        true_in = obs_dim + action_dim
        if arch == "mlp":
            sizes = (self.in_dim, *hidden)
            self.layers = nn.ModuleList(
                StackedLinear(n_q, a, b, true_in if i == 0 else None)
                for i, (a, b) in enumerate(itertools.pairwise(sizes))
            )
            self.head = StackedLinear(n_q, sizes[-1], out_dim)
            first = self.layers[0]
        else:
            self.inp = StackedLinear(n_q, self.in_dim, width, true_in)
            self.blocks = nn.ModuleList(
                nn.ModuleList([StackedLayerNorm(n_q, width), StackedLinear(n_q, width, expansion * width),
                               StackedLinear(n_q, expansion * width, width)])
                for _ in range(blocks)
            )
            self.out_norm = StackedLayerNorm(n_q, width)
            self.head = StackedLinear(n_q, width, out_dim)
            first = self.inp
        with torch.no_grad():  # zero rows for the obs pad and the tail pad
            first.weight[:, obs_dim : self.obs_in] = 0
            first.weight[:, cat:] = 0

    def forward(self, obs: torch.Tensor, action: torch.Tensor, detach_weights: bool = False) -> torch.Tensor:
        """[n_q, batch] Q-values (out_dim 1) or [n_q, batch, out_dim] logits, in fp32.

        detach_weights: the actor's loss needs dQ/daction only; detached weights spare the
        backward pass the weight-gradient matmuls it would otherwise compute and throw away.
        """
        lead = obs.shape[:-1]
        parts = [obs]
        if obs.shape[-1] != self.obs_in:
            parts.append(self.zeros[:, : self.obs_in - obs.shape[-1]].expand(*lead, -1))
        parts.append(action)
        if self.tail:
            parts.append(self.zeros[:, : self.tail].expand(*lead, -1))
        x = torch.cat(parts, dim=-1).unsqueeze(0).expand(self.n_q, -1, -1)
        d = detach_weights
        if self.arch == "mlp":
            for layer in self.layers:
                x = torch.relu(layer(x, d))
        else:
            x = self.inp(x, d)
            for norm, fc1, fc2 in self.blocks:
                x = x + fc2(torch.relu(fc1(norm(x, d), d)), d)
            x = self.out_norm(x, d)
        out = self.head(x, d).float()
        return out.squeeze(-1) if self.out_dim == 1 else out
