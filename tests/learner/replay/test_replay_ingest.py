"""Ingest while updating: rows written on the ingest stream are never lost or torn.

Every column of row i encodes i, so a sample that mixes two transitions (a torn row) is
detectable on the device; counts and a checksum catch lost or duplicated rows. The GPU test
interleaves writes with replays of a captured probe graph (sample + gather + a long matmul
chain, so the H2D copies really overlap it); the CPU twin runs the same schedule eagerly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from herd.learner.replay.ring import ReplayBuffer
from herd.learner.replay.ring_writer import RingWriter
from tests.learner.rows import tagged_rows

OBS, ACT, CAP = 64, 8, 4096


def rows(ids: np.ndarray) -> dict[str, np.ndarray]:
    return tagged_rows(ids, OBS, ACT)


def torn_rows(b: dict[str, torch.Tensor]) -> torch.Tensor:
    """How many sampled rows are not one whole transition (device tensor, no sync)."""
    i = b["obs"][:, :1]
    bad = (b["obs"] != i).any(1) | (b["next_obs"] != i + 0.5).any(1)
    bad |= (b["action"] != i + 0.25).any(1) | (b["reward"] != 2 * i[:, 0])
    bad |= b["terminated"] != torch.remainder(i[:, 0], 2)
    return bad.sum()


def run_schedule(device: torch.device, steps: int = 150) -> None:
    rng = np.random.default_rng(0)
    buf = ReplayBuffer(CAP, (OBS,), ACT, device)
    writer = RingWriter(buf, chunk_rows=512, slots=3)

    def packed(ids):  # as the ingest thread packs them
        return buf.pack_rows(rows(ids))

    torn = torch.zeros((), dtype=torch.long, device=device)
    w = torch.randn(1024, 1024, device=device)

    def probe() -> None:
        torn.add_(torn_rows(buf.sample(1024)))
        x = w
        for _ in range(8 if device.type == "cuda" else 1):  # keep the update stream busy
            x = torch.tanh(x @ w)

    next_id = 0
    first = rng.integers(1, 300)
    writer.write([packed(np.arange(first))])
    next_id = first
    replay = probe
    if device.type == "cuda":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            probe()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        torn.zero_()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            probe()
        replay = graph.replay
    for _ in range(steps):
        replay()
        n = int(rng.integers(1, 700))  # some writes span two slots or wrap the ring
        writer.write([packed(np.arange(next_id, next_id + n))])
        next_id += n
    replay()
    if device.type == "cuda":
        torch.cuda.synchronize()
    assert int(torn) == 0
    assert buf.inserted == next_id and buf.size == CAP and float(buf.size_t) == CAP
    ids = buf.obs[:, 0].double()
    assert sorted(ids.long().tolist()) == list(range(next_id - CAP, next_id))  # none lost
    expect = sum(range(next_id - CAP, next_id))
    assert float(ids.sum()) == expect  # checksum
    assert float(buf.reward.double().sum()) == 2 * expect
    assert torch.equal(buf.next_obs.double().sum(1), OBS * (ids + 0.5))


def test_ingest_no_lost_or_torn_rows_cpu() -> None:
    run_schedule(torch.device("cpu"), steps=40)


@pytest.mark.cuda
def test_ingest_stream_no_lost_or_torn_rows_gpu() -> None:
    run_schedule(torch.device("cuda"))


def test_ring_writer_splits_batches_larger_than_a_slot() -> None:
    buf = ReplayBuffer(CAP, (OBS,), ACT, torch.device("cpu"))
    writer = RingWriter(buf, chunk_rows=100, slots=2)
    assert writer.write([buf.pack_rows(rows(np.arange(250))), buf.pack_rows(rows(np.arange(250, 260)))]) == 260
    assert buf.inserted == 260
    assert buf.obs[:260, 0].tolist() == list(range(260))


@pytest.mark.cuda
def test_page_locked_blocks_go_straight_to_the_device_and_are_free_on_return() -> None:
    """The ingest process's registered slots: no host copy, and reusable once write returns."""
    buf = ReplayBuffer(CAP, (OBS,), ACT, torch.device("cuda"))
    writer = RingWriter(buf, chunk_rows=100, slots=2)
    slots = torch.from_numpy(np.zeros((2, 300, buf.row_width), np.float32))
    cudart = torch.cuda.cudart()
    torch.cuda.check_error(cudart.cudaHostRegister(slots.data_ptr(), slots.numel() * 4, 0))
    try:
        assert slots[1, :260].is_pinned()
        buf.pack_rows(rows(np.arange(250)), out=slots[0])
        buf.pack_rows(rows(np.arange(250, 510)), out=slots[1])
        assert writer.write([slots[0, :250], slots[1, :260]]) == 510
        slots.zero_()  # handed back: the next batches overwrite them at once
        torch.cuda.synchronize()
        assert buf.inserted == 510
        assert buf.obs[:510, 0].tolist() == list(range(510))
        assert torch.equal(buf.reward[:510].cpu(), 2 * torch.arange(510, dtype=torch.float32))
    finally:
        torch.cuda.check_error(cudart.cudaHostUnregister(slots.data_ptr()))
