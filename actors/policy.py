"""The actors' CPU policy, rebuilt from the learner's PolicyWeights messages."""

from __future__ import annotations

import threading

import numpy as np
import torch
import torch.nn.functional as F

from proto import codec
from proto import herd_pb2 as pb

_acting = threading.local()


def _one_thread() -> None:
    """OpenMP's thread count is per thread: each thread that acts gets one, set once. Outside
    Ray (which sets OMP_NUM_THREADS for its workers) a thread would otherwise get a team of one
    thread per core that spins between calls: a whole extra core per actor (bench/actor_cost.py)."""
    if not getattr(_acting, "one", False):
        torch.set_num_threads(1)
        _acting.one = True


class MLPPolicy:
    """tanh-Gaussian MLP as the contract in herd.proto describes it; inference only."""

    def __init__(self, weights: pb.PolicyWeights, low: np.ndarray, high: np.ndarray):
        arrays = [torch.from_numpy(a.copy()) for _, a in codec.unpack_weights(weights)]
        if len(arrays) % 2 or not arrays:
            raise ValueError("PolicyWeights must hold (weight, bias) pairs")
        self.layers = list(zip(arrays[0::2], arrays[1::2]))
        self.version = weights.version
        self.log_std_range = (weights.log_std_min, weights.log_std_max)
        self.scale = torch.from_numpy((np.asarray(high, np.float32) - low) / 2)
        self.bias = torch.from_numpy((np.asarray(high, np.float32) + low) / 2)

    @torch.inference_mode()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        _one_thread()
        x = torch.from_numpy(np.ascontiguousarray(obs, np.float32))
        last = len(self.layers) - 1
        for i, (w, b) in enumerate(self.layers):
            x = F.linear(x, w, b)
            if i < last:
                x = F.relu(x)
        mean, log_std = x.chunk(2, dim=-1)
        if not deterministic:
            std = log_std.clamp(*self.log_std_range).exp()
            mean = mean + std * torch.randn_like(mean)
        return (torch.tanh(mean) * self.scale + self.bias).numpy()
