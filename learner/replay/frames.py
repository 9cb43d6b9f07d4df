"""Pixel replay on the learner's device: each camera frame stored once, stacks gathered by index.

    frames [Fcap, C, H, W] uint8   every frame once, in arrival order (a ring of slots)
    gid    [Fcap] int64            the global number of the frame a slot holds (-1: none yet)
    prev   [Fcap] int64            the global number of the frame before it in its episode (-1: none)
    refs   [Rcap, 2] int64         each row's obs frame and next frame (global numbers)
    rest   [Rcap, A + 3] fp32      action | reward | terminated | discount
    state  [Fcap, D] fp32          the env's state at each frame (D = state_dim; 0: none kept)

Frames get global numbers g = 0, 1, 2, ... as they are written; frame g lives in slot g % Fcap
until frame g + Fcap overwrites it, so "slot g % Fcap still holds g" (gid[g % Fcap] == g) is the
one exact test of whether a frame is there. A stack follows `prev` S - 1 times; a link that is -1
(an episode's first frame) or fails that test (the older frame was overwritten, or was never
known to this learner) stops the walk, and the oldest frame reached is repeated: an episode's
start is padded as proto/herd.proto has it (EnvSpec.frame_stack), and an overwritten frame
pads as an episode start.

Rows are sampled from a window of the newest rows whose frames are still in the ring: the
frame ring is sized a little above the row ring (`frame_margin`) so that the window is nearly
the whole row ring. A row inside the window whose obs or next frame has gone all the same (rows of
different actors arrive out of frame order) is swapped for the newest row whose frames are
there, on the device.
Sampling reads the window from device tensors (no host sync), so it can be captured in a
CUDA graph like the state ring (learner/replay/ring.py).

A learner whose critics read the env's state (learner.encoder.privileged_critic) keeps each
frame's state in the slot of its frame: a row's obs state is its obs frame's, its next state its
next frame's. Per frame, not per row, as the wire sends it: D floats a frame against 2 D a row.

Host side, per actor process ((actor_id, incarnation)), a bounded map frame number -> global
number (FrameIndex): the last `window` numbers of each of the last `max_actors` actors (a
batch's references to its own frames resolve without it; the window bounds how far back a row or
a link may point into earlier batches). It is kept where batches are put in their order (the
ingest loop, before the ack): a batch's frames get their global numbers there, and its rows
are placed against the ring as it will be when the batch is written (a frame is there iff fewer
than `frame_capacity` frames were placed after it). A row that names a frame after the actor's
newest (one it has not sent) refuses its batch; a row whose obs or next frame the map no longer
knows (a learner restarted, a frame evicted) or whose frame the ring no longer holds cannot be
rebuilt and is dropped, counted in `rows_unresolved` (received = inserted + rows_unresolved).
A frame number names the frame the actor sent last under it: an actor that numbers again from
a lower first_frame re-declares those numbers.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np
import torch


def default_frame_capacity(capacity: int, frame_margin: float = 0.02, window: int = 2048) -> int:
    return capacity + math.ceil(capacity * frame_margin) + 4 * window


def layout_bytes(capacity: int, frame_capacity: int, frame_shape, action_dim: int,
                 state_dim: int = 0) -> int:
    """Device bytes of a FrameReplay of these sizes (what it allocates)."""
    per_frame = math.prod(frame_shape) + 2 * 8 + 4 * state_dim  # pixels, gid, prev, state
    per_row = 2 * 8 + 4 * (action_dim + 3)  # refs, rest
    return frame_capacity * per_frame + capacity * per_row + 2 * 8


_TORCH_DTYPE = {"|u1": torch.uint8, "<i8": torch.int64, "<f4": torch.float32}


class ActorFrames:
    """One actor process's frame numbers -> global numbers, for its last `window` frames."""

    def __init__(self, window: int):
        self.window = window
        self.nums = np.full(window, -1, np.int64)
        self.gids = np.full(window, -1, np.int64)
        self.newest = -1
        """The last frame number of the actor's latest batch with frames (-1: none here yet)."""

    def add(self, first: int, gids: np.ndarray) -> None:
        """Frames `first`, `first` + 1, ... are the global numbers `gids`."""
        skip = max(0, len(gids) - self.window)  # a batch longer than the window keeps its newest
        numbers = first + np.arange(skip, len(gids), dtype=np.int64)
        at = numbers % self.window
        self.nums[at], self.gids[at] = numbers, gids[skip:]
        if len(gids):
            self.newest = first + len(gids) - 1

    def lookup(self, numbers: np.ndarray) -> np.ndarray:
        """Global numbers of `numbers` (-1 where unknown, and for -1)."""
        at = numbers % self.window
        known = (self.nums[at] == numbers) & (numbers >= 0)
        return np.where(known, self.gids[at], -1)


