"""Pictures of runs: the evaluation return against seconds since the start and against env
steps, the target as a dashed line. Every job writes its own as runs/<job>/curve.png when it
ends; `herd plot RUN [RUN ...] -o FILE.png` (herd.plot) draws several runs on one figure, the
seeds of one config as a band (min to max, the median as the line).

A run's points are its summary.json's evaluations, or, for a run without a summary (a job that
is still running or was stopped without a wind-down), its metrics.csv rows where eval_return
changed. matplotlib draws them (a dependency of the default install); without it, the caller
gets PlotUnavailable with one line to show.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import yaml

CURVE = "curve.png"


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed, or a run has nothing to draw."""


class Run:
    """A run folder's evaluations as arrays (seconds, env steps, return), its config's name,
    the key its seeds share and its target return."""

    def __init__(self, run_dir: str | Path, evaluations: list[dict] | None = None):
        self.dir = Path(run_dir)
        if not self.dir.is_dir():
            raise FileNotFoundError(f"{run_dir}: no such run folder")
        try:
            cfg = yaml.safe_load((self.dir / "config.yaml").read_text()) or {}
        except (OSError, yaml.YAMLError):
            cfg = {}
        run = dict(cfg.get("run") or {})
        self.name = str(run.get("name") or self.dir.name)
        self.target = run.get("target_return")
        run.pop("seed", None)  # the seeds of one config draw as one band
        self.key = json.dumps({**cfg, "run": run}, sort_keys=True, default=str)
        points = self._points() if evaluations is None else sorted(
            (e["time_s"], e["env_steps"], e["mean_return"]) for e in evaluations)
        if not points:
            raise PlotUnavailable(f"{self.dir}: no evaluation finished yet (nothing to draw)")
        self.seconds, self.steps, self.returns = (np.asarray(c, dtype=float) for c in zip(*points))

    def _points(self) -> list[tuple[float, float, float]]:
        try:
            evals = json.loads((self.dir / "summary.json").read_text()).get("evaluations") or []
            return sorted((e["time_s"], e["env_steps"], e["mean_return"]) for e in evals)
        except (OSError, ValueError, KeyError):
            pass
        out, last = [], None
        try:
            with open(self.dir / "metrics.csv", newline="") as f:
                for row in csv.DictReader(f):
                    ev = row.get("eval_return")
                    if ev not in (None, "") and ev != last:
                        out.append((float(row["time_s"]), float(row["env_steps"]), float(ev)))
                        last = ev
        except (OSError, ValueError, KeyError):
            return []
        return out


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no display); PlotUnavailable without it."""
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailable("matplotlib is not installed (pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def band(runs: list[Run], x: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The seeds' returns on one grid of `x` ("seconds" or "steps") up to the shortest run's
    end: (grid, median, min, max); each run's return drawn straight from one evaluation to the
    next, as a single run's line is."""
    end = min(getattr(r, x)[-1] for r in runs)
    start = max(getattr(r, x)[0] for r in runs)
    grid = np.linspace(start, end, 200) if end > start else np.array([start])
    ys = np.stack([np.interp(grid, getattr(r, x), r.returns) for r in runs])
    return grid, np.median(ys, axis=0), ys.min(axis=0), ys.max(axis=0)


def draw(runs: Iterable[str | Path | Run], out: str | Path, title: str | None = None) -> Path:
    """One figure of the runs (two panels: against seconds and against env steps) in `out`;
    runs of one config but for the seed as one band. FileNotFoundError / PlotUnavailable with
    one line for a path that is no run or has no evaluation."""
    runs = [r if isinstance(r, Run) else Run(r) for r in runs]
    if not runs:
        raise PlotUnavailable("no run to draw")
    out = Path(out)
    if out.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise PlotUnavailable(f"{out}: name a .png, .svg or .pdf file")
    plt = pyplot()
    groups: dict[str, list[Run]] = {}
    for r in runs:
        groups.setdefault(r.key, []).append(r)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for i, members in enumerate(groups.values()):
        colour = f"C{i % 10}"
        label = members[0].name + (f" ({len(members)} seeds)" if len(members) > 1 else "")
        for ax, x in zip(axes, ("seconds", "steps")):
            if len(members) == 1:
                r = members[0]
                ax.plot(getattr(r, x), r.returns, "o-", ms=3, color=colour, label=label)
            else:
                grid, mid, lo, hi = band(members, x)
                ax.fill_between(grid, lo, hi, color=colour, alpha=0.25, lw=0)
                ax.plot(grid, mid, color=colour, label=label)
    targets = sorted({r.target for r in runs if isinstance(r.target, (int, float))})
    for ax, xlabel in zip(axes, ("seconds since the start", "env steps")):
        for t in targets:
            ax.axhline(t, ls="--", color="grey", lw=1)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("deterministic evaluation return")
    if targets:
        axes[0].plot([], [], ls="--", color="grey", lw=1, label="target")
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(title or ", ".join(dict.fromkeys(r.name for r in runs)))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def write_curve(run_dir: str | Path, evaluations: list[dict] | None = None) -> Path:
    """runs/<job>/curve.png, the run's own picture (of `evaluations`, summary.json's, where the
    driver has them before that file is written)."""
    run_dir = Path(run_dir)
    return draw([Run(run_dir, evaluations)], run_dir / CURVE, title=run_dir.name)


def plot(runs: Iterable[str | Path], out: str | Path = "curves.png") -> Path:
    """`herd plot`'s Python twin: the runs (run folders) on one figure in `out`; its path."""
    return draw(list(runs), out)
