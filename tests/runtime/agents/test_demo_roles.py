"""The offline demo role agents: pure answers (roles) and the process (role_agent)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from interlock.runtime.agents import roles
from interlock.runtime.agents.adapters import agent_command, polling_for, read_result
from interlock.runtime.agents.ralph_protocol import classify_steer
from interlock.runtime.agents.role_agent import HANG_STEP, run
from interlock.runtime.config.agents import AgentConfig
from interlock.runtime.dispatch import dispatch


def call(role: str, prompt: str, cwd: Path, *args: str) -> tuple[dict[str, object], str, int]:
    """Run the role agent as a process: (answer, stderr, exit code)."""
    done = subprocess.run([sys.executable, "-m", "interlock.runtime.agents.role_agent",
                           "--role", role, *args], input=prompt, capture_output=True,
                          text=True, cwd=cwd, timeout=60)
    return (yaml.safe_load(done.stdout) if done.stdout else {}), done.stderr, done.returncode


# -- planner --------------------------------------------------------------------------


def test_planner_makes_a_task_per_line_or_clause_in_batches_of_two() -> None:
    answer = roles.plan("You are the planner.\nRequest: parse the file; write the report\n"
                        "- add tests\n\nSTEER: keep it small\n")
    assert answer == {
        "tasks": [{"id": "T1", "title": "parse the file"},
                  {"id": "T2", "title": "write the report"},
                  {"id": "T3", "title": "add tests"}],
        "batches": [["T1", "T2"], ["T3"]],
    }
    assert roles.plan("one thing")["tasks"] == [{"id": "T1", "title": "one thing"}]
    assert roles.plan("")["batches"] == []


def test_planner_aims_at_the_batch_size_its_prompt_names() -> None:
    answer = roles.plan("Request: a; b; c; d; e\nBatch size: 4\n")
    assert answer["batches"] == [["T1", "T2", "T3", "T4"], ["T5"]]
    assert roles.plan("Request: a; b; c\nBatch size: none\n")["batches"] == [["T1", "T2"],
                                                                             ["T3"]]


def test_merger_keeps_both_sides_of_every_conflict(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text(
        "one\n<<<<<<< HEAD\nby T2\n=======\nby T1\n>>>>>>> ralph/s1\nthree\n"
        "<<<<<<< HEAD\nend T2\n=======\nend T1\n>>>>>>> ralph/s1\n")
    answer, _, code = call("merger", f"Workdir: {tmp_path}\nConflict: notes.txt\n"
                           "Conflict: gone.txt\n", tmp_path)
    assert code == 0
    assert answer["status"] == "done" and answer["files"] == ["notes.txt"]
    assert (tmp_path / "notes.txt").read_text() == "one\nby T2\nby T1\nthree\nend T2\nend T1\n"
    blocked, _, _ = call("merger", f"Workdir: {tmp_path}\nConflict: gone.txt\n", tmp_path)
    assert blocked["status"] == "blocked"


def test_same_prompt_same_answer() -> None:
    prompt = "Request: a; b; c; d; e"
    assert roles.plan(prompt) == roles.plan(prompt)
    assert roles.execute("Task: T1 a") == roles.execute("Task: T1 a")


# -- executor -------------------------------------------------------------------------


@pytest.mark.parametrize(("steer", "kind"), [
    ("redo: use the new schema", "invalidated"),
    ("scope: drop the report", "scope"),
    ("also log timings", "additive"),
    ("REDO: again", "invalidated"),
])
def test_steer_is_classified_by_its_first_word(steer: str, kind: str) -> None:
    assert classify_steer(steer) == kind


def test_executor_writes_a_file_and_stages_a_note(tmp_path: Path) -> None:
    answer, err, code = call("executor", "Task: T2 write the report\nWorkdir: out\n", tmp_path)
    assert code == 0, err
    assert answer == {"task": "T2", "status": "done", "report": "T2 done: write the report",
                      "files": ["out/T2.md"], "staged": ["out/knowledge/T2.md"], "blockers": []}
    assert (tmp_path / "out" / "T2.md").read_text().startswith("# T2: write the report")
    assert (tmp_path / "out" / "knowledge" / "T2.md").is_file()


def test_executor_applies_an_additive_steer_and_restarts_on_redo(tmp_path: Path) -> None:
    answer, _, _ = call("executor", "Task: T1 parse\nSTEER: also log timings\nINFO: py3.12\n",
                        tmp_path)
    assert answer["steer"] == "additive" and answer["status"] == "done"
    assert "- constraint: also log timings" in (tmp_path / "T1.md").read_text()
    answer, _, _ = call("executor", "Task: T1 parse\nSTEER: redo: new schema\n", tmp_path)
    assert answer["steer"] == "invalidated"
    assert "restarted due to STEER: redo: new schema" in str(answer["report"])


def test_executor_blocks_on_a_scope_change(tmp_path: Path) -> None:
    answer, _, _ = call("executor", "Task: T1 parse\nSTEER: scope: only the CLI\n", tmp_path)
    assert answer["status"] == "blocked" and answer["steer"] == "scope"
    assert answer["blockers"] == ["STEER scope change: scope: only the CLI"]
    assert not (tmp_path / "T1.md").exists()


# -- reviewer, questioner, librarian ------------------------------------------------------


def test_reviewer_accepts_unless_scripted(tmp_path: Path) -> None:
    answer, _, _ = call("reviewer", "Task: T1 a\nTask: T2 b\n", tmp_path)
    assert answer == {"verdict": "accept", "tasks": ["T1", "T2"], "findings": []}
    script = tmp_path / "reviewer.yaml"
    script.write_text("default: {verdict: reject, findings: [no tests for T2]}\n")
    answer, _, _ = call("reviewer", "Task: T1 a\n", tmp_path, "--script", str(script))
    assert answer["verdict"] == "reject" and answer["findings"] == ["no tests for T2"]


def test_questioner_asks_in_the_question_protocol_shape() -> None:
    questions = roles.ask("Request: build it")["questions"]
    assert [q["kind"] for q in questions] == ["confirm", "select"]
    for question in questions:
        assert set(question) == {"id", "kind", "prompt", "options"}
    assert questions[1]["options"][0] == {"key": "minimal", "label": "The smallest useful slice"}
    asked = roles.ask("Which database?\nShould it be async?\n")["questions"]
    assert [(q["id"], q["kind"], q["prompt"]) for q in asked] == [
        ("q1", "text", "Which database?"), ("q2", "text", "Should it be async?")]


def test_librarian_lists_staged_notes_then_promotes_them(tmp_path: Path) -> None:
    call("executor", "Task: T1 parse\n", tmp_path)
    call("executor", "Task: T2 report\n", tmp_path)
    answer, _, _ = call("librarian", "Mode: stage\n", tmp_path)
    assert answer == {"mode": "stage", "staged": ["T1.md", "T2.md"], "promoted": []}
    answer, _, _ = call("librarian", "Mode: promote\nDocs: docs\n", tmp_path)
    assert answer["promoted"] == ["docs/T1.md", "docs/T2.md"] and answer["reconciled"] == {}
    assert (tmp_path / "docs" / "T1.md").read_text() == (
        tmp_path / "knowledge" / "T1.md").read_text()


def test_librarian_reconciles_notes_carried_forward(tmp_path: Path) -> None:
    """A carried note restaged since is superseded by the new one; one not restaged is
    promoted under its own name, its carried_from marker kept."""
    knowledge = tmp_path / "knowledge"
    knowledge.mkdir()
    carried = "---\ncarried_from: iteration 1\n---\nold T1\n"
    (knowledge / "carried-i1-T1.md").write_text(carried)
    (knowledge / "carried-i1-T2.md").write_text("---\ncarried_from: iteration 1\n---\nold T2\n")
    (knowledge / "T2.md").write_text("new T2\n")
    answer, _, _ = call("librarian", "Mode: promote\nDocs: docs\n", tmp_path)
    assert sorted(answer["promoted"]) == ["docs/T1.md", "docs/T2.md"]  # type: ignore[call-overload]
    assert answer["reconciled"] == {"carried-i1-T1.md": "promoted as T1.md",
                                    "carried-i1-T2.md": "superseded by T2.md, staged since"}
    assert (tmp_path / "docs" / "T1.md").read_text() == carried
    assert (tmp_path / "docs" / "T2.md").read_text() == "new T2\n"
    assert sorted(p.name for p in (tmp_path / "docs").iterdir()) == ["T1.md", "T2.md"]


# -- scripts ----------------------------------------------------------------------------


def test_script_answers_are_used_in_order_across_processes(tmp_path: Path) -> None:
    script = tmp_path / "executor.yaml"
    script.write_text("answers:\n  - {status: blocked, blockers: [needs a database]}\n"
                      "  - {status: paused}\ntasks:\n  T9: {report: special}\n")
    statuses = [call("executor", "Task: T1 a\n", tmp_path, "--script", str(script))[0]["status"]
                for _ in range(2)]
    assert statuses == ["blocked", "paused"]
    assert not (tmp_path / "T1.md").exists()  # a scripted blocked/paused executor writes nothing
    assert call("executor", "Task: T1 a\n", tmp_path, "--script", str(script))[0]["status"] == (
        "done")
    assert (tmp_path / "T1.md").is_file()
    assert call("executor", "Task: T9 a\n", tmp_path, "--script", str(script))[0]["report"] == (
        "special")


def test_script_fail_times_then_answers(tmp_path: Path) -> None:
    script = tmp_path / "planner.yaml"
    script.write_text("fail_times: 2\nexit_code: 7\nfail_message: quota exceeded\n"
                      "answers: [{batches: [[T1]]}]\n")
    first = call("planner", "Request: a; b", tmp_path, "--script", str(script))
    assert first[2] == 7 and "quota exceeded" in first[1] and first[0] == {}
    assert call("planner", "Request: a; b", tmp_path, "--script", str(script))[2] == 7
    answer, _, code = call("planner", "Request: a; b", tmp_path, "--script", str(script))
    assert code == 0 and answer["batches"] == [["T1"]]  # the first answer after the failures


def test_a_bad_script_is_a_located_error(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("fail_times: many\nhangs: true\n")
    _, err, code = call("reviewer", "x", tmp_path, "--script", str(script))
    assert code == 2
    assert f"{script}:1:13: error A506: fail_times" in err
    assert f"{script}:2:1: error A506: hangs" in err
    _, err, code = call("nobody", "x", tmp_path)
    assert code == 2 and "--role must be one of" in err


def test_hang_prints_nothing_and_never_returns(tmp_path: Path) -> None:
    script = tmp_path / "hang.yaml"
    script.write_text("hang: true\n")
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 3:
            raise TimeoutError

    out = io.StringIO()
    with pytest.raises(TimeoutError):
        run("executor", "Task: T1 a", script=script, stdout=out, sleep=sleep)
    assert out.getvalue() == "" and slept == [HANG_STEP] * 3


def test_delay_paces_the_lines_and_json_format() -> None:
    slept: list[float] = []
    out = io.StringIO()
    assert run("planner", "Request: a; b; c", delay=0.25, fmt="json", stdout=out,
               sleep=slept.append) == 0
    assert json.loads(out.getvalue())["batches"] == [["T1", "T2"], ["T3"]]
    assert len(slept) == len(out.getvalue().splitlines()) - 1
    assert set(slept) == {0.25}


def test_the_demo_adapter_runs_a_role_through_the_dispatcher(tmp_path: Path) -> None:
    config = AgentConfig(cli="demo", role="executor", cwd=str(tmp_path), delay=0.01)
    result = dispatch(agent_command(config, "Task: T3 ship it\n"), polling_for(config))
    assert result.status == "completed", result.polling.stderr
    assert yaml.safe_load(read_result(config, result).answer)["files"] == ["T3.md"]
    assert (tmp_path / "T3.md").is_file()


def test_a_lingering_demo_agent_completes_on_its_document(tmp_path: Path) -> None:
    """The seed's failure (an answer, then no exit): the detector ends the run on the
    answer document, whose end marker and role key polling_for tells it about."""
    script = tmp_path / "linger.yaml"
    script.write_text("linger: 600\n")
    config = AgentConfig(cli="demo", role="executor", cwd=str(tmp_path), script=str(script))
    polling = polling_for(config)
    assert polling.completion_markers.required_field == "status"
    result = dispatch(agent_command(config, "Task: T1 a\n"), polling)
    assert result.status == "completed"
    assert result.polling.completion_method == "marker"
    assert result.polling.exit_code is None  # stopped by us, long before the linger ends
    assert yaml.safe_load(read_result(config, result).answer)["status"] == "done"
