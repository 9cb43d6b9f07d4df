"""bench/learner.py --quick runs on the CPU and writes flat records."""

from __future__ import annotations

import json

import pytest

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


def test_a_learner_setting_reaches_every_row_and_its_record(tmp_path) -> None:
    out = tmp_path / "learner.json"
    records = main(["--quick", "--device", "cpu", "--batches", "16", "--seconds", "0.05", "--rows",
                    "fp32 eager", "--set", "compile_options={triton.autotune_pointwise: false}",
                    "--set", "n_step=3", "--out", str(out)])
    assert records and all("error" not in r for r in records)
    assert records[0]["compile_options"] == {"triton.autotune_pointwise": False}
    assert records[0]["n_step"] == 3


def test_an_unknown_learner_setting_is_refused_in_one_line() -> None:
    with pytest.raises(SystemExit, match="expected FIELD=VALUE with a learner field"):
        main(["--quick", "--device", "cpu", "--set", "no_such=1"])
