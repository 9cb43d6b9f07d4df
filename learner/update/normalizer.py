"""Running mean and variance on the device, updated inside the captured update.

The statistics are merged from every sampled batch (Chan et al.'s parallel variance), so they
track the distribution the networks train on: the replay ring's. The count saturates at
`horizon` rows, so older batches fade and the statistics follow a ring whose contents drift.
Everything is a device tensor updated in place: no host sync, CUDA-graph safe.
"""

from __future__ import annotations

import torch

from herd.learner.update.flat_adam import InPlaceState

EPS = 1e-8


class RunningNorm(InPlaceState):
    STATE = (("mean", "mean"), ("var", "var"), ("count", "count"))

    def __init__(self, dim: int, device, horizon: int):
        self.mean = torch.zeros(dim, device=device)
        self.var = torch.ones(dim, device=device)
        self.count = torch.zeros((), device=device)
        self.horizon = float(horizon)

    @torch.no_grad()
    def update_(self, x: torch.Tensor) -> None:
        """Merge the rows of x [M, dim] into the statistics."""
        x = x.float()
        n = x.shape[0]
        batch_mean = x.mean(0)
        batch_var = x.var(0, unbiased=False)
        w = n / (self.count + n)  # the batch's share of the merged statistics
        delta = batch_mean - self.mean
        self.var.copy_(self.var * (1 - w) + batch_var * w + delta.square() * (w * (1 - w)))
        self.mean.add_(delta * w)
        self.count.copy_((self.count + n).clamp(max=self.horizon))

    def std(self) -> torch.Tensor:
        return (self.var + EPS).sqrt()

    def normalize(self, x: torch.Tensor, clip: float) -> torch.Tensor:
        return ((x - self.mean) / self.std()).clamp(-clip, clip)

    def rms(self) -> torch.Tensor:
        """Root mean square (uncentered): the scale of a quantity whose mean matters too."""
        return (self.var + self.mean.square() + EPS).sqrt()

    def tensors(self) -> list[torch.Tensor]:
        return [self.mean, self.var, self.count]
