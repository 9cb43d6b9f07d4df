"""The actors' CPU policy, rebuilt from the learner's PolicyWeights messages."""

from __future__ import annotations

import threading

import numpy as np
import torch
import torch.nn.functional as F

from herd.proto import codec
from herd.proto import herd_pb2 as pb

_acting = threading.local()


def _one_thread() -> None:
    """OpenMP's thread count is per thread: each thread that acts gets one, set once. Outside
    Ray (which sets OMP_NUM_THREADS for its workers) a thread would otherwise get a team of one
    thread per core that spins between calls: a whole extra core per actor (bench/actor_cost.py)."""
    if not getattr(_acting, "one", False):
        torch.set_num_threads(1)
        _acting.one = True


class PolicyNet(torch.nn.Module):
    """The policy network of a PolicyWeights message (any layout, observation normalization
    included) as a torch module: observations -> (pre-tanh mean, log_std). The actors act with
    it and `herd export` traces it, so an exported policy is this very computation. "conv"
    reads stacked uint8 frames [N, S*C, H, W]; the others flat float32 observations."""

    def __init__(self, weights: pb.PolicyWeights):
        super().__init__()
        named = {name: torch.from_numpy(a.copy()) for name, a in codec.unpack_weights(weights)}
        self.arch = weights.arch or "mlp"
        if self.arch == "mlp":
            arrays = list(named.values())
            if len(arrays) % 2 or not arrays:
                raise ValueError("PolicyWeights must hold (weight, bias) pairs")
            self.layers = list(zip(arrays[0::2], arrays[1::2]))
        elif self.arch == "residual":
            try:
                def pair(k):
                    return named[f"{k}.weight"], named[f"{k}.bias"]

                n = len({k.split(".")[0] for k in named if k.startswith("b")})
                self.inp, self.out_norm, self.head = pair("in"), pair("out_norm"), pair("head")
                self.blocks = [(pair(f"b{i}.norm"), pair(f"b{i}.fc1"), pair(f"b{i}.fc2")) for i in range(n)]
            except KeyError as e:
                raise ValueError(f"residual PolicyWeights lack tensor {e}") from None
        elif self.arch == "conv":
            self._conv_layout(named, list(weights.conv_strides))
        else:
            raise ValueError(f"PolicyWeights.arch {weights.arch!r} is not 'mlp', 'residual' or 'conv'")
        self.obs_mean = self.obs_std = None
        if len(weights.obs_mean):
            self.obs_mean = torch.tensor(list(weights.obs_mean), dtype=torch.float32)
            self.obs_std = torch.tensor(list(weights.obs_std), dtype=torch.float32)
        self.obs_clip = weights.obs_clip

    def _conv_layout(self, named: dict, strides: list[int]) -> None:
        def count(prefix):
            return sum(1 for k in named if k.startswith(prefix) and k.endswith(".weight")
                       and k[len(prefix):-len(".weight")].isdigit())

        try:
            self.convs = [(named[f"conv{i}.weight"], named[f"conv{i}.bias"]) for i in range(count("conv"))]
            self.trunk = (named["trunk.weight"], named["trunk.bias"])
            self.trunk_norm = (named["trunk_norm.weight"], named["trunk_norm.bias"])
            # the head behind the trunk: an MLP like the "mlp" layout's
            self.layers = [(named[f"fc{i}.weight"], named[f"fc{i}.bias"]) for i in range(count("fc"))]
        except KeyError as e:
            raise ValueError(f"conv PolicyWeights lack tensor {e}") from None
        if not self.convs or not self.layers or len(strides) != len(self.convs):
            raise ValueError(f"conv PolicyWeights need conv and fc layers and one stride per conv "
                             f"layer ({len(self.convs)} conv, {len(self.layers)} fc, strides {strides})")
        self.strides = strides

    def _encode(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(torch.float32) / 255.0 - 0.5
        for (w, b), stride in zip(self.convs, self.strides):
            x = F.relu(F.conv2d(x, w, b, stride=stride))
        x = F.linear(x.flatten(1), *self.trunk)
        return torch.tanh(F.layer_norm(x, self.trunk_norm[0].shape, *self.trunk_norm))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.arch == "conv":
            x = self._encode(x)
        elif self.obs_mean is not None:
            x = (x - self.obs_mean) / self.obs_std
            if self.obs_clip > 0:
                x = x.clamp(-self.obs_clip, self.obs_clip)
        if self.arch in ("mlp", "conv"):
            last = len(self.layers) - 1
            for i, (w, b) in enumerate(self.layers):
                x = F.linear(x, w, b)
                if i < last:
                    x = F.relu(x)
        else:
            x = F.linear(x, *self.inp)
            for norm, fc1, fc2 in self.blocks:
                h = F.layer_norm(x, norm[0].shape, *norm)  # a static shape: traceable
                x = x + F.linear(F.relu(F.linear(h, *fc1)), *fc2)
            x = F.linear(F.layer_norm(x, self.out_norm[0].shape, *self.out_norm), *self.head)
        mean, log_std = x.chunk(2, dim=-1)
        return mean, log_std


class MLPPolicy:
    """The tanh-Gaussian policy as the contract in herd.proto describes it (any layout,
    observation normalization included); inference only. A "conv" policy acts on stacked
    uint8 frames [N, S*C, H, W]."""

    def __init__(self, weights: pb.PolicyWeights, low: np.ndarray, high: np.ndarray):
        self.net = PolicyNet(weights)
        self.arch = self.net.arch
        self.version = weights.version
        self.log_std_range = (weights.log_std_min, weights.log_std_max)
        self.scale = torch.from_numpy((np.asarray(high, np.float32) - low) / 2)
        self.bias = torch.from_numpy((np.asarray(high, np.float32) + low) / 2)

    @torch.inference_mode()
    def act(self, obs: np.ndarray, deterministic: bool = False,
            generator: torch.Generator | None = None) -> np.ndarray:
        """Actions for a batch of observations; the exploration noise comes from `generator`
        (the actor's seeded one) or, without one, torch's global generator."""
        _one_thread()
        dtype = np.uint8 if self.arch == "conv" else np.float32
        mean, log_std = self.net(torch.from_numpy(np.ascontiguousarray(obs, dtype)))
        if not deterministic:
            std = log_std.clamp(*self.log_std_range).exp()
            mean = mean + std * torch.randn(mean.shape, generator=generator)
        return (torch.tanh(mean) * self.scale + self.bias).numpy()
