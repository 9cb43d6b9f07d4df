"""docs/performance.md and the headline table, generated from bench/results/*.json.

Every record there names its date, machine, cores, torch and the exact command; this module only
picks columns and lays them out, so the page cannot say what the files do not.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"

# (file-name pattern, section, what the figures are, columns). The first matching pattern takes
# a file; the order is the page's order.
KINDS = [
    (r"humanoid-final-fast-", "Humanoid-v5 from `herd submit`: `configs/humanoid.yaml`",
     ("Cold runs of the committed config (compile caches empty), seconds from `herd submit`. "
      "best_eval_contact_cost and final_eval_contact_cost: the evaluation's mean summed contact "
      "cost per episode, which its return has paid (Humanoid-v4's returns never charged it); "
      "updates_per_s counts from the compiled graph's first update, updates_per_s_wall over the "
      "whole run (`bench/humanoid_record.py` says how)."),
     ["seed", "first_update_s", "actors_ready_s", "first_compiled_update_s", "seconds_to_5000",
      "updates_to_5000", "seconds_to_10000", "seconds_to_11000", "min_eval_after_5000", "best_eval_return",
      "best_eval_at_s", "best_eval_contact_cost", "final_eval_return", "final_eval_contact_cost",
      "updates_per_s", "updates_per_s_wall", "env_steps_per_s"]),
    (r"startup-", "Start-up",
     "Seconds from `herd submit` to each milestone of a job (`bench/startup.py`).",
     ["arm", "job_index", "cold", "preload", "driver_ready_s", "learner_listening_s", "actors_ready_s", "first_update_s",
      "first_compiled_update_s", "graph_swap_s", "startup_update_gap_s", "seconds_to_5000", "first_eval_s"]),
    (r"learner-", "The learner's update alone",
     "Updates/s of the SAC update on synthetic data (`bench/learner.py`): no actors, no ingest.",
     ["nets", "actor_arch", "critic_loss", "row", "batch", "amp", "graph", "compile", "updates_per_call",
      "updates_per_s", "us_per_update", "mem_peak"]),
    (r"fanin-", "One learner, a thousand actors",
     "Synthetic gRPC clients against one learner (`bench/fanin.py`): ingest, acks and the update rate.",
     ["clients", "procs", "ingest_processes", "relay", "stalled", "transitions_per_s", "transitions_per_s_paced",
      "p99_ack_ms", "updates_per_s_alone", "updates_per_s_paced", "updates_per_s_flat_out",
      "update_retention_100k", "books_agree"]),
    (r"scale-", "Scaling a running job",
     "A job's env actors scaled while it runs (`bench/scale.py`).",
     ["env", "target_actors", "actors", "stepping", "env_steps_per_s", "updates_per_s", "policy_lag",
      "reconnects_of_running_actors", "reconnects_of_new_actors", "reconnects_total", "refused_actors",
      "books_exact"]),
    (r"actors-|actor-cost-", "Env actors",
     ("Env steps/s of Herd's actors against a plain gymnasium loop with the same policy "
      "(`bench/actors.py`), and CPU per env step (`bench/actor_cost.py`)."),
     ["actors", "envs_per_actor", "variant", "policy", "mode", "env_steps_per_s", "ceiling_steps_per_s",
      "ratio_to_ceiling", "cpu_us_per_step", "updates_per_s", "push_latency_ms"]),
    (r"ingest-|wire-", "Ingest and the wire",
     ("gRPC into the replay buffer while the learner trains (`bench/ingest.py`); encoding cost of a "
      "batch (`bench/wire.py`)."),
     ["what", "phase", "senders", "batch", "target_per_s", "transitions_per_s", "updates_per_s",
      "interference_pct", "rows", "bytes", "cpu_us_per_row", "counts_agree"]),
    (r"humanoid-|curve-|tasks|family-|rllib-|ema", "Learning curves",
     ("Evaluation return against wall-clock from `herd submit` (`bench/humanoid.py`); RLlib's SAC "
      "(`bench/rllib_baseline.py`) as a yardstick."),
     ["variant", "env", "seed", "framework", "actors", "first_update_s", "seconds_to_5000", "updates_to_5000",
      "seconds_to_10000", "seconds_to_11000", "best_eval_return", "best_eval_contact_cost", "final_eval_return",
      "updates_per_s", "updates_per_s_wall", "env_steps_per_s"]),
    (r"ablation-|dips-|support-|sweep-", "Learner variants side by side",
     ("Several jobs on one machine at once, each a variant of the config or a point of a grid "
      "(`bench/humanoid.py --arm/--ablate`, `herd tune`)."),
     ["variant", "seed", "parallel", "batch", "replay_ratio", "learner.batch_size", "learner.replay_ratio",
      "seconds_to_5000", "updates_to_5000", "best_eval_return", "best_eval_contact_cost", "final_eval_return",
      "eval_return", "updates_per_s", "updates_per_s_wall"]),
    (r"compile-profile-", "The update's compile",
     "The compiled update's cold and warm compile alone (`bench/compile_profile.py`).",
     ["arm", "cold", "device", "batch", "updates_per_call", "import_torch_s", "build_s", "prepare_s", "frames"]),
    (r"cli-", "CLI answers",
     "How fast `herd status`, `list`, `scale` and `stop` answer about a running job (`bench/cli.py`).",
     ["cli", "median_s", "calls", "config"]),
    (r".", "Other measurements", "Result files of benchmarks without a section of their own.", []),
]
# Fields every record carries about where it ran: shown above a table, not in it.
CONTEXT = {"date", "machine", "torch", "cores", "command", "cpu_model", "threads_per_core", "l1_cache",
           "l2_cache", "l3_cache"}

# Plots drawn from several files (bench/plot_results.py): the section they join, the command that
# draws them, and the files they are drawn from.
COMPOSITES = {
    "humanoid-vs-rllib-nvidia-h200.png": (
        "Humanoid-v5 from `herd submit`: `configs/humanoid.yaml`", "python bench/plot_results.py",
        ["humanoid-final-fast-s*-nvidia-h200.json", "rllib-nvidia-h200.json"]),
    "humanoid-family-vs-plain-nvidia-h200.png": (
        "Learning curves", "python bench/plot_results.py --family",
        ["humanoid-family-s*-nvidia-h200.json", "humanoid-nvidia-h200.json"]),
}


def load(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else [data]


def newest(path: Path) -> str:
    return max(r.get("date", "") for r in load(path))


def kind_of(name: str) -> int | None:
    for i, (pattern, *_) in enumerate(KINDS):
        if re.match(pattern, name):
            return i
    return None


def cell(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v).replace("|", "\\|")


def value(r: dict, key: str):
    """A flat field, or the same name inside the record's start-up timeline (older records)."""
    if key in ("updates_per_s", "updates_per_s_wall") and whole_run_rate(r):
        return r["updates_per_s"] if key == "updates_per_s_wall" else None
    return r[key] if key in r else (r.get("startup") or {}).get(key)


