"""Spec files through the façade: find, validate, draw (files and live sessions), schema.

These are plain functions: they read files and run Graphviz briefly, nothing waits.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from interlock.machines import SpecError, build_ir, lint, load, loads
from interlock.machines.diagnostics import Diagnostic, Mark, did_you_mean, error, sort_diagnostics
from interlock.runtime.api.errors import InterlockError, UsageError
from interlock.runtime.engine.builtin_specs import builtin_specs, resolve_spec
from interlock.runtime.engine.snapshot import Snapshot

if TYPE_CHECKING:
    from interlock.runtime.store import SessionRow

DrawFormat = Literal["mermaid", "dot", "svg", "png"]
SPEC_SUFFIXES = (".yaml", ".yml")
SKIPPED_DIRS = ("node_modules", "__pycache__")

__all__ = ["SPEC_SUFFIXES", "Validation", "builtin_specs", "draw", "draw_all", "draw_session",
           "existing_spec", "expand_paths", "resolve_spec", "session_chart", "spec_schema",
           "validate"]


def _skipped(relative: Path) -> bool:
    """Folders a search for specs never enters: hidden ones (.venv, .git) and caches."""
    return any(part.startswith(".") or part in SKIPPED_DIRS for part in relative.parts[:-1])


def expand_paths(paths: Iterable[Path]) -> tuple[list[Path], list[str]]:
    """Files as given, and the spec files under each directory; plus paths that don't exist."""
    files, _, missing = _expand(paths)
    return files, missing


def _expand(paths: Iterable[Path]) -> tuple[list[Path], set[Path], list[str]]:
    """Files as given and the YAML files under each directory; the subset found in
    directories (skipped when they are not specs); paths that don't exist."""
    files: list[Path] = []
    found: set[Path] = set()
    missing: list[str] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.suffix in SPEC_SUFFIXES
                            and p.is_file() and not _skipped(p.relative_to(path)))
            files.extend(inside)
            found.update(inside)
        elif path.exists() or path.is_symlink():
            files.append(path)
        else:
            missing.append(str(path))
    return files, found, missing


def _not_a_spec(diagnostics: list[Diagnostic]) -> bool:
    """The file's only finding is S107: YAML that is not a spec at all (interlock.yaml)."""
    return [d.code for d in diagnostics] == ["S107"]


def check_file(path: Path, bindings: Mapping[str, object] | None = None,
               agents: Collection[str] | None = None) -> list[Diagnostic]:
    """Every diagnostic for one spec file: load errors, or lint findings."""
    try:
        spec = load(path)
    except SpecError as exc:
        return exc.diagnostics
    except RecursionError:
        return [error("Y008", "the spec is nested too deeply to check", Mark(str(path), 1, 1))]
    return lint(build_ir(spec), bindings, agents)


def known_agents(root: Path) -> set[str]:
    """The agent names a spec may invoke here: those of ``ROOT/interlock.yaml``'s
    ``agents:``, or without any, the offline demo roles, which need no configuration
    (SpecError with located diagnostics when that section is wrong)."""
    from interlock.runtime.config.agents import default_agents, load_agents

    return set(load_agents(root / "interlock.yaml")) or set(default_agents())


@dataclass(frozen=True, slots=True)
class Validation:
    """What ``validate`` checked and found, sorted by file and position; ``skipped``: YAML
    files found in folders that are not specs (no ``machine:`` key, e.g. interlock.yaml)."""

    files: tuple[Path, ...]
    diagnostics: tuple[Diagnostic, ...]
    skipped: tuple[Path, ...] = ()

    @property
    def errors(self) -> int:
        return sum(d.is_error for d in self.diagnostics)

    @property
    def warnings(self) -> int:
        return len(self.diagnostics) - self.errors


def validate(paths: Iterable[Path | str], *, bindings: str | None = None) -> Validation:
    """Load and lint spec files (folders are searched for *.yaml/*.yml, skipping YAML that
    is not a spec); with ``bindings`` (``MODULE[:ATTR]`` or a file), also report what it
    leaves unbound. An ``agent:`` must name a demo role or an agent of ``interlock.yaml``
    in the working folder."""
    given = [Path(p) for p in paths]
    bound = None
    if bindings is not None:
        from interlock.runtime.api.running import resolve_bindings

        bound = resolve_bindings(bindings, "", "", False)
    agents = known_agents(Path.cwd())
    files, in_folders, missing = _expand(given)
    if missing:
        raise UsageError("no such file or directory: " + ", ".join(missing))
    checked = {f: check_file(f, bound, agents) for f in files}
    skipped = tuple(f for f in files if f in in_folders and _not_a_spec(checked[f]))
    for path in skipped:
        del checked[path]
    if not checked:
        raise UsageError("no spec files (*.yaml, *.yml) found in: " + ", ".join(map(str, given))
                         + (f" ({len(skipped)} YAML file(s) without `machine:` skipped)"
                            if skipped else ""))
    found = sort_diagnostics(d for diagnostics in checked.values() for d in diagnostics)
    return Validation(tuple(checked), tuple(found), skipped)


