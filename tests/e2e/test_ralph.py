"""Ralph sessions end to end: `interlock ralph ...` as real processes, demo agents as real
processes, signals as real files. Waits are on files, bounded; nothing sleeps for time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

INTERLOCK = [sys.executable, "-m", "interlock.runtime.cli"]


def cli(root: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*INTERLOCK, *args], cwd=root, capture_output=True, text=True,
                          timeout=timeout)


def start(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*INTERLOCK, *args], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_until(check: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def session(root: Path, ident: str = "s") -> Path:
    return root / ".ralph-sessions" / ident


def meta(root: Path, ident: str = "s") -> dict:
    return yaml.safe_load((session(root, ident) / "metadata.yaml").read_text()) or {}


def progress(root: Path, n: int = 1, ident: str = "s") -> str:
    path = session(root, ident) / "iterations" / str(n) / "progress.md"
    return path.read_text() if path.exists() else ""


def project(root: Path, agents: str = "", ralph: str = "",
            request: str = "write the parser; write the report\ntest it") -> None:
    if "knowledge_approval_timeout" not in ralph:
        ralph = f"knowledge_approval_timeout: 100ms\n  {ralph}"
    text = f"ralph:\n  {ralph}\n"
    if agents:
        text += "agents:\n" + "".join(f"  {line}\n" for line in agents.splitlines())
    (root / "interlock.yaml").write_text(text)
    done = cli(root, "ralph", "init", "--id", "s", "--request", request)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "s"


def processes_in(root: Path) -> list[int]:
    """Live processes whose working folder is ``root`` (agents left behind)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cwd").readlink() == root:
                stat = (entry / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def test_a_session_runs_to_completion_offline(tmp_path: Path) -> None:
    project(tmp_path)
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 0, done.stderr
    assert meta(tmp_path)["status"] == "completed"
    assert meta(tmp_path)["orchestrator"]["state"] == "COMPLETE"
    assert progress(tmp_path).count("[x]") == 3
    it = session(tmp_path) / "iterations" / "1"
    assert sorted(p.name for p in (it / "tasks").iterdir()) == ["T1.md", "T2.md", "T3.md"]
    assert sorted(p.name for p in (it / "reviews").iterdir()) == ["T1.md", "T2.md", "T3.md"]
    invocations = sorted(p.name for p in (it / "invocations").iterdir())
    assert invocations[0] == "001-planner.md" and len(invocations) == 7
    assert "Request:" in (it / "invocations" / "001-planner.md").read_text()
    assert "completed_at" in yaml.safe_load((it / "metadata.yaml").read_text())
    # no APPROVE in time: staged knowledge is carried forward, not promoted
    assert "carried_from" in (it / "knowledge" / "T1.md").read_text()
    assert not (tmp_path / ".docs").exists()
    status = cli(tmp_path, "ralph", "status", "s", "--json")
    assert '"status": "completed"' in status.stdout
    from interlock.runtime.ralph.watch import RalphStatus

    seen = RalphStatus.model_validate_json(status.stdout)
    assert seen.finished and [t.marker for t in seen.tasks] == ["x", "x", "x"]
    watched = cli(tmp_path, "watch", "s")
    assert watched.returncode == 0 and "COMPLETE" in watched.stdout


SLOW = "executor: {cli: demo, delay: 300ms}"


def test_abort_while_the_executor_runs(tmp_path: Path) -> None:
    project(tmp_path, SLOW)
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: "[/] T1" in progress(tmp_path), what="T1 in progress")
    assert cli(tmp_path, "signal", "s", "ABORT", "stop now").returncode == 0
    code, err = finish(proc)
    assert code == 1, err
    data = meta(tmp_path)
    assert data["status"] == "aborted" and data["orchestrator"]["state"] == "COMPLETE"
    assert "[F] T1: write the parser — Aborted by signal" in progress(tmp_path)
    it_meta = yaml.safe_load((session(tmp_path) / "iterations/1/metadata.yaml").read_text())
    assert "completed_at" in it_meta
    processed = list((session(tmp_path) / "signals/processed").glob("*.yaml"))
    assert len(processed) == 1 and "handling_metadata" in processed[0].read_text()
    assert processes_in(tmp_path) == []


