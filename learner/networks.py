"""SAC networks: a tanh-Gaussian actor and twin critics evaluated as one batched matmul.

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


def pad8(n: int) -> int:
    return -(-n // 8) * 8


class Actor(nn.Module):
    """MLP -> (mean, log_std); the layout the wire contract (PolicyWeights) describes."""

    def __init__(self, obs_dim, action_dim, hidden, action_low, action_high, log_std_range):
        super().__init__()
        self.obs_dim, self.action_dim, self.in_dim = obs_dim, action_dim, pad8(obs_dim)
        sizes = (self.in_dim, *hidden)
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(sizes):
            layers += [nn.Linear(a, b), nn.ReLU()]
        layers.append(nn.Linear(sizes[-1], pad8(2 * action_dim)))
        self.net = nn.Sequential(*layers)
        with torch.no_grad():  # nn.Linear's init with the true fan-in; pads at zero
            first, last = self.net[0], self.net[-1]
            bound = 1 / math.sqrt(obs_dim)
            first.weight.uniform_(-bound, bound)
            first.bias.uniform_(-bound, bound)
            first.weight[:, obs_dim:] = 0
            last.weight[2 * action_dim :] = 0
            last.bias[2 * action_dim :] = 0
        low = torch.as_tensor(np.asarray(action_low, np.float32))
        high = torch.as_tensor(np.asarray(action_high, np.float32))
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("bias", (high + low) / 2)
        # Constant part of the log-density, folded once here instead of on every update:
        # the Gaussian normaliser and the affine rescale of the squashed action.
        const = -0.5 * math.log(2 * math.pi) * low.numel() - torch.log((high - low) / 2).sum()
        self.register_buffer("log_prob_const", const.reshape(()))
        self.log_std_min, self.log_std_max = log_std_range

    def forward(self, obs: torch.Tensor):
        if obs.shape[-1] != self.in_dim:  # unpadded callers (the learner passes padded rows)
            obs = F.pad(obs, (0, self.in_dim - obs.shape[-1]))
        out = self.net(obs).float()
        a = self.action_dim
        return out[..., :a], out[..., a : 2 * a].clamp(self.log_std_min, self.log_std_max)

    def sample(self, obs: torch.Tensor):
        """Reparameterised action and its log-probability (computed in fp32).

        `obs` may carry any leading shape (the learner passes [batch, 2, obs_dim]).
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
        """Linear weights and biases in layer order, as the actors rebuild them."""
        out = {}
        linears = [m for m in self.net if isinstance(m, nn.Linear)]
        for i, layer in enumerate(linears):
            w, b = layer.weight.detach(), layer.bias.detach()
            if i == 0:
                w = w[:, : self.obs_dim]
            if i == len(linears) - 1:
                w, b = w[: 2 * self.action_dim], b[: 2 * self.action_dim]
            out[f"l{i}.weight"] = w.float().cpu().numpy().copy()
            out[f"l{i}.bias"] = b.float().cpu().numpy().copy()
        return out


class TwinCritic(nn.Module):
    """n_q Q-networks stored as stacked weights: each layer is one baddbmm for all of them."""

    def __init__(self, obs_dim, action_dim, hidden, n_q: int = 2):
        super().__init__()
        self.obs_dim, self.obs_in = obs_dim, pad8(obs_dim)
        width = self.obs_in + action_dim
        self.in_dim = pad8(width)
        self.tail = self.in_dim - width
        self.register_buffer("zeros", torch.zeros(1, max(self.tail, self.obs_in - obs_dim, 1)))
        sizes = (self.in_dim, *hidden, 1)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for i, (a, b) in enumerate(itertools.pairwise(sizes)):
            fan_in = obs_dim + action_dim if i == 0 else a
            bound = 1 / math.sqrt(fan_in)  # nn.Linear's init, on the true fan-in
            w = torch.empty(n_q, a, b).uniform_(-bound, bound)
            if i == 0:  # zero rows for the obs pad and the tail pad
                w[:, obs_dim : self.obs_in] = 0
                w[:, width:] = 0
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.empty(n_q, 1, b).uniform_(-bound, bound)))
        self.n_q = n_q

    def forward(
        self, obs: torch.Tensor, action: torch.Tensor, detach_weights: bool = False
    ) -> torch.Tensor:
        """Q-values of shape [n_q, batch].

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
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            if detach_weights:
                w, b = w.detach(), b.detach()
            x = torch.baddbmm(b, x, w)  # autocast picks the dtype
            if i < last:
                x = torch.relu(x)
        return x.squeeze(-1).float()
