"""Write diagrams for specs: ``<machine>.md`` (Mermaid, rendered by GitHub), ``<machine>.svg``
(Graphviz), and an index ``README.md``; and tell which of them are out of date.

``sync_diagrams`` does everything ``interlock diagram --all specs/ -o diagrams/`` should:
write every diagram and the index, and delete diagrams this module generated for specs
that no longer exist. ``stale_diagrams`` reports, without writing, what that would change.

Staleness of an SVG is judged by the DOT source it was drawn from, not by its bytes: the
layout Graphviz produces depends on its version and fonts, so every SVG carries the
SHA-256 of its DOT source in a comment, and it is current when that hash matches. This
also means checking needs no Graphviz; writing does.

Files are written through a temporary file and a rename, and only when their content
changes, so regenerating current diagrams touches nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from interlock.machines import load_checked
from interlock.machines.ir import MachineIR
from interlock.machines.render import render_dot, render_mermaid
from interlock.runtime.diagrams.graphviz import render_with_dot

__all__ = [
    "INDEX_NAME",
    "REGENERATE",
    "DiagramSet",
    "diagram_set",
    "prune_orphans",
    "stale_diagrams",
    "sync_diagrams",
    "write_diagrams",
    "write_index",
]

INDEX_NAME = "README.md"
REGENERATE = "interlock diagram --all specs/ -o diagrams/"
MARKER = "interlock: generated"
_SVG_HASH = re.compile(r"<!-- interlock: generated from .*? dot-sha256=([0-9a-f]{64}) -->")
_SVG_START = re.compile(r"<svg[\s>]")
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>#|])")


@dataclass(frozen=True, slots=True)
class DiagramSet:
    """What is generated for one spec (everything but the SVG bytes, which need ``dot``)."""

    spec_path: Path
    ir: MachineIR
    markdown: str
    dot: str

    @property
    def name(self) -> str:
        return self.ir.name

    @property
    def md_name(self) -> str:
        return f"{self.name}.md"

    @property
    def svg_name(self) -> str:
        return f"{self.name}.svg"

    @property
    def dot_sha256(self) -> str:
        return hashlib.sha256(self.dot.encode("utf-8")).hexdigest()


def _md_text(text: str) -> str:
    """Escape inline markdown (one line): the text shows as it is."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _md_prose(text: str, table: bool = False) -> str:
    """Author prose as markdown on one line: `code` spans kept, ``<x>`` shown, not eaten
    as HTML; ``|`` escaped inside a table cell (GitHub wants that even in code spans)."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    out = [p if p.startswith("`") and p.endswith("`") and len(p) > 1
           else p.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
           for p in parts]
    joined = "".join(out)
    return joined.replace("|", "\\|") if table else joined


def _first_sentence(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    sentence = re.split(r"(?<=[.!?])\s", flat, maxsplit=1)[0]
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rstrip() + "…"


def _states_table(ir: MachineIR) -> list[str]:
    """A table of the states that have a description (the diagram leaves prose out)."""
    rows = []
    for state in ir.states.values():
        if not (state.description and state.description.strip()):
            continue
        kind = str(state.kind)
        if state.is_history:
            kind = f"history ({state.history})"
        inside = f" in `{state.parent}`" if state.parent else ""
        rows.append(f"| `{_md_code(state.id)}` | {kind}{inside} "
                    f"| {_md_prose(state.description, table=True)} |")
    if not rows:
        return []
    return ["## States", "", "| State | Kind | Description |", "| --- | --- | --- |",
            *rows, ""]


def _md_code(text: str) -> str:
    """Text for inside a one-backtick code span in a table cell."""
    return " ".join(text.split()).replace("`", "'").replace("|", "\\|")


def _rel(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.resolve(), start.resolve())).as_posix()


def _dest(target: str) -> str:
    """A markdown link destination (angle brackets when it has spaces or parentheses)."""
    return f"<{target}>" if re.search(r"[\s()<>]", target) else target


def _comment(text: str, xml: bool = False) -> str:
    """An HTML comment (must not contain ``-->``), or an XML one (no ``--`` at all)."""
    text = re.sub(r"-(?=-)", "- ", text) if xml else text.replace("-->", "- ->")
    return f"<!-- {text} -->"


def _markdown(ir: MachineIR, spec_path: Path, out_dir: Path, mermaid: str) -> str:
    source = _rel(spec_path, out_dir)
    lines = [
        _comment(f"{MARKER} from {spec_path.name}; do not edit. Regenerate: {REGENERATE}"),
        f"# {_md_text(ir.name)}",
        "",
    ]
    if ir.description and ir.description.strip():
        lines += [_md_prose(ir.description), ""]
    lines += [
        f"Spec: [{_md_text(spec_path.name)}]({_dest(source)}) · "
        f"Graphviz: [{_md_text(ir.name)}.svg]({_dest(ir.name + '.svg')})",
        "",
        "```mermaid",
        mermaid.rstrip("\n"),
        "```",
        "",
        *_states_table(ir),
    ]
    return "\n".join(lines)


def diagram_set(spec_path: Path, out_dir: Path) -> DiagramSet:
    """Load one spec and render what its diagram files should hold.

    Raises :class:`~interlock.machines.SpecError` when the spec does not load or lint
    finds errors in it (a broken machine is not drawn).
    """
    ir = load_checked(spec_path)
    return DiagramSet(spec_path, ir, _markdown(ir, spec_path, out_dir, render_mermaid(ir)),
                      render_dot(ir))


def _diagram_sets(spec_paths: Iterable[Path], out_dir: Path) -> list[DiagramSet]:
    unique = list(dict.fromkeys(Path(p).resolve() for p in spec_paths))
    sets = [diagram_set(p, out_dir) for p in unique]
    by_name: dict[str, list[Path]] = {}
    for s in sets:
        by_name.setdefault(s.name, []).append(s.spec_path)
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    if clashes:
        detail = "; ".join(f"{name!r} in {', '.join(map(str, paths))}"
                           for name, paths in sorted(clashes.items()))
        raise ValueError(f"several specs define the same machine: {detail}")
    return sets


def _svg(d: DiagramSet) -> bytes:
    """Lay the diagram out with dot and stamp it with the hash of its DOT source."""
    svg = render_with_dot(d.dot, "svg").decode("utf-8")
    stamp = _comment(f"{MARKER} from {d.spec_path.name}; do not edit. "
                     f"dot-sha256={d.dot_sha256}", xml=True) + "\n"
    match = _SVG_START.search(svg)
    at = match.start() if match else 0
    return (svg[:at] + stamp + svg[at:]).encode("utf-8")


def _index(sets: list[DiagramSet]) -> str:
    lines = [
        _comment(f"{MARKER}; do not edit. Regenerate: {REGENERATE}"),
        "# Diagrams",
        "",
        "State diagrams of the built-in specs, generated from `specs/`. Each page has a",
        "Mermaid diagram (drawn by GitHub) and links a Graphviz SVG. A test fails when",
        f"they fall behind the specs; regenerate with `{REGENERATE}`.",
        "",
        "| Machine | Description | Diagram | Graphviz |",
        "| --- | --- | --- | --- |",
    ]
    for d in sorted(sets, key=lambda d: d.name):
        summary = _md_prose(_first_sentence(d.ir.description or ""), table=True)
        lines.append(f"| {_md_text(d.name)} | {summary} "
                     f"| [{_md_text(d.md_name)}]({_dest(d.md_name)}) "
                     f"| [{_md_text(d.svg_name)}]({_dest(d.svg_name)}) |")
    lines.append("")
    return "\n".join(lines)


def _write(path: Path, data: bytes) -> Path:
    """Write ``data`` through a temporary file and a rename, unless ``path`` already holds it."""
    try:
        if path.read_bytes() == data:
            return path
    except FileNotFoundError:
        pass
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        Path(tmp).chmod(0o644)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_diagrams(spec_paths: list[Path], out_dir: Path) -> list[Path]:
    """Write ``<machine>.md`` and ``<machine>.svg`` for each spec; return their paths.

    Every spec is loaded and drawn before anything is written, so a bad spec or a missing
    Graphviz (:class:`~interlock.runtime.diagrams.graphviz.GraphvizNotFound`) leaves ``out_dir``
    as it was. Files already up to date are left untouched (and still returned).
    """
    sets = _diagram_sets(spec_paths, out_dir)
    svgs = [_svg(d) for d in sets]
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for d, svg in zip(sets, svgs, strict=True):
        written.append(_write(out_dir / d.md_name, d.markdown.encode("utf-8")))
        written.append(_write(out_dir / d.svg_name, svg))
    return written


def write_index(spec_paths: list[Path], out_dir: Path) -> Path:
    """Write ``out_dir/README.md``, a table linking every spec's diagrams."""
    sets = _diagram_sets(spec_paths, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return _write(out_dir / INDEX_NAME, _index(sets).encode("utf-8"))


def _generated(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            head = f.read(1024)
    except OSError:
        return False
    return MARKER.encode() in head


def _orphans(sets: list[DiagramSet], out_dir: Path) -> list[Path]:
    """Files in ``out_dir`` this module generated for specs that are no longer given."""
    if not out_dir.is_dir():
        return []
    expected = {INDEX_NAME} | {n for d in sets for n in (d.md_name, d.svg_name)}
    return sorted(p for p in out_dir.iterdir()
                  if p.suffix in (".md", ".svg") and p.name not in expected and p.is_file()
                  and _generated(p))


def prune_orphans(spec_paths: list[Path], out_dir: Path) -> list[Path]:
    """Delete diagrams generated earlier for specs not in ``spec_paths``; return them.

    Only files that carry this module's "generated" marker are deleted.
    """
    orphans = _orphans(_diagram_sets(spec_paths, out_dir), out_dir)
    for path in orphans:
        path.unlink()
    return orphans


def sync_diagrams(spec_paths: list[Path], out_dir: Path) -> list[Path]:
    """Make ``out_dir`` current: every diagram, the index, no orphans. Returns the files."""
    written = write_diagrams(spec_paths, out_dir)
    written.append(write_index(spec_paths, out_dir))
    prune_orphans(spec_paths, out_dir)
    return written


def _svg_current(path: Path, d: DiagramSet) -> bool:
    try:
        head = path.read_text("utf-8", errors="replace")[:4096]
    except OSError:
        return False
    match = _SVG_HASH.search(head)
    return match is not None and match.group(1) == d.dot_sha256


def _text_current(path: Path, text: str) -> bool:
    try:
        return path.read_bytes() == text.encode("utf-8")
    except OSError:
        return False


def stale_diagrams(spec_paths: list[Path], out_dir: Path) -> list[str]:
    """Names of files in ``out_dir`` that differ from what would be generated, sorted.

    Covers each spec's ``.md`` (exact content) and ``.svg`` (hash of the DOT source), the
    index ``README.md``, and generated files left over from specs that are gone. Missing
    files count as stale. Needs no Graphviz.
    """
    sets = _diagram_sets(spec_paths, out_dir)
    stale: list[str] = []
    for d in sets:
        if not _text_current(out_dir / d.md_name, d.markdown):
            stale.append(d.md_name)
        if not _svg_current(out_dir / d.svg_name, d):
            stale.append(d.svg_name)
    if not _text_current(out_dir / INDEX_NAME, _index(sets)):
        stale.append(INDEX_NAME)
    stale.extend(p.name for p in _orphans(sets, out_dir))
    return sorted(stale)