def test_abort_at_a_checkpoint_while_paused(tmp_path: Path) -> None:
    project(tmp_path)
    assert cli(tmp_path, "signal", "s", "PAUSE", "hold on").returncode == 0
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: meta(tmp_path).get("orchestrator", {}).get("state") == "PAUSED",
               what="PAUSED")
    assert proc.poll() is None  # a paused session waits
    assert cli(tmp_path, "signal", "s", "ABORT").returncode == 0
    code, err = finish(proc)
    assert code == 1, err
    assert meta(tmp_path)["status"] == "aborted"


def test_pause_while_running_then_resume(tmp_path: Path) -> None:
    project(tmp_path, SLOW)
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: "[/] T1" in progress(tmp_path), what="T1 in progress")
    assert cli(tmp_path, "signal", "s", "PAUSE", "wait for me").returncode == 0
    wait_until(lambda: meta(tmp_path).get("orchestrator", {}).get("state") == "PAUSED",
               what="PAUSED")
    assert "Paused by signal" in progress(tmp_path)
    assert proc.poll() is None
    resumed = cli(tmp_path, "ralph", "resume", "s", "--message", "go on")
    assert resumed.returncode == 0, resumed.stderr
    code, err = finish(proc)
    assert code == 0, err
    assert progress(tmp_path).count("[x]") == 3
    prompts = (session(tmp_path) / "iterations/1/invocations").glob("*-executor.md")
    assert any("Resumed after PAUSE: go on" in p.read_text() for p in prompts)


def test_steer_scope_change_replans_and_info_reaches_later_prompts(tmp_path: Path) -> None:
    project(tmp_path, SLOW)
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: "[/] T1" in progress(tmp_path), what="T1 in progress")
    assert cli(tmp_path, "signal", "s", "INFO", "the target is Linux").returncode == 0
    assert cli(tmp_path, "signal", "s", "STEER", "scope: write a lexer instead").returncode == 0
    code, err = finish(proc, 90)
    assert code == 0, err
    first = progress(tmp_path, 1)
    assert "[F] T1: write the parser — STEER scope change: scope: write a lexer" in first
    second = progress(tmp_path, 2)
    assert second == "- [x] T1: write a lexer instead\n- [x] T2: test it\n"
    report = (session(tmp_path) / "iterations/1/tasks/T1.md").read_text()
    assert "(c) scope change" in report
    later = (session(tmp_path) / "iterations/2/invocations").glob("*-executor.md")
    assert all("INFO: the target is Linux" in p.read_text() for p in later)


def test_steer_redo_restarts_the_implementation(tmp_path: Path) -> None:
    project(tmp_path, SLOW, request="write the parser")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: "[/] T1" in progress(tmp_path), what="T1 in progress")
    assert cli(tmp_path, "signal", "s", "STEER", "redo: use bar",
               "--target", "Ralph-Executor").returncode == 0
    code, err = finish(proc)
    assert code == 0, err
    report = (session(tmp_path) / "iterations/1/tasks/T1.md").read_text()
    assert "(a) work invalidated" in report and "restarted 1 time" in report


def test_approve_promotes_knowledge(tmp_path: Path) -> None:
    project(tmp_path, ralph="knowledge_approval_timeout: 1h", request="write the parser")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: meta(tmp_path).get("orchestrator", {}).get("state")
               == "KNOWLEDGE_APPROVAL", what="KNOWLEDGE_APPROVAL")
    assert cli(tmp_path, "signal", "s", "APPROVE", "looks good").returncode == 0
    code, err = finish(proc)
    assert code == 0, err
    assert (tmp_path / ".docs" / "T1.md").exists()


def test_sigkill_mid_executor_then_run_again(tmp_path: Path) -> None:
    project(tmp_path, SLOW)
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: "[/] T2" in progress(tmp_path), what="T2 in progress")
    assert cli(tmp_path, "signal", "s", "INFO", "before the crash").returncode == 0
    agents = session(tmp_path) / "agents"

    def executor_running() -> bool:
        listed = [p.name.split("-")[0] for p in agents.glob("*-*")] if agents.is_dir() else []
        return any(int(pid) in processes_in(tmp_path) for pid in listed)

    wait_until(executor_running, what="the T2 executor process")
    os.kill(proc.pid, signal.SIGKILL)  # the runner only: its agent lives on
    proc.wait(timeout=10)
    assert processes_in(tmp_path) != []
    again = cli(tmp_path, "ralph", "run", "s", timeout=90)
    assert again.returncode == 0, again.stderr
    text = progress(tmp_path)
    assert text.count("[x]") == 3 and text.count("T2:") == 1
    processed = list((session(tmp_path) / "signals/processed").glob("*.yaml"))
    assert len(processed) == 1
    assert list((session(tmp_path) / "signals/inputs").iterdir()) == []
    assert processes_in(tmp_path) == []


