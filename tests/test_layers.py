"""The package's shape, read statically. The import graph (every import statement, those inside
functions too, subfolders included): no cycle anywhere; the learner and the actors never import
the job layer (cluster/) nor each other; inside learner/ every import goes down the layer table
of its parts. The sizes: few modules in learner/ and in each of its subfolders, none too long.

`herd` is cluster/, `herd.learner` learner/, `herd.actors` actors/, `herd.proto` proto/
(pyproject.toml's package-dir).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"herd.learner": "learner", "herd.actors": "actors", "herd.proto": "proto", "herd": "cluster"}

LEARNER_LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("config", frozenset({"config"})),
    ("replay", frozenset({"replay"})),
    ("update", frozenset({"update"})),
    ("graph", frozenset({"graph"})),
    ("rpc", frozenset({"rpc"})),
    ("ingest", frozenset({"ingest"})),
    ("trainer", frozenset({"trainer"})),
    ("build", frozenset({"build"})),
    ("checkpoint", frozenset({"checkpoint"})),
    ("learner", frozenset({"learner"})),
)
"""learner/'s parts from the bottom up, each a subpackage or a top module: a module imports its
own part's modules and lower parts'. config is the settings; replay the row layout and the
rings; update the SAC math and networks; graph wraps the update for CUDA graphs and compile; rpc
is the wire and ingest hands its batches on; trainer runs the update; build chooses the ring and
the update for an env; checkpoint writes and reads the learner's state; learner wires them all
(and reads the whole config)."""

TOP_MODULES = 6
"""At most this many modules directly in learner/ (__init__.py counted): the rest live in the
subpackages named for their part."""
PACKAGE_MODULES = 10
"""At most this many modules in each subfolder of learner/ (__init__.py not counted)."""
MAX_LINES = 450
"""No module of learner/, actors/ or cluster/ longer than this."""


def module_of(path: Path, root: Path) -> str:
    """'learner.update.sac' for learner/update/sac.py, 'cluster' for cluster/__init__.py."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(name: str, modules: set[str]) -> str | None:
    """The package module `name` (a dotted import name) refers to, or None outside it."""
    for prefix, folder in FOLDERS.items():
        if name == prefix or name.startswith(prefix + "."):
            target = folder + name[len(prefix):]
            return target if target in modules else None
    return None


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the package modules it imports (`from herd.learner.update import losses` counts
    as learner.update.losses when that is a module, else as learner.update); subfolders included."""
    files = [p for folder in FOLDERS.values() for p in sorted((root / folder).rglob("*.py"))]
    modules = {module_of(p, root) for p in files}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for path in files:
        here = module_of(path, root)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            for name in names:
                target = resolve(name, modules)
                if target is not None and target != here:
                    graph[here].add(target)
                    if isinstance(node, ast.ImportFrom):
                        break  # the first resolvable of `module.name`, then `module`
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path (first module repeated at its end), or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)) is not None:
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)) is not None:
            return found
    return None


def part_of(module: str) -> str | None:
    """The LEARNER_LAYERS part of a learner/ module: its subpackage or its own name
    ('update' for learner.update.sac, 'trainer' for learner.trainer); None outside learner/ and
    for learner/__init__.py."""
    parts = module.split(".")
    return parts[1] if parts[0] == "learner" and len(parts) > 1 else None


def upward_imports(graph: dict[str, set[str]], layers=LEARNER_LAYERS) -> list[str]:
    """learner/ imports that go to a higher part, or from or to a module the table lacks."""
    rank = {part: i for i, (_, parts) in enumerate(layers) for part in parts}
    bad = []
    for m, targets in sorted(graph.items()):
        if part_of(m) is None:
            continue
        if part_of(m) not in rank:
            bad.append(f"{m}: not in LEARNER_LAYERS")
            continue
        for t in sorted(targets):
            if not t.startswith("learner"):
                continue
            if rank.get(part_of(t), len(layers)) > rank[part_of(m)]:
                where = layers[rank[part_of(t)]][0] if part_of(t) in rank else "no layer"
                bad.append(f"{m} ({layers[rank[part_of(m)]][0]}) imports {t} ({where})")
    return bad


def oversized(root: Path = ROOT) -> list[str]:
    """learner/'s folders with more modules than allowed, and modules longer than MAX_LINES."""
    learner = root / "learner"
    bad = []
    top = sorted(p.name for p in learner.glob("*.py"))
    if len(top) > TOP_MODULES:
        bad.append(f"learner/ has {len(top)} modules (at most {TOP_MODULES}): {' '.join(top)}")
    for folder in sorted(p.parent for p in learner.rglob("__init__.py") if p.parent != learner):
        mods = sorted(p.name for p in folder.glob("*.py") if p.name != "__init__.py")
        if len(mods) > PACKAGE_MODULES:
            bad.append(f"{folder.relative_to(root)}/ has {len(mods)} modules (at most {PACKAGE_MODULES})")
    for folder in ("learner", "actors", "cluster"):
        for path in sorted((root / folder).rglob("*.py")):
            name = str(path.relative_to(root))
            lines = len(path.read_text().splitlines())
            if lines > MAX_LINES:
                bad.append(f"{name}: {lines} lines (at most {MAX_LINES})")
    return bad


