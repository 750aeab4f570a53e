"""Live signals: the file format, the mailbox operations, routing, and the CLI."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from interlock.runtime.host.owners import parse_owner
from interlock.runtime.host.procfs import start_ticks
from interlock.runtime.signals.consumer import Consumer, Handled, Subscription
from interlock.runtime.signals.mailbox import Mailbox, read_metadata
from interlock.runtime.signals.model import (
    MAX_SIGNAL_BYTES,
    Signal,
    SignalError,
    check_identifier,
    fifo_key,
    make_signal,
    new_signal_id,
    parse_signal,
)

from support.cli import Cli
from support.proc_helpers import cli_argv

NOW = datetime(2026, 2, 8, 14, 30, 5, 123456, tzinfo=UTC)
NAME = "signal.260208-143005-123-abcd.yaml"


# -- the file format -----------------------------------------------------------------------


def test_ids_sort_by_time_and_carry_milliseconds() -> None:
    assert new_signal_id(NOW, "abcd") == "260208-143005-123-abcd"
    later = new_signal_id(NOW.replace(second=6), "0000")
    names = [f"signal.{later}.yaml", NAME, "signal.260208-143000.yaml"]
    assert sorted(names, key=fifo_key) == [
        "signal.260208-143000.yaml", NAME, f"signal.{later}.yaml"]


def test_a_seed_signal_parses() -> None:
    raw = b"type: STEER\ntarget: ALL\nmessage: \"Use 'bar', not 'foo'.\"\niteration: 1\n"
    assert parse_signal(raw, NAME) == Signal("260208-143005-123-abcd", "STEER", "ALL",
                                             "Use 'bar', not 'foo'.", 1)
    for_one = parse_signal(b"type: STEER\ntarget: Ralph-Executor\nmessage: m\ntask: T2\n",
                           NAME)
    assert for_one.task == "T2" and for_one.event_data()["task"] == "T2"
    assert parse_signal(b"type: PAUSE\ntask: 3\n", NAME).task == "3"
    seed_name = parse_signal(b"type: pause\ntarget: Ralph-Executor\n",
                             "signal.260208-143000.yaml")
    assert (seed_name.id, seed_name.type) == ("260208-143000", "PAUSE")


def test_the_seed_workflow_example_file_parses_as_it_is_written() -> None:
    """Seed 004 section 5 writes signals/inputs/signal.20260208-143000.yaml with an 8-digit
    date and no target: it is read, and its target is ALL."""
    raw = b'type: STEER\nmessage: "Target Firefox only, not Chrome."\n'
    signal = parse_signal(raw, "signal.20260208-143000.yaml")
    assert signal == Signal("20260208-143000", "STEER", "ALL",
                            "Target Firefox only, not Chrome.")


def test_six_and_eight_digit_dates_sort_together() -> None:
    names = ["signal.20260208-143001.yaml", "signal.260208-143002.yaml",
             "signal.260208-143000-500-ab.yaml", "signal.20260207-235959.yaml"]
    assert sorted(names, key=fifo_key) == [
        "signal.20260207-235959.yaml", "signal.260208-143000-500-ab.yaml",
        "signal.20260208-143001.yaml", "signal.260208-143002.yaml"]


@pytest.mark.parametrize(("raw", "name", "reason"), [
    (b"type: STEER\ntarget: ALL\nmessage: x\n", "notes.yaml", "is not a signal file name"),
    (b"type: STEER\ntarget: ALL\nmesage: x\n", NAME, "3:1: unknown field 'mesage' (did you "
                                                     "mean 'message'?)"),
    (b"type: LAUNCH\ntarget: ALL\n", NAME, "unknown signal type 'LAUNCH'"),
    (b"target: ALL\n", NAME, "missing field 'type'"),
    (b"type: STEER\ntarget: ALL\n", NAME, "a STEER signal needs a message"),
    (b"type: INFO\ntarget: ../x\nmessage: m\n", NAME, "target '../x' is not a valid name"),
    (b"type: INFO\ntarget: a/b\nmessage: m\n", NAME, "target 'a/b' is not a valid name"),
    (b"type: [STEER\n", NAME, "YAML syntax error"),
    (b"- STEER\n", NAME, "a signal is a YAML mapping"),
    (b"type: STEER\ntype: INFO\ntarget: ALL\nmessage: m\n", NAME, "duplicate"),
    (b"type: STEER\ntarget: ALL\nmessage: \xff\xfe\n", NAME, "not UTF-8"),
    (b"type: APPROVE\ntarget: ALL\niteration: -1\n", NAME, "iteration must be"),
    (b"type: APPROVE\ntarget: ALL\niteration: true\n", NAME, "iteration must be"),
    (b"type: PAUSE\ntarget: ALL\ntask: [T1]\n", NAME, "task must be a task id"),
    (b"type: PAUSE\ntarget: ALL\ntask: ../T1\n", NAME, "task '../T1' is not a valid name"),
    (b"", NAME, "empty"),
])
def test_malformed_signals_say_why(raw: bytes, name: str, reason: str) -> None:
    with pytest.raises(SignalError) as info:
        parse_signal(raw, name)
    assert reason in str(info.value)


def test_too_large_a_signal_is_refused() -> None:
    raw = b"type: INFO\ntarget: ALL\nmessage: " + b"x" * MAX_SIGNAL_BYTES + b"\n"
    with pytest.raises(SignalError, match="signals are limited to"):
        parse_signal(raw, NAME)


@pytest.mark.parametrize("bad", ["", "..", "a/b", "../etc", ".hidden", "a..b", "x" * 129,
                                 "a b", "a\\b"])
def test_identifiers_cannot_leave_their_folder(bad: str) -> None:
    with pytest.raises(SignalError):
        check_identifier(bad, "session id")
    assert check_identifier("Ralph-Executor_2.v1", "target") == "Ralph-Executor_2.v1"


# -- the mailbox -----------------------------------------------------------------------------


def test_post_creates_private_folders_and_renames_into_inputs(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    signal = make_signal("STEER", message="use bar", now=NOW, random_part="abcd")
    path = mailbox.post(signal)
    assert path == mailbox.inputs / NAME
    assert list(mailbox.tmp.iterdir()) == []
    for folder in (mailbox.root, mailbox.inputs, mailbox.processed, mailbox.rejected):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert parse_signal(path.read_bytes(), NAME) == signal


def test_the_first_claim_wins_and_finish_appends_metadata(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    signal = make_signal("INFO", message="fyi", now=NOW, random_part="abcd")
    mailbox.post(signal)
    first = mailbox.claim(NAME, "1.aa.host")
    assert first is not None
    assert mailbox.claim(NAME, "2.bb.host") is None  # the source is gone
    final = mailbox.finish(first, {"handled_by": "me", "handled_at": "t",
                                   "action_taken": "noted"})
    data = yaml.safe_load(final.read_text())
    assert data["type"] == "INFO" and data["message"] == "fyi"
    assert data["handling_metadata"] == {"handled_by": "me", "handled_at": "t",
                                         "action_taken": "noted"}
    assert list((mailbox.claims / "1.aa.host").iterdir()) == []
    assert read_metadata(final) == data["handling_metadata"]


def test_a_mailbox_is_idle_with_nothing_waiting_and_no_claim_held(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    assert mailbox.idle()
    mailbox.post(make_signal("INFO", message="fyi", now=NOW, random_part="abcd"))
    assert not mailbox.idle()  # waiting in inputs/
    claim = mailbox.claim(NAME, "1.aa.host")
    assert claim is not None and not mailbox.idle()  # being handled
    mailbox.finish(claim, {"handled_by": "me", "handled_at": "t", "action_taken": "noted"})
    assert mailbox.idle()  # handled: processed/ does not count, nor the empty claims folder
    (mailbox.inputs / ".hidden").write_text("x")
    assert mailbox.idle()  # hidden files are no signals


def test_rejection_keeps_the_file_and_writes_the_reason(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    (mailbox.inputs / NAME).write_bytes(b"type: LAUNCH\n")
    assert mailbox.reject(NAME, "unknown signal type") == mailbox.rejected / NAME
    assert (mailbox.rejected / NAME).read_bytes() == b"type: LAUNCH\n"
    assert (mailbox.rejected / f"{NAME}.reason").read_text() == "unknown signal type\n"
    assert mailbox.reject(NAME, "again") is None


# -- the consumer, inline -----------------------------------------------------------------------


def _post(mailbox: Mailbox, kind: str, target: str = "ALL", message: str | None = "m",
          rand: str = "0000", second: int = 5) -> Signal:
    signal = make_signal(kind, target, message, now=NOW.replace(second=second),
                         random_part=rand)
    mailbox.post(signal)
    return signal


def test_routing_by_target_and_type_leaves_the_rest_in_inputs(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    mine = _post(mailbox, "STEER", "Ralph-Executor", rand="a1", second=1)
    everyone = _post(mailbox, "PAUSE", message=None, rand="a2", second=2)
    other = _post(mailbox, "INFO", "Ralph-Reviewer", rand="a3", second=3)
    approve = _post(mailbox, "APPROVE", message=None, rand="a4", second=4)
    delivered: list[str] = []
    consumer = Consumer(watch=False)
    consumer.add(Subscription(mailbox, lambda s, at: delivered.append(s.id) or "ok",
                              identity="Ralph-Executor", handled_by="Ralph-v2-Executor"))
    consumer.run_once()
    assert delivered == [mine.id, everyone.id]  # FIFO by timestamp
    assert sorted(mailbox.pending()) == sorted([other.file_name, approve.file_name])
    meta = read_metadata(mailbox.processed / mine.file_name)
    assert meta is not None and meta["handled_by"] == "Ralph-v2-Executor"
    assert meta["action_taken"] == "ok" and meta["signal_id"] == mine.id


def test_state_specific_signals_wait_until_a_state_accepts_them(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    approve = _post(mailbox, "APPROVE", message=None, rand="b1")
    in_approval = threading.Event()
    delivered: list[str] = []
    consumer = Consumer(watch=False)
    consumer.add(Subscription(mailbox, lambda s, at: delivered.append(s.type) or "promoted",
                              types=("APPROVE", "SKIP", "STEER"),
                              accepts=lambda s: s.type == "STEER" or in_approval.is_set()))
    consumer.run_once()
    assert delivered == [] and mailbox.pending() == [approve.file_name]
    in_approval.set()  # the session entered KNOWLEDGE_APPROVAL
    consumer.run_once()
    assert delivered == ["APPROVE"] and mailbox.pending() == []


def test_a_failing_delivery_keeps_the_claim_and_is_retried(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    signal = _post(mailbox, "ABORT", message=None, rand="c1")
    attempts: list[str] = []

    def deliver(s: Signal, at: str) -> str:
        attempts.append(s.id)
        if len(attempts) == 1:
            raise RuntimeError("store unavailable")
        return "aborted"

    consumer = Consumer(watch=False)
    consumer.add(Subscription(mailbox, deliver))
    consumer.run_once()
    assert not mailbox.is_finished(signal.file_name)
    assert [p.name for p in (mailbox.claims / consumer.owner).iterdir()] == [signal.file_name]
    consumer.run_once()
    assert attempts == [signal.id, signal.id]
    assert mailbox.is_finished(signal.file_name)
    assert consumer.stats.failures == 1 and consumer.stats.handled == 1


def test_a_consumer_names_its_claims_with_the_host_owner_id(tmp_path: Path) -> None:
    consumer = Consumer(watch=False)
    parsed = parse_owner(consumer.owner)
    assert parsed is not None and parsed.pid == os.getpid() and parsed.start is not None
    assert parsed.host == os.uname().nodename


def test_claims_of_a_dead_consumer_with_a_reused_pid_are_adopted(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    signal = _post(mailbox, "INFO", rand="r1")
    live = os.getppid()  # alive, but it started at another time than the claim says
    owner = f"{os.uname().nodename}:{live}-{int(start_ticks(live) or 0) + 1}:consumer-old"
    assert mailbox.claim(signal.file_name, owner) is not None
    consumer = Consumer(watch=False)
    consumer.add(Subscription(mailbox, lambda s, at: "ok"))
    consumer.run_once()
    assert consumer.stats.adopted == 1 and mailbox.is_finished(signal.file_name)
    assert not (mailbox.claims / owner).exists()


def test_claims_of_a_dead_consumer_are_adopted_once(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    signal = _post(mailbox, "INFO", rand="d1")
    dead = subprocess.Popen(["true"])
    dead.wait()
    owner = f"{dead.pid}.dead00.{os.uname().nodename}"  # a consumer's older folder name
    assert mailbox.claim(signal.file_name, owner) is not None  # then it died
    handled: list[Handled] = []
    consumer = Consumer(watch=False, on_handled=handled.append)
    consumer.add(Subscription(mailbox, lambda s, at: "ok"))
    consumer.run_once()
    assert [h.signal.id for h in handled] == [signal.id]
    assert consumer.stats.adopted == 1
    assert not (mailbox.claims / owner).exists()
    consumer.run_once()
    assert len(handled) == 1


@pytest.mark.parametrize("fmt", ["{host}:{pid}-{start}:live00", "{pid}.live00.{host}"])
def test_claims_of_a_live_consumer_are_left_alone(tmp_path: Path, fmt: str) -> None:
    """Either id format: the one of host/owners, or a consumer's older folder name."""
    mailbox = Mailbox(tmp_path / "s1")
    signal = _post(mailbox, "INFO", rand="e1")
    pid = os.getppid()
    owner = fmt.format(host=os.uname().nodename, pid=pid, start=start_ticks(pid))
    assert mailbox.claim(signal.file_name, owner) is not None
    consumer = Consumer(watch=False)
    consumer.add(Subscription(mailbox, lambda s, at: "ok"))
    consumer.run_once()
    assert consumer.stats.adopted == 0
    assert (mailbox.claims / owner / signal.file_name).exists()