def whole_run_rate(r: dict) -> bool:
    """A learning-curve record (bench/humanoid.py's) from before updates_per_s counted from the
    compiled graph's first update: its updates_per_s is the whole run's, updates_per_s_wall's."""
    return "evaluations" in r and "updates_per_s" in r and "updates_per_s_wall" not in r


def machine(r: dict) -> str:
    cores = f" + {r['cores']} cores" if r.get("cores") else ""
    return f"{r.get('machine', '?')}{cores}"


def pngs_of(stem: str) -> list[str]:
    return sorted(p.name for p in RESULTS.glob(f"{stem}*.png")
                  if p.name == f"{stem}.png" or p.name.startswith(f"{stem}-"))


def file_block(path: Path, columns: list[str]) -> list[str]:
    recs = load(path)
    if not columns:  # a file of its own kind: its first flat fields
        columns = [k for k, v in recs[0].items()
                   if k not in CONTEXT and isinstance(v, (int, float, str, bool)) and len(str(v)) < 40][:10]
    cols = [c for c in columns if any(value(r, c) is not None for r in recs)]
    dates = sorted({r.get("date", "?") for r in recs})
    machines = sorted({machine(r) for r in recs})
    torches = sorted({r.get("torch") for r in recs if r.get("torch")})
    commands = list(dict.fromkeys(r["command"] for r in recs if isinstance(r.get("command"), str)))
    out = [f"### `{path.name}`", "",
           f"{', '.join(dates)} · {', '.join(machines)}" + (f" · torch {', '.join(torches)}" if torches else ""),
           ""]
    if commands:
        out += ["```", *commands, "```", ""]
    if cols:
        out += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        out += ["| " + " | ".join(cell(value(r, c)) for c in cols) + " |" for r in recs]
        out.append("")
    for png in pngs_of(path.stem):
        out += [f"![{png}](results/{png})", ""]
    return out


