"""Whether a command recorded in bench/results would still run as written.

A command is checked against today's code, never run: its script still exists, every option it
gives is one the script's (or `herd`'s) parser still takes, every config key it sets (`--set`,
`--grid`, `--arm`) is a key of today's config models (cluster/config.py, learner/config.py,
actors/config.py), and every config file it names is in the repository. `stale` says what
changed; the pages mark such a command as from an older config layout.
"""

from __future__ import annotations

import argparse
import ast
import shlex
from functools import cache
from pathlib import Path

from docs._gen.results import ROOT

MARK = "older config layout"
LEARNER_FIELD_SETS = {"bench/learner.py"}  # --set FIELD=VALUE: a learner field's bare name
KEY_OPTIONS = ("--set", "--grid", "--arm")
FILE_OPTIONS = ("--config", "--nets")


def stale(command: str) -> str | None:
    """Why `command` would not run today as recorded, in a few words; None when it would."""
    try:
        words = shlex.split(command)
    except ValueError as e:
        return f"unreadable command ({e})"
    while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value before it
        words = words[1:]
    if words[:1] == ["herd"] and len(words) > 1:
        program, options, rest = f"herd {words[1]}", herd_options(words[1]), words[2:]
        if options is None:
            return f"{program} is no command"
        files = [w for w in rest[:1] if w.endswith((".yaml", ".yml"))]  # the positional config
    elif len(words) > 1 and words[0].startswith("python") and words[1].endswith(".py"):
        program, rest = words[1], words[2:]
        if not (ROOT / program).is_file():
            return f"{program} is no longer in the repository"
        options, files = script_options(program), []
    else:
        return None  # not a command of this repository's tools
    for i, word in enumerate(rest):
        if not word.startswith("--"):
            continue
        flag, eq, given = word.partition("=")
        known = [o for o in options if o == flag] or [o for o in options if o.startswith(flag)]
        if len(known) != 1:
            return f"{program} takes no {flag}"
        arg = given if eq else (rest[i + 1] if i + 1 < len(rest) else "")
        if known[0] in KEY_OPTIONS:
            why = keys_problem(known[0], arg, program in LEARNER_FIELD_SETS)
            if why:
                return why
        elif known[0] in FILE_OPTIONS:
            files += [f for f in arg.split(",") if f.endswith((".yaml", ".yml"))]
    missing = [f for f in files if not (ROOT / f).is_file()]
    return f"{missing[0]} is not in the repository" if missing else None


def keys_problem(option: str, arg: str, learner_fields: bool) -> str | None:
    """What is wrong with the config keys one --set, --grid or --arm item sets, if anything."""
    items = arg.partition(":")[2].split(";") if option == "--arm" else [arg]
    for item in items:
        key = item.partition("=")[0].strip()
        if not key or key.startswith("$"):  # an --arm's environment variable
            continue
        why = field_problem(key) if learner_fields else key_problem(key)
        if why:
            return why
    return None


def field_problem(name: str) -> str | None:
    """A learner setting given by its bare field name (bench/learner.py --set)."""
    from herd.learner.config import REMOVED, SECTION_OF

    if name in SECTION_OF:
        return None
    return f"learner.{name} was removed" if name in REMOVED else f"no learner field {name}"


def key_problem(key: str) -> str | None:
    """A dotted config key ('learner.replay.batch_size') checked against JobConfig's models."""
    from pydantic import BaseModel

    from herd.config import JobConfig
    from herd.learner.config import MOVED, REMOVED, LearnerConfig

    model, parts = JobConfig, key.split(".")
    for i, part in enumerate(parts):
        where = ".".join(parts[:i + 1])
        field = model.model_fields.get(part)
        if field is None:
            if model is LearnerConfig and part in MOVED:
                return f"{where} is now learner.{MOVED[part]}"
            if model is LearnerConfig and part in REMOVED:
                return f"{where} was removed"
            return f"no key {where}"
        ann = field.annotation
        sub = next((a for a in (ann, *getattr(ann, "__args__", ()))
                    if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if sub is None:  # a value: below it only a mapping's own keys (compile_options, kwargs)
            if i < len(parts) - 1 and "dict" not in str(ann):
                return f"{where} is a value, not a section"
            return None
        model = sub
    return None


@cache
def script_options(script: str) -> tuple[str, ...]:
    """The option strings a bench script's argparse takes, read from its source."""
    tree = ast.parse((ROOT / script).read_text())
    return tuple(a.value for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"
                 for a in node.args
                 if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--"))


@cache
def herd_options(command: str) -> tuple[str, ...] | None:
    """The option strings `herd <command>` takes; None when there is no such command."""
    from herd.cli import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub = subs.choices.get(command)
    if sub is None:
        return None
    return tuple(o for a in [*parser._actions, *sub._actions] for o in a.option_strings if o.startswith("--"))


def stale_of(path: Path) -> dict[str, str]:
    """A result file's stale commands, each with why."""
    from docs._gen.results import commands

    return {c: why for c in commands(path) if (why := stale(c))}
