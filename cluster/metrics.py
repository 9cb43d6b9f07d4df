"""Metric rows of a run: CSV (one row per log tick) and TensorBoard event files."""

from __future__ import annotations

import csv
from pathlib import Path

COLUMNS = (
    "time_s", "env_steps", "env_steps_per_s", "updates", "updates_per_s", "received", "inserted",
    "replay_size", "policy_version", "policy_lag", "actors", "train_return", "eval_return",
    "critic_loss", "actor_loss", "alpha", "entropy", "rejected_batches", "gpu_mem_allocated",
    "gpu_mem_reserved",
)


class MetricsWriter:
    def __init__(self, run_dir: Path):
        from torch.utils.tensorboard import SummaryWriter

        self._file = open(run_dir / "metrics.csv", "a", newline="")  # noqa: SIM115 -- closed in close()
        self._csv = csv.DictWriter(self._file, fieldnames=COLUMNS, extrasaction="ignore")
        if self._file.tell() == 0:
            self._csv.writeheader()
        self._tb = SummaryWriter(str(run_dir / "tb"))

    def write(self, row: dict) -> None:
        self._csv.writerow(row)
        self._file.flush()
        step = int(row.get("env_steps") or 0)
        for key, value in row.items():
            if key != "time_s" and isinstance(value, (int, float)):
                self._tb.add_scalar(f"herd/{key}", value, step)

    def close(self) -> None:
        self._file.close()
        self._tb.close()
