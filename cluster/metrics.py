"""Metric rows of a run: CSV (one row per log tick), TensorBoard event files and, with
run.wandb, a Weights & Biases run; the run's record (config, seeds, versions, commits) goes to
TensorBoard's text tab and W&B's run config."""

from __future__ import annotations

import csv
from pathlib import Path

COLUMNS = (
    "time_s", "env_steps", "env_steps_per_s", "updates", "updates_per_s", "received", "inserted",
    "replay_size", "policy_version", "policy_lag", "actors", "train_return", "eval_return",
    "critic_loss", "actor_loss", "alpha", "entropy", "rejected_batches", "gpu_mem_allocated",
    "gpu_mem_reserved", "eval_contact_cost", "frames_received", "rows_unresolved",
    "eval_heldout_return",
)
"""eval_contact_cost: the last evaluation's mean summed contact cost per episode, a positive
number (herd.evaluation); empty for an env without one. frames_received, rows_unresolved: a
pixel env's frames in the learner's frame ring and rows dropped because a frame they name was
gone (0 for a state env). eval_heldout_return: the last evaluation's mean return on env.randomize's
held-out draws (empty without env.randomize). Each appended, so older files' columns keep their
places."""


class MetricsWriter:
    def __init__(self, run_dir: Path, record: dict | None = None, wandb_run=None):
        """`record`: herd.tracking.provenance; `wandb_run`: herd.tracking.open_wandb's run."""
        from torch.utils.tensorboard import SummaryWriter

        self._file = open(run_dir / "metrics.csv", "a", newline="")  # noqa: SIM115 -- closed in close()
        self._csv = csv.DictWriter(self._file, fieldnames=COLUMNS, extrasaction="ignore")
        if self._file.tell() == 0:
            self._csv.writeheader()
        self._tb = SummaryWriter(str(run_dir / "tb"))
        self._wandb = wandb_run
        if record:
            import json

            import yaml

            self._tb.add_text("herd/config", "```\n" + yaml.safe_dump(record["config"], sort_keys=False) + "```")
            rest = {k: v for k, v in record.items() if k != "config"}
            self._tb.add_text("herd/provenance", "```\n" + json.dumps(rest, indent=2, default=str) + "\n```")

    def write(self, row: dict) -> None:
        self._csv.writerow(row)
        self._file.flush()
        step = int(row.get("env_steps") or 0)
        for key, value in row.items():
            if key != "time_s" and isinstance(value, (int, float)):
                self._tb.add_scalar(f"herd/{key}", value, step)
        if self._wandb is not None:  # W&B's own step: env_steps go back after a learner restart
            self._wandb.log({k: v for k, v in row.items() if isinstance(v, (int, float))})

    def close(self, summary: dict | None = None) -> None:
        self._file.close()
        self._tb.close()
        if self._wandb is not None:
            for key, value in (summary or {}).items():
                self._wandb.summary[key] = value
            self._wandb.finish()
