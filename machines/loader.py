"""YAML -> Spec: parse safely, validate the shape, and put a source mark on every node."""

from __future__ import annotations

import difflib
from pathlib import Path as FsPath
from typing import Any

from pydantic import BaseModel, ValidationError

from .diagnostics import Diagnostic, Mark, SpecError, error
from .spec import ContextField, Node, Spec, StateSpec, TransitionSpec
from .yamlsrc import Path, SourceMap, parse_yaml

SUPPORTED_VERSIONS = (1,)

# How to step from a model field into its children, for did-you-mean and for marks.
_CHILDREN: dict[type[BaseModel], dict[str, tuple[str, ...]]] = {
    Spec: {"context": ("dict",), "states": ("dict",)},
    StateSpec: {"states": ("dict",), "on": ("dict", "list"), "after": ("dict", "list"),
                "always": ("list",)},
}
_CHILD_MODEL: dict[tuple[type[BaseModel], str], type[BaseModel]] = {
    (Spec, "context"): ContextField,
    (Spec, "states"): StateSpec,
    (StateSpec, "states"): StateSpec,
    (StateSpec, "on"): TransitionSpec,
    (StateSpec, "after"): TransitionSpec,
    (StateSpec, "always"): TransitionSpec,
}


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that owns the last element of a pydantic error location."""
    model: type[BaseModel] = Spec
    i = 0
    while i < len(loc) - 1:
        name = loc[i]
        steps = _CHILDREN.get(model, {}).get(str(name))
        child = _CHILD_MODEL.get((model, str(name)))
        if steps is None or child is None:
            return None
        i += 1 + len(steps)
        model = child
    return model


def _field_names(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def _describe_input(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _diagnostic(err: Any, source: SourceMap) -> Diagnostic:
    loc: tuple[Any, ...] = tuple(err["loc"])
    where = ".".join(str(p) for p in loc) or "<root>"
    kind = err["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        model = _model_at(loc)
        hint = None
        if model is not None:
            names = _field_names(model)
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
            hint = (f"did you mean {close[0]!r}?" if close
                    else "expected one of: " + ", ".join(names))
        return error("S101", f"unknown key {key!r} in {where.rsplit('.', 1)[0] or 'spec'}",
                     source.key(loc), hint)
    if kind == "missing":
        return error("S102", f"missing required field {str(loc[-1])!r}", source.value(loc[:-1]))
    message = err["msg"]
    if kind == "literal_error":
        message = message.replace("Input should be", "expected")
    return error("S103", f"invalid value for {where}: {message}, got "
                 f"{_describe_input(err.get('input'))}", source.value(loc))


def _attach_marks(node: Node, path: Path, source: SourceMap) -> None:
    node._mark = source.key(path) if path else source.value(path)
    for name in node.model_fields_set:
        node._field_marks[name] = source.value((*path, name))
        value = getattr(node, name)
        steps = _CHILDREN.get(type(node), {}).get(name, ())
        _attach_children(value, steps, (*path, name), source)


def _attach_children(value: Any, steps: tuple[str, ...], path: Path, source: SourceMap) -> None:
    if not steps:
        if isinstance(value, Node):
            _attach_marks(value, path, source)
        return
    step, rest = steps[0], steps[1:]
    if step == "dict" and isinstance(value, dict):
        for key, child in value.items():
            _attach_children(child, rest, (*path, key), source)
    elif step == "list" and isinstance(value, list):
        for i, child in enumerate(value):
            # A shorthand (`go: done`) has no list in the YAML: mark the scalar itself.
            child_path = (*path, i) if source.has((*path, i)) else path
            _attach_children(child, rest, child_path, source)
            if isinstance(child, Node) and child_path == path:
                child._mark = source.value(path)


def loads(text: str | bytes, file: str = "<string>") -> Spec:
    """Parse and validate a spec from text. Raises :class:`SpecError` with diagnostics."""
    document = parse_yaml(text, file)
    try:
        spec = Spec.model_validate(document.data)
    except ValidationError as exc:
        raise SpecError([_diagnostic(e, document.source) for e in exc.errors()]) from None
    spec._file = file
    _attach_marks(spec, (), document.source)
    spec._mark = Mark(file, 1, 1)
    if spec.version not in SUPPORTED_VERSIONS:
        raise SpecError([error("S106", f"spec version {spec.version} is not supported "
                               f"(supported: {', '.join(map(str, SUPPORTED_VERSIONS))})",
                               spec.mark_of("version"))])
    return spec


def load(path: str | FsPath) -> Spec:
    """Read and validate a spec file. Raises :class:`SpecError` with diagnostics."""
    file = str(path)
    try:
        raw = FsPath(path).read_bytes()
    except IsADirectoryError:
        raise SpecError([error("Y011", "is a directory, not a spec file", Mark(file, 1, 1))]) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SpecError([error("Y011", f"cannot read the file: {reason}", Mark(file, 1, 1))]) from None
    return loads(raw, file)
