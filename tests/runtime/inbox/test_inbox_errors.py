"""Bad config, unreachable servers, bad ids: clear errors, nothing lost."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from interlock.machines.diagnostics import SpecError
from interlock.runtime.config.inbox import load_poller_config
from interlock.runtime.config.inbox_store import InboxConfigError, parse_store_url
from interlock.runtime.inbox import api
from interlock.runtime.inbox.connection import connect
from interlock.runtime.inbox.http import HttpInbox
from interlock.runtime.inbox.model import InboxUnavailable, InvalidTransition, Status


@pytest.mark.parametrize(("url", "expected"), [
    ("http://", "HTTP baseUrl 'http://': no host"),
    ("http://host:99999", "port is not a number"),
    ("arango://host:8529", "database is missing"),
    ("arango://host:8529/db", "messagesCollection is missing"),
    ("arango://host:8529/db?messagesCollection=9bad", "not a valid collection name"),
    ("arango://:8529/db?messagesCollection=m", "no host"),
    ("postgresql:///db", "needs a host"),
    ("sqlite://", "names no file"),
    ("ftp://x/y", "unsupported scheme 'ftp'"),
    ("mysql://u:secret@h/db", "unsupported scheme"),
])
def test_bad_store_urls_say_which_part(url: str, expected: str) -> None:
    with pytest.raises(InboxConfigError, match=expected) as info:
        parse_store_url(url)
    assert "secret" not in str(info.value)


def test_good_store_urls() -> None:
    arango = parse_store_url("arango+https://u:p%40w@db.example:8530/inbox?"
                             "messagesCollection=messages")
    assert (arango.kind, arango.base_url, arango.database, arango.collection,
            arango.username, arango.password) == (
        "arango", "https://db.example:8530", "inbox", "messages", "u", "p@w")
    assert parse_store_url("http://127.0.0.1:8765/").base_url == "http://127.0.0.1:8765"
    assert parse_store_url("postgresql://u@h:5432/db").kind == "postgresql"
    assert parse_store_url(None, Path("/p")).path == Path("/p/.interlock/inbox.db")
    assert parse_store_url("x/inbox.db", Path("/p")).path == Path("/p/x/inbox.db")


def test_poller_config_is_opt_in_and_points_at_the_line(tmp_path: Path) -> None:
    project = tmp_path / "interlock.yaml"
    project.write_text("dispatch: {}\n")
    assert load_poller_config(project) is None
    project.write_text("inbox:\n  interval: 2m\n  store: sqlite:///x.db\n")
    config = load_poller_config(project)
    assert config is not None and config.interval == 120.0 and config.lease == 300.0
    project.write_text("inbox:\n  interval: soon\n  store: arango://h/db\n  colour: red\n")
    with pytest.raises(SpecError) as info:
        load_poller_config(project)
    text = "\n".join(str(d) for d in info.value.diagnostics)
    assert f"{project}:2:13" in text and "inbox.interval" in text
    assert f"{project}:3:10" in text and "inbox.store" in text
    assert "messagesCollection is missing" in text
    assert "inbox.colour: unknown key" in text


def test_unresponsive_server_times_out_per_request() -> None:
    """A server that accepts connections and never answers: the request gives up after
    its timeout instead of hanging."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # never accept(): connects succeed, no reply ever comes
        port = listener.getsockname()[1]
        inbox = HttpInbox(f"http://127.0.0.1:{port}", timeout=0.5)
        started = time.monotonic()
        with pytest.raises(InboxUnavailable, match=r"did not answer within 0\.5 s"):
            inbox.fetch_queued(10)
        assert time.monotonic() - started < 5.0
        inbox.close()


def test_refused_connection_is_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(InboxUnavailable, match="cannot reach the inbox"):
            connect(f"http://127.0.0.1:{port}", timeout=2).list()


def test_unreachable_postgres_is_unavailable_and_names_no_password() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(InboxUnavailable, match=f"127.0.0.1:{port}") as info:
            connect(f"postgresql://u:hunter2@127.0.0.1:{port}/db", timeout=2)
    assert "hunter2" not in str(info.value)


def test_a_refused_update_loses_nothing(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path / 'inbox.db'}"
    message_id = api.post_message("t", "alice", "keep me", store=store)
    api.mark_message(message_id, Status.DONE, store=store)
    with pytest.raises(InvalidTransition):
        api.mark_message(message_id, "acked", store=store)
    (message,) = api.list_messages(store=store)
    assert (message.id, message.status, message.body) == (message_id, Status.DONE, "keep me")
