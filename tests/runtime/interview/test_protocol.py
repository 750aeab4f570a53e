"""The question protocol: typed questions, checked answers, the seed's keys, poller replies."""

from __future__ import annotations

import pytest

from interlock.runtime.interview.protocol import (
    BACK,
    CLOSE_MENU,
    ECHO,
    MULTI_SELECT,
    ProtocolError,
    Question,
    parse_reply,
)


def test_the_seed_keys() -> None:
    assert [o.key for o in ECHO.options] == ["A", "X", "Y"] and ECHO.back == ("B", BACK)
    assert [o.key for o in CLOSE_MENU.options] == ["A", "B", "C", "D"]
    assert CLOSE_MENU.back == (BACK,)  # B is an option there: Back is "<"
    assert [o.key for o in MULTI_SELECT.options] == ["A", "B", "C"]
    assert MULTI_SELECT.back == (BACK,)


def test_answers_are_checked_against_their_question() -> None:
    assert ECHO.check("x") == "X" and ECHO.check("B") == "B" and ECHO.check("<") == "<"
    assert CLOSE_MENU.check("B") == "B"  # an option, not Back
    assert MULTI_SELECT.check(["c", "A", "c"]) == ["C", "A"]
    with pytest.raises(ProtocolError, match="not one of A, X, Y"):
        ECHO.check("Q")
    with pytest.raises(ProtocolError, match="list of keys"):
        MULTI_SELECT.check("A")
    with pytest.raises(ProtocolError, match="at least one"):
        MULTI_SELECT.check([])
    text = Question(id="t", kind="text", prompt="Why?")
    assert text.check("  because ") == "because"
    with pytest.raises(ProtocolError, match="wants text"):
        text.check(["A"])
    confirm = Question(id="c", kind="confirm", prompt="Sure?")
    assert confirm.check(True) == "yes" and confirm.check("no") == "no"


def test_questions_are_validated() -> None:
    with pytest.raises(ValueError, match="repeat"):
        Question.model_validate({"id": "q", "kind": "select", "prompt": "p",
                                 "options": [{"key": "A", "label": "a"},
                                             {"key": "A", "label": "b"}]})
    with pytest.raises(ValueError, match="needs options"):
        Question(id="q", kind="select", prompt="p")
    with pytest.raises(ValueError):
        Question.model_validate({"id": "q", "kind": "radio", "prompt": "p"})


def test_a_malformed_poller_reply_is_one_line_naming_the_field() -> None:
    assert parse_reply({"questions": [], "interpretation": "fix it"}).interpretation == "fix it"
    with pytest.raises(ProtocolError, match=r"questions\.0\.kind"):
        parse_reply({"questions": [{"id": "q", "kind": "radio", "prompt": "p"}]})
    with pytest.raises(ProtocolError, match="not a mapping"):
        parse_reply(["questions"])
