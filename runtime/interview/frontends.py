"""The script, JSON and queued front ends (the terminal UI is :mod:`.terminal`).

``--answers FILE``: a YAML list, in the order the questions are asked, starting with the
menu choice: an option key, a list of keys for a multi-select, or text. ``<`` is Back,
``abort`` aborts; the list running out aborts too.

``--json``: the first line is ``{"node", "output"}`` (what is reviewed); then each question
is one JSON line on stdout, ``{"session", "id", "kind", "prompt", "options", "back"}``; each
answer one line on stdin, ``{"id": QUESTION_ID, "answer": KEY | [KEYS] | TEXT}``, or
``{"id": ..., "abort": true}``; EOF on stdin aborts. An answer that does not fit is told
(``{"error": ..., "id": ...}``) and the question asked again. The last line is
``{"resolution": ..., "poller_id": ..., "staged": {...} | null}``.

:class:`QueuedAnswers` is answered from another thread (``interlock ui``'s forms).
"""

from __future__ import annotations

import json
import os
import select
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from interlock.runtime.engine.clock import Clock, SystemClock
from interlock.runtime.interview.driver import Aborted, NoAnswer, Outcome
from interlock.runtime.interview.protocol import AnswerValue, ProtocolError, Question

ABORT = "abort"


class AnswersError(ValueError):
    """A ``--answers`` file that cannot be used: one line naming the file and the item."""


def load_answers(path: Path) -> list[AnswerValue]:
    """The answers in a YAML list file (keys, lists of keys, text); AnswersError names
    FILE:LINE:COL of what cannot be used."""
    import yaml

    from interlock.machines.yamlsrc import YamlRefused, load_yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AnswersError(f"{path}: cannot read the answers: {exc}") from None
    try:
        data = load_yaml(text)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, YamlRefused) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else f"{path}"
        raise AnswersError(f"{where}: not YAML: {getattr(exc, 'problem', None) or exc}"
                           ) from None
    if not isinstance(data, list) or not isinstance(node, yaml.SequenceNode):
        raise AnswersError(f"{path}:1:1: the answers are a YAML list (one item per question)")
    answers: list[AnswerValue] = []
    for index, item in enumerate(data):
        if isinstance(item, bool):
            item = "yes" if item else "no"
        if isinstance(item, int | float):
            item = str(item)
        if isinstance(item, list) and all(isinstance(i, str) for i in item):
            answers.append([str(i) for i in item])
        elif isinstance(item, str):
            answers.append(item)
        else:
            mark = node.value[index].start_mark
            raise AnswersError(f"{path}:{mark.line + 1}:{mark.column + 1}: answer {index + 1} "
                               "must be a key, a list of keys or text")
    return answers


class ScriptedAnswers:
    """Answers from a list, in order; what was asked is kept in ``asked``. An answer that
    does not fit is an :class:`AnswersError` naming its place in the list."""

    def __init__(self, answers: Sequence[AnswerValue], *, source: str = "answers",
                 out: TextIO | None = None,
                 on_ask: Callable[[Question, float | None], None] | None = None) -> None:
        self.answers = list(answers)
        self.source = source
        self.position = 0
        self.asked: list[tuple[str, Question, AnswerValue | None]] = []
        self.out = out
        self.on_ask = on_ask

    def show_output(self, node: str, text: str) -> None:
        if self.out is not None:
            self.out.write(f"--- output of {node} ---\n{text.rstrip()}\n---\n")

    def ask(self, question: Question, *, session: str, default: AnswerValue | None,
            deadline: float | None) -> AnswerValue:
        self.asked.append((session, question, default))
        if self.on_ask is not None:
            self.on_ask(question, deadline)  # a test moves the clock here
        if self.position >= len(self.answers):
            raise Aborted()
        answer = self.answers[self.position]
        self.position += 1
        if answer == ABORT:
            raise Aborted()
        if answer == "!noanswer":  # for tests and demos: let the question time out
            raise NoAnswer()
        try:
            checked = question.check(answer)
        except ProtocolError as exc:
            raise AnswersError(f"{self.source}: answer {self.position}: {exc}") from None
        if self.out is not None:
            self.out.write(f"{question.prompt} -> {checked}\n")
        return checked

    def finish(self, outcome: Outcome) -> None:
        if self.out is not None:
            self.out.write(f"resolution: {outcome.resolution}\n")