@dataclass
class Placement:
    """Where one batch goes: global numbers of its frames, of their previous frames (-1: none
    or unknown) and of each row's obs and next frames; `keep`: rows both of whose frames the
    ring holds once the batch is written; `written`: frames placed by then."""

    key: tuple
    first: int
    new: np.ndarray
    prev: np.ndarray
    obs: np.ndarray
    nxt: np.ndarray
    keep: np.ndarray
    written: int


class FrameIndex:
    """The host side of the frame replay: per actor process its frame numbers -> global numbers,
    and the count of frames placed. One writer, in the order the batches reach the ring."""

    def __init__(self, frame_capacity: int, window: int = 2048, max_actors: int = 4096):
        self.frame_capacity, self.window, self.max_actors = frame_capacity, window, max_actors
        self.written = 0  # frames placed: the next global number
        self._actors: collections.OrderedDict[tuple, ActorFrames] = collections.OrderedDict()

    def _actor(self, key: tuple) -> ActorFrames:
        frames = self._actors.get(key)
        if frames is None:
            frames = self._actors[key] = ActorFrames(self.window)
            while len(self._actors) > self.max_actors:
                self._actors.popitem(last=False)
        else:
            self._actors.move_to_end(key)
        return frames

    def place(self, arrays: dict) -> Placement:
        """The placement of a validated pixel batch (learner/rpc/validate.py check_frames); nothing
        changes until `commit`. ValueError (one line) when a row names a frame after the
        actor's newest: one it has not sent."""
        key = (str(arrays["actor_id"]), int(arrays["incarnation"]))
        actor = self._actors.get(key)
        first, n_frames = int(arrays["first_frame"]), len(arrays["frame_prev"])
        newest = first + n_frames - 1 if n_frames else actor.newest if actor else -1
        new = self.written + np.arange(n_frames, dtype=np.int64)

        def resolve(numbers) -> np.ndarray:  # this batch's frames directly, earlier ones by map
            numbers = np.asarray(numbers, np.int64)
            out = actor.lookup(numbers) if actor else np.full(len(numbers), -1, np.int64)
            inside = (numbers >= first) & (numbers < first + n_frames)
            out[inside] = new[numbers[inside] - first]
            return out

        if newest >= 0:  # a row after the newest frame names one not sent (yet)
            for name in ("obs_frame", "next_frame"):
                late = np.flatnonzero(np.asarray(arrays[name]) > newest)
                if len(late):
                    i = int(late[0])
                    raise ValueError(f"{name} of row {i} is {int(arrays[name][i])}; this actor "
                                     f"has sent frames up to {newest}")
        written = self.written + n_frames
        obs, nxt = resolve(arrays["obs_frame"]), resolve(arrays["next_frame"])
        oldest = written - self.frame_capacity
        keep = (obs >= 0) & (nxt >= 0) & (obs >= oldest) & (nxt >= oldest)
        return Placement(key, first, new, resolve(arrays["frame_prev"]), obs, nxt, keep, written)

    def commit(self, p: Placement) -> None:
        """The batch `p` places goes to the ring: its frames are known from now on."""
        self._actor(p.key).add(p.first, p.new)
        self.written = p.written