def test_max_iterations_stops_an_agent_that_never_finishes(tmp_path: Path) -> None:
    (tmp_path / "reject.yaml").write_text("default: {verdict: retry}\n")
    project(tmp_path, "reviewer: {cli: demo, script: reject.yaml}", request="write it")
    done = cli(tmp_path, "ralph", "run", "s", "--max-iterations", "2")
    assert done.returncode == 3, done.stderr
    assert meta(tmp_path)["stop"]["reason"] == "max_iterations"


def test_a_hung_agent_is_killed_by_the_invocation_timeout(tmp_path: Path) -> None:
    (tmp_path / "hang.yaml").write_text("hang: true\n")
    project(tmp_path, "executor: {cli: demo, script: hang.yaml}",
            ralph="invocation_timeout: 1s\n  max_iterations: 1", request="write it")
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 3, done.stderr
    assert "timed out after 1s" in progress(tmp_path)
    assert meta(tmp_path)["stop"]["reason"] == "max_iterations"
    assert processes_in(tmp_path) == []


def test_a_transient_failure_is_retried(tmp_path: Path) -> None:
    (tmp_path / "flaky.yaml").write_text("fail_times: 2\n")
    project(tmp_path, "executor: {cli: demo, script: flaky.yaml}",
            ralph="retry: {exit_codes: [1], attempts: 3, base: 10ms, cap: 50ms}",
            request="write it")
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 0, done.stderr
    assert "[x] T1" in progress(tmp_path)
    record = (session(tmp_path) / "iterations/1/invocations/002-executor.md").read_text()
    assert "3 attempt(s)" in record


def test_poll_takes_signals_for_a_role(tmp_path: Path) -> None:
    project(tmp_path)
    cli(tmp_path, "signal", "s", "INFO", "for everyone")
    cli(tmp_path, "signal", "s", "STEER", "only the reviewer", "--target", "Ralph-Reviewer")
    taken = cli(tmp_path, "ralph", "poll", "s", "--as", "executor", "--json")
    assert taken.returncode == 0, taken.stderr
    assert "for everyone" in taken.stdout and "only the reviewer" not in taken.stdout
    assert len(list((session(tmp_path) / "signals/inputs").iterdir())) == 1


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    done = cli(tmp_path, "ralph", "run", "nope")
    assert done.returncode == 1 and "no Ralph session 'nope'" in done.stderr
    assert "Traceback" not in done.stderr
    done = cli(tmp_path, "ralph", "init", "--request", "x", "--id", "../x")
    assert done.returncode == 2 and "Traceback" not in done.stderr


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> None:
    yield
    for pid in processes_in(tmp_path):
        os.kill(pid, signal.SIGKILL)


def test_run_ralph_orchestrator_demo_reaches_complete(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "ralph_orchestrator", "--demo", "--session", "ro")
    assert done.returncode == 0, done.stderr
    assert "finished in [COMPLETE]" in done.stdout + done.stderr
    text = progress(tmp_path, 1, "ro")
    assert text == "- [x] T1: write the parser\n- [x] T2: test the parser\n"


def test_run_ralph_subagent_demo_reaches_completed(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "ralph_subagent", "--demo")
    assert done.returncode == 0, done.stderr
    assert "finished in [completed]" in done.stdout + done.stderr


FAKE_CLIS = Path(__file__).resolve().parents[1] / "support" / "fake_clis"


