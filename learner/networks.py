"""SAC networks: a tanh-Gaussian actor and twin critics evaluated as one batched matmul."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn


class Actor(nn.Module):
    """MLP -> (mean, log_std); the layout the wire contract (PolicyWeights) describes."""

    def __init__(self, obs_dim, action_dim, hidden, action_low, action_high, log_std_range):
        super().__init__()
        sizes = (obs_dim, *hidden)
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        layers.append(nn.Linear(sizes[-1], 2 * action_dim))
        self.net = nn.Sequential(*layers)
        low = torch.as_tensor(np.asarray(action_low, np.float32))
        high = torch.as_tensor(np.asarray(action_high, np.float32))
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("bias", (high + low) / 2)
        self.log_std_min, self.log_std_max = log_std_range

    def forward(self, obs: torch.Tensor):
        mean, log_std = self.net(obs).float().chunk(2, dim=-1)
        return mean, log_std.clamp(self.log_std_min, self.log_std_max)

    def sample(self, obs: torch.Tensor):
        """Reparameterised action and its log-probability (computed in fp32)."""
        mean, log_std = self(obs)
        std = log_std.exp()
        noise = torch.randn_like(mean)
        pre = mean + std * noise
        squashed = torch.tanh(pre)
        log_prob = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        # tanh change of variables, in the numerically stable softplus form
        log_prob = log_prob - (2 * (math.log(2) - pre - nn.functional.softplus(-2 * pre))).sum(-1)
        log_prob = log_prob - torch.log(self.scale).sum()
        return squashed * self.scale + self.bias, log_prob

    def wire_tensors(self) -> dict[str, np.ndarray]:
        """Linear weights and biases in layer order, as the actors rebuild them."""
        out = {}
        for i, layer in enumerate(m for m in self.net if isinstance(m, nn.Linear)):
            out[f"l{i}.weight"] = layer.weight.detach().float().cpu().numpy()
            out[f"l{i}.bias"] = layer.bias.detach().float().cpu().numpy()
        return out


class TwinCritic(nn.Module):
    """n_q Q-networks stored as stacked weights: each layer is one baddbmm for all of them."""

    def __init__(self, obs_dim, action_dim, hidden, n_q: int = 2):
        super().__init__()
        sizes = (obs_dim + action_dim, *hidden, 1)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for a, b in zip(sizes[:-1], sizes[1:]):
            w = torch.empty(n_q, a, b)
            for q in range(n_q):  # the same init nn.Linear uses, per network
                nn.init.kaiming_uniform_(w[q].T, a=math.sqrt(5))
            bound = 1 / math.sqrt(a)
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.empty(n_q, 1, b).uniform_(-bound, bound)))
        self.n_q = n_q

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Q-values of shape [n_q, batch]."""
        x = torch.cat([obs, action], dim=-1).unsqueeze(0).expand(self.n_q, -1, -1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = torch.baddbmm(b, x, w)  # autocast picks the dtype
            if i < last:
                x = torch.relu(x)
        return x.squeeze(-1).float()
