"""`interlock review` and `interlock staged` as real processes: --answers and --json give the
same staged config, --consume gives it once, SIGKILL mid-interview then --resume ends like an
uninterrupted run, every exit code, user mistakes in one line."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.cli import Cli
from support.interview import (
    SEED_ANSWERS,
    SEED_IDS,
    calls,
    gone,
    json_lines,
    use_fake_poller,
    without_time,
)
from support.invoke_helpers import wait_for

OUTPUT = "# Sprite sheet\nA design for 36 hex renders.\n"


def _folder(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "out.md").write_text(OUTPUT)
    return folder


def _answers(folder: Path, answers: list[Any]) -> Path:
    path = folder / "answers.yaml"
    path.write_text("".join(f"- {json.dumps(a)}\n" for a in answers))
    return path


def _review_json(folder: Path, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "interlock.runtime.cli", "review", "out.md", "--node",
         "node_14", "--json"], input=stdin, capture_output=True, text=True, cwd=folder,
        timeout=120)


def test_answers_and_json_stage_the_same_config_and_consume_gives_it_once(
        cli: Cli, tmp_path: Path) -> None:
    scripted = _folder(tmp_path, "scripted")
    done = cli("review", "out.md", "--node", "node_14", "--answers",
               str(_answers(scripted, SEED_ANSWERS)), cwd=scripted, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "resolved (poller poller-14-001)" in done.stderr
    by_json = _folder(tmp_path, "json")
    driven = _review_json(by_json, json_lines(SEED_IDS, SEED_ANSWERS))
    assert driven.returncode == 0, driven.stderr
    lines = [json.loads(line) for line in driven.stdout.splitlines()]
    questions = [line for line in lines if "kind" in line]
    assert [q["id"] for q in questions] == SEED_IDS
    assert questions[0]["session"].startswith("review-node_14-")
    assert {q["session"] for q in questions[1:]} == {"poller-14-001"}
    last = lines[-1]
    assert last["resolution"] == "resolved" and last["poller_id"] == "poller-14-001"

    shown = cli("staged", "node_14", "--json", cwd=scripted)
    assert shown.returncode == 0
    staged = json.loads(shown.stdout)
    assert without_time(staged) == without_time(last["staged"])
    first = cli("staged", "node_14", "--consume", cwd=scripted)
    assert first.returncode == 0 and json.loads(first.stdout) == staged
    second = cli("staged", "node_14", "--consume", cwd=scripted)
    assert (second.returncode, second.stdout) == (1, "")
    assert cli("staged", "node_14", cwd=scripted).returncode == 1


def test_json_tells_a_wrong_answer_and_asks_again(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "f")
    stdin = ('{"id": "menu", "answer": "retry"}\nnot json\n{"id": "category", "answer": "Q"}\n'
             '{"id": "category", "answer": "A"}\n')  # then EOF: abort
    driven = _review_json(folder, stdin)
    lines = [json.loads(line) for line in driven.stdout.splitlines()]
    errors = [line["error"] for line in lines if "error" in line]
    assert errors[0].startswith("not JSON") and "'Q' is not one of A, B, C, D" in errors[1]
    assert lines[-1] == {"resolution": "aborted", "poller_id": "poller-14-001", "staged": None}
    assert driven.returncode == 3


class Lines:
    """JSON lines from a process's stdout, read from its descriptor (bounded waits)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buffer = b""

    def next(self, timeout: float = 60) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.fd], [], [], timeout)
            assert ready, "no line within the timeout"
            chunk = os.read(self.fd, 65536)
            assert chunk, "the process closed its stdout"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return dict(json.loads(line))


def test_sigkill_mid_interview_then_resume_stages_the_same_config(
        cli: Cli, tmp_path: Path) -> None:
    folder = _folder(tmp_path, "killed")
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock.runtime.cli", "review", "out.md", "--node",
         "node_14", "--json"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=folder)
    assert proc.stdin is not None
    lines = Lines(proc)
    assert "output" in lines.next()
    for qid, answer in zip(SEED_IDS[:4], SEED_ANSWERS[:4], strict=True):
        question = lines.next()
        assert question["id"] == qid
        proc.stdin.write(json.dumps({"id": qid, "answer": answer}) + "\n")
        proc.stdin.flush()
    assert lines.next()["id"] == "close"  # the echo's Close was committed
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)

    rest = _answers(folder, SEED_ANSWERS[4:])
    resumed = cli("review", "--resume", "poller-14-001", "--answers", str(rest), cwd=folder,
                  timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert [line.split(" -> ")[0] for line in resumed.stdout.splitlines()
            if " -> " in line] == ["Close but not exactly... What's off?",
                                   "Select all that apply:", "Is this what you meant?"]
    assert_as_uninterrupted(cli, folder, tmp_path)


def _start_json(folder: Path) -> tuple[subprocess.Popen[str], Lines]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock.runtime.cli", "review", "out.md", "--node",
         "node_14", "--json"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=folder)
    lines = Lines(proc)
    assert "output" in lines.next()
    return proc, lines


def _answer(proc: subprocess.Popen[str], lines: Lines, count: int) -> None:
    """Answer the first ``count`` questions of the seed's path."""
    assert proc.stdin is not None
    for qid, answer in zip(SEED_IDS[:count], SEED_ANSWERS[:count], strict=True):
        assert lines.next()["id"] == qid
        proc.stdin.write(json.dumps({"id": qid, "answer": answer}) + "\n")
        proc.stdin.flush()


