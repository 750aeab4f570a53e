"""`interlock run` with invoke: states through the installed CLI: an `agent: executor`
invoke with no interlock.yaml runs the offline demo executor role, then a `command:`
invoke runs; the journal (`interlock log --json`) shows both invocations and their
done.invoke events."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.cli import Cli
from support.paths import TESTS

SPEC = TESTS / "support" / "invoke" / "e2e" / "two_invokes.yaml"


def test_run_drives_an_agent_invoke_and_a_command_invoke_to_a_final_state(
        cli: Cli, tmp_path: Path) -> None:
    shutil.copy(SPEC, tmp_path / "two_invokes.yaml")
    assert not (tmp_path / "interlock.yaml").exists()
    run = cli("run", "two_invokes.yaml", "--session", "s1", "--no-signals", cwd=tmp_path,
              timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "session s1 finished in [done]" in run.stdout + run.stderr
    log = cli("log", "s1", "--json", cwd=tmp_path)
    assert log.returncode == 0, log.stderr
    entries = [json.loads(line) for line in log.stdout.splitlines() if line.strip()]
    invoked = [e for e in entries if e["kind"] == "invoked"]
    assert [e["data"]["invoke"] for e in invoked] == ["execute", "check"]
    assert invoked[0]["data"]["argv"][-2:] == ["--role", "executor"]  # the demo role
    assert invoked[1]["data"]["argv"] == ["python3", "-c", "print('v: checked')"]
    for entry in invoked:
        assert Path(entry["data"]["spool"]).is_relative_to(
            tmp_path / ".interlock" / "sessions" / "s1" / "invocations")
    done = [e for e in entries if e["kind"] == "event"]
    assert [e["event"] for e in done] == ["done.invoke.execute", "done.invoke.check"]
    assert [(e["before"], e["after"]) for e in done] == [
        (["executing"], ["checking"]), (["checking"], ["done"])]
    execute, check = (e["data"] for e in done)
    assert execute["invocation"] == invoked[0]["data"]["invocation"]
    assert execute["answer"]["status"] == "done" and execute["answer"]["task"] == "T1"
    assert (tmp_path / "T1.md").is_file()  # the executor role wrote its task's file
    assert check["invocation"] == invoked[1]["data"]["invocation"]
    assert check["answer"] == {"v": "checked"}


NESTED = TESTS / "support" / "invoke" / "e2e"


def test_run_drives_a_fanout_of_command_children_two_at_once(cli: Cli, tmp_path: Path
                                                              ) -> None:
    """The fan-out acceptance: `command:` children, a concurrency of 2 over 5 items: at
    most 2 ran at once (their own recorded times say so), 5 done events with their item
    and index, the 'all done' event once with every outcome in item order."""
    from interlock.runtime.store.sqlite import SqliteStore

    from support.fanout_helpers import CHILD, most_at_once, times

    shutil.copy(NESTED / "fanout.yaml", tmp_path / "fanout.yaml")
    shutil.copy(CHILD, tmp_path / "fanout_child.py")
    (tmp_path / "pair").mkdir()  # the first two children wait for each other
    drawn = cli("diagram", "fanout.yaml", cwd=tmp_path)
    assert "working : \u2225 each: context.tasks \u00d72" in drawn.stdout
    run = cli("run", "fanout.yaml", "--session", "f1", "--no-signals", cwd=tmp_path,
              timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "session f1 finished in [done]" in run.stdout + run.stderr
    assert most_at_once(tmp_path) == 2
    assert sorted(times(tmp_path)) == [0, 1, 2, 3, 4]
    log = cli("log", "f1", "--json", cwd=tmp_path)
    entries = [json.loads(line) for line in log.stdout.splitlines() if line.strip()]
    events = [e for e in entries if e["kind"] == "event"]
    tasks = ["parse", "lex", "check", "emit", "test"]
    done = [e["data"] for e in events if e["event"] == "done.invoke.work"]
    assert sorted((d["index"], d["item"]) for d in done) == list(enumerate(tasks))
    assert all(d["answer"]["prompt"] == f"Task {d['index']}: {d['item']}" for d in done)
    [every] = [e for e in events if e["event"] == "done.invoke.work.all"]
    assert events[-1] is every and every["after"] == ["done"]
    assert [o["item"] for o in every["data"]["outcomes"]] == tasks
    assert [o["index"] for o in every["data"]["outcomes"]] == [0, 1, 2, 3, 4]
    assert (every["data"]["done"], every["data"]["failed"]) == (5, 0)
    assert [e["data"]["index"] for e in entries if e["kind"] == "invoked"] == [0, 1, 2, 3, 4]
    store = SqliteStore(tmp_path / ".interlock" / "state.db")
    try:
        rows = store.invocations("f1")
        [fanout] = store.fanouts("f1")
    finally:
        store.close()
    assert sorted((r.index, r.outcome) for r in rows) == [(i, "done") for i in range(5)]
    assert (fanout.items, fanout.concurrency, fanout.outcome) == (tuple(tasks), 2, "done")


def test_run_drives_a_child_machine_and_rm_removes_it_with_its_parent(
        cli: Cli, tmp_path: Path) -> None:
    shutil.copytree(NESTED, tmp_path / "specs")
    assert cli("validate", "specs/nested.yaml", cwd=tmp_path).returncode == 0
    run = cli("run", "specs/nested.yaml", "--session", "p", "--no-signals", cwd=tmp_path,
              timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "session p finished in [done]" in run.stdout + run.stderr
    log = cli("log", "p", "--json", cwd=tmp_path)
    entries = [json.loads(line) for line in log.stdout.splitlines() if line.strip()]
    [invoked] = [e for e in entries if e["kind"] == "invoked"]
    assert invoked["data"]["argv"] == ["machine", "steps/check.yaml"]
    [done] = [e for e in entries if e["kind"] == "event"]
    assert done["event"] == "done.invoke.step.checked"
    assert done["data"]["session"] == "p.0001-step"
    assert done["data"]["output"]["task"] == {"id": "T1", "title": "write the parser"}
    child = cli("log", "p.0001-step", "--json", cwd=tmp_path)
    events = [json.loads(line) for line in child.stdout.splitlines() if line.strip()]
    [answer] = [e for e in events if e["kind"] == "event"]
    assert answer["data"]["answer"] == {"v": "checked T1"}
    listed = cli("sessions", cwd=tmp_path).stdout
    assert "p (+1 child)" in listed and "p.0001-step" not in listed
    every = json.loads(cli("sessions", "--all", "--json", cwd=tmp_path).stdout)
    assert [(s["id"], s["parent"]) for s in every] == [("p", None), ("p.0001-step", "p")]
    assert cli("rm", "p", cwd=tmp_path).returncode == 0
    assert cli("status", "p.0001-step", cwd=tmp_path).returncode != 0  # removed with it


ASK = """\
machine: ask
initial: asking
states:
  asking:
    invoke: {id: ask, agent: helper, prompt: "Say hello"}
    on:
      done.invoke.ask: done
      error.invoke.ask: failed
  done: {type: final}
  failed: {type: final}
"""


@pytest.mark.real_cli
def test_a_real_clis_own_words_reach_run_status_and_log(cli: Cli, tmp_path: Path) -> None:
    """The real claude, logged out (an empty home, no key): `interlock run`'s line and
    `interlock status` say what claude said, with the reason."""
    from support.real_clis import cli_path, require_cli

    require_cli("claude")
    (tmp_path / "ask.yaml").write_text(ASK)
    env = {"HOME": str(tmp_path / "home"), "PATH": cli_path(),
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    (tmp_path / "interlock.yaml").write_text(
        f"agents:\n  helper: {{cli: claude, env: {json.dumps(env)}}}\n")
    run = cli("run", "ask.yaml", "--session", "p1", "--no-signals", cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    said = "(auth: claude: Not logged in · Please run /login)"
    assert f"error.invoke.ask {said}" in run.stdout
    status = cli("status", "p1", cwd=tmp_path)
    assert "failure: error.invoke.ask (auth): claude: Not logged in · Please run /login" \
        in status.stdout
    log = cli("log", "p1", cwd=tmp_path).stdout
    assert max(len(line) for line in log.splitlines()) < 2000  # the stdout is cut short
