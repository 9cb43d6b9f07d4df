"""Every relative link and image in README.md and docs/*.md resolves in the repository, where
the code host and a clone show them (the docs site's side: test_site's strict build)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"```.*?```", re.DOTALL)


def broken_links(page: Path) -> list[str]:
    out = []
    for m in LINK.finditer(FENCE.sub("", page.read_text())):
        target = m.group(1).split("#")[0]
        if not target or re.match(r"[a-z][a-z0-9+.-]*:", target):  # an anchor, a URL, mailto:
            continue
        if not (page.parent / target).exists():
            out.append(m.group(1))
    return out


def test_every_relative_link_resolves_in_the_repository():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = {p.relative_to(ROOT).as_posix(): b for p in pages if (b := broken_links(p))}
    assert not broken, {page: links[:5] for page, links in broken.items()}


def test_the_check_finds_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    (tmp_path / "there.png").write_bytes(b"")
    page.write_text("![a](there.png) [b](results/gone.json) [c](https://x.org) [d](#top)\n"
                    "```\n[e](inside-a-fence.md)\n```\n")
    assert broken_links(page) == ["results/gone.json"]
