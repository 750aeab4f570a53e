"""``interlock ui`` over HTTP, served by a real uvicorn on a free port: its pages and JSON,
the guard (the token, the Host name, cross-site POSTs), the session's files (nothing
outside its folders), the actions and what they answer, and the event streams."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from interlock import runtime

from support.ui import UiServer, ask_session


@pytest.fixture
def project(tmp_path: Path) -> Path:
    ask_session(tmp_path)  # a1: stopped in `answered`, one invocation done
    return tmp_path


@pytest.fixture
def server(project: Path) -> Iterator[UiServer]:
    with UiServer(project) as served:
        yield served


def _post(server: UiServer, path: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    sent = {"content-type": "application/json", "x-csrf-token": server.csrf, **headers}
    return httpx.post(server.url + path, content=json.dumps(body), headers=sent)


def _raw_get(server: UiServer, path: str) -> int:
    """GET ``path`` as written (no client normalizes its ``..``): the status code."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                     .encode())
        head = sock.recv(4096).decode("latin-1")
    return int(head.split(" ", 2)[1])


def test_the_pages_and_their_json(server: UiServer) -> None:
    page = httpx.get(server.url + "/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert '"id": "a1"' in page.text  # the rows the page starts from
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert page.headers["x-content-type-options"] == "nosniff"
    session = httpx.get(server.url + "/s/a1")
    assert session.status_code == 200
    assert 'data-state="answered" data-active="true"' in session.text
    data = httpx.get(server.url + "/api/s/a1").json()
    assert data["info"]["active"] == ["answered"] and data["listening"] == ["again"]
    [invocation] = data["invocations"]
    assert "prompt" not in invocation and invocation["outcome"] == "done"
    full = httpx.get(f"{server.url}/api/s/a1/invocations/{invocation['id']}").json()
    assert full["prompt"] == "What is it? six by nine" and full["answer"]["v"] == "GO"
    rows = httpx.get(server.url + "/api/sessions").json()
    assert [r["id"] for r in rows] == ["a1"] and rows[0]["status"] == "stopped"
    assert httpx.get(server.url + "/static/session.js").status_code == 200


def test_an_unknown_session_is_a_404_page(server: UiServer) -> None:
    page = httpx.get(server.url + "/s/nope")
    assert page.status_code == 404 and "no session &#39;nope&#39;" in page.text
    assert httpx.get(server.url + "/api/s/nope").status_code == 404
    assert httpx.get(server.url + "/events/s/nope").status_code == 404
    assert httpx.get(server.url + "/s/a1/files/session/nope").status_code == 404
    assert httpx.get(server.url + "/api/s/a1/invocations/nope").status_code == 404


def test_a_session_file_is_served_as_text(server: UiServer) -> None:
    reply = httpx.get(server.url + "/s/a1/files/session/invocations/0001-ask/stdout")
    assert reply.status_code == 200 and reply.text == "p: six times nine\nv: GO\n"
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"
    assert reply.headers["x-content-type-options"] == "nosniff"


def test_no_path_leads_out_of_the_session_folder(server: UiServer, project: Path) -> None:
    (project / "secret.txt").write_text("secret")
    folder = project / ".interlock" / "sessions" / "a1"
    (folder / "escape.txt").symlink_to(project / "secret.txt")
    (folder / "up").symlink_to(project)
    base = "/s/a1/files/session/"
    for path in ("../../../secret.txt", "invocations/../../../../secret.txt",
                 "%2e%2e/%2e%2e/%2e%2e/secret.txt", "..%2f..%2f..%2fsecret.txt",
                 "escape.txt", "up/secret.txt", "%2Fetc%2Fpasswd", "invocations"):
        assert _raw_get(server, base + path) == 404, path
        assert httpx.get(server.url + base + path).status_code == 404, path
    assert _raw_get(server, base + "invocations/0001-ask/stdin") == 200


def test_a_token_is_asked_for_on_every_request(project: Path) -> None:
    with UiServer(project, token="s3cret") as served:
        for path in ("/", "/s/a1", "/api/sessions", "/static/app.css", "/events/sessions"):
            assert httpx.get(served.url + path).status_code == 401, path
        assert httpx.get(served.url + "/?token=wrong").status_code == 401
        assert _post(served, "/s/a1/cancel", {}).status_code == 401
        with httpx.Client(follow_redirects=True) as client:  # the URL printed, then the cookie
            first = client.get(served.url + "/s/a1?token=s3cret")
            assert first.status_code == 200 and first.url.path == "/s/a1"
            assert "token" not in str(first.url)
            assert client.get(served.url + "/api/sessions").status_code == 200
        bearer = {"authorization": "Bearer s3cret"}
        assert httpx.get(served.url + "/api/sessions", headers=bearer).status_code == 200


def test_another_host_name_is_refused(server: UiServer) -> None:
    """A page of another site whose name resolves to 127.0.0.1 (DNS rebinding) gets
    nothing."""
    evil = httpx.get(server.url + "/api/sessions", headers={"host": "evil.example:80"})
    assert evil.status_code == 421
    assert httpx.get(server.url + "/", headers={"host": "localhost"}).status_code == 200


def test_a_cross_site_post_is_refused(server: UiServer, project: Path) -> None:
    before = runtime.sync.log("a1", root=project)
    evil = {"origin": "http://evil.example"}
    for headers, body in ((evil, {"event": "again"}),
                          ({"sec-fetch-site": "cross-site"}, {"event": "again"}),
                          ({"x-csrf-token": "guessed"}, {"event": "again"}),
                          ({"origin": "null"}, {"event": "again"})):
        refused = _post(server, "/s/a1/send", body, **headers)
        assert refused.status_code == 403 and "cross-site" in refused.text, headers
    form = httpx.post(server.url + "/s/a1/cancel", data={"reason": "x"})  # a plain form
    assert form.status_code == 403
    assert runtime.sync.log("a1", root=project) == before
    assert runtime.sync.status("a1", root=project).queued == 0
    assert httpx.request("PUT", server.url + "/s/a1/send").status_code == 405


def test_actions_say_what_happened(server: UiServer, project: Path) -> None:
    same = {"origin": server.url, "sec-fetch-site": "same-origin"}
    queued = _post(server, "/s/a1/send", {"event": "again"}, **same).json()
    assert queued["outcome"] == "queued" and "stopped" in queued["detail"]
    rejected = _post(server, "/s/a1/send", {"event": "nope"}).json()
    assert rejected["outcome"] == "rejected" and "takes: again" in rejected["detail"]
    bad = _post(server, "/s/a1/send", {"event": "again", "data": "{oops"})
    assert bad.status_code == 400 and "not JSON" in bad.json()["detail"]
    signal = _post(server, "/s/a1/signal", {"type": "INFO", "message": "hello"}).json()
    assert signal["outcome"] == "queued" and "INFO" in signal["detail"]
    inputs = project / ".interlock" / "sessions" / "a1" / "signals" / "inputs"
    assert len(list(inputs.glob("*.yaml"))) == 1
    for_one = _post(server, "/s/a1/signal", {"type": "STEER", "message": "m", "task": "T2"})
    assert for_one.json()["outcome"] == "queued"
    assert "task: T2" in max(inputs.glob("*.yaml")).read_text()  # as --task posts it
    wrong = _post(server, "/s/a1/signal", {"type": "SHOUT"}).json()
    assert wrong["outcome"] == "rejected" and "unknown signal type" in wrong["detail"]
    cancelled = _post(server, "/s/a1/cancel", {"reason": "enough"}).json()
    assert cancelled["outcome"] == "taken"
    assert runtime.sync.status("a1", root=project).status == "cancelled"
    again = _post(server, "/s/a1/cancel", {}).json()
    assert again["outcome"] == "rejected" and "cancelled" in again["detail"]
    assert _post(server, "/s/nope/cancel", {}).status_code == 404
    not_json = httpx.post(server.url + "/s/a1/send", content="event=again", headers={
        "x-csrf-token": server.csrf, "content-type": "application/x-www-form-urlencoded"})
    assert not_json.status_code == 415


def test_resume_starts_a_runner_for_a_stopped_session(server: UiServer,
                                                      project: Path) -> None:
    runtime.sync.send("a1", "again", root=project)  # queued: the resumed runner takes it
    resumed = _post(server, "/s/a1/resume", {}).json()
    assert resumed["outcome"] == "taken", resumed

    def events() -> list[str | None]:
        return [e.event for e in runtime.sync.log("a1", root=project) if e.kind == "event"]

    try:
        deadline = time.monotonic() + 20
        while events()[-2:] != ["again", "done.invoke.ask"]:  # taken, its invoke answered
            assert time.monotonic() < deadline, events()
            time.sleep(0.05)
    finally:  # the runner the page started outlives the page: stopped here either way
        runtime.sync.cancel("a1", root=project)


def _events(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    name = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: ") and name is not None:
            yield name, json.loads(line[6:])
            name = None


def test_the_session_stream_sends_each_step_as_it_is_committed(project: Path) -> None:
    runner = subprocess.Popen([sys.executable, "-m", "interlock.runtime.cli", "resume", "a1"],
                              cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while runtime.sync.status("a1", root=project).status != "running":
            assert time.monotonic() < deadline and runner.poll() is None
            time.sleep(0.05)
        with UiServer(project) as served, \
                httpx.stream("GET", served.url + "/events/s/a1", timeout=20) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            seen: list[str] = []
            for name, data in _events(stream):
                seen.append(name)
                if name == "session" and "again" not in seen:
                    runtime.sync.send("a1", "again", root=project)  # a step, live
                    seen.append("again")
                if name == "entry" and data["event"] == "done.invoke.ask" \
                        and "again" in seen:
                    break
            assert seen.count("session") >= 1
    finally:
        runner.terminate()
        runner.wait(10)


def test_the_sessions_stream_sends_what_changed(server: UiServer, project: Path) -> None:
    with httpx.stream("GET", server.url + "/events/sessions?version=0", timeout=20) as stream:
        events = _events(stream)
        name, first = next(events)
        assert name == "rows" and first["reset"] and [r["id"] for r in first["upsert"]] == ["a1"]
        runtime.sync.create(project / "ask.yaml", session_id="a2", root=project)
        name, change = next(events)
        assert name == "rows" and [r["id"] for r in change["upsert"]] == ["a2"]
        assert change["version"] == first["version"] + 1 and not change.get("reset")


def test_the_inbox_page_lists_and_marks_messages(tmp_path: Path,
                                                 tmp_path_factory: pytest.TempPathFactory
                                                 ) -> None:
    """A project whose interlock.yaml has `inbox:`: its messages, and ack/done/failed."""
    (tmp_path / "interlock.yaml").write_text("inbox:\n  store: inbox.db\n")
    store = f"sqlite://{tmp_path / 'inbox.db'}"
    first = runtime.post_message("review", "alice", "look at <b>PR 7</b>",
                                 correlation_id="pr-7", store=store)
    with UiServer(tmp_path) as served:
        page = httpx.get(served.url + "/inbox")
        assert page.status_code == 200 and "inbox.db" in page.text
        [message] = httpx.get(served.url + "/api/inbox").json()
        assert (message["id"], message["from"], message["status"], message["correlation_id"]
                ) == (first, "alice", "queued", "pr-7")
        acked = _post(served, f"/inbox/{first}", {"status": "acked"}).json()
        assert acked["outcome"] == "taken" and "acked" in acked["detail"]
        again = _post(served, f"/inbox/{first}", {"status": "queued"}).json()
        assert again["outcome"] == "rejected"
        assert httpx.get(served.url + "/api/inbox?status=acked").json()[0]["id"] == first
    with UiServer(tmp_path_factory.mktemp("bare")) as bare:  # no interlock.yaml: no inbox
        assert "The inbox is off here" in httpx.get(bare.url + "/inbox").text
        assert httpx.get(bare.url + "/api/inbox").status_code == 404
