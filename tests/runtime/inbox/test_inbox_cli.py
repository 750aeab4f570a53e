"""`interlock inbox ...` as a real process, on SQLite and through `inbox serve`."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from support.cli import Cli
from support.inbox_helpers import server_process


def _post(cli: Cli, store: str, cwd: Path, *extra: str) -> str:
    result = cli("inbox", "post", "--type", "review", "--from", "alice", "--store", store,
                 *extra, "look at PR 7", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_post_list_and_mark(cli: Cli, tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path / 'inbox.db'}"
    first = _post(cli, store, tmp_path, "--correlation-id", "c-1", "--payload-ref", "s3://x")
    second = _post(cli, store, tmp_path)
    listed = cli("inbox", "list", "--store", store, cwd=tmp_path)
    assert listed.returncode == 0
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["id", "type", "from", "status", "correlation_id", "payload_ref"]
    assert rows[0].split() == [first, "review", "alice", "queued", "c-1", "s3://x"]
    assert cli("inbox", "ack", first, "--store", store, cwd=tmp_path).returncode == 0
    done = cli("inbox", "done", first, "--reason", "merged", "--store", store, cwd=tmp_path)
    assert done.returncode == 0 and f"{first} done" in done.stderr
    assert cli("inbox", "failed", second, "--store", store, cwd=tmp_path).returncode == 0
    data = json.loads(cli("inbox", "list", "--json", "--status", "done", "--store", store,
                          cwd=tmp_path).stdout)
    assert [(m["id"], m["from"], m["status"]) for m in data] == [(first, "alice", "done")]


def test_default_store_is_under_dot_interlock(cli: Cli, tmp_path: Path) -> None:
    assert cli("inbox", "post", "--type", "t", "--from", "f", cwd=tmp_path).returncode == 0
    assert (tmp_path / ".interlock" / "inbox.db").is_file()


def test_mistakes_are_one_line_errors(cli: Cli, tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path / 'inbox.db'}"
    message_id = _post(cli, store, tmp_path)
    cli("inbox", "done", message_id, "--store", store, cwd=tmp_path)
    cases = [
        (["inbox", "done", message_id], 1, f"message {message_id}: cannot mark done: it is "
                                           "already done"),
        (["inbox", "ack", "nope"], 2, "bad message id 'nope'"),
        (["inbox", "ack", "f" * 32], 1, f"no message {'f' * 32}"),
        (["inbox", "list", "--status", "finished"], 2, "unknown status 'finished'"),
        (["inbox", "interval", "soon"], 2, "interval 'soon'"),
        (["inbox", "post", "--from", "f"], 2, "--type is required"),
    ]
    for args, code, message in cases:
        result = cli(*args, "--store", store, cwd=tmp_path)
        assert (result.returncode, result.stdout) == (code, ""), (args, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    bad = cli("inbox", "list", "--store", "arango://h:8529/db", cwd=tmp_path)
    assert bad.returncode == 2 and "messagesCollection is missing" in bad.stderr
    (row,) = json.loads(cli("inbox", "list", "--json", "--store", store, cwd=tmp_path).stdout)
    assert row["status"] == "done"


def test_on_off_interval_write_the_settings(cli: Cli, tmp_path: Path) -> None:
    from interlock.runtime.inbox import api

    store = f"sqlite://{tmp_path / 'inbox.db'}"
    assert cli("inbox", "off", "--store", store, cwd=tmp_path).returncode == 0
    assert cli("inbox", "interval", "1m30s", "--store", store, cwd=tmp_path).returncode == 0
    assert api.poll_settings(store=store) == {"enabled": False, "interval": 90.0}
    assert cli("inbox", "on", "--store", store, cwd=tmp_path).returncode == 0
    assert api.poll_settings(store=store)["enabled"] is True


def test_serve_shares_one_store(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "served.db"
    with server_process(f"sqlite://{db}", tmp_path) as (proc, url):
        message_id = _post(cli, url, tmp_path)
        assert cli("inbox", "ack", message_id, "--store", url, cwd=tmp_path).returncode == 0
        again = cli("inbox", "ack", message_id, "--store", url, cwd=tmp_path)
        assert again.returncode == 1 and "cannot mark acked" in again.stderr
        data = json.loads(cli("inbox", "list", "--json", "--store", url, cwd=tmp_path).stdout)
        assert [(m["id"], m["status"]) for m in data] == [(message_id, "acked")]
    assert proc.returncode == 0  # stopped cleanly by SIGTERM
    local = json.loads(cli("inbox", "list", "--json", "--store", f"sqlite://{db}",
                           cwd=tmp_path).stdout)
    assert [m["id"] for m in local] == [message_id]


def test_serve_refuses_bad_config(cli: Cli, tmp_path: Path) -> None:
    bad = cli("inbox", "serve", "--store", "http://127.0.0.1:1", cwd=tmp_path)
    assert bad.returncode == 2 and "serve needs a store" in bad.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        busy = cli("inbox", "serve", "--port", str(port), "--store",
                   f"sqlite://{tmp_path / 'x.db'}", cwd=tmp_path)
    assert busy.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr


def test_unreachable_server_is_a_clear_error(cli: Cli, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        result = cli("inbox", "list", "--store", f"http://127.0.0.1:{port}", cwd=tmp_path)
    assert result.returncode == 1 and "cannot reach the inbox" in result.stderr
    assert "Traceback" not in result.stderr
