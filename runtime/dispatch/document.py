"""Document detection: does a sub-agent's output hold a whole YAML/JSON review document yet?

Pure functions and frozen values, no processes and no clock. The dispatcher sends the
``polling_state`` machine a ``marker`` event when new output holds a marker pattern (a cheap
hint); the machine's ``document_complete`` guard calls :func:`check_document` on the buffered
stdout. A ``v:`` line on its own is never completion: the output must parse as one whole
YAML/JSON mapping that holds the required field, and then either be explicitly closed
(:attr:`DocumentCheck.ended_by_marker`) or be followed by ``min_silence_cycles`` silent polls.

What agent CLIs really print is handled: one surrounding Markdown code fence, prose lines
before the document, text after it, Windows newlines, a byte-order mark, and compact review
YAML that strict YAML refuses over a second ``: `` in a value (``- C: Missing test: x``).

A closing line (``...``, ``---``, a closing fence, JSON's ``}`` + newline) only counts once
its newline has arrived: ``...`` may still grow into ``....x``, and an unterminated line is
never proof that the agent has finished. What the document says is read by
:mod:`interlock.runtime.dispatch.verdict`.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from interlock.machines.yamlsrc import load_yaml

__all__ = ["DocumentCheck", "OutputFormat", "check_document"]

OutputFormat = Literal["yaml", "json", "text"]

_MAX_JSON_CANDIDATES = 32

# ---------------------------------------------------------------------------------------------
# Parsers (module level, so tests can count calls). YAML is machines.yamlsrc's fast reading.

_JSON = json.JSONDecoder()


def _decode_json(text: str, pos: int) -> tuple[Any, int]:
    """Decode one JSON value starting at ``pos``; returns it and the index after it."""
    return _JSON.raw_decode(text, pos)


# ---------------------------------------------------------------------------------------------
# Document check


@dataclass(frozen=True)
class DocumentCheck:
    """Outcome of :func:`check_document`.

    ``complete``: the output holds one parseable mapping with the required field at top
    level (not null) and is at least ``min_output_length`` bytes long. ``ended_by_marker``:
    that document is also explicitly closed, so nothing more belongs to it. ``reason`` says
    why it is not complete (empty when complete), for logs.
    """

    complete: bool
    ended_by_marker: bool = False
    document: dict[str, Any] | None = None
    reason: str = ""


def _incomplete(reason: str) -> DocumentCheck:
    return DocumentCheck(complete=False, reason=reason)


_KEY_NAME = r"(?:\w[\w.\-]*|\"[^\"\n]*\"|'[^'\n]*')"
_KEY = rf"{_KEY_NAME}[ \t]*:(?:[ \t]|$)"
_KEY_LINE = re.compile(_KEY)
_FENCE_OPEN = re.compile(r"[ \t]{0,3}```[ \t]*([\w+.\-]*)[ \t]*$")
_FENCE_CLOSE = re.compile(r"[ \t]{0,3}```[ \t]*$")
_FENCE_TAGS: dict[str, frozenset[str]] = {
    "yaml": frozenset({"yaml", "yml", ""}),
    "json": frozenset({"json", ""}),
    "text": frozenset({"yaml", "yml", "json", "", "text"}),
}


def _needles(fmt: str, required_field: str) -> tuple[str, ...]:
    if fmt == "json":
        return (f'"{required_field}"',)
    return (f"{required_field}:", f'"{required_field}"', f"'{required_field}'")


def _strip_fence(
    lines: list[str], tags: frozenset[str], needles: Sequence[str]
) -> tuple[list[str], bool]:
    """Keep the content of one fenced block if there is a fitting one.

    ``lines`` ends with the unterminated tail (``""`` when the text ended with a newline).
    Returns the lines to examine (in the same shape) and whether the fence was closed. The
    block chosen is the last one whose tag fits the format and whose content holds a needle.
    """
    blocks: list[tuple[str, int, int | None]] = []  # tag, first content line, closing line
    opened: tuple[str, int] | None = None
    last = len(lines) - 1
    for i, line in enumerate(lines):
        if "```" not in line:
            continue
        if opened is None:
            m = _FENCE_OPEN.match(line)
            if m is not None and i < last:
                opened = (m.group(1).lower(), i + 1)
        elif _FENCE_CLOSE.match(line) and i < last:
            blocks.append((opened[0], opened[1], i))
            opened = None
    if opened is not None:
        blocks.append((opened[0], opened[1], None))
    for tag, begin, close in reversed(blocks):
        if tag not in tags:
            continue
        end = len(lines) if close is None else close
        body = lines[begin:end]
        if any(n in line for line in body for n in needles):
            if close is None:
                return body, False
            return [*body, ""], True
    return lines, False


def _doc_like(line: str) -> bool:
    """Whether a line can belong to a top-level block mapping."""
    if not line or line[0] in " \t#":
        return True
    if line[0] == "-" and (len(line) == 1 or line[1] in " \t"):
        return True
    return _KEY_LINE.match(line) is not None


def _check_yaml(
    lines: list[str], required_field: str, tokens: frozenset[str], fence_closed: bool
) -> DocumentCheck:
    last = len(lines) - 1  # the unterminated tail never counts as a marker line
    bounds = [-1, *(i for i in range(last) if lines[i].rstrip() in tokens), len(lines)]
    required = re.compile(
        rf"(?:{re.escape(required_field)}|\"{re.escape(required_field)}\""
        rf"|'{re.escape(required_field)}')[ \t]*:(?:[ \t]|$)"
    )
    for k in range(len(bounds) - 2, -1, -1):
        a, b = bounds[k] + 1, bounds[k + 1]
        if any(_KEY_LINE.match(lines[j]) for j in range(a, b)):
            break
    else:
        return _incomplete("no top-level YAML mapping key")
    followed_by_marker = b < len(lines)
    r = next((j for j in range(b - 1, a - 1, -1) if required.match(lines[j])), None)
    if r is None:
        return _incomplete(f"{required_field!r} is not a top-level key of the last document")
    start = r
    while start > a and _doc_like(lines[start - 1]):
        start -= 1
    end = r + 1
    while end < b and _doc_like(lines[end]):
        end += 1
    trailing = end < b
    try:
        doc = load_yaml("\n".join(lines[start:end]))
    except Exception as exc:  # any input: never raise
        error = exc
        if trailing:
            try:  # what looked like trailing prose may be part of the document
                doc = load_yaml("\n".join(lines[start:b]))
                return _finish(doc, required_field, ended=followed_by_marker or fence_closed)
            except Exception as exc2:
                error = exc2
        failed = _incomplete(f"YAML does not parse: {_one_line(error)}")
        if not isinstance(exc, yaml.YAMLError):  # a refusal gets no lenient reading
            return failed
        try:
            doc = _compact_review(lines[start:end])
        except Exception:
            return failed
    return _finish(doc, required_field, ended=not trailing and (followed_by_marker or fence_closed))


_MAX_COMPACT_LINES = 1000
_PAIR = re.compile(rf"({_KEY_NAME})[ \t]*:(?:[ \t]|$)(.*)")
_ITEM = re.compile(r"( *)-(?: (.*))?")
_PLAIN_START = re.compile(r"[^\s\-?:,\[\]{}#&*!|>'\"%@`]|[\-?:]\S")


def _compact_entry(line: str) -> tuple[Any, Any]:
    """One ``key: value`` line as strict YAML reads it; failing that, key and raw text."""
    try:
        loaded = load_yaml(line)
    except yaml.YAMLError:
        loaded = None
    if isinstance(loaded, dict) and len(loaded) == 1:
        return next(iter(loaded.items()))
    m = _PAIR.fullmatch(line)
    text = "" if m is None else m.group(2).strip()
    if m is None or not _PLAIN_START.match(text):
        raise ValueError(f"not a compact review line: {line!r}")
    return load_yaml(m.group(1)), text


def _compact_item(text: str) -> Any:
    """One list item (the text after ``- ``): as strict YAML reads it, or ``{X: text}``/text."""
    try:
        loaded = load_yaml(f"- {text}")
    except yaml.YAMLError:
        loaded = None
    if isinstance(loaded, list) and len(loaded) == 1:
        return loaded[0]
    if _PAIR.fullmatch(text):
        return dict([_compact_entry(text)])
    if not _PLAIN_START.match(text):
        raise ValueError(f"not a compact review item: {text!r}")
    return text


def _compact_review(lines: Sequence[str]) -> dict[Any, Any]:
    """Read the compact review YAML that strict YAML refuses over a second ``: `` in a value.

    Top-level ``key: value`` lines, a key with no value followed by ``- item`` lines at one
    indentation, blank and comment lines. Each line is read by the YAML loader first, so what
    strict YAML accepts reads the same; a line it refuses keeps the rest of the line as text
    (``- X: text`` gives ``{X: text}``), where a plain scalar could start. Anything else
    (deeper nesting, broken quotes or flow collections, unknown lines) raises ValueError.
    """
    if len(lines) > _MAX_COMPACT_LINES:
        raise ValueError("too many lines for the compact review reading")
    doc: dict[Any, Any] = {}
    open_key: tuple[Any] | None = None  # a key with no value yet: list items may follow
    indent = -1
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = _ITEM.fullmatch(line)
        if item is not None and open_key is not None:
            if indent < 0:
                indent, doc[open_key[0]] = len(item.group(1)), []
            if len(item.group(1)) != indent:
                raise ValueError(f"list item at another indentation: {line!r}")
            doc[open_key[0]].append(_compact_item((item.group(2) or "").strip()))
            continue
        pair = _PAIR.fullmatch(line)
        if pair is None:
            raise ValueError(f"not a compact review line: {line!r}")
        key, value = _compact_entry(line)
        doc[key] = value
        rest = pair.group(2).strip()
        open_key = (key,) if not rest or rest.startswith("#") else None
        indent = -1
    return doc


def _check_json(
    text: str, required_field: str, markers: Sequence[str], fence_closed: bool
) -> DocumentCheck:
    # Top-level objects start at column 0 (pretty-printed nested ones are indented); failing
    # that, any brace, tried in order: a truncated candidate stops the search.
    starts = [m.start() for m in re.finditer(r"^\{", text, re.MULTILINE)]
    if not starts:
        starts = [m.start() for m in itertools.islice(re.finditer(r"\{", text), 256)]
    reason = "no JSON object"
    resume = 0
    for pos in starts[:_MAX_JSON_CANDIDATES]:
        if pos < resume:
            continue
        try:
            obj, resume = _decode_json(text, pos)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
                return _incomplete("JSON object not closed yet")
            reason = f"JSON does not parse: {_one_line(exc)}"
            continue
        except Exception as exc:  # RecursionError on deep nesting, ...
            return _incomplete(f"JSON does not parse: {_one_line(exc)}")
        if not isinstance(obj, dict) or required_field not in obj:
            reason = f"{required_field!r} is not a top-level key of the JSON object"
            continue
        rest = text[resume:]
        closed = "}" + rest.replace(" ", "").replace("\t", "")
        ended = not rest.strip() and (fence_closed or any(m and m in closed for m in markers))
        return _finish(obj, required_field, ended=ended)
    return _incomplete(reason)


def _finish(doc: Any, required_field: str, *, ended: bool) -> DocumentCheck:
    if not isinstance(doc, dict):
        return _incomplete(f"the document is a {type(doc).__name__}, not a mapping")
    document = {str(k): v for k, v in doc.items()}
    if required_field not in document:
        return _incomplete(f"{required_field!r} is not a top-level key")
    if document[required_field] is None:
        return _incomplete(f"{required_field!r} has no value yet")
    return DocumentCheck(complete=True, ended_by_marker=ended, document=document)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200] or type(exc).__name__


def _normalize(text: str) -> str:
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def check_document(
    text: str,
    *,
    output_format: OutputFormat = "yaml",
    required_field: str = "v",
    min_output_length: int = 100,
    yaml_markers: Sequence[str] = ("---", "\n..."),
    json_markers: Sequence[str] = ("}\n",),
) -> DocumentCheck:
    """Check whether ``text`` (a sub-agent's stdout so far) holds a complete document.

    ``output_format`` is the SubAgentCommand's: ``yaml``, ``json``, or ``text`` (try JSON,
    then YAML). ``yaml_markers`` are lines that close a YAML document (stripped: ``---`` starts
    the next one, ``...`` ends this one); ``json_markers`` what follows a closed object. The
    parse is skipped when the required key cannot appear, when the output is too short, and
    is limited to the last document region. Never raises.
    """
    try:
        return _check(
            text, output_format, required_field, min_output_length, yaml_markers, json_markers
        )
    except Exception as exc:  # a bug here must not take the dispatcher down
        return _incomplete(f"check failed: {_one_line(exc)}")


def _check(
    text: str,
    fmt: str,
    required_field: str,
    min_output_length: int,
    yaml_markers: Sequence[str],
    json_markers: Sequence[str],
) -> DocumentCheck:
    if fmt not in _FENCE_TAGS:
        return _incomplete(f"unknown output format {fmt!r}")
    if not required_field:
        return _incomplete("no required field configured")
    needles = _needles(fmt, required_field)
    if not any(n in text for n in needles):
        return _incomplete(f"required field {required_field!r} absent")
    # len(text) <= its UTF-8 size, so encode only when the character count is too small
    if len(text) < min_output_length and len(text.encode("utf-8", "replace")) < min_output_length:
        return _incomplete(f"output shorter than {min_output_length} bytes")
    text = _normalize(text)
    body, fence_closed = _strip_fence(text.split("\n"), _FENCE_TAGS[fmt], needles)
    tokens = frozenset(t for t in (m.strip() for m in yaml_markers) if t)
    if fmt == "yaml":
        return _check_yaml(body, required_field, tokens, fence_closed)
    if fmt == "json":
        return _check_json("\n".join(body), required_field, json_markers, fence_closed)
    tried: DocumentCheck | None = None
    if f'"{required_field}"' in text:
        tried = _check_json("\n".join(body), required_field, json_markers, fence_closed)
        if tried.complete:
            return tried
    result = _check_yaml(body, required_field, tokens, fence_closed)
    if result.complete or tried is None:
        return result
    return _incomplete(f"{tried.reason}; {result.reason}")
