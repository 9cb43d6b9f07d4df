"""Live views in the terminal: `herd submit --follow` and `herd status`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from herd.nodes import lost_line
from herd.progress import RATE_WINDOW_S
from herd.ray_errors import failure_line

PIPE_WIDTH = 100_000
"""A pipe's lines (a log file, CI) are as long as their text: no wrapping, no path split."""


def make_console(file=None, force_terminal: bool | None = None) -> Console:
    """rich's console on a terminal (styled, unless NO_COLOR is set: then no escape of any kind,
    bold and dim included); on a pipe, one that neither wraps nor styles, as Ray's and SB3's CLIs
    write to a log."""
    console = Console(file=file, force_terminal=force_terminal)
    if console.is_terminal:
        if os.environ.get("NO_COLOR"):  # https://no-color.org: rich drops colours, not bold/dim
            return Console(file=file, force_terminal=force_terminal, color_system=None)
        return console
    return Console(file=file, width=PIPE_WIDTH, color_system=None, highlight=False, soft_wrap=True)


console = make_console()
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


def _fmt(v, spec=".1f") -> str:
    return "-" if v is None else format(v, spec)


def _progress_of(job_id: str) -> dict | None:
    """The driver's latest progress row, read from the job's controller (None if not up yet):
    over its loopback endpoint when this machine has its record, else through Ray."""
    from herd.control import Unreachable, find

    ep = find(job_id)
    if ep is not None:
        try:
            return ep.progress()
        except (Unreachable, RuntimeError):
            pass
    import ray

    from herd.control import NAMESPACE, controller_name
    from herd.local import join

    try:
        join()
        ctl = ray.get_actor(controller_name(job_id), namespace=NAMESPACE)
        return ray.get(ctl.latest_progress.remote(), timeout=15)
    except Exception:  # noqa: BLE001 -- not up yet, or gone: no progress to show
        return None


PLAIN_EVERY_S = 15.0
"""Not a terminal (a pipe, a log file, CI): no bar, but a plain line this often, and at each change
of state, so that a long job shows progress there too."""


class Budget:
    """How far a job is toward whichever ends it: run.max_env_steps, run.max_seconds, or, with
    run.stop_at_target, the eval return's way from the first evaluation (or 0) to the target."""

    def __init__(self, run_dir: Path):
        self.run_dir, self.target, self.base = run_dir, None, None

    def fraction(self, p: dict) -> float:
        if self.target is None:
            self.target = self._target()
        frac = max(p["env_steps"] / p["max_env_steps"], p["time_s"] / p["max_seconds"])
        ev = p.get("eval_return")
        if type(self.target) in (int, float) and ev is not None:
            self.base = min(0.0, ev) if self.base is None else self.base
            if self.target > self.base:
                frac = max(frac, (ev - self.base) / (self.target - self.base))
        return min(max(frac, 0.0), 1.0)

    def _target(self):
        """run.target_return when the job stops there (config.yaml, written as the job starts);
        False when it does not."""
        import yaml

        try:
            run = (yaml.safe_load((self.run_dir / "config.yaml").read_text()) or {}).get("run") or {}
        except (OSError, yaml.YAMLError):
            return None  # not written yet: asked again next time
        stops = run.get("stop_at_target") and run.get("target_return") is not None
        return run["target_return"] if stops else False


def follow_columns() -> tuple:
    """The live line's columns, what matters first (state, elapsed, then follow_info: the
    evaluation return, steps/s) and the bar last: on 80 columns the bar shrinks, the line is
    cut at its end, never before the evaluation return."""
    from rich.table import Column

    return (TextColumn("[bold]{task.description}", table_column=Column(no_wrap=True, min_width=8)),
            TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=7)),
            TextColumn("{task.fields[info]}", table_column=Column(no_wrap=True, overflow="ellipsis")),
            BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=3)))


