"""interlock's one YAML reader: safe, YAML 1.2 booleans, hostile documents refused.

Two readings of the same YAML:

* :func:`parse_yaml` (specs, signals): the document is composed with PyYAML's safe
  composer (no Python tags: libyaml's, ten times faster, when it reads the text; PyYAML's
  Python one, whose messages the diagnostics quote, when it does not or when the text
  nests too deep for C), then converted to plain dicts, lists and scalars while a
  :class:`SourceMap` records the mark of every path. Duplicate keys are errors (never
  silently last-wins); size, depth and node count are capped so that a hostile document
  (an alias bomb, 10,000 nested brackets) yields a diagnostic instead of a hang or a
  traceback.
* :func:`load_yaml` (agent output, metadata): plain data and nothing else, as fast as
  libyaml parses it, for text read many times over (the dispatcher parses an agent's
  output as it grows). Its guards run before libyaml sees the text: libyaml recurses in
  C, so deep nesting is refused (:class:`YamlRefused`) rather than crashing the process,
  and so are anchors with aliases (nothing read this way needs them, and they let a small
  document expand exponentially).

Both read YAML 1.2 booleans: only ``true``/``false`` (any case); ``yes``, ``on``, ``NO``
stay strings.

>>> load_yaml("v: NO\\nok: true\\nwhen: [on, off]")
{'v': 'NO', 'ok': True, 'when': ['on', 'off']}
>>> yaml_refusal("a: &x [1]\\nb: *x")  # load_yaml raises YamlRefused with this
'YAML anchors and aliases are not accepted'
>>> yaml_refusal("message: 'fish &chips *today*'") is None
True
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from interlock.machines.diagnostics import Diagnostic, Mark, SpecError, error

Path = tuple[str | int, ...]

MAX_BYTES = 1 << 20  # 1 MiB: far beyond any hand-written spec
MAX_DEPTH = 64
MAX_NODES = 200_000

_MERGE_TAG = "tag:yaml.org,2002:merge"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_PLAIN_TAGS = ("tag:yaml.org,2002:seq", "tag:yaml.org,2002:map")  # of collections


def _yaml12_booleans(loader: type[Any]) -> None:
    """Make ``loader`` resolve only true/false (any case) as booleans, as YAML 1.2 does."""
    loader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL_TAG]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    loader.add_implicit_resolver(
        _BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
    )


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans: only true/false. ``on:``, ``yes``, ``off`` are strings."""


_yaml12_booleans(_Loader)

_FastBase: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _FastLoader(_FastBase):  # type: ignore[misc]
    """The same reading on libyaml when it is installed (no marks kept: :func:`load_yaml`)."""


_yaml12_booleans(_FastLoader)


@dataclass
class SourceMap:
    """Marks of the keys and values of one document, by path from the root."""

    file: str
    values: dict[Path, Mark] = field(default_factory=dict)
    keys: dict[Path, Mark] = field(default_factory=dict)

    def value(self, path: Path) -> Mark:
        """The mark of the value at ``path``, or of its nearest recorded ancestor."""
        for i in range(len(path), -1, -1):
            mark = self.values.get(path[:i])
            if mark is not None:
                return mark
        return Mark(self.file, 1, 1)

    def key(self, path: Path) -> Mark:
        """The mark of the key that names ``path`` (falls back to the value's mark)."""
        return self.keys.get(path) or self.value(path)

    def has(self, path: Path) -> bool:
        return path in self.values


@dataclass
class Document:
    data: Any
    source: SourceMap


def _mark(file: str, node_mark: Any) -> Mark:
    return Mark(file, node_mark.line + 1, node_mark.column + 1)


