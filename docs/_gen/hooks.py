"""mkdocs hook: the files of bench/results/ (plots, records, profiles) become site files under
results/, so the performance and archive pages link to them without a copy kept in docs/.

The pages link them as ../bench/results/NAME, which resolves where the repository is read (the
code host, a clone); on the site those links become results/NAME."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def on_files(files, config):
    for path in sorted(p for p in RESULTS.iterdir() if p.is_file()):
        files.append(File(f"results/{path.name}", str(RESULTS.parent), config["site_dir"],
                          config["use_directory_urls"]))
    return files


REPO_LINK = re.compile(r"\]\(\.\./bench/results/")


def on_page_markdown(markdown, page, config, files):
    return REPO_LINK.sub("](results/", markdown)
