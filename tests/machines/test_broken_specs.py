"""The broken corpus: each file in tests/machines/broken/ yields exactly what EXPECTED.txt lists.

Loading and linting a broken spec may only ever raise :class:`SpecError`; anything else
(a traceback, a hang) is a bug in the loader or in lint.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pytest

from interlock.machines import Diagnostic, SpecError, lint, load
from interlock.machines.diagnostics import CODES
from interlock.machines.yamlsrc import MAX_BYTES

BROKEN = Path(__file__).parent / "broken"
EXPECTED_FILE = BROKEN / "EXPECTED.txt"
CORPUS = sorted(p for p in BROKEN.iterdir() if p.is_file() and p != EXPECTED_FILE)
WARNINGS = {"M205", "M206", "M209", "M223", "M226", "M232"}
# Codes the corpus cannot hold as a file: made in tmp_path below, or not lint's.
# D codes belong to the dispatch configuration (tests/test_dispatch_config.py).
NOT_IN_CORPUS = {"Y007", "Y011", "B301"} | {code for code in CODES if code.startswith("D")}

_LINE = re.compile(r"(?P<file>\S+) (?P<code>[A-Z]\d{3}) (?P<line>\d+):(?P<col>\d+)")
_HEADER = re.compile(rb"\A# lint-(?P<kind>bindings|agents):(?P<names>[^\n]*)\n")

Found = set[tuple[str, int, int]]


def _read_expected() -> dict[str, Found]:
    table: dict[str, Found] = {}
    for number, raw in enumerate(EXPECTED_FILE.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _LINE.fullmatch(line)
        assert match, f"EXPECTED.txt:{number}: not `FILENAME CODE LINE:COL`: {raw!r}"
        entry = (match["code"], int(match["line"]), int(match["col"]))
        table.setdefault(match["file"], set()).add(entry)
    return table


EXPECTED = _read_expected()


def _header(raw: bytes, kind: str) -> list[str] | None:
    """The names of a ``# lint-<kind>: a, b`` first line, or None without one."""
    match = _HEADER.match(raw)
    if match is None or match["kind"].decode() != kind:
        return None
    return [name.strip() for name in match["names"].decode().split(",")]


def _bindings(raw: bytes) -> Mapping[str, object] | None:
    names = _header(raw, "bindings")
    return None if names is None else dict.fromkeys(names, object())


def diagnose(path: Path) -> list[Diagnostic]:
    """Load and lint one file; only SpecError may escape the loader."""
    try:
        spec = load(path)
    except SpecError as exc:
        return exc.diagnostics
    raw = path.read_bytes()
    return lint(spec, _bindings(raw), _header(raw, "agents"))


def test_the_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 35


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_broken_spec(path: Path) -> None:
    expected = EXPECTED.get(path.name)
    assert expected, f"{path.name} has no line in EXPECTED.txt"
    diagnostics = diagnose(path)
    found = {(d.code, d.mark.line, d.mark.column) for d in diagnostics}
    assert found == expected
    for d in diagnostics:
        assert d.mark.file == str(path)
        assert d.code in CODES
        assert d.is_error == (d.code not in WARNINGS), d
        assert d.message.strip()


def test_every_expectation_names_a_corpus_file() -> None:
    assert set(EXPECTED) <= {p.name for p in CORPUS}


def test_the_corpus_covers_every_code() -> None:
    covered = {code for found in EXPECTED.values() for code, _, _ in found}
    assert set(CODES) - NOT_IN_CORPUS <= covered


def test_the_corpus_files_are_named_by_their_main_code() -> None:
    for path in CORPUS:
        code = path.name.split("_", 1)[0]
        assert code in {c for c, _, _ in EXPECTED.get(path.name, set())}, path.name


def test_a_huge_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    states = "".join(f"  s{i}: {{on: {{go: s{i + 1}}}}}\n" for i in range(60_000))
    path.write_text("machine: huge\ninitial: s0\nstates:\n" + states)
    assert path.stat().st_size > MAX_BYTES
    found = [(d.code, d.mark.line, d.mark.column) for d in diagnose(path)]
    assert found == [("Y007", 1, 1)]


def test_a_file_just_under_the_limit_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    text = "machine: big\nstates:\n  idle: {type: final}\n"
    path.write_text(text + "#" * (MAX_BYTES - len(text) - 1) + "\n")
    assert path.stat().st_size == MAX_BYTES
    assert diagnose(path) == []


def test_a_directory_is_not_a_spec(tmp_path: Path) -> None:
    assert [d.code for d in diagnose(tmp_path)] == ["Y011"]


def test_a_missing_file_is_reported(tmp_path: Path) -> None:
    diagnostics = diagnose(tmp_path / "nope.yaml")
    assert [d.code for d in diagnostics] == ["Y011"]
    assert "nope.yaml" in str(diagnostics[0])


def _mutations(raw: bytes) -> list[bytes]:
    """Every line-prefix of a file, plus each line dropped in turn."""
    lines = raw.splitlines(keepends=True)
    prefixes = [b"".join(lines[:n]) for n in range(len(lines))]
    dropped = [b"".join(lines[:n] + lines[n + 1:]) for n in range(len(lines))]
    return prefixes + dropped


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_damaged_specs_only_raise_spec_error(path: Path, tmp_path: Path) -> None:
    target = tmp_path / path.name
    for variant in _mutations(path.read_bytes()):
        target.write_bytes(variant)
        for d in diagnose(target):  # anything but SpecError propagates and fails here
            assert d.code in CODES
