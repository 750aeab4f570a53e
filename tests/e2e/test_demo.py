"""`interlock demo` (the README's first command) runs offline and shows its result."""

from __future__ import annotations

from pathlib import Path

from support.cli import Cli
from support.paths import require_dot


def test_demo_runs_three_ralph_sessions_and_draws_the_specs(cli: Cli, tmp_path: Path
                                                            ) -> None:
    require_dot()
    result = cli("demo", "--dir", str(tmp_path / "out"), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("polling_state", "review_menu", "poller_interview", "ralph_orchestrator",
                 "ralph_subagent", "inbox_poller"):
        assert (tmp_path / "out" / "diagrams" / f"{name}.svg").read_bytes().startswith(b"<?xml")
        assert "```mermaid" in (tmp_path / "out" / "diagrams" / f"{name}.md").read_text()
    [root] = (tmp_path / "out").glob("ralph-*")
    timeline = (root / "timeline.txt").read_text()
    for seen in ("STEER scope: parse the input as a stream", "REPLANNING", "PAUSED",
                 "APPROVE", "ABORT wrong database", "COMPLETE"):
        assert seen in timeline
    assert "status: completed" in (root / ".ralph-sessions/demo-1/metadata.yaml").read_text()
    assert "status: aborted" in (root / ".ralph-sessions/demo-2/metadata.yaml").read_text()
    parallel = root / "parallel"  # demo-3: a batch of two at once, in git worktrees
    assert "status: completed" in (parallel / ".ralph-sessions/demo-3/metadata.yaml"
                                   ).read_text()
    for seen in ("merged T1 into ralph/demo-3", "merged T2 into ralph/demo-3"):
        assert seen in timeline
    assert "both tasks ran at once and merged into ralph/demo-3" in result.stdout
    assert "worktrees left: 0; branches: ['ralph/demo-3']" in result.stdout
    assert (root / ".docs").is_dir()
    records = [p.read_text() for p in (root / ".ralph-sessions/demo-1/iterations/2/"
                                       "invocations").glob("*-executor.md")]
    prompted = [text for text in records if "## Call " in text]  # a PAUSE can come first
    assert prompted and all("INFO: the report is read on phones" in text for text in prompted)
    assert "style" in (root / "demo-1-path.md").read_text() or "classDef" in (
        root / "demo-1-path.md").read_text()
