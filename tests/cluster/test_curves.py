"""Pictures of runs (herd.curves): a run's curve.png, `herd plot` of several runs with the seeds
of one config as one band, the points read from summary.json or, without one, metrics.csv; and
the one line for what cannot be drawn. The job tests check curve.png in real run folders."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from herd import curves

ROOT = curves.Path(__file__).resolve().parents[2]


def fake_run(root, name: str, seed: int, returns: list[float], summary: bool = True):
    run = root / f"herd-{name}-{seed}"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(
        {"env": {"id": "InvertedPendulum-v5"}, "run": {"name": name, "seed": seed, "target_return": 900}}))
    evals = [{"time_s": 10.0 * (i + 1), "env_steps": 1000 * (i + 1), "mean_return": r}
             for i, r in enumerate(returns)]
    if summary:
        (run / "summary.json").write_text(json.dumps({"evaluations": evals}))
    else:  # a run stopped without its wind-down: metrics.csv, eval_return repeated between evals
        rows = ["time_s,env_steps,eval_return", "5,500,"]
        for e in evals:
            rows += [f"{e['time_s']},{e['env_steps']},{e['mean_return']}"] * 2
        (run / "metrics.csv").write_text("\n".join(rows) + "\n")
    return run


def test_a_run_from_summary_or_metrics(tmp_path):
    a = curves.Run(fake_run(tmp_path, "demo", 1, [10, 500, 950]))
    b = curves.Run(fake_run(tmp_path, "demo", 2, [20, 400, 990], summary=False))
    assert list(b.returns) == [20, 400, 990] and list(b.steps) == [1000, 2000, 3000]
    assert a.key == b.key and a.target == 900  # seeds of one config: one band
    c = curves.Run(fake_run(tmp_path, "other", 1, [1, 2]))
    assert c.key != a.key
    grid, mid, lo, hi = curves.band([a, b], "seconds")
    assert grid[0] == 10 and grid[-1] == 30 and lo[-1] == 950 and hi[-1] == 990
    assert (lo <= mid).all() and (mid <= hi).all()


def test_herd_plot_draws_two_configs_and_a_band(tmp_path):
    runs = [fake_run(tmp_path, "demo", s, [10 * s, 500, 900 + s]) for s in (1, 2, 3)]
    runs.append(fake_run(tmp_path, "other", 1, [5, 50, 100]))
    out = tmp_path / "figs" / "cmp.png"
    r = subprocess.run([sys.executable, "-m", "herd", "plot", *map(str, runs), "-o", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {out}: 4 run(s)" in r.stdout
    single = curves.write_curve(runs[0])
    assert single == runs[0] / "curve.png" and single.stat().st_size > 1000


def test_what_cannot_be_drawn_is_one_line(tmp_path):
    empty = tmp_path / "herd-empty"
    empty.mkdir()
    with pytest.raises(curves.PlotUnavailable, match="no evaluation finished yet"):
        curves.plot([empty], tmp_path / "x.png")
    with pytest.raises(FileNotFoundError, match="no such run folder"):
        curves.plot([tmp_path / "nope"], tmp_path / "x.png")
    run = fake_run(tmp_path, "demo", 1, [1.0])
    with pytest.raises(curves.PlotUnavailable, match="name a .png, .svg or .pdf file"):
        curves.plot([run], tmp_path / "x.txt")
    r = subprocess.run([sys.executable, "-m", "herd", "plot", str(empty)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "herd: no plot:" in r.stderr, r.stderr


def test_without_matplotlib_the_picture_is_skipped_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    with pytest.raises(curves.PlotUnavailable, match="matplotlib is not installed"):
        curves.write_curve(fake_run(tmp_path, "demo", 1, [1.0, 2.0]))