def follow_info(p: dict) -> str:
    """The live line's figures from the driver's progress row, most wanted first."""
    return (f"eval {_fmt(p['eval_return'])}  steps {p['env_steps']:,} "
            f"({p['env_steps_per_s']:,.0f}/s)  return {_fmt(p['train_return'])}  updates "
            f"{p['updates']:,} ({p['updates_per_s']:,.0f}/s)  actors {p['actors']}")


def follow_job(client, job_id: str, run_dir: Path) -> int:
    """Progress bar until the job ends; then the final evaluation and where results are."""
    plain, said, last_line, began = not console.is_terminal, None, 0.0, time.monotonic()
    budget = Budget(run_dir)
    with Progress(*follow_columns(), console=console, transient=False, disable=plain) as bar:
        task = bar.add_task("starting", total=None, info="")
        while True:
            status = str(client.get_job_status(job_id)).split(".")[-1]
            if status in TERMINAL:
                if status == "SUCCEEDED":  # it ended at one of its budgets: the bar ends full
                    bar.update(task, total=1.0, completed=1.0, description="done")
                break
            p = _progress_of(job_id) if status == "RUNNING" else None
            state = "training" if p else status.lower()
            info = ""
            if p:
                info = follow_info(p)
                bar.update(task, total=1.0, completed=budget.fraction(p), description=state, info=info)
            else:
                bar.update(task, description=state)
            now = time.monotonic()
            if plain and (state != said or now - last_line >= PLAIN_EVERY_S):
                console.print(f"{now - began:5.0f}s {state}  {info}".rstrip(), markup=False, highlight=False,
                              soft_wrap=True)  # one line each, at any width
                said, last_line = state, now
            time.sleep(2)
    summary = run_dir / "summary.json"
    if status == "SUCCEEDED" and summary.exists():
        s = json.loads(summary.read_text())
        verdict = ""
        if s.get("target_return") is not None:
            reached = "reached" if s["reached_target"] else "NOT reached"
            if s["final_eval"].get("mean_return") is None:
                reached = "not evaluated"
            verdict = f" (target {s['target_return']:.0f} {reached} by the final checkpoint"
            if s.get("best_reached_target") and not s["reached_target"]:
                verdict += f"; reached by {s['best_policy']}"
            verdict += ")"
        console.print(f"[bold green]{job_id} finished[/] in {s['wall_s']:.0f}s ({s['stop_reason']}){verdict}")
        for line in finish_lines(s, run_dir):
            console.print(line, markup=False, highlight=False)
        return 0
    logs = client.get_job_logs(job_id)
    console.print(f"[bold red]{job_id} ended {status}[/]; last log lines:")
    console.print("\n".join(logs.splitlines()[-40:]), markup=False)
    why = failure_line(logs)
    if why and why.startswith("herd: "):  # the driver's reason, last, where a user looks
        console.print(why, markup=False, highlight=False, soft_wrap=True)
    return 1


def finish_lines(s: dict, run_dir: Path) -> list[str]:
    """What a finished job's summary says below its first line: the best and final evaluations
    (only those that ran), the start-up, and the files its run folder holds."""
    ev, best, out = s["final_eval"], s.get("best_eval"), []
    if best:
        out.append(f"best deterministic eval return {best['mean_return']:.1f} (policy "
                   f"v{best['policy_version']} at {best['time_s']:.0f}s, {best['env_steps']} env "
                   f"steps; saved as {s['best_policy']}, which herd evaluate and export take)")
    if ev.get("mean_return") is not None:
        out.append(f"final checkpoint's deterministic eval return {ev['mean_return']:.1f} "
                   f"(policy v{ev['policy_version']})")
    else:
        out.append(f"final evaluation skipped: {ev.get('skipped')}")
    up = s.get("startup") or {}
    if up.get("first_update_s") is not None:
        phases = [f"{what} {up[key]:.1f} s" for what, key in
                  (("actors ready", "actors_ready_s"), ("first eval", "first_eval_s"))
                  if up.get(key) is not None]
        out.append(f"first update {up['first_update_s']:.1f} s after {up['since']} ("
                   + "; ".join([", ".join(phases)] * bool(phases) + ["summary.json's startup has every phase"])
                   + ")")
    files = [name for name in RUN_FILES if (run_dir / name).exists()]
    out.append(f"results: {run_dir}  ({', '.join(files)})" if files else f"results: {run_dir}")
    return out


