"""``interlock ui`` in a real browser: Debian's headless Chromium driven by Playwright, one
browser per worker (started once, connected to by this module), against the real server
(uvicorn in this process) and real sessions (``ralph run`` as a process with the demo
agents). Every page a test opens is watched: no request may leave 127.0.0.1, no dialog
may open, no script may fail. Screenshots go to .cache/ui-screenshots/."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from interlock import runtime

from support.ralph_e2e import SLOW, finish, processed, project, session, start, state
from support.ui import (
    UiServer,
    ask_session,
    browser_context,
    chromium_process,
    in_thread,
    shot,
)

WAIT = 45_000  # ms: the longest wait for the page to show what a session did


@pytest.fixture(scope="session")
def chromium_endpoint() -> Iterator[str]:
    """One Chromium per worker, for the whole run."""
    with chromium_process() as endpoint:
        yield endpoint


@pytest.fixture(scope="module")
def browser(chromium_endpoint: str) -> Iterator[Any]:
    """Playwright connected to it while this module's tests run (Playwright's event loop
    would be in the way of the other modules' ``runtime.sync`` calls)."""
    with browser_context(chromium_endpoint) as context:
        yield context


class Watched:
    """A page, with every request and dialog it caused."""

    def __init__(self, page: Any, server: UiServer) -> None:
        self.page = page
        self.server = server
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("dialog", self._dialog)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def open(self, path: str) -> Any:
        self.page.goto(self.server.url + path)
        return self.page

    def lit(self) -> list[str]:
        """The states the chart shows active (leaves, not compound states)."""
        return list(self.page.locator('[data-kind="state"][data-active="true"]').evaluate_all(
            "gs => gs.map(g => g.dataset.state)"))

    def wait_lit(self, state: str) -> None:
        self.page.wait_for_selector(f'[data-state="{state}"][data-active="true"]',
                                    state="attached", timeout=WAIT)


@pytest.fixture
def watched(browser: Any) -> Iterator[Callable[[UiServer], Watched]]:
    pages: list[Watched] = []

    def make(server: UiServer) -> Watched:
        page = Watched(browser.new_page(), server)
        pages.append(page)
        return page

    yield make
    for page in pages:
        page.page.close()
        outside = [url for url in page.requests
                   if not url.startswith(page.server.url + "/") and url != "data:,"]
        assert not outside, f"requests left 127.0.0.1: {outside}"
        assert not page.dialogs, f"dialogs opened: {page.dialogs}"
        assert not page.errors, f"the page's scripts failed: {page.errors}"


