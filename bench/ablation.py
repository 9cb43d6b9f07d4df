"""The ablation's table and plot, from bench/humanoid.py's records (`--ablate`, any number of calls
appended into one file): per variant, every seed's final and last-three evaluation, their means,
the change against the full config, when each seed first reached 5,000, its lowest evaluation
after that and how many of the evaluations after it fell below 4,000 (the no-dip target).

    python bench/ablation.py bench/results/ablation-par4-nvidia-h200.json   # markdown table; <stem>-bars.png beside it
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.humanoid_record import dips_after


def by_variant(runs: list[dict]) -> dict[str, list[dict]]:
    """Runs grouped by variant, 'full' first, then in the order they first appear; each group by seed."""
    groups: dict[str, list[dict]] = {}
    for r in sorted(runs, key=lambda r: r["variant"] != "full"):
        groups.setdefault(r["variant"], []).append(r)
    return {v: sorted(rs, key=lambda r: r["seed"]) for v, rs in groups.items()}


def mean_of(xs) -> float | None:
    """The mean of the values there are (a run too short for an evaluation has none); None if none."""
    xs = [x for x in xs if x is not None]
    return mean(xs) if xs else None


def rows(runs: list[dict]) -> list[dict]:
    """One row per variant: per-seed values, means, and the mean's change against 'full'."""
    out = []
    groups = by_variant(runs)
    full = groups.get("full")
    base = mean_of(r["last3_eval_return"] for r in full) if full else None
    for variant, rs in groups.items():
        last3 = mean_of(r["last3_eval_return"] for r in rs)
        out.append({
            "variant": variant, "seeds": [r["seed"] for r in rs],
            "final": [r["final_eval_return"] for r in rs], "final_mean": mean_of(r["final_eval_return"] for r in rs),
            "last3": [r["last3_eval_return"] for r in rs], "last3_mean": last3,
            "vs_full": None if base in (None, 0) or last3 is None else (last3 - base) / abs(base),
            "seconds_to_5000": [r.get("seconds_to_5000") for r in rs],
            "min_after_5000": [r.get("min_eval_after_5000") for r in rs],
            # from the evaluations: records written before the key existed have them too
            "dips_after_5000": [dips_after(r.get("evaluations", [])) for r in rs],
            "updates_per_s": mean_of(r.get("updates_per_s") for r in rs),  # null: a run too short to tell
        })
    return out


def markdown(table: list[dict]) -> str:
    def each(xs, fmt="{:,.0f}"):
        return " / ".join("–" if x is None else fmt.format(x) for x in xs)

    lines = [("| variant | seeds | final (each) | last 3 (each) | last 3, mean | vs full | 5,000 at s (each) "
              "| updates/s | lowest after 5,000 (each) | evals < 4,000 after 5,000 (each) |"),
             "|---|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        vs = "" if t["vs_full"] is None or t["variant"] == "full" else f"{t['vs_full']:+.0%}"
        lines.append(f"| {t['variant']} | {', '.join(map(str, t['seeds']))} | {each(t['final'])} | "
                     f"{each(t['last3'])} | **{each([t['last3_mean']])}** | {vs} | "
                     f"{each(t['seconds_to_5000'], '{:.0f}')} | {each([t['updates_per_s']])} | "
                     f"{each(t['min_after_5000'])} | {' / '.join(d or '–' for d in t['dips_after_5000'])} |")
    return "\n".join(lines)


def plot(table: list[dict], path: Path, title: str) -> None:
    """Bars: each variant's mean of the last three evaluations; dots: its seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.2 * len(table) + 2, 4))
    xs = range(len(table))
    ax.bar(xs, [t["last3_mean"] or 0 for t in table], color="#9ab", label="mean of seeds")
    for x, t in zip(xs, table):
        seeds = [v for v in t["last3"] if v is not None]
        ax.plot([x] * len(seeds), seeds, "ko", ms=4, label="a seed" if x == 0 else None)
    ax.set_xticks(list(xs), [t["variant"] for t in table])
    ax.set_ylabel("eval return, mean of the last 3 evaluations")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", help="bench/humanoid.py --ablate's JSON")
    args = p.parse_args()
    path = Path(args.results)
    runs = json.loads(path.read_text())
    if not runs or not all("variant" in r for r in runs):
        raise SystemExit(f"{path}: no bench/humanoid.py runs with a variant in it")
    table = rows(runs)
    print(markdown(table))
    r0 = runs[0]
    budget = r0.get("config", {}).get("run", {}).get("max_seconds")
    png = path.with_name(path.stem + "-bars.png")  # bench/humanoid.py's curves keep <stem>.png
    plot(table, png, f"Herd ablation, {r0['env']}, {budget} s per run, {r0.get('machine')}")
    print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
