"""bench/learner.py --quick runs on the CPU and writes flat records."""

from __future__ import annotations

import json

from bench.learner import main


def test_bench_quick_cpu(tmp_path) -> None:
    out = tmp_path / "learner.json"
    records = main(["--quick", "--device", "cpu", "--batches", "16", "--seconds", "0.05", "--out", str(out)])
    assert json.loads(out.read_text()) == records
    assert records and all("error" not in r for r in records)
    for key in ("machine", "torch", "env", "batch", "amp", "graph", "compile", "updates_per_s",
                "samples_per_s", "command", "mem_allocated", "mem_reserved"):
        assert key in records[0]
    assert records[0]["updates_per_s"] > 0 and records[0]["graph"] is False