def spec_schema() -> dict[str, Any]:
    """The JSON Schema of spec files (for editors: yaml-language-server)."""
    from interlock.machines.schema import spec_json_schema

    return spec_json_schema()


def _render(path: Path, fmt: DrawFormat, text: str | None = None,
            active: frozenset[str] = frozenset()) -> bytes:
    from interlock.machines.render import render_dot, render_mermaid
    from interlock.runtime.diagrams.graphviz import GraphvizError, render_with_dot

    ir = build_ir(load(path) if text is None else loads(text, str(path)))
    errors = [d for d in lint(ir) if d.is_error]
    if errors:
        raise SpecError(errors)
    if fmt == "mermaid":
        return render_mermaid(ir, active).encode()
    source = render_dot(ir, active)
    if fmt == "dot":
        return source.encode()
    try:
        return render_with_dot(source, "svg" if fmt == "svg" else "png")
    except GraphvizError as exc:
        raise InterlockError(str(exc)) from None


def existing_spec(spec: str | Path) -> Path:
    """The spec file ``spec`` names (a path or a built-in spec name); UsageError naming it
    (with the closest built-in name) when there is none."""
    path = resolve_spec(str(spec))
    if path.exists():
        return path
    close = did_you_mean(str(spec), [p.stem for p in builtin_specs()])
    raise UsageError(f"no spec file {path} (nor a built-in spec of that name"
                     + (f"; {close}" if close else "; `interlock specs` lists them") + ")")


def draw(spec: str | Path, fmt: DrawFormat = "mermaid") -> bytes:
    """A spec file or built-in spec drawn as Mermaid, DOT, SVG or PNG (SpecError when the
    spec has errors, UsageError when there is no such spec)."""
    return _render(existing_spec(spec), fmt)


async def draw_session(session_id: str, fmt: DrawFormat = "mermaid", *,
                       store: str | None = None, root: Path | str | None = None) -> bytes:
    """A session's own spec (the text it runs) with its active states filled."""
    row = await _session_row(session_id, store, root)
    active = frozenset(Snapshot.from_json(row.snapshot).configuration)
    return _render(Path(row.spec_path), fmt, row.spec_text, active)


async def session_chart(session_id: str, *, store: str | None = None,
                        root: Path | str | None = None) -> str:
    """The session's statechart for a live page: the SVG of its own spec, each drawn
    state marked ``data-state="<id>"`` and ``data-active="true|false"`` (as of its last
    step), each transition ``data-from``/``data-to``; nothing filled (a page lights the
    active states with CSS); safe to inline (:mod:`interlock.runtime.diagrams.live`)."""
    import asyncio

    from interlock.machines.render import render_dot
    from interlock.runtime.diagrams.graphviz import GraphvizError, render_with_dot
    from interlock.runtime.diagrams.live import annotate_svg

    row = await _session_row(session_id, store, root)
    ir = build_ir(loads(row.spec_text, row.spec_path))
    try:
        svg = await asyncio.to_thread(render_with_dot, render_dot(ir), "svg")
    except GraphvizError as exc:
        raise InterlockError(str(exc)) from None
    return annotate_svg(svg, ir, Snapshot.from_json(row.snapshot).configuration)


async def _session_row(session_id: str, store: str | None, root: Path | str | None
                       ) -> SessionRow:
    """The session's row. The store and the sessions' façade are imported here: drawing
    and checking spec files (the mistakes a user makes most) need neither."""
    import asyncio

    from interlock.runtime.api.common import opened_store, root_of, translated
    from interlock.runtime.api.sessions import check_session_id

    check_session_id(session_id)
    with opened_store(store, root_of(root), create=False, session_id=session_id) as opened, \
            translated():
        return await asyncio.to_thread(opened.get, session_id)


def draw_all(spec_dir: Path | str, out_dir: Path | str) -> list[Path]:
    """Draw every spec under ``spec_dir`` into ``out_dir`` (a Markdown page with Mermaid and
    an SVG each, plus an index); stale files are rewritten, orphans removed."""
    from interlock.runtime.diagrams.files import sync_diagrams
    from interlock.runtime.diagrams.graphviz import GraphvizError

    files, missing = expand_paths([Path(spec_dir)])
    if missing or not files:
        raise UsageError(f"no spec files in {spec_dir}")
    try:
        return sync_diagrams(files, Path(out_dir))
    except (GraphvizError, ValueError) as exc:
        raise InterlockError(str(exc)) from None
