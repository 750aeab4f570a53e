"""`interlock demo` (the README's first command) runs offline and shows its result."""

from __future__ import annotations

from pathlib import Path

from conftest import Cli, require_dot


def test_demo_runs_and_completes_the_polling_replay(cli: Cli, tmp_path: Path) -> None:
    require_dot()
    result = cli("demo", "--dir", str(tmp_path / "out"), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "completed by marker with the whole issue list" in result.stdout
    for name in ("polling_state", "review_menu", "poller_interview", "ralph_orchestrator",
                 "ralph_subagent", "inbox_poller"):
        assert (tmp_path / "out" / "diagrams" / f"{name}.svg").read_bytes().startswith(b"<?xml")
        assert "```mermaid" in (tmp_path / "out" / "diagrams" / f"{name}.md").read_text()