def _wait_for(check: Callable[[], bool], what: str, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"waiting for {what}"
        time.sleep(0.05)


def _in_store(root: Path, session_id: str) -> bool:
    try:
        in_thread(runtime.sync.status, session_id, root=root)
    except runtime.NotFound:
        return False
    return True


RECORD_LIT = """{
  window.litSeen = [];
  document.addEventListener("interlock:step", () => {
    const lit = [...document.querySelectorAll('[data-kind="state"][data-active="true"]')]
      .map((g) => g.dataset.state).join(",");
    if (window.litSeen[window.litSeen.length - 1] !== lit) window.litSeen.push(lit);
  });
}"""  # every step the page shows, from the first it replays


def test_a_ralph_session_lit_live_paused_resumed_and_approved_from_the_page(
        tmp_path: Path, watched: Callable[[UiServer], Watched]) -> None:
    project(tmp_path, SLOW, ralph="knowledge_approval_timeout: 10m",
            request="write the parser")
    with UiServer(tmp_path) as server:
        view = watched(server)
        proc = start(tmp_path, "ralph", "run", "s")
        _wait_for(lambda: _in_store(tmp_path, "s"), "the session in the store")
        view.page.add_init_script(RECORD_LIT)
        page = view.open("/s/s")
        view.wait_lit("invoking_executor")  # the lit state follows the session
        page.get_by_role("button", name="Pause").click()
        page.wait_for_selector("#outcome[data-outcome]", timeout=WAIT)
        view.wait_lit("PAUSED")
        page.wait_for_selector('#status[data-status="paused"]', timeout=WAIT)
        assert state(tmp_path) == "PAUSED"
        page.get_by_role("button", name="Resume").click()
        view.wait_lit("awaiting_approval")  # it went on: reviewed, waits for approval
        assert "taken" in page.locator("#outcome").inner_text()
        page.wait_for_function("document.getElementById('ralph-facts').textContent"
                               ".includes('KNOWLEDGE_APPROVAL')", timeout=WAIT)
        page.evaluate("document.getElementById('h-chart').scrollIntoView()")
        shot(page, "ralph-session", full_page=False)  # the README's docs/ui.png
        shot(page, "ralph-session-approval")
        page.get_by_role("button", name="Approve knowledge").click()
        view.wait_lit("COMPLETE")
        page.wait_for_selector('body[data-ended="true"]', state="attached", timeout=WAIT)
        shot(page, "ralph-session-complete")
        code, err = finish(proc)
        assert code == 0, err
        seen = page.evaluate("window.litSeen")
        order = ["invoking_executor", "PAUSED", "invoking_reviewer", "awaiting_approval",
                 "promoting", "COMPLETE"]
        leaves = [lit for lit in seen if lit in order]
        assert [s for s in order if s in leaves] == order, seen
        assert view.lit() == ["COMPLETE"]
        # the sessions page folds the subagents under the session
        listing = view.open("/")
        listing.get_by_role("button", name="unfold the").click()
        assert listing.locator("tr.child").count() >= 4
    assert sorted((tmp_path / ".docs").iterdir())  # the knowledge promoted
    archived = processed(tmp_path)
    assert [s["type"] for s in archived] == ["PAUSE", "APPROVE"]  # one file each, once
    assert all(s["handling_metadata"]["handled_by"] for s in archived)
    mailbox = session(tmp_path) / "signals"
    files = sorted(p.name for p in mailbox.rglob("*.yaml"))
    assert files == sorted(p.name for p in (mailbox / "processed").glob("*.yaml"))
    assert len(files) == 2  # nothing left in inputs/, nothing rejected or copied twice


def test_the_questioners_question_answered_in_the_page_reaches_the_replanner(
        tmp_path: Path, watched: Callable[[UiServer], Watched]) -> None:
    (tmp_path / "blocked.yaml").write_text(
        "answers:\n  - {status: blocked, blockers: [needs a database]}\n")
    project(tmp_path, "executor: {cli: demo, script: blocked.yaml}", request="store users")
    with UiServer(tmp_path) as server:
        view = watched(server)
        proc = start(tmp_path, "ralph", "run", "s")
        _wait_for(lambda: _in_store(tmp_path, "s"), "the session in the store")
        page = view.open("/s/s")
        form = page.get_by_role("form", name="the Questioner's questions")
        form.wait_for(timeout=WAIT)
        assert "needs a database" in form.inner_text()
        form.locator("textarea").fill("use sqlite, in a file")
        form.get_by_role("button", name="Answer and go on").click()
        page.wait_for_selector("#outcome[data-outcome]", timeout=WAIT)
        said = page.locator("#outcome").inner_text()
        assert said.startswith("taken: answers: queued for the running session"), said
        code, err = finish(proc)
        assert code == 0, err
    prompts = sorted((session(tmp_path) / "iterations/2/invocations").glob("*-planner.md"))
    assert prompts and "use sqlite, in a file" in prompts[0].read_text()
    assert "use sqlite, in a file" in (session(tmp_path) / "iterations/2/questions.md"
                                       ).read_text()


HOSTILE = ('p: "<img src=x onerror=alert(1)> <script>window.xss = 1; alert(2)</script>"\n'
           "v: GO\n")


def test_what_an_agent_wrote_is_shown_as_text(
        tmp_path: Path, watched: Callable[[UiServer], Watched]) -> None:
    in_thread(ask_session, tmp_path, HOSTILE)
    with UiServer(tmp_path) as server:
        view = watched(server)
        page = view.open("/s/a1")
        details = page.locator("details.invocation").first
        details.locator("summary").click()
        answer = details.locator("pre").filter(has_text="onerror")
        answer.first.wait_for(timeout=WAIT)
        assert "<img src=x onerror=alert(1)>" in answer.first.inner_text()
        assert "<script>window.xss = 1; alert(2)</script>" in details.inner_text()
        assert "onerror=alert(1)" in page.locator("#timeline").inner_text()
        assert page.locator("img").count() == 0  # no element was made of its text
        scripts = page.locator("script").evaluate_all(
            "ss => ss.map(s => `${s.type} ${s.src ? 'file' : 'inline'}`)")
        assert set(scripts) == {"module file", "application/json inline"}  # the page's own
        assert page.evaluate("window.xss") is None
        shot(page, "agent-answer-as-text")
        view.open("/s/a1/files/session/invocations/0001-ask/stdout")
        assert "<img src=x onerror=alert(1)>" in page.locator("body").inner_text()
        assert page.evaluate("window.xss") is None
        shot(page, "agent-file-as-text")
    # the fixture asserts that no dialog opened


def test_the_sessions_page_follows_the_store_and_filters(
        tmp_path: Path, watched: Callable[[UiServer], Watched]) -> None:
    in_thread(ask_session, tmp_path)
    with UiServer(tmp_path) as server:
        view = watched(server)
        page = view.open("/")
        page.wait_for_selector('tr[data-session="a1"]')
        in_thread(runtime.sync.create, tmp_path / "ask.yaml", session_id="a2", root=tmp_path)
        page.wait_for_selector('tr[data-session="a2"]', timeout=WAIT)  # no reload
        in_thread(runtime.sync.cancel, "a1", root=tmp_path)
        page.wait_for_selector('tr[data-session="a1"][data-status="cancelled"]',
                               timeout=WAIT)
        page.select_option("#f-status", "cancelled")
        page.wait_for_function("document.querySelectorAll('#sessions tbody tr').length === 1")
        assert "status=cancelled" in page.url
        page.select_option("#f-status", "")
        page.keyboard.press("Tab")  # the keyboard reaches the skip link first
        assert page.evaluate("document.activeElement.textContent") == "Skip to the content"
        page.set_viewport_size({"width": 390, "height": 844})  # a phone
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
        shot(page, "sessions-phone")
        session_page = view.open("/s/a2")
        assert session_page.evaluate("document.documentElement.scrollWidth <= innerWidth")
        session_page.set_viewport_size({"width": 1280, "height": 900})
        session_page.locator("#send-form input[name=event]").fill("nope")
        session_page.keyboard.press("Enter")  # a form sent from the keyboard
        session_page.wait_for_selector("#outcome[data-outcome=rejected]", timeout=WAIT)
        assert "takes: again" in session_page.locator("#outcome").inner_text()


def test_no_request_leaves_127_0_0_1(tmp_path: Path,
                                     watched: Callable[[UiServer], Watched]) -> None:
    """The network off: every request the pages make is refused unless it is for this
    server, and none is made."""
    in_thread(ask_session, tmp_path)
    refused: list[str] = []
    with UiServer(tmp_path) as server:
        view = watched(server)

        def only_local(route: Any) -> None:
            if route.request.url.startswith(server.url + "/"):
                route.continue_()
            else:
                refused.append(route.request.url)
                route.abort()

        view.page.route("**/*", only_local)
        for path in ("/", "/s/a1", "/inbox", "/s/a1/files/session/invocations/0001-ask/stdin"):
            view.open(path)
            view.page.wait_for_load_state("load")
        page = view.open("/s/a1")
        page.locator("details.invocation summary").first.click()
        page.locator("details.invocation pre").first.wait_for(timeout=WAIT)
        page.locator("#send-form input[name=event]").fill("again")
        page.get_by_role("button", name="Send event").click()
        page.wait_for_selector("#outcome[data-outcome]", timeout=WAIT)
        assert view.requests and all(url.startswith(server.url) for url in view.requests)
    assert refused == []


def test_a_rejected_tasks_correction_given_through_the_review_menu_in_the_page(
        tmp_path: Path, watched: Callable[[UiServer], Watched]) -> None:
    """The review menu and its poller interview (seed 000's questions) as forms: retry,
    the poller's questions, the echo confirmed; the correction is staged, the session
    told, and the task's next Executor gets it."""
    (tmp_path / "reject.yaml").write_text("answers:\n  - {verdict: retry}\n")
    project(tmp_path, "reviewer: {cli: demo, script: reject.yaml}",
            ralph="review_rejections: wait", request="write the parser")
    with UiServer(tmp_path) as server:
        view = watched(server)
        proc = start(tmp_path, "ralph", "run", "s")
        _wait_for(lambda: _in_store(tmp_path, "s"), "the session in the store")
        page = view.open("/s/s")
        page.get_by_role("button", name="Review T1").click(timeout=WAIT)
        for answer in ("retry", "A", "A", "A"):  # as `ralph review --answers` would
            form = page.locator("form.review-form")
            form.wait_for(timeout=WAIT)
            asked = form.locator("legend").inner_text()
            form.locator(f'input[value="{answer}"]').check()
            form.get_by_role("button", name="Answer").click()
            page.wait_for_function(
                "asked => !document.querySelector('form.review-form legend') || "
                "document.querySelector('form.review-form legend').textContent !== asked "
                "|| document.querySelector('#outcome').dataset.outcome === 'rejected'",
                arg=asked, timeout=WAIT)
        ended = page.locator("p.review-end")
        try:
            ended.wait_for(timeout=WAIT)
        except Exception:
            shot(page, "review-failed")
            raise AssertionError(page.locator("#ralph").inner_text()
                                 + page.locator("#outcome").inner_text()) from None
        assert "resolved" in ended.inner_text() and "staged" in ended.inner_text()
        assert "the session was told" in ended.inner_text()
        code, err = finish(proc)
        assert code == 0, err
    executor = sorted((session(tmp_path) / "iterations/2/invocations").glob("*-executor.md"))
    assert "Previous output was corrected by the player (action: retry" in \
        executor[0].read_text()


def test_the_inbox_page_marks_a_message(tmp_path: Path,
                                        watched: Callable[[UiServer], Watched]) -> None:
    (tmp_path / "interlock.yaml").write_text("inbox:\n  store: inbox.db\n")
    first = runtime.post_message("review", "alice", "look at <b>PR 7</b>",
                                 store=f"sqlite://{tmp_path / 'inbox.db'}")
    with UiServer(tmp_path) as server:
        page = watched(server).open("/inbox")
        row = page.locator(f'tr[data-message="{first}"]')
        row.wait_for(timeout=WAIT)
        assert "look at <b>PR 7</b>" in row.inner_text()  # text, as written
        row.get_by_role("button", name=f"mark {first} done").click()
        page.wait_for_selector(f'tr[data-message="{first}"][data-status="done"]',
                               timeout=WAIT)
        assert page.locator("#outcome").inner_text().startswith("taken:")
