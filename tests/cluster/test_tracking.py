"""The run's record (config, seeds, versions, commits) in TensorBoard and a W&B offline run,
written without a network."""

from __future__ import annotations

from pathlib import Path

import pytest

from herd.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def test_record_tensorboard_and_wandb_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from herd.job.supervise import run_record
    from herd.metrics import MetricsWriter
    from herd.tracking import open_wandb, submit_info

    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")
    import json

    monkeypatch.setenv("HERD_SUBMIT_INFO", json.dumps(submit_info(ROOT / "configs" / "demo.yaml", {})))
    cfg = load_config(ROOT / "configs" / "demo.yaml", ["run.wandb.project=herd-test", "run.wandb.mode=offline",
                                                       "run.wandb.tags=[a, b]"], seed=4)
    record = run_record(cfg, "herd-test-job", tmp_path)
    assert record["seeds"]["run"] == record["seeds"]["learner"] == 4 and record["seeds"]["evaluation"] == 14_000
    assert record["versions"]["torch"].startswith("2.13") and record["config"]["run"]["seed"] == 4
    assert len(record["git"]["herd"]["commit"]) == 40  # this checkout (an editable install)
    metrics = MetricsWriter(tmp_path, record, open_wandb(cfg.run.wandb, tmp_path, "herd-test-job", record))
    metrics.write({"time_s": 1.0, "env_steps": 10, "updates": 3, "eval_return": None})
    metrics.close({"final_eval_return": 5.0})
    runs = list(tmp_path.glob("wandb/offline-run-*/run-herd-test-job.wandb"))
    assert runs and runs[0].stat().st_size > 0
    events = b"".join(p.read_bytes() for p in (tmp_path / "tb").glob("events.*"))
    assert b"herd/config" in events and b"herd/provenance" in events
    assert open_wandb(None, tmp_path, "x", record) is None