class FrameReplay:
    """The device frame ring and row ring (one writer: the training thread)."""

    def __init__(self, capacity: int, frame_shape: tuple[int, int, int], frame_stack: int,
                 action_dim: int, device: torch.device, one_step_discount: float = 0.99,
                 frame_margin: float = 0.02, window: int = 2048, max_actors: int = 4096,
                 frame_capacity: int | None = None, state_dim: int = 0):
        """`frame_capacity` (default: `capacity` plus `frame_margin` of it plus 4 `window`s):
        frames kept; above `capacity` by the frames no row's obs is (each episode's last) and
        the ones rows still wait for (n-step rows, batches in flight). `state_dim`: floats of
        env state kept per frame (a batch's frame_state), for critics that read it."""
        self.capacity = capacity
        self.frame_capacity = frame_capacity or default_frame_capacity(capacity, frame_margin, window)
        self.frame_shape, self.stack, self.action_dim = tuple(frame_shape), frame_stack, action_dim
        self.one_step_discount = float(one_step_discount)
        self.device = torch.device(device)
        self.window, self.max_actors = window, max_actors
        dev = self.device
        self.frames = torch.zeros(self.frame_capacity, *frame_shape, dtype=torch.uint8, device=dev)
        self.gid = torch.full((self.frame_capacity,), -1, dtype=torch.int64, device=dev)
        self.prev = torch.full((self.frame_capacity,), -1, dtype=torch.int64, device=dev)
        self.state_dim = state_dim
        self.state = torch.zeros(self.frame_capacity, state_dim, dtype=torch.float32, device=dev)
        self.refs = torch.zeros(capacity, 2, dtype=torch.int64, device=dev)
        self.rest = torch.zeros(capacity, action_dim + 3, dtype=torch.float32, device=dev)
        # [start, count] of the sampling window, read by captured graphs (no .item())
        self.window_t = torch.zeros(2, dtype=torch.int64, device=dev)
        # host copy of each row's older frame (obs, or next where an actor re-declared its
        # numbers), for the window: a row lives as long as both its frames
        self._row_oldest = np.full(capacity, -1, np.int64)
        self.index = FrameIndex(self.frame_capacity, window, max_actors)
        self.written = 0  # frames written: one above the newest global number written
        self.pos = self.inserted = 0
        self.size = 0  # rows in the sampling window (the newest rows whose obs frame is there)
        self.rows_unresolved = 0
        self.frames_received = 0  # frames of the batches inserted
        self._cuda = dev.type == "cuda"

    # ---- memory ----
    @property
    def frame_bytes(self) -> int:
        return math.prod(self.frame_shape)

    @property
    def nbytes(self) -> int:
        return layout_bytes(self.capacity, self.frame_capacity, self.frame_shape, self.action_dim,
                            self.state_dim)

    @property
    def bytes_per_transition(self) -> float:
        """Device bytes per row of capacity, frames (and their margin) included."""
        return self.nbytes / self.capacity

    @property
    def naive_bytes_per_transition(self) -> int:
        """The usual layout's: obs and next_obs stacks (and states) stored whole in every row."""
        return 2 * self.stack * self.frame_bytes + 4 * (self.action_dim + 3 + 2 * self.state_dim)

    def _to_device(self, a: np.ndarray) -> torch.Tensor:
        """`a` on the device. On CUDA through page-locked memory (torch's caching host
        allocator, which keeps a block until its copy is done) and queued on the current stream,
        the update's: the training thread goes on while the copy waits behind the replays
        already queued, and the next replay sees it whole."""
        host = torch.empty(a.shape, dtype=_TORCH_DTYPE[a.dtype.str], pin_memory=self._cuda)
        host.numpy()[...] = a  # the one host copy (off the message's read-only bytes too)
        return host.to(self.device, non_blocking=True) if self._cuda else host

    # ---- writing (the training thread, on the update stream: replays see whole batches) ----
    def insert(self, arrays: dict) -> int:
        """One validated pixel batch (learner/rpc/validate.py) into the rings; returns rows kept.
        Placed by the ingest loop before its ack (arrays["placement"]), or here."""
        p = arrays.get("placement")
        if p is None:
            p = self.index.place(arrays)
            self.index.commit(p)
        self._write_frames(arrays["frames"], p.new, p.prev, arrays.get("frame_state"))
        self.written = max(self.written, p.written)
        self.frames_received += len(p.new)
        n = int(p.keep.sum())
        if n:
            self._write_rows(arrays, p.keep, p.obs[p.keep], p.nxt[p.keep])
        self.rows_unresolved += len(p.keep) - n
        self._shrink_window()
        return n

    def _write_frames(self, frames: np.ndarray, new: np.ndarray, prev: np.ndarray,
                      states: np.ndarray | None) -> None:
        k = min(len(new), self.frame_capacity)  # a batch longer than the ring keeps its newest
        if not k:
            return
        if self.state_dim:
            self.state.index_copy_(0, self._to_device(new[-k:] % self.frame_capacity),
                                   self._to_device(np.asarray(states[-k:], np.float32)))
        frames, new, prev = frames[-k:], new[-k:], prev[-k:]
        meta = self._to_device(np.stack([new % self.frame_capacity, new, prev]))
        pixels = self._to_device(np.asarray(frames, np.uint8))
        self.frames.index_copy_(0, meta[0], pixels)
        self.gid.index_copy_(0, meta[0], meta[1])
        self.prev.index_copy_(0, meta[0], meta[2])

    def _write_rows(self, arrays: dict, keep: np.ndarray, obs: np.ndarray, nxt: np.ndarray) -> None:
        n = len(obs)
        if n > self.capacity:
            keep_tail = slice(n - self.capacity, None)
            obs, nxt = obs[keep_tail], nxt[keep_tail]
            keep = np.flatnonzero(keep)[keep_tail]
            self.inserted += n - self.capacity
            n = self.capacity
        a = self.action_dim
        rest = np.empty((n, a + 3), np.float32)
        rest[:, :a] = np.asarray(arrays["action"], np.float32).reshape(-1, a)[keep]
        rest[:, a] = np.asarray(arrays["reward"])[keep]
        rest[:, a + 1] = np.asarray(arrays["terminated"])[keep]
        discount = arrays.get("discount")
        rest[:, a + 2] = self.one_step_discount if discount is None else np.asarray(discount)[keep]
        rows = (self.pos + np.arange(n)) % self.capacity
        refs = np.stack([rows, obs, nxt], axis=1)
        refs_t, rest_t = self._to_device(refs), self._to_device(rest)
        self.refs.index_copy_(0, refs_t[:, 0], refs_t[:, 1:])
        self.rest.index_copy_(0, refs_t[:, 0], rest_t)
        self._row_oldest[rows] = np.minimum(obs, nxt)
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.inserted += n

    def _shrink_window(self) -> None:
        """Drop the oldest rows one of whose frames was overwritten from the sampling window."""
        count = self.size
        oldest_alive = self.written - self.frame_capacity
        while count:
            start = (self.pos - count) % self.capacity
            idx = (start + np.arange(min(count, 4096))) % self.capacity
            dead = self._row_oldest[idx] < oldest_alive
            gone = len(dead) if dead.all() else int(np.argmin(dead))
            count -= gone
            if gone < len(dead):
                break
        self.size = count
        window = np.array([(self.pos - count) % self.capacity, count], np.int64)
        self.window_t.copy_(self._to_device(window))

    # ---- sampling (graph-safe: fixed shapes, no host reads) ----
    def sample_indices(self, batch_size: int) -> torch.Tensor:
        start, count = self.window_t[0], self.window_t[1]
        u = torch.rand(batch_size, device=self.device)
        idx = (start + (u * count).long().clamp_(max=self.capacity - 1)) % self.capacity
        newest = (start + count - 1).clamp_(min=0) % self.capacity
        # a row with a frame gone is swapped for the newest row or, when that one's frames are
        # gone too, for the window's oldest: _shrink_window leaves it alive, and nothing is
        # written between an insert and a sample
        newest = newest.view(1)  # a 1-element index: a 0-d one would be read on the host
        fallback = torch.where(self._alive(self.refs[newest]), newest, start)
        return torch.where(self._alive(self.refs[idx]), idx, fallback)

    def _alive(self, g: torch.Tensor) -> torch.Tensor:
        """Whether the ring still holds both frames of rows whose refs are `g` [..., 2]."""
        return (self.gid[g % self.frame_capacity] == g).all(dim=-1)

    def stacks(self, g: torch.Tensor) -> torch.Tensor:
        """Global numbers [..., S] of the stacks whose newest frames are `g` [...], oldest first."""
        chain, cur = [g], g
        for _ in range(self.stack - 1):
            p = self.prev[cur % self.frame_capacity]
            ok = (p >= 0) & (self.gid[p.clamp(min=0) % self.frame_capacity] == p)
            cur = torch.where(ok, p, cur)
            chain.append(cur)
        return torch.stack(chain[::-1], dim=-1)

    def gather(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        """Rows at `idx`: pixels [B, 2, S*C, H, W] uint8 (obs | next_obs stacks, one gather;
        obs and next_obs are its views), the rest fp32; with a state ring obs_state and
        next_state [B, D], the states of the rows' obs and next frames."""
        b, (c, h, w) = idx.shape[0], self.frame_shape
        newest = self.refs[idx]  # [B, 2]: each row's obs frame and next frame
        slots = self.stacks(newest) % self.frame_capacity  # [B, 2, S]
        pix = self.frames.index_select(0, slots.reshape(-1)).view(b, 2, self.stack * c, h, w)
        return {"pixels": pix, "obs": pix[:, 0], "next_obs": pix[:, 1], **self._rows(idx, newest)}

    def _rows(self, idx: torch.Tensor, newest: torch.Tensor) -> dict[str, torch.Tensor]:
        """What rows at `idx` hold beside their frames: action, reward, terminated, discount and,
        with a state ring, obs_state and next_state."""
        a, rest = self.action_dim, self.rest.index_select(0, idx)
        out = {"action": rest[:, :a], "reward": rest[:, a], "terminated": rest[:, a + 1],
               "discount": rest[:, a + 2]}
        if self.state_dim:
            state = self.state.index_select(0, (newest % self.frame_capacity).reshape(-1))
            state = state.view(idx.shape[0], 2, self.state_dim)
            out["obs_state"], out["next_state"] = state[:, 0], state[:, 1]
        return out

    def sample(self, batch_size: int) -> dict[str, torch.Tensor]:
        return self.gather(self.sample_indices(batch_size))

    def sample_state(self, batch_size: int) -> dict[str, torch.Tensor]:
        """A uniform batch of rows without their frames (a state ring's: obs_state, next_state,
        action, reward, terminated, discount), for updates that read no frame."""
        idx = self.sample_indices(batch_size)
        return self._rows(idx, self.refs[idx])
