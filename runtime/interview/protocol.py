"""The question protocol: every question is typed data, every answer is checked against it.

A question has an ``id`` (kept each time it is asked again), a ``kind`` (``select``,
``multi``, ``text``, ``confirm``), a ``prompt`` and ``options`` as ``{key, label}``. A
poller agent answers in the same shape (:class:`PollerReply`); front ends show questions
and return :class:`Answer` values: an option key, a list of keys (a multi-select), text, or
:data:`BACK`.

The seed's keys: the echo offers ``A`` Correct, ``X`` Close, ``Y`` Not at all, ``B`` Back;
the Close branch offers ``A``-``D``; ``D`` (combination) opens a multi-select confirmed with
``X``. Where ``B`` is also an option (the Close branch, the multi-select, any agent
question) Back is ``<`` (Backspace in the terminal); the echo takes ``B`` and ``<`` alike.

>>> ECHO.check("X")
'X'
>>> CLOSE_MENU.check("<")
'<'
>>> MULTI_SELECT.check(["A", "C"])
['A', 'C']
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Kind = Literal["select", "multi", "text", "confirm"]
AnswerValue = str | list[str]
BACK = "<"
CONFIRM_KEYS = ("yes", "no")


class ProtocolError(ValueError):
    """An answer that does not fit its question, or a malformed poller reply."""


class Option(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_.-]+$")
    label: str = Field(min_length=1)


class Question(BaseModel):
    """One question. ``back`` says whether Back is offered (and by which keys)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Kind
    prompt: str = Field(min_length=1)
    options: tuple[Option, ...] = ()
    back: tuple[str, ...] = ()
    note: str | None = None  # shown above the prompt (the interpretation, for the echo)

    @field_validator("options")
    @classmethod
    def _unique_keys(cls, options: tuple[Option, ...]) -> tuple[Option, ...]:
        keys = [o.key for o in options]
        if len(set(keys)) != len(keys):
            raise ValueError(f"option keys repeat: {keys}")
        if BACK in keys:
            raise ValueError(f"{BACK!r} is Back, not an option key")
        return options

    def model_post_init(self, context: Any) -> None:
        if self.kind in ("select", "multi") and not self.options:
            raise ProtocolError(f"question {self.id}: a {self.kind} question needs options")

    @property
    def keys(self) -> tuple[str, ...]:
        if self.kind == "confirm":
            return CONFIRM_KEYS
        return tuple(o.key for o in self.options)

    def label(self, key: str) -> str:
        return next((o.label for o in self.options if o.key == key), key)

    def is_back(self, answer: AnswerValue) -> bool:
        return isinstance(answer, str) and answer in self.back

    def check(self, answer: Any) -> AnswerValue:
        """``answer`` if it fits this question (keys compared case-insensitively for the
        one-letter keys), else ProtocolError with a one-line reason."""
        if isinstance(answer, str) and answer in self.back:
            return answer
        if self.kind == "text":
            if not isinstance(answer, str) or not answer.strip():
                raise ProtocolError(f"question {self.id} wants text")
            return answer.strip()
        if self.kind == "multi":
            if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
                raise ProtocolError(f"question {self.id} wants a list of keys of "
                                    f"{', '.join(self.keys)}")
            picked = [self._key(a) for a in answer]
            if not picked:
                raise ProtocolError(f"question {self.id}: pick at least one")
            return list(dict.fromkeys(picked))
        if isinstance(answer, bool) and self.kind == "confirm":
            return "yes" if answer else "no"
        if not isinstance(answer, str):
            raise ProtocolError(f"question {self.id} wants one key of {', '.join(self.keys)}")
        return self._key(answer)

    def _key(self, answer: str) -> str:
        for key in self.keys:
            if answer == key or (len(key) == 1 and answer.upper() == key.upper()):
                return key
        backs = f" or Back ({' '.join(self.back)})" if self.back else ""
        raise ProtocolError(f"question {self.id}: {answer!r} is not one of "
                            f"{', '.join(self.keys)}{backs}")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class PollerReply(BaseModel):
    """What a poller agent answers: the next questions, or an interpretation (the suggested
    fix, with the corrections and context additions it would stage)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    questions: tuple[Question, ...] = ()
    interpretation: str | None = None
    corrections: tuple[str, ...] = ()
    context_additions: tuple[str, ...] = ()


def parse_reply(data: Any) -> PollerReply:
    """A poller agent's answer document as a :class:`PollerReply`; ProtocolError (one line,
    naming the field) when it is malformed."""
    if not isinstance(data, dict):
        raise ProtocolError(f"the poller answered {type(data).__name__}, not a mapping")
    try:
        return PollerReply.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise ProtocolError(f"the poller's answer is malformed at {where}: {first['msg']}"
                            ) from None
    except ProtocolError as exc:
        raise ProtocolError(f"the poller's answer is malformed: {exc}") from None


# -- the fixed questions of seed 000 ----------------------------------------------------

MENU_ACTIONS = ("accept", "retry", "deepen", "redirect", "config", "route")
MENU = Question(id="menu", kind="select", prompt="What should happen to this output?",
                options=(
                    Option(key="accept", label="Accept: the output is good, mark it done"),
                    Option(key="retry", label="Retry: re-run with corrections"),
                    Option(key="deepen", label="Deepen: add depth to a section"),
                    Option(key="redirect", label="Redirect: change the unit's approach"),
                    Option(key="config", label="Config: change model / harness / tools"),
                    Option(key="route", label="Route: send the output to another node"),
                ))

# echo keys -> the poller_interview event they send
ECHO_EVENTS = {"A": "correct", "X": "close", "Y": "not_at_all", "B": "back", BACK: "back"}
ECHO = Question(id="echo", kind="select", prompt="Is this what you meant?",
                options=(Option(key="A", label="Correct"), Option(key="X", label="Close"),
                         Option(key="Y", label="Not at all")),
                back=("B", BACK))

# Close-branch keys -> events; the issue each names (multi-select keys are the same A-C)
CLOSE_EVENTS = {"A": "wrong_section", "B": "wrong_metric", "C": "too_specific",
                "D": "combination", BACK: "back"}
ISSUES = {"A": "wrong_section", "B": "wrong_metric", "C": "too_specific"}
CLOSE_MENU = Question(id="close", kind="select", prompt="Close but not exactly... What's off?",
                      options=(
                          Option(key="A", label="The suggested section is wrong"),
                          Option(key="B", label="The metric is wrong (should be different "
                                                "data)"),
                          Option(key="C", label="Too specific: need higher-level guidance"),
                          Option(key="D", label="Combination of above"),
                      ), back=(BACK,))
MULTI_SELECT = Question(id="combination", kind="multi", prompt="Select all that apply:",
                        options=(Option(key="A", label="Wrong section"),
                                 Option(key="B", label="Wrong metric"),
                                 Option(key="C", label="Too specific")),
                        back=(BACK,))


def echo_question(interpretation: str) -> Question:
    """The interpretation echo with the current suggested fix."""
    return ECHO.model_copy(update={"note": interpretation})
