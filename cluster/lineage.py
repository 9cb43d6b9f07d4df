"""A resumed run goes on from the run it resumes: its metrics.csv starts with that run's rows
(seconds counting on from that run's last row), its curve.png draws that run's evaluations
before its own, and its log and summary say how its budgets count.

The earlier run is the folder of the checkpoint resumed (runs/<job>/checkpoint/ or
checkpoint-best/ -> runs/<job>/), where it holds a metrics.csv; a checkpoint named elsewhere has
no earlier run, and the resumed run starts its files afresh.
"""

from __future__ import annotations

import csv
from pathlib import Path

from herd.metrics import COLUMNS

BUDGETS = ("run.max_env_steps counts the env steps of the run resumed too (the learner's "
           "counters go on from the checkpoint's); run.max_seconds counts from this job's start")


class Lineage:
    """The earlier run of a resumed job (None: a fresh job) and the seconds its rows reached."""

    def __init__(self, resume: str | None):
        self.earlier: Path | None = None
        self.offset_s = 0.0
        if resume:
            run = Path(resume).parent
            if (run / "metrics.csv").is_file():
                self.earlier = run

    def carry_metrics(self, run_dir: Path) -> int:
        """The earlier run's metrics.csv rows as the first rows of this run's (written before
        its MetricsWriter appends); sets offset_s to the last row's time_s. The rows carried."""
        if self.earlier is None or (run_dir / "metrics.csv").exists():
            return 0
        with open(self.earlier / "metrics.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        with open(run_dir / "metrics.csv", "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            out.writeheader()
            out.writerows(rows)  # an older file's missing columns stay empty
        for row in reversed(rows):
            try:
                self.offset_s = float(row["time_s"])
                break
            except (KeyError, TypeError, ValueError):
                continue
        return len(rows)

    def row(self, row: dict) -> dict:
        """A metrics row of this run with its seconds counted on from the earlier run's."""
        return {**row, "time_s": round(row["time_s"] + self.offset_s, 2)} if self.offset_s else row

    def evaluations(self, own: list[dict]) -> list[dict]:
        """The earlier run's evaluations, then this run's (seconds counted on): the curve's points."""
        if self.earlier is None:
            return own
        from herd.curves import PlotUnavailable, Run

        try:
            before = Run(self.earlier)
        except (PlotUnavailable, FileNotFoundError):
            before = None
        earlier = [] if before is None else [
            {"time_s": float(t), "env_steps": float(n), "mean_return": float(r)}
            for t, n, r in zip(before.seconds, before.steps, before.returns)]
        return earlier + [{**e, "time_s": e["time_s"] + self.offset_s} for e in own]

    def record(self) -> dict | None:
        """summary.json's `lineage`: the earlier run, the seconds offset and the budgets rule."""
        if self.earlier is None:
            return None
        return {"earlier_run": str(self.earlier), "time_offset_s": self.offset_s, "budgets": BUDGETS}
