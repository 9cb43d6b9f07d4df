"""mkdocs hook: the plots in bench/results/ become site files under results/, so the performance
page links to them without a copy of each PNG kept in docs/."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def on_files(files, config):
    for png in sorted(RESULTS.glob("*.png")):
        files.append(File(f"results/{png.name}", str(RESULTS.parent), config["site_dir"], config["use_directory_urls"]))
    return files
