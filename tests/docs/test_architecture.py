"""docs/architecture.md cites code as `path/file.py:Name` (a function, a class, or Class.method):
every file it names exists and defines every name it cites, so the page cannot drift from the
code unnoticed. Its transition's way takes 12 steps at most."""

from __future__ import annotations

import ast
import re

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "architecture.md"
CITED = re.compile(r"`([\w/]+\.py):([\w.]+)`")


def defined(path) -> set[str]:
    """Top-level functions and classes of a module, and each class's methods as Class.method."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {f"{node.name}.{m.name}" for m in node.body
                      if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return names


def test_every_cited_name_is_defined_where_the_page_says() -> None:
    text = PAGE.read_text()
    cited = CITED.findall(text)
    assert len(cited) >= 12
    missing = [f"{path}:{name}" for path, name in cited
               if not (ROOT / path).is_file() or name not in defined(ROOT / path)]
    assert missing == []


def test_the_transitions_way_takes_twelve_steps_at_most() -> None:
    section = PAGE.read_text().split("## One transition, from `env.step`", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^(\d+)\. `[\w/]+\.py:[\w.]+`", section, re.MULTILINE)
    assert [int(n) for n in steps] == list(range(1, len(steps) + 1)) and 1 <= len(steps) <= 12
