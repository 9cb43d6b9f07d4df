"""The performance page's Humanoid table: a record with the contact cost and the compiled graph's
updates/s shows them; an older record without them still renders, its whole-run updates/s under
updates_per_s_wall."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
performance = importlib.import_module("docs._gen.performance")
results = importlib.import_module("docs._gen.results")

CONTEXT = {"date": "2026-12-04", "machine": "nvidia-h200", "cores": 16, "torch": "2.9.1",
           "command": "python bench/humanoid.py --config configs/humanoid.yaml --seeds 1 --seconds 480"}
OLD = {**CONTEXT, "seed": 1, "seconds_to_5000": 30.0, "best_eval_return": 10_297.0,
       "final_eval_return": 10_081.0, "updates_per_s": 1_039.1, "evaluations": [{"seconds": 30.0}]}
NEW = {**OLD, "seed": 2, "seconds_to_11000": 402.5, "best_eval_at_s": 402.5, "best_eval_contact_cost": 612.3,
       "final_eval_contact_cost": 598.0, "updates_per_s": 2_410.0, "updates_per_s_wall": 2_100.0}


def humanoid_table(tmp_path, records: list[dict], name: str) -> tuple[list[str], list[list[str]]]:
    path = tmp_path / f"humanoid-final-fast-{name}.json"
    path.write_text(json.dumps(records))
    kind = results.kind_of(path.name)
    assert kind.section == "Humanoid-v5 learning curves"
    lines = [ln for ln in performance.kind_block(kind, [path]) if ln.startswith("| ")]
    split = lambda ln: [c.strip() for c in ln.strip("|").split("|")]
    return split(lines[0]), [split(ln) for ln in lines[1:]]


def test_a_new_record_shows_the_new_keys(tmp_path):
    head, (row,) = humanoid_table(tmp_path, [NEW], "s2-test")
    got = dict(zip(head, row))
    assert {k: got[k] for k in ("seconds_to_11000", "best_eval_at_s", "best_eval_contact_cost",
                                "final_eval_contact_cost", "updates_per_s", "updates_per_s_wall")} == {
        "seconds_to_11000": "402.5", "best_eval_at_s": "402.5", "best_eval_contact_cost": "612.3",
        "final_eval_contact_cost": "598.0", "updates_per_s": "2,410", "updates_per_s_wall": "2,100"}


def test_an_older_record_renders_with_its_whole_run_rate_where_it_belongs(tmp_path):
    head, (row,) = humanoid_table(tmp_path, [OLD], "s1-test")
    got = dict(zip(head, row))
    assert "seconds_to_11000" not in got and "best_eval_contact_cost" not in got  # no column for nothing
    assert "updates_per_s" not in got and got["updates_per_s_wall"] == "1,039"
    head, rows = humanoid_table(tmp_path, [OLD, NEW], "mixed-test")  # one file of both: a dash where a key is missing
    old, new = (dict(zip(head, r)) for r in rows)
    assert (old["updates_per_s"], old["updates_per_s_wall"], old["best_eval_contact_cost"]) == ("–", "1,039", "–")
    assert (new["updates_per_s"], new["updates_per_s_wall"]) == ("2,410", "2,100")


def test_other_records_keep_their_updates_per_s():
    learner = {"nets": "residual", "batch": 1024, "updates_per_s": 1540.0}  # bench/learner.py's: no evaluations
    assert results.value(learner, "updates_per_s") == 1540.0
    assert results.value(learner, "updates_per_s_wall") is None


def test_every_curve_of_a_shown_plot_has_its_numbers_on_the_page():
    from docs._gen.results import COMPOSITES, composite_sources

    page = (ROOT / "docs" / "performance.md").read_text()
    for png in COMPOSITES:
        if f"(../bench/results/{png})" in page:
            missing = [p.name for p in composite_sources(png)
                       if f"(../bench/results/{p.name})" not in page and f"`{p.name}`" not in page]
            assert not missing, (png, missing)
