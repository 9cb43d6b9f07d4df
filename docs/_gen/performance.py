"""docs/performance.md and the headline table, generated from bench/results/.

The page is the headline, then one section per capability (the sections of results.KINDS), each
showing the newest result of its kind: its date, machine, command, a few figures and its plot.
The archive page (docs/_gen/archive.py) lists every result file.
"""

from __future__ import annotations

import re
from pathlib import Path

from docs._gen.commands import MARK, stale, stale_of
from docs._gen.results import (
    COMPOSITES,
    KINDS,
    RESULTS,
    Kind,
    cell,
    composite_sources,
    files,
    kind_of,
    load,
    machine,
    newest,
    pngs_of,
    table,
)

INTRO = f"""Herd's benchmarks, the newest result of each kind. Every figure is a record in
`bench/results/` that names its date, machine and exact command (`bench/README.md` says how to run
each again); [the results archive](results-archive.md) lists every result file. A command marked
"{MARK}" set config keys, or named files, that have since moved or gone: its figures
stand as measured, and today's keys run it again (`herd submit` names where a key moved)."""


def ranked(paths: list[Path]) -> list[Path]:
    """Newest first; among files of one date, those whose commands still run, then by name."""
    by_name = sorted(paths, key=lambda p: p.name)
    return sorted(sorted(by_name, key=lambda p: bool(stale_of(p))), key=newest, reverse=True)


def shown(kind: Kind, paths: list[Path]) -> list[tuple[Path, list[dict]]]:
    """The files a section shows for a kind and the records of each it shows: the newest file, or
    with `per` the newest file holding each value of that key."""
    def fits(r: dict) -> bool:
        return all(r.get(k) == v for k, v in kind.rows.items())

    picks: dict[Path, set | None] = {}
    seen: set = set()
    for path in ranked(paths):
        if kind.per is None:
            picks[path] = None
            break
        new = {r.get(kind.per) for r in load(path) if fits(r)} - seen
        if new:
            picks[path], seen = new, seen | new
    return [(p, [r for r in load(p) if fits(r) and (vals is None or r.get(kind.per) in vals)])
            for p, vals in picks.items()]


def link(path_or_name) -> str:
    name = getattr(path_or_name, "name", path_or_name)
    return f"[{name}](../bench/results/{name})"


def sources(picks: list[tuple[Path, list[dict]]]) -> str:
    """'date · machine · torch · files', one group per date and machine."""
    groups: dict[tuple, list[Path]] = {}
    for path, recs in picks:
        dates = ", ".join(sorted({r.get("date", "?") for r in recs}))
        machines = ", ".join(sorted({machine(r) for r in recs}))
        torches = ", ".join(sorted({r["torch"] for r in recs if r.get("torch")}))
        groups.setdefault((dates, machines, torches), []).append(path)
    return "; ".join(" · ".join(x for x in (d, m, f"torch {t}" if t else "") if x) + " · "
                     + ", ".join(link(p) for p in paths) for (d, m, t), paths in groups.items())


def command_lines(recs: list[dict]) -> list[str]:
    out = []
    for c in dict.fromkeys(r["command"] for r in recs if isinstance(r.get("command"), str)):
        why = stale(c)
        out.append(f"{c}  # ({MARK}: {why})" if why else c)
    return out


def plots(kind: Kind, picks: list[tuple[Path, list[dict]]]) -> list[str]:
    """One plot drawn from every shown file where there is one, else each shown file's own (with
    `per`, those of the values shown where a file has one plot per value)."""
    shown_files = {p for p, _ in picks}
    for png in COMPOSITES:
        if (RESULTS / png).exists() and len(picks) > 1 and shown_files <= set(composite_sources(png)):
            return [png]
    out = []
    for path, recs in picks:
        pngs = pngs_of(path.stem)
        each = [p for p in pngs if any(p.endswith(f"-{r.get(kind.per)}.png") for r in load(path))]
        if kind.per and each:  # one plot per value of `per`: those of the values shown
            pngs = [p for p in each if any(p.endswith(f"-{r.get(kind.per)}.png") for r in recs)]
        out += pngs
    return out


def kind_block(kind: Kind, paths: list[Path]) -> list[str]:
    picks = shown(kind, paths)
    recs = [r for _, rs in picks for r in rs]
    if not recs:
        return []
    out = [kind.what, "", sources(picks), "", "```", *command_lines(recs), "```", ""]
    out += [*table(recs, kind.figures), ""]
    for png in plots(kind, picks):
        out += [f"![{png}](../bench/results/{png})", ""]
        out += drawn_beside(png, {p for p, _ in picks})
    return out


BESIDE = ("framework", "env", "actors", "wall_s", "env_steps", "env_steps_per_s", "best_eval_return",
          "seconds_to_5000")
"""The figures of a record a composite plot draws beside the section's own."""


def drawn_beside(png: str, shown: set[Path]) -> list[str]:
    """For a plot drawn from more files than its section shows (another framework's run, say):
    those files' figures and commands, so that no curve on the page is without its numbers."""
    if png not in COMPOSITES:
        return []
    out = []
    for path in composite_sources(png):
        if path in shown:
            continue
        for r in load(path):
            figures = "; ".join(f"{k} {cell(r[k])}" for k in BESIDE if k in r)
            out += [f"Also in this plot: `{path.name}` · {r.get('date', '?')} · "
                    f"{r.get('machine', '?')}: {figures}" + (f" (`{r['command']}`)" if r.get("command") else ""), ""]
    return out


def performance_md() -> str:
    by_kind: dict[str, list[Path]] = {}
    for f in files():
        by_kind.setdefault(kind_of(f.name).name, []).append(f)
    out = ["# Performance", "",
           "<!-- generated by docs/_gen/generate.py from bench/results/; make docs-gen -->", "",
           INTRO, "", "## Headline", "", headline_md(), ""]
    for section in dict.fromkeys(k.section for k in KINDS if k.section):
        blocks = [kind_block(k, by_kind[k.name]) for k in KINDS if k.section == section and k.name in by_kind]
        if any(blocks):
            out += [f"## {section}", ""] + [line for b in blocks for line in b]
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
