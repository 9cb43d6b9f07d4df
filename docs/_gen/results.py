"""bench/results/ as the docs read it: each file's records, its kind, its plots and its cells.

KINDS is the one table that says what a result file is: the first kind whose pattern matches a
file's name takes it. A kind with a section is a capability of the performance page, which shows
its newest result (`per`: the newest for each value of that key) through `figures`; the others
are listed on the archive page only. `measure` is the figure the archive's one-line summary
gives. Every record names its date, machine, torch and exact command; this module only picks
and lays out, so the pages cannot say what the files do not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"


@dataclass(frozen=True)
class Kind:
    name: str
    pattern: str
    measure: tuple[str, str]  # (record key, or keys a|b: the first a record has; its name)
    section: str | None = None
    what: str = ""
    figures: tuple[str, ...] = ()
    per: str | None = None  # the newest file for each value of this key, not one file
    rows: dict = field(default_factory=dict)  # only records with these values are shown


KINDS = [
    Kind("profile", r".*\.txt$", ("", "")),
    Kind("demo", r"demo-", ("best_eval_return", "best eval return"), "The demo on 2 cores",
         "`configs/demo.yaml` (InvertedPendulum-v5 to 900, the job `make demo` runs) from `herd "
         "submit` on a 2-core machine with no GPU, one job per seed (`bench/humanoid.py --config "
         "configs/demo.yaml`): the job stops at the target; best_eval_at_s is when it got there. "
         "cpu_pressure_s is the seconds the machine's tasks waited for a CPU meanwhile.",
         ("seed", "first_update_s", "best_eval_return", "best_eval_at_s", "updates_per_s",
          "env_steps_per_s", "cpu_pressure_s"), per="seed"),
    Kind("Humanoid", r"humanoid-final-fast-", ("best_eval_return", "best eval return"),
         "Humanoid-v5 learning curves",
         "`configs/humanoid.yaml` from `herd submit`, cold (compile caches empty), one job per seed, "
         "its full budget (`bench/humanoid.py`); seconds count from `herd submit`. A contact cost is "
         "the evaluation's summed contact cost per episode, which its return has paid; updates_per_s "
         "counts from the compiled graph's first update, updates_per_s_wall over the whole run.",
         ("seed", "first_update_s", "seconds_to_5000", "seconds_to_10000", "seconds_to_11000",
          "best_eval_return", "best_eval_at_s", "best_eval_contact_cost", "final_eval_return",
          "final_eval_contact_cost", "updates_per_s", "updates_per_s_wall", "env_steps_per_s"),
         per="seed"),
    Kind("MuJoCo tasks", r"(tasks2?|family|curve)-", ("best_eval_return", "best eval return"),
         "Other MuJoCo tasks",
         "The newest run of each task (`bench/humanoid.py --envs`): each config a job of its own, "
         "seconds from `herd submit`.",
         ("env", "config_file", "variant", "seconds_to_5000", "best_eval_return", "final_eval_return",
          "updates_per_s", "updates_per_s_wall", "env_steps_per_s"), per="env"),
    Kind("pixels", r"pixels-", ("best_eval_return", "best eval return"), "Pixels",
         "Learning from camera frames (`bench/pixels.py`): each arm a job of the config with one "
         "change, per seed; frames_per_s counts rendered frames.",
         ("env", "arm", "seed", "target_return", "seconds_to_target", "seconds_to_500",
          "best_eval_return", "best_eval_at_s",
          "final_eval_return", "frames_per_s")),
    Kind("pixel update alone", r"pixel-learner-", ("updates_per_s", "updates/s"), "Pixels",
         "The pixel update alone on frames prefilled on the device, no actors and no ingest "
         "(`bench/pixel_learner.py`): one row per learner setting over the config's.",
         ("row", "pixels", "batch", "amp", "graph", "compile", "target_encoder",
          "strided", "privileged_critic", "updates_per_s", "us_per_update")),
    Kind("frame ingest", r"frame-ingest-", ("cpu_us_per_frame", "learner CPU µs per frame"), "Pixels",
         "The learner's CPU per camera frame taken in (`bench/frame_ingest.py`): decode, "
         "validation, the frame index and the insert, and the share of one core at 2,000 agent "
         "steps/s.",
         ("device", "rows_per_batch", "decode_us_per_frame", "validate_us_per_frame",
          "place_us_per_frame", "insert_us_per_frame", "cpu_us_per_frame", "core_share")),
    Kind("pixel policy", r"pixel-policy-", ("ms_per_frame", "ms per frame"), "Pixels",
         "The conv policy acting on an actor's CPU (`bench/pixel_policy.py`).",
         ("size", "stack", "envs", "ms_per_frame", "ms_per_call")),
    Kind("update alone", r"learner-nets-", ("updates_per_s", "updates/s"), "The update alone",
         "SAC updates/s on synthetic data, no actors and no ingest (`bench/learner.py`): plain "
         "SAC's networks and `configs/humanoid.yaml`'s.",
         ("nets", "batch", "amp", "graph", "compile", "updates_per_call", "updates_per_s",
          "us_per_update")),
    Kind("fan-in", r"fanin-", ("transitions_per_s", "transitions/s"), "Fan-in",
         "Synthetic gRPC actors against one learner (`bench/fanin.py`): ingest flat out, acks, "
         "and whether any actor stalled.",
         ("clients", "ingest_processes", "relay", "stalled", "transitions_per_s", "p99_ack_ms",
          "updates_per_s_alone", "updates_per_s_flat_out", "books_agree")),
    Kind("scaling", r"scale-", ("stepping", "actors stepping"), "Actor scaling",
         "A running job's env actors scaled up with `herd scale` while it trains "
         "(`bench/scale.py`): its status after each step.",
         ("env", "target_actors", "stepping", "env_steps_per_s", "updates_per_s", "policy_lag",
          "reconnects_of_running_actors", "refused_actors")),
    Kind("start-up", r"startup-", ("first_update_s", "seconds to first update"), "Start-up",
         "Seconds from `herd submit` to each milestone of a job (`bench/startup.py`).",
         ("job_index", "cold", "preload", "driver_ready_s", "learner_listening_s", "actors_ready_s",
          "first_update_s", "first_compiled_update_s", "first_eval_s")),
    Kind("rendering", r"render-", ("frames_per_s_total", "frames/s"), "Rendering",
         "Rendered frames/s of DeepMind Control walker-walk at 84x84, effects off, on each "
         "machine's newest run (`bench/render.py`): a frame at a time (step) or all of a "
         "process's envs in one buffer (tiled).",
         ("machine", "gl", "processes", "envs_per_process", "mode", "antialias", "frames_per_s_total"),
         per="machine", rows={"env": "dm_control/walker-walk-v0", "size": 84, "effects": False}),
    Kind("Humanoid runs", r"humanoid-|ema|rllib-", ("best_eval_return", "best eval return")),
    Kind("learner variants", r"ablation-|dips-|support-|sweep-",
         ("best_eval_return|eval_return", "best eval return")),
    Kind("update options", r"learner-", ("updates_per_s", "updates/s")),
    Kind("env actors", r"actors?-", ("env_steps_per_s", "env steps/s")),
    Kind("ingest", r"ingest-", ("transitions_per_s", "transitions/s")),
    Kind("wire", r"wire-", ("cpu_us_per_row", "CPU µs per row")),
    Kind("compile", r"compile-profile-", ("prepare_s", "seconds to compile and capture")),
    Kind("CLI", r"cli-", ("median_s", "median seconds to answer")),
    Kind("randomization", r"randomize-", ("best_retention|retention", "held-out return kept")),
    Kind("other", r".", ("", "")),
]

# Plots drawn from several files (bench/plot_results.py): the command and the files drawn from.
COMPOSITES = {
    "humanoid-vs-rllib-nvidia-h200.png": (
        "python bench/plot_results.py", ["humanoid-final-fast-s*-nvidia-h200.json", "rllib-nvidia-h200.json"]),
    "humanoid-family-vs-plain-nvidia-h200.png": (
        "python bench/plot_results.py --family",
        ["humanoid-family-s*-nvidia-h200.json", "humanoid-nvidia-h200.json"]),
}
MACHINES = {"nvidia-h200": "NVIDIA H200", "x86-64": "x86_64"}  # a text file's name -> its machine


@cache
def load(path: Path) -> list[dict]:
    """A result file's records; a text file is one record: the date and machine its name or first
    line gives, and that line as its command."""
    if path.suffix == ".txt":
        first = path.read_text().splitlines()[0]
        date = re.match(r"# (\d{4}-\d\d-\d\d)", first)
        suffix = next((m for m in MACHINES if path.stem.endswith(m)), None)
        return [{"date": date.group(1) if date else "", "machine": MACHINES.get(suffix, "?"),
                 "what": first.lstrip("# ")}]
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else [data]


def newest(path: Path) -> str:
    return max(r.get("date", "") for r in load(path))


def kind_of(name: str) -> Kind:
    return next(k for k in KINDS if re.match(k.pattern, name))


def files() -> list[Path]:
    """Every result file (not a plot), by name."""
    return sorted(p for p in RESULTS.iterdir() if p.is_file() and p.suffix != ".png")


def commands(path: Path) -> list[str]:
    return list(dict.fromkeys(r["command"] for r in load(path) if isinstance(r.get("command"), str)))


def pngs_of(stem: str) -> list[str]:
    return sorted(p.name for p in RESULTS.glob(f"{stem}*.png")
                  if p.name == f"{stem}.png" or p.name.startswith(f"{stem}-"))


def composite_sources(png: str) -> list[Path]:
    return sorted(f for pattern in COMPOSITES[png][1] for f in RESULTS.glob(pattern))


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


def table(records: list[dict], columns: tuple[str, ...] | list[str]) -> list[str]:
    """A markdown table of the columns any record has, one row per record."""
    cols = [c for c in columns if any(value(r, c) is not None for r in records)]
    if not cols:
        return []
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols),
            *("| " + " | ".join(cell(value(r, c)) for c in cols) + " |" for r in records)]
