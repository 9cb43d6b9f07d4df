"""Replay ring buffer: preallocated tensors on the learner's device.

Rows are written by one writer (the learner's training thread). The filled size lives in a
device tensor so that a captured update can sample from a growing buffer without a host sync.

Layout: two packed tensors instead of five, so one sample is two gathers (one kernel each):
  obs_pair [capacity, 2 * obs_pad]    obs | next_obs, in the configured storage dtype
  rest     [capacity, action_dim + 3] action | reward | terminated | discount, always fp32
obs_pad is obs_dim rounded up to 8 (zero columns), the width the networks' matmuls want.
`obs_pair` rows reshape to [2, obs_pad] for free, which lets the actor evaluate obs and
next_obs in one pass. `obs`, `next_obs`, `action`, `reward`, `terminated`, `discount` are
views. `discount` is each row's bootstrap factor g^k (n-step rows, proto TransitionBatch);
rows that arrive without one are one-step rows and get `one_step_discount` (the learner's g).
"""

from __future__ import annotations

import torch

from herd.learner.replay.row_layout import RowLayout


class ReplayBuffer:
    """Fixed-capacity ring of (obs, action, reward, next_obs, terminated, discount) rows."""

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        action_dim: int,
        device: torch.device,
        obs_dtype: torch.dtype = torch.float32,
        one_step_discount: float = 0.99,
    ):
        self.capacity = capacity
        self.one_step_discount = float(one_step_discount)
        self.device = torch.device(device)
        self.layout = RowLayout.of(obs_shape, action_dim, one_step_discount)
        self.obs_dim = obs_dim = self.layout.obs_dim
        self.obs_pad = self.layout.obs_pad
        self.action_dim = action_dim
        self.row_width = self.layout.row_width
        cols = self.layout.columns
        # a packed row's obs | next_obs go to obs_pair, the rest (from the action on) to rest
        self.split = split = cols["action"][0]
        self.rest_at = {name: start - split for name, (start, _) in cols.items() if start >= split}
        self.obs_pair = torch.zeros(capacity, split, dtype=obs_dtype, device=self.device)
        self.rest = torch.zeros(capacity, self.row_width - split, dtype=torch.float32, device=self.device)
        self.obs = self.obs_pair[:, cols["obs"][0] : cols["obs"][0] + obs_dim]
        self.next_obs = self.obs_pair[:, cols["next_obs"][0] : cols["next_obs"][0] + obs_dim]
        at = self.rest_at
        self.action = self.rest[:, at["action"] : at["action"] + action_dim]
        self.reward = self.rest[:, at["reward"]]
        self.terminated = self.rest[:, at["terminated"]]
        self.discount = self.rest[:, at["discount"]]
        # The number of valid rows, readable by captured graphs (no .item()).
        self.size_t = torch.zeros((), dtype=torch.float32, device=self.device)
        self.pos = 0
        self.size = 0
        self.inserted = 0

    # ---- writing (the single writer) ----
    def pack_rows(self, rows: dict, out: torch.Tensor | None = None) -> torch.Tensor:
        """Rows (numpy arrays or CPU tensors) as one [n, row_width] fp32 CPU tensor, packed in
        numpy on a view of `out` (e.g. pinned staging; allocate it zeroed): RowLayout.pack."""
        n = int(rows["reward"].shape[0])
        if out is None:
            out = torch.zeros(n, self.row_width, dtype=torch.float32)
        self.layout.pack(rows, out[:n].numpy())
        return out[:n]

    def extend(self, rows: dict) -> None:
        """Write `n` rows given field by field (numpy arrays or tensors); wraps around the ring."""
        self.extend_packed(self.pack_rows(rows).to(self.device, non_blocking=True))

    def extend_packed(self, packed: torch.Tensor) -> None:
        """Write [n, row_width] rows in row_layout.ROW_FIELDS order, on the current stream."""
        n = packed.shape[0]
        if n > self.capacity:
            packed = packed[-self.capacity :]
            self.pos = (self.pos + n - self.capacity) % self.capacity
            self.inserted += n - self.capacity
            n = self.capacity
        split = self.split
        first = min(n, self.capacity - self.pos)
        for start, stop, src in ((self.pos, self.pos + first, 0), (0, n - first, first)):
            if stop <= start:
                continue
            part = packed[src : src + stop - start]
            self.obs_pair[start:stop].copy_(part[:, :split], non_blocking=True)
            self.rest[start:stop].copy_(part[:, split:], non_blocking=True)
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.inserted += n
        # Stream-ordered after the row copies: a replay queued later sees rows and size together.
        self.size_t.fill_(float(self.size))

    # ---- sampling (graph-safe: fixed shapes, no host reads) ----
    def sample_indices(self, batch_size: int, generator: torch.Generator | None = None):
        """Uniform indices in [0, size) computed on the device from size_t (graph-safe)."""
        u = torch.rand(batch_size, device=self.device, generator=generator)
        return (u * self.size_t).long().clamp_(max=self.capacity - 1)

    def gather(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        """Rows at `idx`; obs_pair is [batch, 2, obs_pad] (obs, next_obs; zero pad) in fp32."""
        pair = self.obs_pair.index_select(0, idx).float().view(-1, 2, self.obs_pad)
        rest = self.rest.index_select(0, idx)
        a, d, at = self.action_dim, self.obs_dim, self.rest_at
        return {
            "obs_pair": pair,
            "obs": pair[:, 0, :d],
            "next_obs": pair[:, 1, :d],
            "action": rest[:, at["action"] : at["action"] + a],
            "reward": rest[:, at["reward"]],
            "terminated": rest[:, at["terminated"]],
            "discount": rest[:, at["discount"]],
        }

    def sample(self, batch_size: int) -> dict[str, torch.Tensor]:
        return self.gather(self.sample_indices(batch_size))

    # ---- memory and persistence ----
    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.obs_pair, self.rest))

    def start_copy(self, chunk: int = 65_536) -> RingCopy:
        """A host copy of the rows as they are now, to go on chunk by chunk (call under the
        writer's lock; then `RingCopy.step` under it until `remaining` is 0)."""
        return RingCopy(self, chunk)

    def state_dict(self) -> dict:
        n = self.size
        return {
            "obs_pair": self.obs_pair[:n].cpu(),
            "rest": self.rest[:n].cpu(),
            "pos": self.pos,
            "size": self.size,
            "inserted": self.inserted,
        }

    def load_state_dict(self, state: dict) -> None:
        n = int(state["size"])
        if n > self.capacity:
            raise ValueError(f"saved buffer holds {n} rows; this ring has {self.capacity}")
        if tuple(state["obs_pair"].shape[1:]) != tuple(self.obs_pair.shape[1:]):
            raise ValueError(f"saved rows are {tuple(state['obs_pair'].shape)}, ring {tuple(self.obs_pair.shape)}")
        width = state["rest"].shape[1]  # saved before rows had a discount: one-step rows
        if width not in (self.rest.shape[1], self.rest.shape[1] - 1):
            raise ValueError(f"saved rows have {width} action/reward columns, ring {self.rest.shape[1]}")
        # Chunked so that an mmap'd file streams to the device without a full host copy.
        step = 65_536
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            self.obs_pair[lo:hi].copy_(state["obs_pair"][lo:hi])
            self.rest[lo:hi, :width].copy_(state["rest"][lo:hi])
        if width < self.rest.shape[1]:
            self.discount[:n] = self.one_step_discount
        self.size, self.inserted = n, int(state["inserted"])
        self.pos = int(state["pos"]) % self.capacity
        self.size_t.fill_(float(n))


