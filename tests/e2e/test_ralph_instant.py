"""Ralph sessions with instant agents (``cli: command``, a bash script answering at once),
run back to back: the writes race each other hardest when the agents take no time.

Every run must end ``completed`` (exit 0), and every artefact must be whole: each YAML
file parses, progress.md lists every task done, each invocation record and task report is
there and ends with a newline. Marked ``stress``: 20 sessions in ``make stress`` (.ci/run), 3 at the
reduced size (``pytest -m stress``)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from support.proc_helpers import cli_argv
from support.stress import scaled

AGENT = """\
cat > /dev/null
case "$1" in
  planner) printf 'tasks:\\n  - {id: T1, title: one}\\n  - {id: T2, title: two}\\n'
           printf 'batches:\\n  - [T1, T2]\\n' ;;
  executor) printf 'status: done\\nreport: done\\n' ;;
  reviewer) echo "verdict: accept" ;;
  *) echo "mode: stage" ;;
esac
"""
ROLES = ("planner", "executor", "reviewer", "questioner", "librarian")
RUNS = scaled(3, 20)


def _project(root: Path) -> None:
    (root / "agent.sh").write_text(AGENT)
    (root / "interlock.yaml").write_text("agents:\n" + "".join(
        f"  {role}: {{cli: command, command: [bash, {root / 'agent.sh'}, {role}]}}\n"
        for role in ROLES))


def _whole(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n"), f"{path} is cut short"
    if path.suffix == ".yaml":
        assert isinstance(yaml.safe_load(text), dict), f"{path} does not parse"


@pytest.mark.stress
def test_instant_agents_run_sessions_to_the_end_with_every_artefact_whole(
        tmp_path: Path) -> None:
    _project(tmp_path)
    for n in range(RUNS):
        session = f"r{n}"
        made = subprocess.run(cli_argv("ralph", "init", "--id", session, "--request",
                                       "one; two"), cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
        assert made.returncode == 0, made.stderr
        done = subprocess.run(cli_argv("ralph", "run", session), cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"run {n}: {done.stderr}"
        folder = tmp_path / ".ralph-sessions" / session
        meta = yaml.safe_load((folder / "metadata.yaml").read_text())
        assert meta["status"] == "completed", f"run {n}: {meta}"
        files = [p for p in folder.rglob("*") if p.is_file() and "signals" not in p.parts]
        for path in files:
            if path.suffix in (".yaml", ".md"):
                _whole(path)
        iteration = folder / "iterations" / "1"
        assert (iteration / "progress.md").read_text().count("[x]") == 2
        assert sorted(p.name for p in (iteration / "tasks").iterdir()) == ["T1.md", "T2.md"]
        records = sorted(p.name for p in (iteration / "invocations").iterdir())
        assert records[0] == "001-planner.md" and len(records) == 5, records


def test_inbox_messages_reach_a_ralph_session_as_info_through_its_mailbox(
        tmp_path: Path) -> None:
    """With ``inbox:`` in interlock.yaml, ``ralph run`` polls the inbox while no subagent
    runs and posts each message into the session's mailbox as INFO: a session held in
    PAUSED takes it there, the message is marked done, the next prompt carries it, and
    ``ralph status`` counts it."""
    _project(tmp_path)
    with (tmp_path / "interlock.yaml").open("a") as project:
        project.write("inbox:\n  store: inbox.db\n  interval: 100ms\n")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cli_argv(*args), cwd=tmp_path, capture_output=True, text=True,
                              timeout=120)

    assert run("ralph", "init", "--id", "s", "--request", "one; two").returncode == 0
    posted = run("inbox", "post", "--store", "inbox.db", "--type", "note", "--from", "alice",
                 "the API moved to v2")
    assert posted.returncode == 0, posted.stderr
    assert run("signal", "s", "PAUSE", "hold on").returncode == 0  # held in PAUSED at once
    proc = subprocess.Popen(cli_argv("ralph", "run", "s"), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        folder = tmp_path / ".ralph-sessions" / "s"
        deadline = time.monotonic() + 60
        while not any((folder / "signals" / "processed").glob("*inbox*.yaml")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        assert run("ralph", "resume", "s").returncode == 0
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "inbox: note from alice" in err
    listed = json.loads(run("inbox", "list", "--json", "--store", "inbox.db").stdout)
    assert [m["status"] for m in listed] == ["done"]
    prompt = (folder / "iterations/1/invocations/001-planner.md").read_text()
    assert "[inbox note from alice] the API moved to v2" in prompt
    status = json.loads(run("ralph", "status", "s", "--json").stdout)
    assert status["inbox"] == {"delivered": 1, "pending": 0}


def test_a_bad_inbox_section_stops_ralph_run_before_it_starts(tmp_path: Path) -> None:
    _project(tmp_path)
    with (tmp_path / "interlock.yaml").open("a") as project:
        project.write("inbox:\n  interval: -3s\n")
    made = subprocess.run(cli_argv("ralph", "init", "--id", "s", "--request", "x"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    done = subprocess.run(cli_argv("ralph", "run", "s"), cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{tmp_path / 'interlock.yaml'}:" in done.stderr and "inbox.interval" in done.stderr
    assert not (tmp_path / ".interlock" / "state.db").exists()  # nothing ran


def test_an_agent_of_a_session_polls_it_from_any_folder_and_cannot_start_one(
        tmp_path: Path) -> None:
    _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"  # where a task's worktree would be
    elsewhere.mkdir()
    interlock = " ".join(cli_argv())
    (tmp_path / "agent.sh").write_text(AGENT.replace(
        "  executor) ", f"  executor) (cd {elsewhere} && {interlock} ralph poll s --as "
        f"executor --json > poll.out 2> poll.err; echo $? > poll.code; "
        f"{interlock} ralph run s > run.out 2>&1; echo $? > run.code); "))
    assert subprocess.run(cli_argv("ralph", "init", "--id", "s", "--request", "x"),
                          cwd=tmp_path, timeout=60).returncode == 0
    done = subprocess.run(cli_argv("ralph", "run", "s"), cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (elsewhere / "poll.err").read_text() == ""  # it found its session's folder
    assert (elsewhere / "poll.code").read_text().strip() == "0"
    assert (elsewhere / "run.code").read_text().strip() == "1"
    assert ("this process is an agent of Ralph session s: a worker never starts a Ralph "
            "session of its own") in (elsewhere / "run.out").read_text()