def composite_blocks(section: str) -> list[str]:
    out = []
    for png, (where, command, sources) in COMPOSITES.items():
        files = sorted(f for pattern in sources for f in RESULTS.glob(pattern))
        if where != section or not files or not (RESULTS / png).exists():
            continue
        recs = [r for f in files for r in load(f)]
        dates = sorted({r.get("date", "?") for r in recs})
        machines = sorted({machine(r) for r in recs})
        out += [f"### `{png}`", "", f"{', '.join(dates)} · {', '.join(machines)} · drawn from "
                + ", ".join(f"`{f.name}`" for f in files), "", "```", command, "```", "",
                f"![{png}](results/{png})", ""]
    return out


def performance_md() -> str:
    files = sorted(RESULTS.glob("*.json"))
    by_kind: dict[int, list[Path]] = {}
    for f in files:
        k = kind_of(f.name)
        if k is not None:
            by_kind.setdefault(k, []).append(f)
    out = ["# Performance", "",
           "<!-- generated by docs/_gen/generate.py from bench/results/*.json; make docs-gen -->", "",
           "Every figure below is a record in `bench/results/`, which names its date, machine, torch",
           "version and the exact command; `bench/README.md` says how to run each benchmark again.", "",
           "## Headline", "", headline_md(), ""]
    for k, (_, title, what, columns) in enumerate(KINDS):
        if k not in by_kind:
            continue
        out += [f"## {title}", "", what, "", *composite_blocks(title)]
        for f in sorted(sorted(by_kind[k]), key=newest, reverse=True):  # newest first, then by name
            out += file_block(f, columns)
    return "\n".join(out).rstrip() + "\n"


def _span(values: list[float], fmt: str, unit: str = " s") -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return (lo if lo == hi else f"{lo}–{hi}") + unit


def latest(pattern: str) -> Path:
    """The newest result file of a kind (by its records' date, then by name)."""
    return max(sorted(RESULTS.glob(pattern)), key=newest)


def headline_md() -> str:
    """One table of the figures the README leads with, each with its date, machine and source."""
    finals = [r for f in sorted(RESULTS.glob("humanoid-final-fast-s*.json")) for r in load(f)]
    fanin_file, scale_file = latest("fanin-*1000-ip4*.json"), latest("scale-*.json")
    fanin, scale = load(fanin_file)[0], load(scale_file)
    learner = [r for r in load(RESULTS / "learner-nets-mse-512-2048-nvidia-h200.json")
               if r["nets"] != "plain"]
    n = len(finals)
    to10k = [r["seconds_to_10000"] for r in finals if r.get("seconds_to_10000")]
    f0 = finals[0]
    budget = re.search(r"--seconds (\d+)", f0["command"]).group(1)
    rows = [
        ("Humanoid-v5: evaluation ≥ 5,000", _span([r["seconds_to_5000"] for r in finals], "{:.1f}")
         + " after `herd submit`", f"{n} cold seeds", f0, "humanoid-final-fast-s*"),
        ("Humanoid-v5: evaluation ≥ 10,000", _span(to10k, "{:.0f}") + f" ({len(to10k)} of {n} seeds "
         f"within {budget} s)", f"{n} cold seeds", f0, "humanoid-final-fast-s*"),
        ("First update after `herd submit`", _span([r["first_update_s"] for r in finals], "{:.1f}"),
         "cold, preloaded cluster", f0, "humanoid-final-fast-s*"),
        ("Actors on one learner", (f"{fanin['clients']:,} clients, {fanin['stalled']} stalled, "
                                   f"{fanin['transitions_per_s']:,} transitions/s flat out"),
         "synthetic gRPC actors", fanin, fanin_file.name),
        ("Live scale of a running job", " → ".join(str(r["stepping"]) for r in scale) + " env actors, "
         "all stepping" + (f", {sum(r['reconnects_of_running_actors'] for r in scale)} reconnects of "
                           "running actors" if "reconnects_of_running_actors" in scale[0] else ""),
         scale[0]["env"], scale[0], scale_file.name),
        ("SAC updates/s, Humanoid config", " / ".join(f"{r['updates_per_s']:,.0f} (batch {r['batch']})"
                                                     for r in learner), "update alone", learner[0],
         "learner-nets-mse-512-2048-*"),
    ]
    out = ["| what | figure | runs | date | machine | file |", "|---|---|---|---|---|---|"]
    out += [f"| {w} | {fig} | {runs} | {r['date']} | {machine(r)} | `{src}` |" for w, fig, runs, r, src in rows]
    return "\n".join(out)
