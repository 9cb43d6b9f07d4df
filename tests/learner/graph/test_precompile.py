"""precompile() fills the compile cache: a second compile of the same update is much faster."""

from __future__ import annotations

import pytest
import torch

from herd.learner.config import LearnerConfig
from herd.learner.graph.precompile import precompile

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def test_precompile_is_a_no_op_on_the_cpu() -> None:
    cfg = LearnerConfig.flat(device="cpu", compile=True, hidden_sizes=(16, 16), capacity=1000)
    assert precompile(cfg, 5, 2, [-1, -1], [1, 1], torch.device("cpu")) == 0.0


@cuda
def test_second_compile_hits_the_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # start cold
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    cfg = LearnerConfig.flat(device="cuda", compile=True, amp="bf16", hidden_sizes=(64, 64),
                        batch_size=128, capacity=1000, updates_per_call=2)
    first = precompile(cfg, 11, 3, [-1] * 3, [1] * 3, torch.device("cuda"))
    torch._dynamo.reset()  # forget the in-memory compiled code: only the disk cache is left
    second = precompile(cfg, 11, 3, [-1] * 3, [1] * 3, torch.device("cuda"))
    print(f"precompile cold {first:.1f}s, warm {second:.1f}s")
    assert second < 0.6 * first
