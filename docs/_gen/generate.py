"""Regenerate the pages built from the code and from bench/results: `make docs-gen`.

docs/configuration.md (the config models), docs/cli.md (the argparse parser), docs/performance.md
and docs/results-archive.md (bench/results/), and the headline table inside README.md and
docs/index.md (between the `<!-- headline -->` markers). tests/docs/test_generated.py fails when a committed page differs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from docs._gen.archive import archive_md
from docs._gen.cli_ref import cli_md
from docs._gen.config_ref import configuration_md
from docs._gen.performance import headline_md, performance_md

MARKERS = re.compile(r"(<!-- headline -->\n)(?:.*?\n)?(<!-- /headline -->)", re.DOTALL)
WITH_HEADLINE = ["README.md", "docs/index.md"]


def with_headline(text: str) -> str:
    return MARKERS.sub(lambda m: m.group(1) + headline_md() + "\n" + m.group(2), text)


def pages() -> dict[str, str]:
    """Every generated file's path (from the repository root) and the text it must hold."""
    out = {"docs/configuration.md": configuration_md(), "docs/cli.md": cli_md(),
           "docs/performance.md": performance_md(), "docs/results-archive.md": archive_md()}
    for rel in WITH_HEADLINE:
        path = ROOT / rel
        if path.exists():
            out[rel] = with_headline(path.read_text())
    return out


def main() -> int:
    for rel, text in pages().items():
        path = ROOT / rel
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
