"""mkdocs hook: the files of bench/results/ (plots, records, profiles) become site files under
results/, so the performance and archive pages link to them without a copy kept in docs/."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def on_files(files, config):
    for path in sorted(p for p in RESULTS.iterdir() if p.is_file()):
        files.append(File(f"results/{path.name}", str(RESULTS.parent), config["site_dir"],
                          config["use_directory_urls"]))
    return files