RUN_FILES = ("summary.json", "metrics.csv", "curve.png", "tb/", "checkpoint/", "checkpoint-best/",
             "best_policy.pb")
"""The files of a run folder a finished job's summary names, where they exist."""


LEGEND = ("st/s: env steps/s (window above)  acked: transitions the learner took\n"
          "MB: sent  ver: policy version  ms: push round trip  infl: batches in flight\n"
          "rc: reconnects  (every figure: docs/status.md)")
"""The actor table's legend, in lines that fit an 80-column terminal."""


def learner_lines(ls: dict, p: dict) -> list[str]:
    """The status box's learner lines, each labelled and under 76 characters for values of
    up to 9 digits: a box of 80 columns holds them without a wrap."""
    rate = p.get("updates_per_s", ls["updates_per_s"])
    staged = ls["received"] - ls["inserted"]
    lines = [
        (f"updates {ls['updates']:,} ({rate:,.0f}/s)  policy v{ls['policy_version']:,}  "
        f"lag {ls['mean_policy_lag']:.1f}  on {ls['device']}"),
        (f"received {ls['received']:,} = inserted {ls['inserted']:,} + staged {staged:,}"),
        (f"buffer {ls['replay_size']:,}/{ls['replay_capacity']:,}  rejected batches "
        f"{ls['rejected_batches']}  refused actors {ls.get('refused_actors', 0)}"),
    ]
    if ls.get("frames_received"):  # a pixel env: its frames, and rows whose frame was gone
        lines.append(f"frames {ls['frames_received']:,}  rows unresolved {ls.get('rows_unresolved', 0):,}")
    if ls.get("gpu_mem_reserved"):  # a learner on the CPU has none to show
        lines.append(f"gpu mem {ls['gpu_mem_allocated'] / 2**20:.0f}/"
                     f"{ls['gpu_mem_reserved'] / 2**20:.0f} MiB (allocated/reserved)")
    return lines


def progress_line(p: dict, now: float | None) -> str:
    """The driver's last progress row: returns, the job's env steps/s, and the time since the
    job started, counted on to the status's own time (rows come every run.log_every_s)."""
    elapsed = p.get("time_s", 0)
    if now is not None and p.get("unix_time"):
        elapsed += max(0.0, now - p["unix_time"])
    return (f"elapsed {elapsed:.0f}s  eval return {_fmt(p.get('eval_return'))}  train return "
            f"{_fmt(p.get('train_return'))}\nenv steps/s {_fmt(p.get('env_steps_per_s'), ',.0f')} "
            f"(all actors, last {RATE_WINDOW_S:g} s)")


