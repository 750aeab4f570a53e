"""YAML -> Spec: parse safely, validate the shape, and put a source mark on every node."""

from __future__ import annotations

import difflib
from pathlib import Path as FsPath
from typing import Any

from pydantic import BaseModel, ValidationError

from interlock.machines.diagnostics import Diagnostic, Mark, SpecError, error
from interlock.machines.spec import ContextField, Node, Spec, StateSpec, TransitionSpec
from interlock.machines.yamlsrc import Path, SourceMap, parse_yaml

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


def _source_path(loc: tuple[Any, ...], source: SourceMap) -> Path:
    """The YAML path of a pydantic location: drop list indexes that a shorthand added
    (``go: {taget: x}`` is validated as ``go: [{taget: x}]``)."""
    path: Path = ()
    for part in loc:
        if isinstance(part, int) and source.has(path) and not source.has((*path, part)):
            continue
        path = (*path, part)
    return path


def _diagnostic(err: Any, source: SourceMap) -> Diagnostic:
    loc: tuple[Any, ...] = tuple(err["loc"])
    at = _source_path(loc, source)
    where = ".".join(str(p) for p in at) or "<root>"
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
        return error("S101", f"unknown key {key!r} in {where.rpartition('.')[0] or 'spec'}",
                     source.key(at), hint)
    if kind == "missing":
        return error("S102", f"missing required field {str(loc[-1])!r}", source.value(at[:-1]))
    message = err["msg"]
    if kind == "literal_error":
        message = message.replace("Input should be", "expected")
    return error("S103", f"invalid value for {where}: {message}, got "
                 f"{_describe_input(err.get('input'))}", source.value(at))


def _attach_marks(node: Node, path: Path, source: SourceMap) -> None:
    node._mark = source.key(path) if path else source.value(path)
    for name in node.model_fields_set:
        key = type(node).model_fields[name].alias or name  # `continue:` is continue_
        node._field_marks[name] = source.value((*path, key))
        value = getattr(node, name)
        if isinstance(value, dict):
            _attach_key_marks(node, name, value, (*path, name), source)
        steps = _CHILDREN.get(type(node), {}).get(name, ())
        _attach_children(value, steps, (*path, name), source)


def _attach_key_marks(node: Node, name: str, value: dict[Any, Any], path: Path,
                      source: SourceMap) -> None:
    """Remember where each key of a mapping field is written (``on: {go: ...}`` -> `go`)."""
    for key in value:
        raw = _raw_key(key, path, source)
        if raw is not None:
            node._key_marks[(name, str(key))] = source.keys[(*path, raw)]


def _raw_key(key: Any, path: Path, source: SourceMap) -> Any:
    """The key as YAML wrote it: event keys like `404` or `1.5` arrive as text."""
    if (*path, key) in source.keys:
        return key
    for convert in (int, float):
        try:
            candidate = convert(key)
        except (TypeError, ValueError):
            continue
        if (*path, candidate) in source.keys:
            return candidate
    return None


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


def is_spec_like(data: object) -> bool:
    """Whether parsed YAML is meant as a spec: a mapping with ``machine:`` or ``states:``.

    Anything else (a project file ``interlock.yaml``, a CI file) is not a spec at all,
    rather than a spec with every field missing (S107; ``validate FOLDER`` skips it).

    >>> is_spec_like({"machine": "m"}), is_spec_like({"states": {}}), is_spec_like({"x": 1})
    (True, True, False)
    """
    return isinstance(data, dict) and ("machine" in data or "states" in data)


def loads(text: str | bytes, file: str = "<string>") -> Spec:
    """Parse and validate a spec from text. Raises :class:`SpecError` with diagnostics."""
    document = parse_yaml(text, file)
    if not is_spec_like(document.data):
        found = ", ".join(map(str, list(document.data)[:5])) or "nothing"
        raise SpecError([error(
            "S107", f"not a spec: no `machine:` key (the file holds: {found})",
            Mark(file, 1, 1), "a spec starts with machine: NAME and states:")])
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
        unreadable = "is a directory, not a spec file"
    except OSError as exc:
        unreadable = f"cannot read the file: {exc.strerror or exc}"
    else:
        return loads(raw, file)
    raise SpecError([error("Y011", unreadable, Mark(file, 1, 1))])
