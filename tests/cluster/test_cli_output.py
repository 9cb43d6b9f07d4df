"""What the CLI prints for a reader and for a pipe: every argument of `herd submit` explained,
piped output without wrapping or colour, `--watch` a block per refresh on a pipe."""

from __future__ import annotations

import argparse

from herd.cli import build_parser


def subcommand(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_every_argument_of_submit_says_what_it_is():
    unexplained = [a.dest for a in subcommand("submit")._actions if not (a.help or "").strip()]
    assert not unexplained, unexplained