class JsonLines:
    """Questions as JSON lines out, answers as JSON lines in (another program drives)."""

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None,
                 clock: Clock | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.clock = clock or SystemClock()
        self._buffer = b""

    def _emit(self, doc: dict[str, Any]) -> None:
        self.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
        self.stdout.flush()

    def show_output(self, node: str, text: str) -> None:
        self._emit({"node": node, "output": text})

    def _fd(self) -> int | None:
        try:
            return self.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            return None

    def _line(self, deadline: float | None) -> str:
        """One line of stdin, read from its descriptor (so that lines piped in at once are
        not hidden in a buffer while waiting with a deadline); EOF aborts."""
        fd = self._fd()
        if fd is None:
            line = self.stdin.readline()
            if not line:
                raise Aborted()
            return line
        while b"\n" not in self._buffer:
            if deadline is not None:
                wait = max(0.0, deadline - self.clock.now())
                ready, _, _ = select.select([fd], [], [], wait)
                if not ready:
                    raise NoAnswer()
            chunk = os.read(fd, 65536)
            if not chunk:
                if self._buffer.strip():
                    line, self._buffer = self._buffer, b""
                    return line.decode("utf-8", "replace")
                raise Aborted()
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace")

    def ask(self, question: Question, *, session: str, default: AnswerValue | None,
            deadline: float | None) -> AnswerValue:
        while True:
            shown: dict[str, Any] = {"session": session, **question.to_json()}
            if default is not None:
                shown["default"] = default
            self._emit(shown)
            line = self._line(deadline)
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                self._emit({"error": f"not JSON: {exc.msg}", "id": question.id})
                continue
            if not isinstance(data, dict) or data.get("id") != question.id:
                self._emit({"error": f"expected {{\"id\": \"{question.id}\", \"answer\": ...}}",
                            "id": question.id})
                continue
            if data.get("abort"):
                raise Aborted()
            try:
                return question.check(data.get("answer"))
            except ProtocolError as exc:
                self._emit({"error": str(exc), "id": question.id})

    def finish(self, outcome: Outcome) -> None:
        self._emit(outcome.to_json())


class QueuedAnswers:
    """A front end answered from another thread (a web page): :meth:`ask` publishes the
    question and blocks until :meth:`answer` or :meth:`abort` (or the question's
    deadline: NoAnswer); :meth:`state` is what there is to show, and
    :meth:`wait_question` waits for the next question or the end. Thread-safe."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._version = 0
        self._asked: tuple[str, Question, AnswerValue | None] | None = None
        self._asked_at = -1  # the version that asked it
        self._answer: AnswerValue | None = None
        self._aborted = False
        self._output: tuple[str, str] | None = None
        self._outcome: Outcome | None = None
        self._error: str | None = None

    def _bump(self) -> None:
        self._version += 1
        self._changed.notify_all()

    # -- the interview's side ----------------------------------------------------------

    def show_output(self, node: str, text: str) -> None:
        with self._changed:
            self._output = (node, text)
            self._bump()

    def ask(self, question: Question, *, session: str, default: AnswerValue | None,
            deadline: float | None) -> AnswerValue:
        with self._changed:
            self._asked, self._answer = (session, question, default), None
            self._bump()
            self._asked_at = self._version
            try:
                while (given := self._given()) is None:
                    if self._aborted:
                        raise Aborted()
                    left = None if deadline is None else deadline - time.time()
                    if left is not None and left <= 0:
                        raise NoAnswer()
                    self._changed.wait(left)
                return given
            finally:
                self._asked = None

    def _given(self) -> AnswerValue | None:
        return self._answer

    def finish(self, outcome: Outcome) -> None:
        with self._changed:
            self._outcome = outcome
            self._bump()

    def failed(self, message: str) -> None:
        """The interview ended without an outcome; ``message`` says why."""
        with self._changed:
            self._error = message
            self._bump()

    # -- the page's side ---------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """``{"version", "output", "question", "outcome", "error"}``: the unit's output
        (``{node, text}``), the question waiting for an answer (its JSON, with
        ``session`` and ``default``), how it ended; None where there is none."""
        with self._changed:
            question = None
            if self._asked is not None:
                session, asked, default = self._asked
                question = {"session": session, **asked.to_json(), "default": default}
            return {"version": self._version, "question": question,
                    "output": None if self._output is None else
                    {"node": self._output[0], "text": self._output[1]},
                    "outcome": None if self._outcome is None else self._outcome.to_json(),
                    "error": self._error}

    def answer(self, question_id: str, answer: Any) -> int:
        """Answer the waiting question; the version it leaves (for
        :meth:`wait_question`). ProtocolError (one line) when no question ``question_id``
        waits or the answer does not fit it."""
        with self._changed:
            if self._asked is None or self._asked[1].id != question_id:
                raise ProtocolError(f"no question {question_id!r} waits for an answer")
            self._answer = self._asked[1].check(answer)
            self._bump()
            return self._version

    def abort(self) -> None:
        with self._changed:
            self._aborted = True
            self._bump()

    @property
    def over(self) -> bool:
        with self._changed:
            return self._outcome is not None or self._error is not None

    def wait_question(self, after: int, timeout: float) -> dict[str, Any]:
        """:meth:`state` once a question asked after version ``after`` waits, or the
        interview is over (or after ``timeout``)."""
        with self._changed:
            self._changed.wait_for(
                lambda: self._outcome is not None or self._error is not None
                or (self._asked is not None and self._asked_at > after), timeout)
        return self.state()
