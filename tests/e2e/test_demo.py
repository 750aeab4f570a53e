"""`interlock demo` (the README's first command) runs offline and shows its result."""

from __future__ import annotations

from pathlib import Path

from support.cli import Cli
from support.paths import require_dot


def test_demo_dispatches_four_real_reviewers_and_draws_the_specs(
        cli: Cli, tmp_path: Path) -> None:
    require_dot()
    result = cli("demo", "--dir", str(tmp_path / "out"), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines()
            if line.startswith("│") and line.split("│")[1].strip() in (
                "TECHLEAD", "SECURITY", "QA", "ARCHITECT")}
    assert set(rows) == {"TECHLEAD", "SECURITY", "QA", "ARCHITECT"}
    assert "completed │ exit" in rows["TECHLEAD"]
    assert "completed │ marker" in rows["SECURITY"]  # hung after answering: stopped
    assert "completed │ marker" in rows["QA"]
    assert (tmp_path / "out" / ".interlock" / "state.db").is_file()
    for name in ("polling_state", "review_menu", "poller_interview", "ralph_orchestrator",
                 "ralph_subagent", "inbox_poller"):
        assert (tmp_path / "out" / "diagrams" / f"{name}.svg").read_bytes().startswith(b"<?xml")
        assert "```mermaid" in (tmp_path / "out" / "diagrams" / f"{name}.md").read_text()