def test_the_same_session_with_a_fake_claude_reviewer(tmp_path: Path) -> None:
    """FAKE claude (stream-json) as the Reviewer gives the same artefacts as the demo
    reviewer, plus the usage it reports."""
    demo_root, claude_root = tmp_path / "demo", tmp_path / "claude"
    demo_root.mkdir()
    claude_root.mkdir()
    project(demo_root)
    path = f"{FAKE_CLIS}{os.pathsep}{os.environ.get('PATH', '')}"
    project(claude_root, f"reviewer: {{cli: claude, env: {{PATH: '{path}'}}}}")
    assert cli(demo_root, "ralph", "run", "s").returncode == 0
    done = cli(claude_root, "ralph", "run", "s")
    assert done.returncode == 0, done.stderr
    assert progress(demo_root) == progress(claude_root)
    for sub in ("tasks", "knowledge"):
        a = sorted(p.name for p in (session(demo_root) / "iterations/1" / sub).iterdir())
        b = sorted(p.name for p in (session(claude_root) / "iterations/1" / sub).iterdir())
        assert a == b
    review = (session(claude_root) / "iterations/1/reviews/T1.md").read_text()
    assert "verdict: accept" in review
    record = (session(claude_root) / "iterations/1/invocations/004-reviewer.md").read_text()
    assert "costUsd: 0." in record


def _artefacts(root: Path) -> dict[str, str]:
    """Every file of the session's iterations and the project, the timing of each call
    left out (the one thing a replay may change)."""
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or rel.parts[0] in (".interlock",) or "signals" in rel.parts:
            continue
        if rel.name == "metadata.yaml" or rel.suffix == ".jsonl":
            continue  # timestamps
        text = path.read_text().replace(str(root), "ROOT")
        files[str(rel)] = "\n".join(line for line in text.splitlines()
                                    if not line.startswith("## Call "))
    return files


def test_a_recorded_cassette_replays_to_identical_artefacts(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    cassette = tmp_path / "session.jsonl"
    project(first)
    project(second)
    done = cli(first, "ralph", "run", "s", "--record", str(cassette))
    assert done.returncode == 0, done.stderr
    assert len(cassette.read_text().splitlines()) == 7
    done = cli(second, "ralph", "run", "s", "--replay", str(cassette))
    assert done.returncode == 0, done.stderr
    assert _artefacts(first) == _artefacts(second)
    assert progress(second).count("[x]") == 3


def test_gates_send_a_failing_task_back_then_fail_it(tmp_path: Path) -> None:
    """A gate that passes once T1.md exists accepts T1; one that never passes fails T2
    after gate_attempts, with the gate's output in the next prompt."""
    project(tmp_path, ralph="gates:\n    - {name: check, command: 'test ! -e T2.md'}\n"
            "  gate_attempts: 2\n  max_iterations: 1", request="write one; write two")
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 3, done.stderr
    text = progress(tmp_path)
    assert "[x] T1" in text and "[F] T2: write two — gates:" in text
    record = (session(tmp_path) / "iterations/1/invocations/003-executor.md").read_text()
    assert "The gates failed on your last attempt" in record
    assert "## Gates, run 2: failed" in (session(tmp_path) / "iterations/1/tasks/T2.md"
                                         ).read_text()


def test_a_dead_runners_hung_agent_is_stopped_by_the_next_runner(tmp_path: Path) -> None:
    (tmp_path / "hang.yaml").write_text("hang: true\n")
    project(tmp_path, "executor: {cli: demo, script: hang.yaml}", request="write it")
    proc = start(tmp_path, "ralph", "run", "s")
    agents = session(tmp_path) / "agents"

    def listed() -> list[int]:
        found = [int(p.name.split("-")[0]) for p in agents.glob("*-*")] if agents.is_dir() else []
        return [pid for pid in found if pid in processes_in(tmp_path)]

    wait_until(lambda: "[/] T1" in progress(tmp_path) and bool(listed()),
               what="the hung executor")
    hung = listed()
    os.kill(proc.pid, signal.SIGKILL)  # the runner only: its agent hangs on
    proc.wait(timeout=10)
    assert set(hung) <= set(processes_in(tmp_path))
    project_file = tmp_path / "interlock.yaml"
    project_file.write_text(project_file.read_text().replace(
        "executor: {cli: demo, script: hang.yaml}", "executor: {cli: demo}"))
    again = cli(tmp_path, "ralph", "run", "s")
    assert again.returncode == 0, again.stderr
    assert "left by a dead runner" in " ".join(again.stderr.split())
    assert processes_in(tmp_path) == []
    assert "[x] T1" in progress(tmp_path)