class _Converter:
    def __init__(self, file: str) -> None:
        self.file = file
        self.source = SourceMap(file)
        self.diagnostics: list[Diagnostic] = []
        self.count = 0
        self.constructor = _Loader("")  # only its scalar constructors are used

    def convert(self, node: Node, path: Path, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise SpecError(
                [
                    error(
                        "Y009",
                        f"the document expands to more than {MAX_NODES} nodes "
                        "(an alias bomb?)",
                        _mark(self.file, node.start_mark),
                    )
                ]
            )
        if depth > MAX_DEPTH:
            raise SpecError(
                [
                    error(
                        "Y008",
                        f"the document is nested more than {MAX_DEPTH} levels deep",
                        _mark(self.file, node.start_mark),
                    )
                ]
            )
        self.source.values.setdefault(path, _mark(self.file, node.start_mark))
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        if node.tag not in _PLAIN_TAGS:  # e.g. !!python/object/apply on a list: never run
            self.diagnostics.append(
                error("Y002", f"unsupported YAML tag {node.tag!r}; specs are plain YAML",
                      _mark(self.file, node.start_mark))
            )
            return None
        if isinstance(node, SequenceNode):
            return [
                self.convert(item, (*path, i), depth + 1) for i, item in enumerate(node.value)
            ]
        if isinstance(node, MappingNode):
            return self._mapping(node, path, depth)
        raise SpecError([error("Y002", "unsupported YAML node", _mark(self.file, node.start_mark))])

    def _scalar(self, node: ScalarNode) -> Any:
        """A scalar's value; an impossible one (``2024-13-45``) is reported, kept as text."""
        try:
            return self.constructor.construct_object(node, deep=True)
        except (ValueError, OverflowError) as exc:
            self.diagnostics.append(
                error("S103", f"invalid value {node.value!r}: {exc}",
                      _mark(self.file, node.start_mark))
            )
            return node.value

    def _mapping(self, node: MappingNode, path: Path, depth: int) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        first_seen: dict[Any, Mark] = {}
        merge_nodes: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merge_nodes.append(value_node)
                continue
            key_mark = _mark(self.file, key_node.start_mark)
            if not isinstance(key_node, ScalarNode):
                self.diagnostics.append(
                    error("S103", "mapping keys must be plain scalars", key_mark)
                )
                continue
            key = self._scalar(key_node)
            if not isinstance(key, str | int | float | bool) or key is None:
                key = str(key)
            if key in first_seen:
                first = first_seen[key]
                self.diagnostics.append(
                    error(
                        "Y004",
                        f"duplicate key {key!r} (first defined at line {first.line})",
                        key_mark,
                        "YAML would silently keep the last one; remove or rename one of them",
                    )
                )
                continue
            first_seen[key] = key_mark
            child = (*path, key)
            self.source.keys.setdefault(child, key_mark)
            result[key] = self.convert(value_node, child, depth + 1)
        # Merged after the explicit keys, so that the marks of explicit keys win.
        for source in (m for n in merge_nodes for m in self._merge_sources(n, path, depth)):
            for key, value in source.items():
                result.setdefault(key, value)
        return result

    def _merge_sources(self, node: Node, path: Path, depth: int) -> Iterator[dict[Any, Any]]:
        nodes = node.value if isinstance(node, SequenceNode) else [node]
        for item in nodes:
            value = self.convert(item, path, depth + 1)
            if not isinstance(value, dict):
                self.diagnostics.append(
                    error(
                        "S103",
                        "a merge key (<<) must name a mapping",
                        _mark(self.file, item.start_mark),
                    )
                )
                continue
            yield value


class _TooDeep(Exception):
    """Deeper than MAX_DEPTH: the converter reports it (Y008)."""


def _children(node: Node) -> list[Node]:
    """The nodes the converter converts under ``node``, in its order (values of scalar
    keys, the first of a duplicated key only; then the merged mappings)."""
    if isinstance(node, ScalarNode) or node.tag not in _PLAIN_TAGS:
        return []
    if isinstance(node, SequenceNode):
        return list(node.value)
    values: list[Node] = []
    merged: list[Node] = []
    seen: set[str] = set()
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE_TAG:
            merged += value_node.value if isinstance(value_node, SequenceNode) else [value_node]
        elif isinstance(key_node, ScalarNode) and key_node.value not in seen:
            seen.add(key_node.value)
            values.append(value_node)
    return values + merged


def _refuse_bombs(root: Node, file: str) -> None:
    """Y009 before converting anything when the document expands to more than MAX_NODES
    nodes: an alias names one node, so sizes are counted once per node (not once per
    use), and the error points where the converter would have stopped."""
    sizes: dict[int, int] = {}

    def size(node: Node, depth: int) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if depth > MAX_DEPTH:
            raise _TooDeep
        total = 1 + sum(size(child, depth + 1) for child in _children(node))
        sizes[id(node)] = total = min(total, MAX_NODES + 1)
        return total

    try:
        if size(root, 0) <= MAX_NODES:
            return
    except (_TooDeep, RecursionError):
        return  # the converter says where it is too deep
    node, count = root, 0
    while count < MAX_NODES:  # down to the node the converter's count passes MAX_NODES at
        count += 1
        for child in _children(node):
            if count + sizes[id(child)] <= MAX_NODES:
                count += sizes[id(child)]
                continue
            node = child
            break
    raise SpecError([error("Y009", f"the document expands to more than {MAX_NODES} nodes "
                           "(an alias bomb?)", _mark(file, node.start_mark))])


def _decode(raw: bytes, file: str) -> str:
    if len(raw) > MAX_BYTES:
        raise SpecError(
            [
                error(
                    "Y007",
                    f"the file is {len(raw)} bytes; specs are limited to {MAX_BYTES} bytes",
                    Mark(file, 1, 1),
                )
            ]
        )
    if b"\x00" in raw:
        offset = raw.index(b"\x00")
        line = raw.count(b"\n", 0, offset) + 1
        column = offset - (raw.rfind(b"\n", 0, offset) + 1) + 1
        raise SpecError(
            [error("Y006", "the file is binary (it contains a NUL byte)", Mark(file, line, column))]
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError(
            [
                error(
                    "Y006",
                    f"the file is not UTF-8 text (byte 0x{raw[exc.start]:02x})",
                    Mark(file, line, column),
                )
            ]
        ) from None
    return text.removeprefix("\ufeff")


def _syntax_error(exc: yaml.YAMLError, file: str) -> Diagnostic:
    problem_mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    mark = _mark(file, problem_mark) if problem_mark is not None else Mark(file, 1, 1)
    problem = getattr(exc, "problem", None) or str(exc)
    if "'\\t'" in problem:
        return error(
            "Y005",
            "tab character used for indentation",
            mark,
            "YAML indents with spaces only",
        )
    context = getattr(exc, "context", None)
    message = f"{context}: {problem}" if context else problem
    return error("Y002", f"YAML syntax error, {message}", mark)


def _compose(text: str) -> list[Any]:
    """The document's nodes: libyaml's (ten times faster) when it reads the text, else
    PyYAML's Python composer's, whose errors the diagnostics quote (a tab, an alias's
    name); text nested too deep for C goes to Python's composer straight away."""
    if not too_deep_for_libyaml(text):
        with contextlib.suppress(yaml.YAMLError):
            return list(yaml.compose_all(text, Loader=_FastLoader))
    return list(yaml.compose_all(text, Loader=_Loader))


def parse_yaml(raw: bytes | str, file: str) -> Document:
    """Parse one YAML document into plain data plus its source map.

    Raises :class:`SpecError` for anything that is not a single YAML mapping; duplicate
    keys are returned as diagnostics on the converter (see :func:`load_document`).
    """
    text = _decode(raw.encode("utf-8") if isinstance(raw, str) else raw, file)
    try:
        nodes = _compose(text)
    except yaml.YAMLError as exc:
        raise SpecError([_syntax_error(exc, file)]) from None
    except RecursionError:
        raise SpecError(
            [error("Y008", f"the document is nested more than {MAX_DEPTH} levels deep",
                   Mark(file, 1, 1))]
        ) from None
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        raise SpecError([error("Y001", "the file is empty (no YAML document)", Mark(file, 1, 1))])
    if len(nodes) > 1:
        raise SpecError(
            [
                error(
                    "Y010",
                    "the file holds more than one YAML document; a spec is one document",
                    _mark(file, nodes[1].start_mark),
                )
            ]
        )
    root = nodes[0]
    _refuse_bombs(root, file)
    converter = _Converter(file)
    try:
        data = converter.convert(root, (), 0)
    except RecursionError:
        raise SpecError(
            [error("Y008", f"the document is nested more than {MAX_DEPTH} levels deep",
                   _mark(file, root.start_mark))]
        ) from None
    except yaml.YAMLError as exc:  # a bad scalar, e.g. an impossible timestamp
        raise SpecError([_syntax_error(exc, file)]) from None
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a scalar ({type(data).__name__})"
        raise SpecError(
            [
                error(
                    "Y003",
                    f"the top level is {kind}; a spec is a mapping with machine:, states:, ...",
                    _mark(file, root.start_mark),
                )
            ]
        )
    if converter.diagnostics:
        raise SpecError(list(dict.fromkeys(converter.diagnostics)))  # merges re-read anchors
    return Document(data, converter.source)


# ---------------------------------------------------------------------------------------------
# Plain data, fast (no source marks)

MAX_FLOW_DEPTH = 500
MAX_BLOCK_RUN = 1000
_BRACKET = re.compile(r"[\[\]{}]")
_BLOCK_RUN = re.compile(rf"^[ \-?]{{{MAX_BLOCK_RUN}}}", re.MULTILINE)
_ANCHOR = re.compile(r"(?:^|[\s\[{,])&[^\s,\[\]{}]")
_ALIAS = re.compile(r"(?:^|[\s\[{,])\*[^\s,\[\]{}]")


class YamlRefused(ValueError):
    """:func:`load_yaml` will not hand this text to the parser (see :func:`yaml_refusal`)."""


def _anchors_and_aliases(text: str) -> bool:
    """Whether the text really holds an anchor and an alias (a cheap look for ``&x`` and
    ``*x`` first; only then the tokens, so ``&`` and ``*`` in quoted text do not count)."""
    if not (_ANCHOR.search(text) and _ALIAS.search(text)):
        return False
    anchor = alias = False
    try:
        for token in yaml.scan(text, Loader=_FastLoader):
            anchor = anchor or isinstance(token, yaml.AnchorToken)
            alias = alias or isinstance(token, yaml.AliasToken)
            if anchor and alias:
                return True
    except yaml.YAMLError:
        return False  # the parser reports the same error, with its line
    return False


def too_deep_for_libyaml(text: str) -> bool:
    """Whether ``text`` may nest deeper than libyaml can take (it recurses in C): a run of
    indentation or dashes, or brackets opened, beyond what any sane document needs."""
    if _BLOCK_RUN.search(text):
        return True
    if text.count("[") + text.count("{") > MAX_FLOW_DEPTH:
        depth = 0
        for m in _BRACKET.finditer(text):
            depth += 1 if m.group() in "[{" else -1
            if depth > MAX_FLOW_DEPTH:
                return True
    return False


def yaml_refusal(text: str) -> str | None:
    """Why :func:`load_yaml` refuses ``text``, or None: nesting deeper than libyaml can
    take (it recurses in C), or anchors with aliases (an alias bomb)."""
    if too_deep_for_libyaml(text):
        return "YAML nesting too deep"
    if _anchors_and_aliases(text):
        return "YAML anchors and aliases are not accepted"
    return None


def load_yaml(text: str | bytes) -> Any:
    """One YAML document as plain data: safe constructors only, YAML 1.2 booleans, libyaml
    when available. Raises :class:`YamlRefused` (a ValueError) for what :func:`yaml_refusal`
    names, and ``yaml.YAMLError`` for text that does not parse."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    refusal = yaml_refusal(text)
    if refusal is not None:
        raise YamlRefused(refusal)
    return yaml.load(text, Loader=_FastLoader)
