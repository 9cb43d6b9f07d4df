"""The generated pages match what they are generated from: docs/configuration.md the config
models, docs/cli.md the argparse parser, docs/performance.md, docs/results-archive.md and the
headline tables of README.md and docs/index.md bench/results/. A failure names the file; `make docs-gen` rewrites them."""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
generate = importlib.import_module("docs._gen.generate")


@pytest.mark.parametrize("rel", ["docs/configuration.md", "docs/cli.md", "docs/performance.md",
                                 "docs/results-archive.md", "README.md", "docs/index.md"])
def test_committed_page_matches_its_source(rel):
    want = generate.pages()[rel]
    have = (ROOT / rel).read_text()
    if have != want:
        diff = "".join(list(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                                 f"{rel} (committed)", f"{rel} (generated)"))[:60])
        pytest.fail(f"{rel} is out of date; regenerate it with `make docs-gen`:\n{diff}")


def test_every_config_field_and_command_is_documented():
    from pydantic import BaseModel

    from herd.cli import build_parser
    from herd.config import JobConfig

    page = (ROOT / "docs/configuration.md").read_text()

    def keys(model, prefix=""):
        for name, field in model.model_fields.items():
            key = f"{prefix}{name}"
            yield key
            sub = field.annotation
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                yield from keys(sub, key + ".")

    missing = [k for k in keys(JobConfig) if f"`{k}`" not in page]
    assert not missing, f"not in docs/configuration.md: {missing}"
    cli = (ROOT / "docs/cli.md").read_text()
    subs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert all(f"## herd {name}" in cli for name in subs.choices)


def test_headline_names_date_and_machine():
    table = generate.headline_md()
    rows = table.splitlines()[2:]
    assert len(rows) >= 5
    assert all("| 20" in row and "NVIDIA" in row for row in rows), table
