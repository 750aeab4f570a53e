"""`interlock run review_menu --demo` and `interlock run poller_interview --demo` run offline
and unattended to a final state (scripted menu choice, scripted answers, demo questioner)."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import Cli


def _sessions(cli: Cli, folder: Path) -> dict[str, dict[str, object]]:
    listed = cli("sessions", "--json", cwd=folder)
    assert listed.returncode == 0, listed.stderr
    return {view["id"]: view for view in json.loads(listed.stdout)}


def test_poller_interview_demo_resolves_and_stages(cli: Cli, tmp_path: Path) -> None:
    result = cli("run", "poller_interview", "--demo", "--no-signals", cwd=tmp_path,
                 timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "finished in [resolved]" in result.stderr + result.stdout
    staged = json.loads(cli("staged", "node_14", "--json", cwd=tmp_path).stdout)
    assert staged["action"] == "retry"
    assert staged["corrections"][1:] == ["Focus on 36-hex render time specifically",
                                         "Give higher-level guidance, not exact numbers"]


def test_review_menu_demo_forks_the_interview_reruns_and_accepts(
        cli: Cli, tmp_path: Path) -> None:
    result = cli("run", "review_menu", "--demo", "--no-signals", cwd=tmp_path, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "finished in [accepted]" in result.stderr + result.stdout
    views = _sessions(cli, tmp_path)
    menu = next(v for v in views.values() if v["machine"] == "review_menu")
    poller = next(v for v in views.values() if v["machine"] == "poller_interview")
    assert menu["active"] == ["accepted"] and poller["active"] == ["resolved"]
    shown = cli("status", str(menu["id"]), "--json", cwd=tmp_path)
    context = json.loads(shown.stdout)["context"]
    assert isinstance(context, dict) and context["applied"]["poller_id"] == poller["id"]
    # the re-run consumed the staged correction: exactly once
    assert cli("staged", "node_14", cwd=tmp_path).returncode == 1