def memory_metrics(device: torch.device) -> dict[str, int]:
    """Allocated / reserved / peak bytes on a CUDA device (zeros on the CPU)."""
    device = torch.device(device)
    if device.type != "cuda":
        return {"mem_allocated": 0, "mem_reserved": 0, "mem_peak": 0}
    return {
        "mem_allocated": torch.cuda.memory_allocated(device),
        "mem_reserved": torch.cuda.memory_reserved(device),
        "mem_peak": torch.cuda.max_memory_allocated(device),
    }


class RingCopy:
    """A host copy of the ring as it was when started, in `state_dict`'s layout, taken one chunk
    per `step()`, each under the writer's lock: training and inserts go on between chunks
    instead of waiting for the whole ring (GBs) to cross to the host.

    Chunks go oldest rows first, the ones the writer overwrites first, and the first is copied
    when the copy starts, so the copy stays ahead of the writer. A row the writer overwrote
    before its chunk was copied (inserts faster than the copy) is saved in its newer form and
    counted in `overtaken`; every row is whole."""

    def __init__(self, buf: ReplayBuffer, chunk: int):
        self.buf, self.chunk = buf, chunk
        self.size, self.pos, self.inserted = buf.size, buf.pos, buf.inserted
        self.obs = torch.empty((self.size, buf.obs_pair.shape[1]), dtype=buf.obs_pair.dtype)
        self.rest = torch.empty((self.size, buf.rest.shape[1]), dtype=buf.rest.dtype)
        self.start = self.pos if self.size == buf.capacity else 0  # the oldest row
        self.free = buf.capacity - self.size  # slots the writer fills before the oldest row
        self.done = self.overtaken = 0
        self.step()

    @property
    def remaining(self) -> int:
        return self.size - self.done

    def step(self) -> None:
        """Copy the next chunk (the caller holds the writer's lock)."""
        buf, k = self.buf, min(self.chunk, self.remaining)
        if k <= 0:
            return
        if buf.device.type == "cuda":  # inserts run on their own stream
            torch.cuda.synchronize(buf.device)
        lost = max(0, buf.inserted - self.inserted - self.free)  # oldest rows overwritten so far
        self.overtaken += max(0, min(lost, self.done + k) - self.done)
        lo = (self.start + self.done) % buf.capacity
        for a, b in ((lo, min(lo + k, buf.capacity)), (0, max(0, lo + k - buf.capacity))):
            if b > a:
                self.obs[a:b].copy_(buf.obs_pair[a:b])
                self.rest[a:b].copy_(buf.rest[a:b])
        self.done += k

    def result(self) -> dict:
        assert self.remaining == 0, "RingCopy.result before the last step"
        return {"obs_pair": self.obs, "rest": self.rest, "pos": self.pos, "size": self.size,
                "inserted": self.inserted, "overtaken": self.overtaken}
