"""docs/configuration.md, generated from the pydantic models a job's YAML is validated against.

Walks JobConfig and every model nested in it; each field's line comes from the model: its type
and bounds, its default, and the docstring written under it in the source.
"""

from __future__ import annotations

import ast
import html
import inspect
import itertools
import re
import textwrap
import types
import typing
from enum import Enum

import annotated_types as at
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

BOUNDS = [(at.Ge, "ge", "≥"), (at.Gt, "gt", ">"), (at.Le, "le", "≤"), (at.Lt, "lt", "<"),
          (at.MultipleOf, "multiple_of", "multiple of")]


def field_docs(cls: type[BaseModel]) -> dict[str, str]:
    """The string literal under each annotated attribute, for `cls` and the models it extends."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body
        for node, nxt in itertools.pairwise(body):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                docs[node.target.id] = inspect.cleandoc(nxt.value.value)
    return docs


def models_in(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in models_in(arg)]


def type_name(annotation) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Literal:
        return " or ".join(repr(a) if not isinstance(a, str) else f"'{a}'" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join('...' if a is Ellipsis else type_name(a) for a in args)}]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{anchor(annotation.__name__)})"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def bounds(field) -> str:
    parts = []
    for meta in field.metadata:
        for kind, attr, sign in BOUNDS:
            if isinstance(meta, kind):
                parts.append(f"{sign} {getattr(meta, attr)}")
        pattern = getattr(meta, "pattern", None)
        if pattern:
            parts.append(f"matches `{pattern}`")
    return ", ".join(parts)


def default_of(field) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "its defaults"
    if isinstance(value, Enum):
        value = value.value
    return f"`{yaml_value(value)}`"


def yaml_value(value) -> str:
    """A default as it is written in the YAML file."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {yaml_value(v)}" for k, v in value.items()) + "}"
    return repr(value) if isinstance(value, str) else str(value)


def anchor(name: str) -> str:
    return name.lower()


def escape(text: str) -> str:
    """Markdown table cell: one line, pipes escaped, angle brackets shown. A code span holding a
    pipe becomes HTML, since a table keeps the backslash of an escaped pipe inside backticks."""
    parts = " ".join(text.split()).split("`")
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:  # outside backticks
            out.append(html.escape(part, quote=False).replace("|", "\\|"))
        elif "|" in part:
            out.append("<code>" + html.escape(part, quote=False).replace("|", "&#124;") + "</code>")
        else:
            out.append(f"`{part}`")
    return "".join(out)


def walk(model: type[BaseModel], path: str, seen: list[tuple[str, type[BaseModel]]]) -> None:
    seen.append((path, model))
    for name, field in model.model_fields.items():
        for sub in models_in(field.annotation):
            if all(sub is not m for _, m in seen):
                walk(sub, f"{path}.{name}" if path else name, seen)


def section(path: str, model: type[BaseModel]) -> list[str]:
    docs = field_docs(model)
    title = f"`{path}`" if path else "The whole file"
    about = escape(inspect.cleandoc(model.__doc__ or ""))
    out = [f"## {model.__name__}", "", f"{title}. {about}".strip(), ""]
    out += ["| key | type | default | what it does |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        typ = type_name(field.annotation)
        limit = bounds(field)
        kind = escape(typ) + (f" ({escape(limit)})" if limit else "")
        subs = models_in(field.annotation)
        text = docs.get(name) or field.description or (inspect.cleandoc(subs[0].__doc__ or "") if subs else "")
        key = f"{path}.{name}" if path else name
        out.append(f"| `{key}` | {kind} | {escape(default_of(field))} | {escape(text)} |")
    out.append("")
    return out


def configuration_md() -> str:
    from herd.config import JobConfig

    seen: list[tuple[str, type[BaseModel]]] = []
    walk(JobConfig, "", seen)
    out = ["# Configuration reference", "",
           "<!-- generated by docs/_gen/generate.py from the config models; make docs-gen -->", "",
           "A job is one YAML file (`herd submit CONFIG`), validated against these models before any",
           "process starts; an unknown key or a value out of range is refused with one line naming it.",
           "`--set KEY=VALUE` overrides one key with the same checks (`--set learner.replay.batch_size=512`).", "",
           "Contents: " + ", ".join(f"[{m.__name__}](#{anchor(m.__name__)})" for _, m in seen), ""]
    for path, model in seen:
        out += section(path, model)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).rstrip() + "\n"
