"""The terminal views on an 80-column terminal: the status box and the actor table hold their
values without a wrap, the legend fits, the `--follow` line keeps the evaluation return, the
elapsed time and steps/s; NO_COLOR leaves no escape at all (bold and dim included); a finished
job's summary names only what it has."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.progress import Progress

from herd import live
from herd.progress import window_rates

ROW = {"eval_return": 912.3, "env_steps": 35_804, "env_steps_per_s": 2178.0, "train_return": 950.1,
       "updates": 35_000, "updates_per_s": 61.0, "actors": 1, "time_s": 11.0, "unix_time": 995.0,
       "inserts_per_s": 2100.0}


def a_status() -> dict:
    ls = {"device": "cpu", "learner_id": "herd-demo-20261207-045012-ab12-learner", "updates": 123_456_789,
          "updates_per_s": 61.0, "received": 123_456_789, "inserted": 123_454_741, "inserts_per_s": 0.0,
          "replay_size": 100_000, "replay_capacity": 1_000_000, "policy_version": 123_456,
          "mean_policy_lag": 1.3, "rejected_batches": 0, "refused_actors": 0,
          "gpu_mem_reserved": 0, "gpu_mem_allocated": 0}
    actor = {"actor_id": "actor-0", "pid": 123_456, "steps": 1_234_567, "steps_per_s": 61.0,
             "acked": 1_234_500, "bytes_sent": 1.2e9, "mean_return": 999.9, "policy_version": 12_345,
             "push_latency_ms": 12.0, "in_flight": 2, "reconnects": 0}
    return {"job_id": "herd-demo-20261207-045012-ab12", "time": 1000.0, "learner": ls,
            "actors": [actor], "target_actors": 1, "progress": dict(ROW), "stop_requested": False}


def terminal(width: int = 80) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)


def test_the_status_box_and_table_fit_80_columns():
    console = terminal()
    console.print(live.status_view(a_status()))
    lines = console.file.getvalue().splitlines()
    assert max(len(ln) for ln in lines) <= 80, "\n".join(lines)
    text = "\n".join(lines)
    # each value on one line with its label: nothing wrapped
    for shown in ("updates 123,456,789 (61/s)", "received 123,456,789 = inserted 123,454,741 + staged 2,048",
                  "eval return 912.3", "env steps/s 2,178 (all actors, last 10 s)", "elapsed 16s",
                  "actor-0  123456  1234567"):
        assert shown in text, (shown, text)
    assert all(len(ln) <= 80 for ln in live.LEGEND.splitlines())


def test_elapsed_counts_on_between_two_rows():
    st = a_status()
    first = live.progress_line(st["progress"], st["time"])
    later = live.progress_line(st["progress"], st["time"] + 2)
    assert "elapsed 16s" in first and "elapsed 18s" in later


def test_the_follow_line_keeps_what_matters_at_80_columns():
    console = terminal()
    with Progress(*live.follow_columns(), console=console, auto_refresh=False) as bar:
        bar.add_task("training", total=1.0, completed=0.4, info=live.follow_info(ROW))
        bar.refresh()
    line = console.file.getvalue().replace("\r", "\n").splitlines()[-2]
    for shown in ("training", "0:00:0", "eval 912.3", "steps 35,804 (2,178/s)"):
        assert shown in line, (shown, line)


def test_no_color_means_no_escape_of_any_kind(monkeypatch):
    def printed() -> str:
        out = io.StringIO()
        console = live.make_console(out, force_terminal=True)
        console.print("[bold green]herd-x finished[/] [dim]dim[/] [italic]it[/]")
        console.print(live.status_view(a_status()))
        return out.getvalue()

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert "\x1b[1" in printed()  # styled on a terminal
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in printed()


def test_rates_over_the_window_replace_the_learners_last_second():
    ls = a_status()["learner"]
    assert window_rates(ls, ROW)["inserts_per_s"] == 2100.0
    assert window_rates(ls, ROW)["rates_over_s"] == 10.0
    assert window_rates(ls, {})["inserts_per_s"] == 0.0  # no row yet: the learner's own
    assert window_rates(ls, {})["rates_over_s"] == 1.0  # the same keys either way


def test_a_finished_job_names_only_what_it_has(tmp_path):
    s = {"final_eval": {"mean_return": 31.0, "policy_version": 7}, "best_eval": None,
         "best_policy": None, "startup": {"first_update_s": 4.2, "since": "herd submit",
                                          "actors_ready_s": 3.1, "first_eval_s": None}}
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "checkpoint").mkdir()
    lines = live.finish_lines(s, tmp_path)
    text = "\n".join(lines)
    assert "best_policy.pb" not in text and "first eval" not in text and " - s" not in text, text
    assert lines[-1] == f"results: {tmp_path}  (summary.json, checkpoint/)"
    assert "actors ready 3.1 s" in text
    s["final_eval"] = {"mean_return": None, "skipped": "no time left of the 5 s grace"}
    assert "final evaluation skipped: no time left of the 5 s grace" in live.finish_lines(s, tmp_path)


def test_the_drivers_rate_window_gives_inserts_and_actor_rates():
    import time

    from herd.progress import actor_rates, progress_row

    st = a_status()
    ls = {**st["learner"], "received": 3000, "inserted": 2048, "losses": {}}
    t0 = time.monotonic() - 2
    window = [(t0, 1000, 10, 0, {"actor-0": 1000}), (t0 + 1, 2000, 20, 1024, {"actor-0": 2000})]
    row = progress_row({**st, "learner": ls}, None, 2.0, window[0])
    assert row["inserts_per_s"] == pytest.approx(1024, rel=0.05)
    assert actor_rates({"actor-0": 3000}, t0 + 2, window) == {"actor-0": 1000.0}


def test_every_figure_of_herd_status_is_explained_on_one_page():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "status.md").read_text()
    console = Console(file=io.StringIO(), width=200, color_system=None)
    st = a_status()
    st["relays"], st["stop_requested"] = {"n": {"weight_streams": 1}}, True
    st["nodes_lost"] = [{"node_id": "ab" * 28, "address": "10.0.0.7", "unix_time": 1.0, "cpus": 8}]
    console.print(live.status_view(st))
    shown = console.file.getvalue()
    box = ["updates", "policy v", "lag", "on", "received", "inserted", "staged", "buffer",
           "rejected batches", "refused actors", "elapsed", "eval return", "train return",
           "env steps/s", "weights relays", "node lost", "stop requested"]
    table = ["actor", "pid", "steps", "st/s", "acked", "MB", "return", "ver", "ms", "infl", "rc"]
    assert all(label in shown for label in box), shown
    assert all(f" {label} " in f" {ln} " for label in table for ln in shown.splitlines()
               if ln.strip().startswith("actor ")), shown
    missing = [label for label in box + table if f"`{label}`" not in page]
    assert not missing, missing
    for book in ("actor_steps", "actor_acked", "learner.received", "learner.inserted",
                 "inserts_per_s", "rates_over_s", "duplicate_batches", "wind_down"):
        assert f"`{book}`" in page, book
