"""Adam over one flat buffer: parameters are re-homed as views of a single contiguous tensor.

Over one flat buffer Adam's math is plain elementwise work spread over the whole GPU (one
kernel when compiled), and the Polyak update becomes a single `lerp_` over the flat target
(against torch's fused Adam: docs/tried.md#one-flat-adam).
Everything stays on the device (the step count too), so it is CUDA-graph safe.
"""

from __future__ import annotations

import torch
from torch import nn


def flatten_(params: list[torch.Tensor]) -> torch.Tensor:
    """Move `params` into one contiguous fp32 buffer (they become views of it); return it."""
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    offset = 0
    for p in params:
        n = p.numel()
        p.data = flat[offset : offset + n].view_as(p)
        offset += n
    return flat


def adam_flat_(p, grads, m, v, step, lr, beta1: float, beta2: float, eps: float, found_inf=None,
               decay=None):
    """One Adam step on flat `p` (torch.optim.Adam's math); skipped where found_inf > 0.
    `decay` (lr * weight decay, a float or per element; None: none): AdamW's decoupled decay,
    p <- p * (1 - decay) before the step (torch.optim.AdamW's math)."""
    g = torch.cat([x.reshape(-1) for x in grads])
    keep = None if found_inf is None else (found_inf > 0)
    step.add_(1 if keep is None else 1 - keep.to(step.dtype))
    bc1 = 1 - torch.pow(beta1, step)
    bc2 = 1 - torch.pow(beta2, step)
    m_new = torch.lerp(m, g, 1 - beta1)
    v_new = v * beta2 + (1 - beta2) * g * g
    update = (lr / bc1) * m_new / (v_new.sqrt() / bc2.sqrt() + eps)
    if decay is not None:  # folded into the step's subtraction: p - (p * decay + update)
        update = update + p * decay
    if keep is None:
        m.copy_(m_new)
        v.copy_(v_new)
        p.sub_(update)
    else:  # fp16 overflow: leave moments and parameters as they were
        m.copy_(torch.where(keep, m, m_new))
        v.copy_(torch.where(keep, v, v_new))
        p.sub_(torch.where(keep, torch.zeros_like(update), update))


class InPlaceState:
    """State held in device tensors that a captured graph reads at fixed addresses: saved as
    host copies, restored by copying into the same tensors. STATE: (state_dict key, attribute)."""

    STATE: tuple[tuple[str, str], ...] = ()

    def state_dict(self) -> dict:
        return {key: getattr(self, attr).cpu() for key, attr in self.STATE}

    def load_state_dict(self, state: dict) -> None:
        for key, attr in self.STATE:
            getattr(self, attr).copy_(state[key])


class FlatAdam(InPlaceState):
    """Adam (AdamW where a group has weight decay) for parameter groups that share one flat
    buffer; one lr and one weight decay per group: (params, lr) or (params, lr, weight_decay)."""

    def __init__(self, groups: list[tuple], betas=(0.9, 0.999), eps=1e-8):
        groups = [(g[0], g[1], g[2] if len(g) > 2 else 0.0) for g in groups]
        self.params = [p for ps, *_ in groups for p in ps]
        self.flat = flatten_(self.params)
        self.lr = self._per_group([lr for _, lr, _ in groups], groups)
        # AdamW's decay is lr * weight_decay per element; None (the plain Adam graph) without any
        self.decay = (None if not any(wd for *_, wd in groups)
                      else self._per_group([lr * wd for _, lr, wd in groups], groups))
        self.betas, self.eps = betas, eps
        self.exp_avg = torch.zeros_like(self.flat)
        self.exp_avg_sq = torch.zeros_like(self.flat)
        self.step_t = torch.zeros((), dtype=torch.float32, device=self.flat.device)
        self.found_inf: torch.Tensor | None = None
        self._fn = adam_flat_

    def _per_group(self, values: list[float], groups) -> float | torch.Tensor:
        """One value for all (a float), or one per element (one more read, still one kernel)."""
        if len(set(values)) == 1:
            return values[0]
        return torch.cat([torch.full((sum(p.numel() for p in ps),), x, device=self.flat.device)
                          for (ps, *_), x in zip(groups, values)])

    def compile(self, **kw) -> None:
        """torch.compile the step with `kw` (a mode, or options: learner/update/sac.py compile_kwargs)."""
        self._fn = torch.compile(adam_flat_, **kw)

    def step(self, grads: list[torch.Tensor]) -> None:
        """Apply `grads` (one per param, in order); honours `found_inf` as fused Adam does."""
        self._fn(self.flat, grads, self.exp_avg, self.exp_avg_sq, self.step_t, self.lr,
                 self.betas[0], self.betas[1], self.eps, self.found_inf, self.decay)

    STATE = (("exp_avg", "exp_avg"), ("exp_avg_sq", "exp_avg_sq"), ("step", "step_t"))

    def tensors(self) -> list[torch.Tensor]:
        return [self.flat, self.exp_avg, self.exp_avg_sq, self.step_t]


def module_params(*modules: nn.Module) -> list[nn.Parameter]:
    return [p for m in modules for p in m.parameters()]