def assert_as_uninterrupted(cli: Cli, folder: Path, tmp_path: Path) -> None:
    """The config staged in ``folder`` (after a kill and --resume) is the one a whole
    uninterrupted run stages (its timestamps aside)."""
    after_kill = json.loads(cli("staged", "node_14", "--json", cwd=folder).stdout)
    whole = _folder(tmp_path, "whole")
    done = _review_json(whole, json_lines(SEED_IDS, SEED_ANSWERS))
    assert done.returncode == 0
    assert without_time(after_kill) == without_time(json.loads(done.stdout.splitlines()[-1])
                                                    ["staged"])


def _kinds(cli: Cli, folder: Path) -> list[str]:
    shown = cli("log", "poller-14-001", "--json", cwd=folder)
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line)["kind"] for line in shown.stdout.splitlines()]


def test_sigkill_while_the_agent_works_then_resume_adopts_the_same_agent(
        cli: Cli, tmp_path: Path) -> None:
    folder = _folder(tmp_path, "killed")
    calls_file = use_fake_poller(folder, "--hold", "suggest")
    proc, lines = _start_json(folder)
    _answer(proc, lines, 3)  # menu, category, narrow: the agent drafts the interpretation
    wait_for(lambda: (folder / "held").exists())
    agent = int((folder / "held").read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert not gone(agent)  # the agent does not depend on its runner

    rest = _answers(folder, SEED_ANSWERS[3:])
    resumed = subprocess.Popen(
        [sys.executable, "-m", "interlock.runtime.cli", "review", "--resume", "poller-14-001",
         "--answers", str(rest)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=folder)
    wait_for(lambda: "adopted" in _kinds(cli, folder))  # on_resume: adopt
    (folder / "go").touch()  # the adopted agent answers
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert [line.split(" -> ")[0] for line in out.splitlines() if " -> " in line] == [
        "Is this what you meant?", "Close but not exactly... What's off?",
        "Select all that apply:", "Is this what you meant?"]
    assert calls(calls_file) == [("category", calls(calls_file)[0][1]),
                                 ("narrow", calls(calls_file)[1][1]), ("suggest", agent),
                                 ("refine", calls(calls_file)[3][1])]  # one suggest agent
    assert gone(agent)
    assert_as_uninterrupted(cli, folder, tmp_path)


def test_ctrl_c_while_the_agent_works_leaves_no_process_and_resume_asks_again(
        cli: Cli, tmp_path: Path) -> None:
    folder = _folder(tmp_path, "interrupted")
    calls_file = use_fake_poller(folder, "--hold", "category")
    proc, lines = _start_json(folder)
    _answer(proc, lines, 1)  # menu: retry; the agent drafts the category question
    wait_for(lambda: (folder / "held").exists())
    agent = int((folder / "held").read_text())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; continue with: interlock review --resume poller-14-001" in err
    assert "Traceback" not in err
    assert gone(agent)  # the invoke's cancel stopped it before the command ended
    assert "interrupted" in _kinds(cli, folder)

    (folder / "go").touch()
    resumed = cli("review", "--resume", "poller-14-001", "--answers",
                  str(_answers(folder, SEED_ANSWERS[1:])), cwd=folder, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    stages = [stage for stage, _ in calls(calls_file)]
    assert stages == ["category", "category", "narrow", "suggest", "refine"]  # asked anew
    assert json.loads(cli("staged", "node_14", "--json", cwd=folder).stdout)["action"] == \
        "retry"


def test_exit_codes_and_user_mistakes(cli: Cli, tmp_path: Path) -> None:
    folder = _folder(tmp_path, "f")
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return cli(*args, cwd=folder, timeout=120)

    accept = run("review", "out.md", "--node", "node_14", "--answers",
                 str(_answers(folder, ["accept"])))
    assert accept.returncode == 0 and "accepted" in accept.stderr
    aborted = run("review", "out.md", "--node", "node_14", "--answers",
                  str(_answers(folder, ["retry", "A", "abort"])))
    assert aborted.returncode == 3 and "aborted" in aborted.stderr
    limit = run("review", "out.md", "--node", "node_14", "--max-rounds", "1", "--answers",
                str(_answers(folder, ["retry", "A", "A", "X", "A"])))
    assert limit.returncode == 5 and "round_limit" in limit.stderr
    for args, message in [
        (("review", "missing.md", "--node", "n"), "no output file missing.md"),
        (("review", "out.md"), "use: interlock review OUTPUT --node NODE"),
        (("review", "out.md", "--node", "../x", "--answers", "answers.yaml"), "'/'"),
        (("review", "out.md", "--node", "n", "--answers", "nope.yaml"), "nope.yaml"),
        (("review", "out.md", "--node", "n", "--answers", "answers.yaml", "--json"),
         "one of --answers FILE and --json"),
        (("review", "--resume", "poller-9-009", "--answers", "answers.yaml"),
         "no poller interview 'poller-9-009'"),
        (("review", "out.md", "--node", "n"), "needs a terminal"),
        (("review", "-", "--node", "n", "--json"), "give OUTPUT as a file"),
    ]:
        result = run(*args)
        assert result.returncode in (1, 2), (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    (folder / "bad.yaml").write_text("- retry\n- {a: 1}\n")
    bad = run("review", "out.md", "--node", "n", "--answers", "bad.yaml")
    assert bad.returncode == 2
    assert "bad.yaml:2:3: answer 2 must be a key, a list of keys or text" in bad.stderr
    (folder / "wrong.yaml").write_text("- retry\n- Q\n")
    wrong = run("review", "out.md", "--node", "n", "--answers", "wrong.yaml")
    assert wrong.returncode == 2
    assert "wrong.yaml: answer 2: question category: 'Q' is not one of A, B, C, D" in wrong.stderr
