"""What the CLI prints for a reader and for a pipe: every argument of `herd submit` explained,
piped output without wrapping or colour, `--watch` a block per refresh on a pipe."""

from __future__ import annotations

import argparse
import io

from herd.cli import build_parser
from tests.cluster.test_front_door import rendered, status


def subcommand(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_every_argument_of_submit_says_what_it_is():
    unexplained = [a.dest for a in subcommand("submit")._actions if not (a.help or "").strip()]
    assert not unexplained, unexplained


def test_an_actors_steps_per_s_is_over_the_headers_window():
    """The driver's row gives each actor's rate over the window of the job's own (10 s); the
    actor's own rate is since whoever asked it last (0 after a call a moment earlier)."""
    from herd.progress import actor_rates

    window = [(100.0, 0, 0, {"actor-0": 1000, "actor-1": 5000, "actor-2": 900}),
              (105.0, 0, 0, {"actor-0": 3000, "actor-1": 100, "actor-2": 900, "actor-3": 0})]
    # actor-1 came back at 105 s as a fresh incarnation (counting from 0), actor-3 is new then,
    # actor-4 newer still: each since its first sample, actor-4 none yet
    steps = {"actor-0": 5330, "actor-1": 600, "actor-2": 900, "actor-3": 50, "actor-4": 10}
    rates = actor_rates(steps, 110.0, window)
    assert rates == {"actor-0": 433.0, "actor-1": 100.0, "actor-2": 0.0, "actor-3": 10.0}

    st = status()
    st["actors"][0]["recent_steps_per_s"] = 0.0
    st["progress"]["actor_steps_per_s"] = {"actor-0": 433.0}
    row = next(ln for ln in rendered(st).splitlines() if ln.strip().startswith("actor-0"))
    assert row.split()[3] == "433", row  # pid, steps, st/s
    del st["progress"]["actor_steps_per_s"]  # a driver's row without it: the actor's own
    row = next(ln for ln in rendered(st).splitlines() if ln.strip().startswith("actor-0"))
    assert row.split()[3] == "0", row


def test_piped_output_neither_wraps_nor_colours():
    from herd.live import make_console, status_view

    path = "/home/someone/projects/" + "a-long-folder-name/" * 8 + "runs/herd-x-20261205-101010-abcd"
    out = io.StringIO()
    console = make_console(out)
    console.print(f"[bold green]herd-x finished[/] results: {path}  (summary.json, metrics.csv, tb/)")
    st = status()
    st["actors"][0]["actor_id"] = "actor-0-" + "x" * 90
    console.print(status_view(st))
    text = out.getvalue()
    assert "\x1b[" not in text, text
    assert f"herd-x finished results: {path}  (summary.json, metrics.csv, tb/)\n" in text
    assert any(ln.split()[:2] == [st["actors"][0]["actor_id"], "1"] for ln in text.splitlines()), text


def test_watch_on_a_pipe_prints_a_block_per_refresh():
    from herd.live import make_console, watch_status

    answers = [status(), status(), status(), None]  # three refreshes, then the job ends
    out = io.StringIO()
    assert watch_status(lambda: answers.pop(0), 0.01, make_console(out)) == 0
    text = out.getvalue()
    assert text.count("--- ") == 3 and text.count("1 env actors") == 3, text
    assert text.rstrip().endswith("the job ended (see `herd logs JOB`)")


def test_commands_find_the_dashboard_herd_up_started_on_its_own_port(tmp_path):
    """`herd up --dashboard-port P` then `herd submit`: the CLI asks the dashboard on P (the
    record `herd up` leaves in HERD_HOME), not the default port."""
    import json
    import os
    import socket
    import subprocess
    import sys

    from tests.jobs import ROOT

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing answers there
    (tmp_path / "cluster.json").write_text(json.dumps({"dashboard": f"http://127.0.0.1:{port}"}))
    env = {k: v for k, v in os.environ.items() if k not in ("HERD_DASHBOARD_URL", "RAY_ADDRESS")}
    env["HERD_HOME"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-m", "herd", "list"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 2 and f"no Ray dashboard answers at http://127.0.0.1:{port})" in r.stderr, r.stderr