def crossings(graph: dict[str, set[str]]) -> list[str]:
    """learner/ or actors/ importing cluster/ (the job layer) or each other."""
    banned = {"learner": ("cluster", "actors"), "actors": ("cluster", "learner")}
    return [f"{m} imports {t}" for m, targets in sorted(graph.items()) for t in sorted(targets)
            if t.split(".")[0] in banned.get(m.split(".")[0], ())]


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))
    learner = {m: {t for t in ts if t.startswith("learner")}
               for m, ts in graph.items() if m.startswith("learner")}
    assert find_cycle(learner) is None


def test_learner_and_actors_import_neither_the_job_layer_nor_each_other() -> None:
    assert crossings(import_graph()) == []


def test_learner_imports_go_down_its_layers() -> None:
    assert upward_imports(import_graph()) == []


def test_learner_folders_and_modules_stay_small() -> None:
    assert oversized() == []


def test_every_learner_folder_is_a_package_with_a_part() -> None:
    """A subfolder of learner/ is a package (setuptools ships it: pyproject.toml lists it) and a
    part of LEARNER_LAYERS."""
    toml = (ROOT / "pyproject.toml").read_text()
    packages = re.search(r"^packages = \[(.*?)\]", toml, re.MULTILINE | re.DOTALL).group(1)
    parts = {part for _, ps in LEARNER_LAYERS for part in ps}
    folders = (p for p in (ROOT / "learner").iterdir() if p.is_dir() and p.name != "__pycache__")
    for folder in sorted(folders):
        assert (folder / "__init__.py").is_file(), f"{folder} has no __init__.py"
        assert f'"herd.learner.{folder.name}"' in packages, f"pyproject.toml lacks herd.learner.{folder.name}"
        assert folder.name in parts, f"learner/{folder.name}/ is in no layer of LEARNER_LAYERS"


def test_the_graph_sees_what_the_checks_must_catch(tmp_path: Path) -> None:
    """A synthetic tree with a cycle, a job-layer import, upward imports (a subpackage's too) and
    an oversized folder and module, each found; imports inside functions included."""
    for folder in FOLDERS.values():
        (tmp_path / folder).mkdir()
    (tmp_path / "learner" / "update").mkdir()
    (tmp_path / "learner" / "replay").mkdir()
    (tmp_path / "learner" / "config.py").write_text("def f():\n    from herd.learner.update import sac\n")
    (tmp_path / "learner" / "update" / "__init__.py").write_text("")
    (tmp_path / "learner" / "update" / "sac.py").write_text("import herd.learner.config\n")
    (tmp_path / "learner" / "replay" / "__init__.py").write_text("")
    (tmp_path / "learner" / "replay" / "ring.py").write_text("from herd.learner.update import losses\n")
    for i in range(PACKAGE_MODULES):
        (tmp_path / "learner" / "replay" / f"m{i}.py").write_text("x = 1\n" * (MAX_LINES + (i == 0)))
    (tmp_path / "actors" / "env_actor.py").write_text("def g():\n    from herd.startup import x\n")
    (tmp_path / "cluster" / "startup.py").write_text("from herd.proto.timing import y\n")
    (tmp_path / "proto" / "timing.py").write_text("")
    graph = import_graph(tmp_path)
    assert graph["learner.config"] == {"learner.update.sac"} and graph["cluster.startup"] == {"proto.timing"}
    assert graph["learner.replay.ring"] == {"learner.update"}  # no module losses: the package
    assert find_cycle(graph) == ["learner.config", "learner.update.sac", "learner.config"]
    assert crossings(graph) == ["actors.env_actor imports cluster.startup"]
    assert upward_imports(graph) == ["learner.config (config) imports learner.update.sac (update)",
                                     "learner.replay.ring (replay) imports learner.update (update)"]
    assert oversized(tmp_path) == [
        f"learner/replay/ has {PACKAGE_MODULES + 1} modules (at most {PACKAGE_MODULES})",
        f"learner/replay/m0.py: {MAX_LINES + 1} lines (at most {MAX_LINES})"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def imported_names(path: Path) -> set[str]:
    """Every module a file imports, functions' imports included (`from herd import cli` as
    herd.cli too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_the_python_api_is_no_cli_in_disguise() -> None:
    """cluster/api.py calls the job functions (herd.jobs, herd.submission) with keyword
    arguments: no argparse, nothing of the CLI's, so a renamed flag cannot break herd.submit."""
    names = imported_names(ROOT / "cluster" / "api.py")
    assert not {n for n in names if n == "argparse" or n == "herd.cli" or n.startswith("herd.cli.")}
