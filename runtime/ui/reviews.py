"""The review of a rejected Ralph task from a page: the review menu and its poller
interview (seed 000's question protocol), run by :func:`interlock.runtime.ralph_review`
in a thread of the server, answered through :class:`interlock.runtime.QueuedAnswers`
(each question a form; each answer a POST). When it ends the task is marked corrected
if the session waits for it, as ``interlock ralph review`` does."""

from __future__ import annotations

import asyncio
import secrets
import threading
from typing import TYPE_CHECKING, Any

from interlock import runtime

if TYPE_CHECKING:
    from interlock.runtime.ui.server import UiConfig

__all__ = ["ANSWER_WAIT", "Review", "Reviews"]

ANSWER_WAIT = 60.0  # seconds an answer waits for the next question (the poller thinks)


class Review:
    """One review in progress (or ended): its questions and how it ended."""

    def __init__(self, config: UiConfig, session_id: str, task: str) -> None:
        self.id = secrets.token_hex(8)
        self.session_id = session_id
        self.task = task
        self.answers = runtime.QueuedAnswers()
        self.result: dict[str, Any] | None = None
        self._done = threading.Event()
        self._config = config
        self._thread = threading.Thread(target=self._run, daemon=True,
                                         name=f"review {session_id} {task}")

    def start(self) -> None:
        self._thread.start()

    def _reviewer(self, item: runtime.TaskReview) -> bool:
        if item.report is None:
            self.answers.failed(str(item.missing))
            return False
        outcome = runtime.review_blocking(
            item.report.read_text(encoding="utf-8"), item.node, unit=item.unit,
            front=self.answers, store=self._config.store, root=self._config.root)
        return outcome.resolution != "aborted"

    def _run(self) -> None:
        try:
            results = runtime.ralph_review(self.session_id, self._reviewer, [self.task],
                                           store=self._config.store, root=self._config.root)
            self.result = {"reviewed": any(r.reviewed for r in results),
                           "corrected": any(r.corrected for r in results)}
            if not results:
                self.answers.failed(f"task {self.task} has nothing to review")
        except runtime.InterlockError as exc:
            self.answers.failed(str(exc))
        except Exception as exc:  # the page must hear of it, whatever it was
            self.answers.failed(f"the review stopped: {type(exc).__name__}: {exc}")
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def state(self) -> dict[str, Any]:
        return {"review": self.id, "session": self.session_id, "task": self.task,
                **self.answers.state(), "done": self.done, "result": self.result}

    async def next_state(self, after: int = -1, timeout: float = ANSWER_WAIT
                         ) -> dict[str, Any]:
        """The state once a question asked after version ``after`` waits, or the review
        has ended (then once the task is marked corrected), or after ``timeout``."""

        def wait() -> dict[str, Any]:
            state = self.answers.wait_question(after, timeout)
            if state["question"] is None and self.answers.over:
                self._done.wait(timeout)
            return self.state()

        return await asyncio.to_thread(wait)

    async def answer(self, question_id: str, answer: Any) -> dict[str, Any]:
        """Answer the waiting question; the next state (as :meth:`next_state`)."""
        version = self.answers.answer(question_id, answer)
        return await self.next_state(version)

    def abort(self) -> None:
        self.answers.abort()


class Reviews:
    """The reviews of one server, by id; one at a time per task."""

    def __init__(self, config: UiConfig) -> None:
        self.config = config
        self._reviews: dict[str, Review] = {}
        self._lock = threading.Lock()

    def start(self, session_id: str, task: str) -> Review:
        with self._lock:
            for review in self._reviews.values():
                if (review.session_id, review.task) == (session_id, task) \
                        and not review.done:
                    return review
            review = Review(self.config, session_id, task)
            self._reviews[review.id] = review
        review.start()
        return review

    def get(self, review_id: str) -> Review | None:
        with self._lock:
            return self._reviews.get(review_id)

    def close(self) -> None:
        with self._lock:
            for review in self._reviews.values():
                review.abort()