def test_the_watching_consumer_handles_a_signal_as_it_lands(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    got = threading.Event()
    seen: list[str] = []

    def deliver(s: Signal, at: str) -> str:
        seen.append(s.id)
        got.set()
        return "ok"

    # A scan interval far longer than the test: only the inotify hint can deliver it.
    with Consumer(scan_interval=3600) as consumer:
        consumer.add(Subscription(mailbox, deliver))
        signal = _post(mailbox, "STEER", rand="f1")
        assert got.wait(10)
    assert seen == [signal.id]


# -- the CLI ------------------------------------------------------------------------------------


def test_signal_and_consume_from_the_command_line(cli: Cli, tmp_path: Path) -> None:
    session = tmp_path / "s1"
    posted = cli("signal", str(session), "steer", "use bar", "--target", "Ralph-Executor",
                 "--create")
    assert posted.returncode == 0, posted.stderr
    signal_id = posted.stdout.strip()
    assert (session / "signals" / "inputs" / f"signal.{signal_id}.yaml").is_file()
    stale = session / "signals" / "inputs" / "signal.260101-000000.yaml"
    stale.write_text("type: STEER\n")
    os.utime(stale, (0, 0))  # written long ago: not a file still being written
    consumed = cli("mailbox", "consume", str(session), "--as", "Ralph-Executor", "--json",
                   "--once")
    assert consumed.returncode == 0, consumed.stderr
    lines = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert [(d["id"], d["type"], d["handled_by"]) for d in lines] == [
        (signal_id, "STEER", "Ralph-Executor")]
    assert "rejected signal.260101-000000.yaml: a STEER signal needs a message" in consumed.stderr
    assert (session / "signals" / "rejected" / "signal.260101-000000.yaml.reason").is_file()


def test_signal_wait_prints_the_receipt_or_times_out(cli: Cli, tmp_path: Path) -> None:
    session = tmp_path / "s1"
    consumer = subprocess.Popen(cli_argv("mailbox", "consume", str(session), "--count", "1"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (session / "signals" / "inputs").mkdir(parents=True, exist_ok=True)
        waited = cli("signal", str(session), "INFO", "fyi", "--wait", "30")
        assert waited.returncode == 0, waited.stderr
        receipt = json.loads(waited.stdout)
        assert receipt["handled"] is True and receipt["handled_by"] == "interlock"
        consumer.communicate(timeout=30)
        assert consumer.returncode == 0
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.communicate()
    timed_out = cli("signal", str(session), "INFO", "nobody listens", "--wait", "0.5")
    assert timed_out.returncode == 124
    assert "stays in inputs/" in timed_out.stderr


def test_bad_cli_input_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    for args, message in [
        (("signal", str(tmp_path), "LAUNCH"), "unknown signal type 'LAUNCH'"),
        (("signal", str(tmp_path), "STEER"), "a STEER signal needs a message"),
        (("signal", str(tmp_path), "INFO", "m", "--target", "../x"), "is not a valid name"),
        (("mailbox", "consume", str(tmp_path / "nope")), "no session folder"),
        (("mailbox", "consume", str(tmp_path), "--types", "STEER,NOPE"), "unknown NOPE"),
    ]:
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr
        assert "Traceback" not in result.stderr


def test_a_fresh_malformed_file_may_still_be_being_written(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    half = mailbox.inputs / NAME
    half.write_text("type: STEER\n")  # an editor writing straight into inputs/
    consumer = Consumer(watch=False)
    consumer.add(Subscription(mailbox, lambda s, at: "ok"))
    consumer.run_once()
    assert mailbox.pending() == [NAME]  # left alone for now
    os.utime(half, (0, 0))  # nobody touched it since: it is what it is
    consumer.run_once()
    assert mailbox.pending() == []
    reason = (mailbox.rejected / f"{NAME}.reason").read_text()
    assert reason.startswith("a STEER signal needs a message")


def test_a_killed_consumer_not_yet_reaped_counts_as_dead(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path / "s1")
    signal = _post(mailbox, "INFO", rand="z1")
    child = subprocess.Popen(["sleep", "600"])
    try:
        owner = f"{os.uname().nodename}:{child.pid}-{start_ticks(child.pid)}:zz0000"
        assert mailbox.claim(signal.file_name, owner) is not None
        consumer = Consumer(watch=False)
        consumer.add(Subscription(mailbox, lambda s, at: "ok"))
        consumer.run_once()
        assert consumer.stats.adopted == 0  # alive: its claim is its own
        child.kill()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie now, not reaped
        consumer.run_once()
        assert consumer.stats.adopted == 1 and mailbox.is_finished(signal.file_name)
    finally:
        child.kill()
        child.wait()
