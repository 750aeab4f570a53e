"""The diagrams writer: pages, SVGs, index, staleness and orphans, with the real `dot`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from interlock.machines import SpecError, build_ir, loads
from interlock.machines.render import render_mermaid
from interlock.runtime.diagrams.files import (
    REGENERATE,
    prune_orphans,
    stale_diagrams,
    sync_diagrams,
    write_diagrams,
    write_index,
)
from interlock.runtime.diagrams.graphviz import GraphvizNotFound

from support.paths import require_dot
from support.render_cases import COMPOUND, FLAT, write_text


@pytest.fixture
def specs(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "specs"
    folder.mkdir()
    flat = FLAT.replace("description: A door with a lock.",
                        "description: A door with a lock. See <ID>/`a|b` and `<x>`.")
    return [write_text(folder / "door.yaml", flat), write_text(folder / "job.yaml", COMPOUND)]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "diagrams"


def test_write_diagrams(specs: list[Path], out: Path) -> None:
    require_dot()
    written = write_diagrams(specs, out)
    assert written == [out / "door.md", out / "door.svg", out / "job.md", out / "job.svg"]
    page = (out / "door.md").read_text()
    assert page.startswith("<!-- interlock: generated from door.yaml; do not edit. "
                           f"Regenerate: {REGENERATE} -->\n# door\n")
    assert "A door with a lock. See &lt;ID&gt;/`a|b` and `<x>`." in page
    assert "Spec: [door.yaml](../specs/door.yaml) · Graphviz: [door.svg](door.svg)" in page
    fence = re.search(r"```mermaid\n(.*?)```\n", page, re.S)
    assert fence is not None
    assert fence.group(1) == render_mermaid(build_ir(loads(specs[0].read_text())))
    svg = (out / "door.svg").read_bytes()
    assert ET.fromstring(svg).tag == "{http://www.w3.org/2000/svg}svg"
    assert re.search(rb"<!-- interlock: generated from door\.yaml; do not edit\. "
                     rb"dot-sha256=[0-9a-f]{64} -->", svg)
    assert stale_diagrams(specs, out) == ["README.md"]


def test_index(specs: list[Path], out: Path) -> None:
    path = write_index(list(reversed(specs)), out)
    assert path == out / "README.md"
    text = path.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "](" in line]
    assert rows == [
        "| door | A door with a lock. | [door.md](door.md) | [door.svg](door.svg) |",
        "| job |  | [job.md](job.md) | [job.svg](job.svg) |",
    ]


def test_sync_then_current_and_untouched(specs: list[Path], out: Path) -> None:
    require_dot()
    written = sync_diagrams(specs, out)
    assert out / "README.md" in written
    assert stale_diagrams(specs, out) == []
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.iterdir()}
    sync_diagrams(specs, out)
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.iterdir()} == before
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_spec_change_makes_its_files_stale(specs: list[Path], out: Path) -> None:
    require_dot()
    sync_diagrams(specs, out)
    specs[1].write_text(COMPOUND.replace("fetched: parsing", "fetched: parsing, skip: done"))
    assert stale_diagrams(specs, out) == ["job.md", "job.svg"]


def test_svg_judged_by_its_source_hash(specs: list[Path], out: Path) -> None:
    require_dot()
    sync_diagrams(specs, out)
    svg = out / "door.svg"
    # Another Graphviz would lay it out differently: still current, same source.
    svg.write_text(svg.read_text().replace("<svg ", "<svg data-other-layout='1' ", 1))
    assert stale_diagrams(specs, out) == []
    text = svg.read_text()
    svg.write_text(re.sub(r"dot-sha256=[0-9a-f]{64}", "dot-sha256=" + "0" * 64, text))
    assert stale_diagrams(specs, out) == ["door.svg"]
    svg.unlink()
    assert stale_diagrams(specs, out) == ["door.svg"]


def test_orphans_reported_and_pruned(specs: list[Path], out: Path) -> None:
    require_dot()
    sync_diagrams(specs, out)
    handwritten = write_text(out / "notes.md", "# my notes\n")
    assert stale_diagrams(specs[:1], out) == ["README.md", "job.md", "job.svg"]
    assert prune_orphans(specs[:1], out) == [out / "job.md", out / "job.svg"]
    assert handwritten.exists()
    sync_diagrams(specs[:1], out)
    assert stale_diagrams(specs[:1], out) == []
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "door.md", "door.svg",
                                                     "notes.md"]


def test_same_machine_twice_is_refused(specs: list[Path], out: Path, tmp_path: Path) -> None:
    copy = write_text(tmp_path / "other.yaml", specs[0].read_text())
    with pytest.raises(ValueError, match="several specs define the same machine: 'door'"):
        stale_diagrams([*specs, copy], out)
    # The same file given twice is one spec.
    assert "door.md" in stale_diagrams([specs[0], specs[0]], out)


def test_bad_spec_writes_nothing(specs: list[Path], out: Path, tmp_path: Path) -> None:
    bad = write_text(tmp_path / "bad.yaml", "machine: bad\nstates: {a: {on: 3}}\n")
    with pytest.raises(SpecError):
        write_diagrams([*specs, bad], out)
    assert not out.exists()


def test_no_graphviz_writes_nothing_but_checking_works(
    specs: list[Path], out: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("INTERLOCK_DOT", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GraphvizNotFound):
        write_diagrams(specs, out)
    assert not out.exists()
    assert "door.svg" in stale_diagrams(specs, out)
