"""Replay ring: packing, wrap-around, gather, its rows saved and loaded as a checkpoint does
(learner/checkpoint.py: replay.pt read with torch.load(mmap=True))."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from herd.learner.checkpoint import read_model, read_rows, write_checkpoint
from herd.learner.replay.ring import ReplayBuffer, memory_metrics
from tests.learner.rows import tagged_rows

OBS, ACT = 5, 3


def rows(ids: np.ndarray) -> dict[str, np.ndarray]:
    return tagged_rows(ids, OBS, ACT)


def test_wraparound_keeps_the_newest_rows() -> None:
    buf = ReplayBuffer(1000, (OBS,), ACT, torch.device("cpu"))
    buf.extend(rows(np.arange(700)))
    buf.extend(rows(np.arange(700, 1500)))
    assert (buf.size, buf.pos, buf.inserted) == (1000, 500, 1500)
    assert float(buf.size_t) == 1000
    ids = buf.obs[:, 0]
    assert sorted(ids.tolist()) == list(range(500, 1500))
    assert torch.equal(buf.next_obs[:, 0], ids + 0.5)
    assert torch.equal(buf.reward, ids * 2)
    assert torch.equal(buf.terminated, (ids % 2))


def test_oversized_write_keeps_the_last_capacity_rows() -> None:
    buf = ReplayBuffer(1000, (OBS,), ACT, torch.device("cpu"))
    buf.extend(rows(np.arange(2500)))
    assert buf.inserted == 2500 and buf.size == 1000
    assert sorted(buf.obs[:, 0].tolist()) == list(range(1500, 2500))


def test_sample_stays_in_filled_range_and_rows_are_whole() -> None:
    buf = ReplayBuffer(1000, (OBS,), ACT, torch.device("cpu"))
    buf.extend(rows(np.arange(10)))
    b = buf.sample(512)
    ids = b["obs"][:, 0]
    assert ids.max() < 10
    assert b["obs_pair"].shape == (512, 2, 8)  # padded to 8
    assert not b["obs_pair"][..., OBS:].any()
    assert torch.equal(b["next_obs"][:, 0], ids + 0.5)
    assert torch.equal(b["action"][:, 0], ids + 0.25)
    assert torch.equal(b["reward"], ids * 2)


def test_bf16_storage_halves_obs_memory() -> None:
    f32 = ReplayBuffer(1000, (OBS,), ACT, torch.device("cpu"))
    b16 = ReplayBuffer(1000, (OBS,), ACT, torch.device("cpu"), torch.bfloat16)
    assert b16.obs_pair.nbytes * 2 == f32.obs_pair.nbytes
    b16.extend(rows(np.arange(100)))
    assert b16.sample(8)["obs"].dtype == torch.float32


def save(buf: ReplayBuffer, where) -> None:
    """The ring's rows as a checkpoint saves them (learner/checkpoint.py), beside their model.pt."""
    write_checkpoint(where, {"inserted": buf.inserted}, buf.state_dict())


def load(buf: ReplayBuffer, where) -> None:
    """The rows back as a restore reads them: replay.pt memory-mapped, paged in as copied."""
    rows, how = read_rows(where, read_model(where))
    assert how == "loaded"
    buf.load_state_dict(rows)


@pytest.mark.parametrize("n", [0, 300, 1700])
def test_save_load_mmap_roundtrip(tmp_path, n: int) -> None:
    buf = ReplayBuffer(1000, (OBS,), ACT, torch.device("cpu"))
    if n:
        buf.extend(rows(np.arange(n)))
    save(buf, tmp_path)
    assert not (tmp_path / "replay.pt.tmp").exists()
    other = ReplayBuffer(1000, (OBS,), ACT, torch.device("cpu"))
    load(other, tmp_path)
    assert (other.size, other.pos, other.inserted) == (buf.size, buf.pos, buf.inserted)
    assert torch.equal(other.obs_pair, buf.obs_pair) and torch.equal(other.rest, buf.rest)
    assert float(other.size_t) == buf.size


def test_load_refuses_a_bigger_buffer(tmp_path) -> None:
    buf = ReplayBuffer(2000, (OBS,), ACT, torch.device("cpu"))
    buf.extend(rows(np.arange(1500)))
    save(buf, tmp_path)
    with pytest.raises(ValueError):
        load(ReplayBuffer(1000, (OBS,), ACT, torch.device("cpu")), tmp_path)


def test_memory_metrics_cpu_is_zero_and_nbytes_counts_the_ring() -> None:
    buf = ReplayBuffer(1000, (OBS,), ACT, torch.device("cpu"))
    assert buf.nbytes == 1000 * (2 * 8 + ACT + 3) * 4  # obs padded 5 -> 8; + reward, terminated, discount
    assert memory_metrics(torch.device("cpu"))["mem_allocated"] == 0


@pytest.mark.cuda
def test_gpu_ring_and_memory_metrics(tmp_path) -> None:
    dev = torch.device("cuda")
    buf = ReplayBuffer(4096, (OBS,), ACT, dev)
    buf.extend(rows(np.arange(5000)))
    m = memory_metrics(dev)
    assert m["mem_allocated"] >= buf.nbytes and m["mem_reserved"] >= m["mem_allocated"]
    save(buf, tmp_path)
    other = ReplayBuffer(4096, (OBS,), ACT, dev)
    load(other, tmp_path)
    assert torch.equal(other.obs_pair, buf.obs_pair)
