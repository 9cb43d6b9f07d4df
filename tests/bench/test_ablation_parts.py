"""bench/ablation.py's table from bench/humanoid.py records, and bench/humanoid.py's --no-full /
--append pieces (the ablation split over several runs)."""

import json
import subprocess
import sys

import pytest

from bench.ablation import markdown, rows
from bench.humanoid import ROOT, earlier_runs, variants


def run(variant, seed, last3, final=None, s5000=None, seconds=120, evals=()):
    return {"variant": variant, "seed": seed, "last3_eval_return": last3,
            "evaluations": [{"mean_return": r} for r in evals],
            "min_eval_after_5000": min(evals[[r >= 5000 for r in evals].index(True) + 1:], default=None)
            if any(r >= 5000 for r in evals) else None,
            "final_eval_return": final if final is not None else last3, "seconds_to_5000": s5000,
            "updates_per_s": 1000.0, "env": "Humanoid-v5", "machine": "test",
            "config": {"run": {"max_seconds": seconds}}}


RUNS = [run("-c51", 2, 3000), run("full", 2, 6000, s5000=60.0, evals=(900, 5100, 3000, 6000, 3999, 4000)),
        run("-c51", 1, 5000),
        run("full", 1, 4000, final=4100, s5000=None)]


def test_rows_per_variant_full_first_seeds_in_order_and_the_change_against_full():
    table = rows(RUNS)
    assert [t["variant"] for t in table] == ["full", "-c51"]
    full, c51 = table
    assert full["seeds"] == [1, 2] and full["last3"] == [4000, 6000] and full["final"] == [4100, 6000]
    assert full["last3_mean"] == 5000 and c51["last3_mean"] == 4000
    assert c51["vs_full"] == pytest.approx(-0.2) and full["vs_full"] == 0
    assert full["seconds_to_5000"] == [None, 60.0]
    md = markdown(table)
    assert "| -c51 | 1, 2 | 5,000 / 3,000 | 5,000 / 3,000 | **4,000** | -20% |" in md
    assert "| full | 1, 2 | 4,100 / 6,000 | 4,000 / 6,000 | **5,000** |  | – / 60 |" in md
    # the no-dip columns: seed 2 fell below 4,000 in 2 of the 4 evaluations after its first 5,000
    assert full["min_after_5000"] == [None, 3000] and full["dips_after_5000"] == [None, "2/4"]
    assert md.splitlines()[2].endswith("| – / 3,000 | – / 2/4 |")


def ablation(path):
    return subprocess.run([sys.executable, "bench/ablation.py", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)


def test_the_cli_prints_the_table_and_writes_the_bar_plot(tmp_path):
    path = tmp_path / "ablation.json"
    path.write_text(json.dumps(RUNS))
    r = ablation(path)
    assert r.returncode == 0, r.stderr
    assert "| -c51 |" in r.stdout and (tmp_path / "ablation-bars.png").stat().st_size > 1000
    path.write_text(json.dumps([{"seed": 1}]))
    r = ablation(path)
    assert r.returncode != 0 and "no bench/humanoid.py runs" in r.stderr


def test_variants_without_the_full_config():
    assert [v for v, _ in variants("c51,n_step", full=False)] == ["+c51", "-n_step"]
    assert [v for v, _ in variants("c51")] == ["full", "+c51"]
    with pytest.raises(SystemExit, match="needs --ablate"):
        variants(None, full=False)


def test_append_keeps_runs_of_the_same_budget_and_refuses_anything_else(tmp_path):
    path = tmp_path / "a.json"
    assert earlier_runs(path, 120) == []  # nothing there yet
    path.write_text(json.dumps(RUNS))
    assert len(earlier_runs(path, 120)) == 4
    with pytest.raises(SystemExit, match="not 240 s"):
        earlier_runs(path, 240)
    path.write_text(json.dumps([{"batch_size": 512}]))  # e.g. a herd tune result
    with pytest.raises(SystemExit, match="does not hold"):
        earlier_runs(path, 120)
    path.write_text("{not json")
    with pytest.raises(SystemExit, match="not JSON"):
        earlier_runs(path, 120)


def test_a_run_with_no_evaluation_leaves_its_cell_blank_not_the_table():
    table = rows(RUNS + [run("-n_step", 1, None, final=300.0)])
    n_step = table[-1]
    assert n_step["variant"] == "-n_step" and n_step["last3_mean"] is None and n_step["vs_full"] is None
    assert "| -n_step | 1 | 300 | – | **–** |" in markdown(table)
