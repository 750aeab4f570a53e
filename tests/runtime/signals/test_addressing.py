"""`interlock signal SESSION`: a session id or a folder; unknown ones refused unless --create."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock.runtime.signals.addressing import (
    UnknownSession,
    known_list,
    resolve_mailbox_folder,
)
from interlock.runtime.signals.model import SignalError

from support.cli import Cli

SESSIONS = Path(".interlock") / "sessions"


def test_a_known_session_id_is_its_folder_here(tmp_path: Path) -> None:
    assert resolve_mailbox_folder("s1", tmp_path, ["s1"]) == tmp_path / SESSIONS / "s1"


def test_a_session_folder_counts_as_known(tmp_path: Path) -> None:
    (tmp_path / SESSIONS / "s2").mkdir(parents=True)
    assert resolve_mailbox_folder("s2", tmp_path, []) == tmp_path / SESSIONS / "s2"


def test_an_unknown_id_lists_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / SESSIONS / "nightly").mkdir(parents=True)
    with pytest.raises(UnknownSession) as caught:
        resolve_mailbox_folder("session1", tmp_path, ["session-1", "other"])
    assert str(caught.value) == (
        "unknown session 'session1' (did you mean 'session-1'?); known sessions: nightly, "
        "other, session-1 (use --create to make its mailbox anyway)")
    assert not (tmp_path / SESSIONS / "session1").exists()
    assert resolve_mailbox_folder("session1", tmp_path, [], create=True) == (
        tmp_path / SESSIONS / "session1")


def test_an_unsafe_id_is_refused_even_with_create(tmp_path: Path) -> None:
    for bad in ("a b", "-x", "..x"):
        with pytest.raises(SignalError, match="is not a valid name"):
            resolve_mailbox_folder(bad, tmp_path, [], create=True)


def test_folders_need_a_mailbox_unless_create(tmp_path: Path) -> None:
    (tmp_path / "w" / "signals").mkdir(parents=True)
    assert resolve_mailbox_folder("./w", tmp_path, []) == tmp_path / "w"
    assert resolve_mailbox_folder(str(tmp_path / "w"), Path("/"), []) == tmp_path / "w"
    with pytest.raises(UnknownSession, match=r"^\./nope is not a session folder \(no such "
                       r"folder\); no sessions here yet \(use --create"):
        resolve_mailbox_folder("./nope", tmp_path, [])
    with pytest.raises(UnknownSession, match="no signals/ mailbox in it"):
        resolve_mailbox_folder(".", tmp_path, ["a"])
    assert resolve_mailbox_folder("./nope", tmp_path, [], create=True) == tmp_path / "nope"


def test_known_list_is_short() -> None:
    assert known_list([]) == "no sessions here yet"
    assert known_list([f"s{i:02}" for i in range(25)]).endswith("s19 and 5 more")


def test_the_cli_refuses_an_unknown_session_and_creates_nothing(cli: Cli,
                                                                 tmp_path: Path) -> None:
    refused = cli("signal", "s1", "INFO", "hello", cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr == ("error: unknown session 's1'; no sessions here yet (use "
                              "--create to make its mailbox anyway)\n")
    assert list(tmp_path.iterdir()) == []
    created = cli("signal", "s1", "INFO", "hello", "--create", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    inputs = tmp_path / SESSIONS / "s1" / "signals" / "inputs"
    assert [p.name for p in inputs.iterdir()] == [f"signal.{created.stdout.strip()}.yaml"]
    again = cli("signal", "s1", "STEER", "go", cwd=tmp_path)  # its folder makes it known
    assert again.returncode == 0, again.stderr
    other = cli("signal", "s2", "INFO", "x", cwd=tmp_path)
    assert other.returncode == 1 and "known sessions: s1" in other.stderr