def status_view(st: dict):
    """One renderable of a job's status: a learner panel over a table with a row per actor."""
    from rich.console import Group
    from rich.panel import Panel

    ls = st["learner"]
    p = st.get("progress") or {}
    head = "\n".join(f"[red]{ls['error']}[/]" if "error" in ls else learner_lines(ls, p))
    if p:
        head += "\n" + progress_line(p, st.get("time"))
    if st.get("relays"):
        streams = sum(r.get("weight_streams", 0) for r in st["relays"].values())
        head += f"\nweights relays {len(st['relays'])} ({streams} actor streams)"
    if st.get("nodes_lost"):
        head += f"\n[red]{lost_line(st['nodes_lost'])}[/]"
    if st.get("stop_requested"):
        why = (st.get("stop_why") or {}).get("why")
        head += f"\n[yellow]stop requested{f' ({why})' if why else ''}: winding down[/]"
    from rich import box

    waiting = [a for a in st["actors"] if a.get("waiting")]  # one line for all of them, below
    actors = [a for a in st["actors"] if not a.get("waiting")]
    n, target = len(actors), st.get("target_actors")
    starting = f", {target - n - len(waiting)} starting" if target is not None and target > n + len(waiting) else ""
    if waiting:
        starting += f", {len(waiting)} waiting for CPUs"
    cancelled = f", {st['cancelled']} cancelled" if st.get("cancelled") else ""
    t = Table(title=f"{n} env actors ({len(st.get('retired', []))} retired{cancelled}{starting})",
              box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    t.add_column("actor", no_wrap=True, min_width=7)
    # short headers: the table fits an 80-column terminal (see the caption)
    for name in ("pid", "steps", "st/s", "acked", "MB", "return", "ver", "ms", "infl", "rc"):
        t.add_column(name, justify="right", no_wrap=True)
    t.caption = LEGEND
    notes = []
    if waiting:
        notes.append(f"[yellow]{len(waiting)} actor{'s' if len(waiting) > 1 else ''} "
                     f"{waiting[0]['error']}; {st.get('cpus_free', 0):g} CPUs free: they start when "
                     "CPUs free up or nodes join[/]")
    # an actor's own rate is since whoever asked it last: the driver's is over the header's window
    window_rates = p.get("actor_steps_per_s") or {}
    for a in actors:
        if a.get("error"):
            notes.append(f"[red]{a['actor_id']}: {a['error']}[/]")
        if "steps" not in a:
            t.add_row(a["actor_id"], *["-"] * 10)
            continue
        t.add_row(a["actor_id"], str(a["pid"]), str(a["steps"]),
                  f"{window_rates.get(a['actor_id'], a.get('recent_steps_per_s', a['steps_per_s'])):.0f}",
                  str(a["acked"]),
                  f"{a.get('bytes_sent', 0) / 1e6:.0f}", _fmt(a["mean_return"]),
                  str(a["policy_version"]), f"{a['push_latency_ms']:.0f}", str(a.get("in_flight", "-")),
                  str(a["reconnects"]))
    if notes:
        t.caption = "\n".join(notes) + "\n" + t.caption
    return Group(Panel(head, title=f"[bold]{st['job_id']}[/]", expand=False), t)


def print_status(st: dict) -> None:
    console.print(status_view(st))


def print_ended(final: dict) -> None:
    """An ended job's final status (herd.jobs.ended_status): its state, and from its summary why it
    ended, its books and evaluations, and where its results are."""
    s = final.get("summary") or {}
    line = f"{final['job_id']} ended {final['state']}"
    if s:
        ls, best = s.get("learner") or {}, s.get("best_eval") or {}
        line += (f" ({s.get('stop_reason')}) after {s.get('wall_s', 0):.0f} s: env steps "
                 f"{s.get('actor_steps')}, received {ls.get('received')}, updates {ls.get('updates')}; "
                 f"final eval return {_fmt((s.get('final_eval') or {}).get('mean_return'))}, best "
                 f"{_fmt(best.get('mean_return'))}")
    console.print(line, markup=False, highlight=False)
    if final.get("error"):
        console.print(final["error"], markup=False, highlight=False)
    if final.get("run_dir"):
        console.print(f"results: {final['run_dir']}" + ("" if s else " (no summary.json there)"),
                      markup=False, highlight=False)


def watch_status(fetch, every_s: float, out: Console | None = None) -> int:
    """The status every `every_s` seconds until the job ends: redrawn in place on a terminal
    (rich Live); on a pipe, which cannot redraw, a block per refresh headed by its time."""
    from rich.live import Live

    out = out or console
    st = fetch()
    if st is None:
        return 1
    if not out.is_terminal:
        while st is not None:
            out.print(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')}")
            out.print(status_view(st))
            out.file.flush()  # a block as it comes, to a file or a pipe too
            time.sleep(every_s)
            st = fetch()
    else:
        with Live(status_view(st), console=out, refresh_per_second=4, screen=False) as live:
            while True:
                time.sleep(every_s)
                st = fetch()
                if st is None:
                    break
                live.update(status_view(st))
    out.print("[bold]the job's controller is gone[/]: the job ended (see `herd logs JOB`)")
    return 0
