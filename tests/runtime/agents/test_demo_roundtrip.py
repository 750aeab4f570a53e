"""Every demo answer parses back, through the dispatcher's reading, to the same verdict."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.runtime.agents.demo import (
    DEFAULT_VERDICTS,
    TOPIC_WORDS,
    AnswerFormat,
    make_answer,
    render,
)
from interlock.runtime.dispatch import Verdict, VerdictValue, check_document, parse_verdict

ROLES = (*DEFAULT_VERDICTS, "PERF", "DOCS", "X1")
PROMPTS = ("", *(f"please look at the {words[0]}" for words in TOPIC_WORDS.values()),
           "security test timeout database performance")


def read_back(answer: Verdict, fmt: AnswerFormat, end_marker: bool) -> Verdict:
    text = "".join(line + "\n" for line in render(answer, fmt, end_marker))
    check = check_document(text, output_format=fmt.value, min_output_length=0)
    assert check.complete, check.reason
    assert check.document is not None
    return parse_verdict(check.document)


@pytest.mark.parametrize("fmt", list(AnswerFormat))
@pytest.mark.parametrize("end_marker", [False, True])
def test_every_demo_answer_reads_back(fmt: AnswerFormat, end_marker: bool) -> None:
    for role in ROLES:
        for verdict in (None, *VerdictValue):
            for prompt in PROMPTS:
                answer = make_answer(role, prompt, verdict)
                got = read_back(answer, fmt, end_marker)
                assert got == answer
                assert got.verdict_recognized
                assert got.to_json() == answer.to_json()


@settings(max_examples=100, deadline=None)
@given(role=st.from_regex(r"[A-Z][A-Z0-9_-]{0,11}", fullmatch=True), prompt=st.text(max_size=80),
       fmt=st.sampled_from(list(AnswerFormat)))
def test_generated_answers_read_back(role: str, prompt: str, fmt: AnswerFormat) -> None:
    answer = make_answer(role, prompt)
    assert read_back(answer, fmt, end_marker=False) == answer
