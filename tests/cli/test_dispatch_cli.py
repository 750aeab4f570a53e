"""`interlock dispatch` as a real process: output, exit codes, and no orphan after a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from interlock.runtime.engine.orphans import reap_orphans
from interlock.runtime.host.procfs import DISPATCH_ID_VAR, group_members
from interlock.runtime.store import AgentRecord, open_store

from support.cli import Cli
from support.proc_helpers import agent_argv, cli_argv
from support.stress import scaled

DEMO = cli_argv("demo-agent")
FAST = ["--timeout", "20", "--interval", "1"]


def test_prints_the_polling_result_as_json_and_exits_0(cli: Cli, tmp_path: Path) -> None:
    result = cli("dispatch", *FAST, "--", *DEMO, "--role", "QA", "--delay", "0",
                 "--prompt", "x", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data)[:8] == ["success", "stdout", "stderr", "exitCode", "elapsedTime",
                              "pollCount", "status", "completionMethod"]
    assert (data["success"], data["status"], data["completionMethod"], data["exitCode"]) == (
        True, "completed", "exit", 0)
    assert data["verdict"]["role"] == "QA"
    assert "completed by exit" in result.stderr


def test_yaml_format_and_a_prompt_from_a_file(cli: Cli, tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Review the retry logic in client.py\n")
    result = cli("dispatch", *FAST, "--format", "yaml", "--prompt-file", str(prompt), "--",
                 *DEMO, "--role", "SECURITY", "--delay", "0", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = yaml.safe_load(result.stdout)
    direct = subprocess.run([*DEMO, "--role", "SECURITY", "--delay", "0"],
                            input=prompt.read_text(), capture_output=True, text=True,
                            check=True)
    assert data["stdout"] == direct.stdout  # the agent got the prompt on its stdin


def test_a_hung_agent_exits_0_by_marker(cli: Cli, tmp_path: Path) -> None:
    result = cli("dispatch", *FAST, "--", *agent_argv("answers_then_hangs"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["completionMethod"], data["exitCode"]) == ("marker", None)


def test_exit_codes_error_timeout_and_usage(cli: Cli, tmp_path: Path) -> None:
    error = cli("dispatch", *FAST, "--", *agent_argv("exits_at_once", "4"), cwd=tmp_path)
    assert error.returncode == 1
    assert json.loads(error.stdout)["exitCode"] == 4

    missing = cli("dispatch", *FAST, "--", "no-such-agent-cli-x", cwd=tmp_path)
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["completionMethod"] == "spawn"
    assert "command not found: 'no-such-agent-cli-x'" in missing.stderr

    hang = [sys.executable, "-c", "import sys,time; print('x' * 200, flush=True); "
            "time.sleep(600)"]
    (tmp_path / "interlock.yaml").write_text("dispatch:\n  idleTimeout: 1\n")
    timeout = cli("dispatch", *FAST, "--", *hang, cwd=tmp_path)
    assert timeout.returncode == 124, timeout.stderr
    assert json.loads(timeout.stdout)["completionMethod"] == "idle"

    bad = cli("dispatch", "--timeout", "0", "--", "true", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr == "error: --timeout 0: dispatchTimeout must be more than 0 s, got 0\n"
    assert bad.stdout == ""
    (tmp_path / "interlock.yaml").write_text("dispatch:\n  pollingIntervall: 2\n")
    typo = cli("dispatch", "--", "true", cwd=tmp_path)
    assert typo.returncode == 2
    assert "interlock.yaml:2:3: error D401" in typo.stderr and typo.stdout == ""
    for result in (error, missing, timeout, bad, typo):
        assert "Traceback" not in result.stderr


def test_parallel_commands_print_one_result_each(cli: Cli, tmp_path: Path) -> None:
    result = cli("dispatch", *FAST, "--name", "TECHLEAD", "--name", "QA", "--",
                 *DEMO, "--role", "TECHLEAD", "--delay", "0", "--prompt", "x", ":::",
                 *DEMO, "--role", "QA", "--delay", "0", "--prompt", "x", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [(d["name"], d["verdict"]["role"]) for d in data] == [
        ("TECHLEAD", "TECHLEAD"), ("QA", "QA")]
    mismatch = cli("dispatch", "--name", "A", "--", "true", ":::", "true", cwd=tmp_path)
    assert mismatch.returncode == 2 and "1 --name given for 2 command(s)" in mismatch.stderr
    empty = cli("dispatch", "--", "true", ":::", cwd=tmp_path)
    assert empty.returncode == 2 and "empty command" in empty.stderr


def _wait_for_record(store_path: Path, deadline: float = 20.0) -> AgentRecord:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if store_path.exists():
            store = open_store(str(store_path), store_path.parent)
            try:
                records = store.agents()
            finally:
                store.close()
            if records:
                return records[0]
        time.sleep(0.05)  # waiting on another process, not on time
    raise AssertionError("the dispatcher never recorded its agent")


def test_agents_of_a_sigkilled_dispatcher_are_stopped_by_the_next_one(tmp_path: Path) -> None:
    store_path = tmp_path / "state.db"
    silent = [sys.executable, "-c", "import time; time.sleep(600)"]  # never answers
    dispatcher = subprocess.Popen(
        [*cli_argv("dispatch", "--store", str(store_path), *FAST), "--", *silent],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        record = _wait_for_record(store_path)
        dispatcher.send_signal(signal.SIGKILL)
        dispatcher.wait(timeout=10)
        assert list(group_members(record.pgid)) == [record.pid]  # orphaned, still running

        follow = subprocess.run(
            [*cli_argv("dispatch", "--store", str(store_path), *FAST), "--",
             *agent_argv("exits_at_once", "0")],
            cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert follow.returncode == 0, follow.stderr
        assert f"stopped agent group {record.pgid}" in follow.stderr
        assert "left by a dead dispatcher: stopped" in follow.stderr
        assert list(group_members(record.pgid)) == []
        store = open_store(str(store_path), tmp_path)
        try:
            assert store.agents() == []
        finally:
            store.close()
    finally:
        if dispatcher.poll() is None:
            dispatcher.kill()
        dispatcher.communicate()


def test_a_recycled_group_id_without_our_marker_is_never_signalled(tmp_path: Path) -> None:
    # A record left by a dead owner whose group id now belongs to an unrelated process.
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                                 start_new_session=True,
                                 env={k: v for k, v in os.environ.items()
                                      if k != DISPATCH_ID_VAR})
    dead = subprocess.Popen(["true"])
    dead.wait()
    store = open_store(str(tmp_path / "state.db"), tmp_path)
    try:
        store.record_agent(AgentRecord(
            id="f" * 32, pgid=bystander.pid, pid=bystander.pid,
            owner=f"{os.uname().nodename}:{dead.pid}:dispatch", argv=("old-agent",),
            started_at=time.time()))
        reaped = reap_orphans(store, grace=0.5)
        assert [r.outcome for r in reaped] == ["gone"]
        assert bystander.poll() is None  # untouched
        assert store.agents() == []
    finally:
        store.close()
        bystander.kill()
        bystander.wait()


def test_records_of_a_live_dispatcher_are_left_alone(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "state.db"), tmp_path)
    try:
        record = AgentRecord(id="a" * 32, pgid=1, pid=1,
                             owner=f"{os.uname().nodename}:{os.getpid()}:dispatch",
                             argv=("agent",), started_at=time.time())
        store.record_agent(record)
        assert reap_orphans(store) == []
        assert store.agents() == [record]
    finally:
        store.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_the_dispatcher_stops_its_agents(tmp_path: Path, sig: int) -> None:
    store_path = tmp_path / "state.db"
    (tmp_path / "interlock.yaml").write_text("dispatch:\n  terminateGrace: 1\n")
    dispatcher = subprocess.Popen(
        [*cli_argv("dispatch", "--store", str(store_path), *FAST), "--",
         *agent_argv("ignores_sigterm")],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    record = _wait_for_record(store_path)
    dispatcher.send_signal(sig)
    _, stderr = dispatcher.communicate(timeout=30)
    assert dispatcher.returncode == 130, stderr
    assert "interrupted; the agents were stopped" in stderr
    assert "Traceback" not in stderr
    assert list(group_members(record.pgid)) == []


@pytest.mark.stress
def test_the_dispatcher_process_stays_small_through_a_flood(tmp_path: Path) -> None:
    # A wrapper waits for `interlock dispatch` and reports the peak RSS of its children
    # (the dispatcher and the flood agent): the output does not pile up in memory.
    # 256 MiB (1 GiB with INTERLOCK_STRESS=full); the dispatcher stays near 75 MiB.
    wrapper = ("import resource, subprocess, sys\n"
               "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    size = scaled(1 << 28, 1 << 30)
    limit_kib = min(200 * 1024, size // 2 // 1024)  # less than what piling up would take
    result = subprocess.run(
        [sys.executable, "-c", wrapper, *cli_argv("dispatch", "--no-store", *FAST, "--"),
         *agent_argv("flood", str(size))],
        cwd=tmp_path, capture_output=True, text=True, timeout=240)
    code, peak_kib = (int(x) for x in result.stdout.split())
    assert code == 0, result.stderr
    assert peak_kib < limit_kib, f"peak RSS {peak_kib // 1024} MiB for {size >> 20} MiB"
    spilled = list((tmp_path / ".interlock" / "dispatch").glob("*/stdout.log"))
    assert [p.stat().st_size for p in spilled] == [size + len(b"p: QA\nv: GO\ni: []\n")]
