"""The package's import graph, read statically (every import statement, those inside functions
too): no cycle anywhere; the learner and the actors never import the job layer (cluster/) nor
each other; inside learner/ every import goes down the layer table.

`herd` is cluster/, `herd.learner` learner/, `herd.actors` actors/, `herd.proto` proto/
(pyproject.toml's package-dir).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"herd.learner": "learner", "herd.actors": "actors", "herd.proto": "proto", "herd": "cluster"}

LEARNER_LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("config", frozenset({"config"})),
    ("basics", frozenset({"row_layout", "replay", "frame_replay", "publisher", "validate",
                          "thread_cpu", "update_gaps", "child_proc"})),
    ("math", frozenset({"networks", "losses", "normalizer", "branches", "flat_adam", "sac",
                        "encoder", "pixel_sac", "pixel_teacher"})),
    ("graph", frozenset({"graphed", "precompile"})),
    ("replay and ingest", frozenset({"replay_table", "ingest_stream", "servicer", "server",
                                     "ingest", "ingest_proc", "relay"})),
    ("trainer", frozenset({"trainer"})),
    ("learner", frozenset({"service"})),
)
"""learner/'s modules from the bottom up: a module imports its own layer's and lower ones'.
basics are the ring and the pieces that need nothing of the learner; math is the SAC update's
functions and networks; graph wraps it for CUDA graphs and compile; trainer runs it; service
wires them all (and reads the whole config)."""


def module_of(path: Path, root: Path) -> str:
    """'learner.sac' for learner/sac.py, 'cluster' for cluster/__init__.py."""
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
    """module -> the package modules it imports (`from herd.learner import losses` counts as
    learner.losses when that is a module, else as learner)."""
    files = [p for folder in FOLDERS.values() for p in sorted((root / folder).glob("*.py"))]
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


def upward_imports(graph: dict[str, set[str]], layers=LEARNER_LAYERS) -> list[str]:
    """learner/ imports that go to a higher layer, or from or to a module the table lacks."""
    rank = {f"learner.{m}": i for i, (_, ms) in enumerate(layers) for m in ms}
    bad = []
    for m, targets in sorted(graph.items()):
        if not m.startswith("learner."):
            continue
        if m not in rank:
            bad.append(f"{m}: not in LEARNER_LAYERS")
            continue
        for t in sorted(targets):
            if t.startswith("learner.") and rank.get(t, len(layers)) > rank[m]:
                where = layers[rank[t]][0] if t in rank else "no layer"
                bad.append(f"{m} ({layers[rank[m]][0]}) imports {t} ({where})")
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


def test_the_graph_sees_what_the_checks_must_catch(tmp_path: Path) -> None:
    """A synthetic tree with a cycle, a job-layer import and an upward import, each found;
    imports inside functions included."""
    for folder in FOLDERS.values():
        (tmp_path / folder).mkdir()
    (tmp_path / "learner" / "config.py").write_text("def f():\n    from herd.learner import sac\n")
    (tmp_path / "learner" / "sac.py").write_text("import herd.learner.config\n")
    (tmp_path / "actors" / "env_actor.py").write_text("def g():\n    from herd.startup import x\n")
    (tmp_path / "cluster" / "startup.py").write_text("from herd.proto.timing import y\n")
    (tmp_path / "proto" / "timing.py").write_text("")
    graph = import_graph(tmp_path)
    assert graph["learner.config"] == {"learner.sac"} and graph["cluster.startup"] == {"proto.timing"}
    assert find_cycle(graph) == ["learner.config", "learner.sac", "learner.config"]
    assert crossings(graph) == ["actors.env_actor imports cluster.startup"]
    assert upward_imports(graph) == ["learner.config (config) imports learner.sac (math)"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
