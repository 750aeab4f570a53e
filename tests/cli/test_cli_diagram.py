"""`interlock diagram` as a user runs it."""

from __future__ import annotations

from pathlib import Path

from support.cli import Cli
from support.paths import ROOT, require_dot


def test_mermaid_to_stdout_by_builtin_name(cli: Cli) -> None:
    result = cli("diagram", "polling_state")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("stateDiagram-v2")
    assert "pending" in result.stdout and "completed" in result.stdout


def test_svg_and_png_files_through_dot(cli: Cli, tmp_path: Path) -> None:
    require_dot()
    svg, png = tmp_path / "p.svg", tmp_path / "p.png"
    assert cli("diagram", "polling_state", "-f", "svg", "-o", str(svg)).returncode == 0
    assert cli("diagram", "polling_state", "-f", "png", "-o", str(png)).returncode == 0
    assert b"<svg" in svg.read_bytes()
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_a_spec_with_errors_is_not_drawn(cli: Cli) -> None:
    broken = ROOT / "tests" / "machines" / "broken"
    result = cli("diagram", str(broken / "M201_unknown_target.yaml"))
    assert result.returncode == 1
    assert result.stdout == ""  # stdout is for the drawing
    [line] = result.stderr.splitlines()
    assert "M201_unknown_target.yaml:" in line and "error M201" in line


def test_usage_errors(cli: Cli, tmp_path: Path) -> None:
    assert cli("diagram").returncode == 2
    assert cli("diagram", "--all", str(ROOT / "specs")).returncode == 2  # no -o
    assert cli("diagram", "polling_state", "-f", "gif").returncode == 2
    missing = cli("diagram", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and f"no spec file {tmp_path / 'nope.yaml'}" in missing.stderr
    typo = cli("diagram", "polling_stat")
    assert typo.returncode == 2 and "did you mean 'polling_state'?" in typo.stderr


def test_all_writes_markdown_svg_and_an_index(cli: Cli, tmp_path: Path) -> None:
    require_dot()
    out = tmp_path / "diagrams"
    result = cli("diagram", "--all", str(ROOT / "specs"), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert (out / "README.md").exists()
    assert (out / "polling_state.md").read_text().count("```mermaid") == 1
    assert (out / "polling_state.svg").read_bytes().startswith(b"<?xml")
