"""The review verdict: role, verdict and issues read from a parsed document."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.runtime.dispatch import Issue, Verdict, check_document, parse_verdict

SEED = "p: TECHLEAD\nv: GO\ni:\n  - C: missing migration\n  - H: no test for the timeout\n"


def yaml_check(text: str) -> Any:
    return check_document(text, output_format="yaml", min_output_length=0)


# --- Verdict ----------------------------------------------------------------------------------


def test_verdict_from_seed() -> None:
    doc = yaml_check(SEED).document
    assert doc is not None
    assert parse_verdict(doc) == Verdict(
        role="TECHLEAD",
        verdict="GO",
        issues=(Issue("C", "missing migration"), Issue("H", "no test for the timeout")),
    )


@pytest.mark.parametrize(
    ("given_", "expected", "recognized"),
    [
        ("go", "GO", True),
        ("No-Go", "NO-GO", True),
        ("NO_GO", "NO-GO", True),
        (" conditional ", "CONDITIONAL", True),
        ("MAYBE", "MAYBE", False),
        (True, "true", False),
        (None, None, False),
    ],
)
def test_verdict_normalized_or_flagged(given_: Any, expected: str | None, recognized: bool) -> None:
    got = parse_verdict({"p": "QA", "v": given_})
    assert (got.verdict, got.verdict_recognized) == (expected, recognized)


def test_yaml_12_booleans_keep_verdict_text() -> None:
    doc = yaml_check("p: QA\nv: NO\ni: []\n").document
    assert doc is not None and parse_verdict(doc).verdict == "NO"  # not False


def test_issue_shapes() -> None:
    got = parse_verdict(
        {"v": "GO", "i": [{"c": "lower"}, "plain text", {"X": "odd"}, {"C": "a", "H": "b"}, 5]}
    )
    assert got.issues == (
        Issue("C", "lower"),
        Issue(None, "plain text"),
        Issue(None, '{"X": "odd"}'),
        Issue(None, '{"C": "a", "H": "b"}'),
        Issue(None, "5"),
    )
    assert parse_verdict({"v": "GO", "i": "one issue"}).issues == (Issue(None, "one issue"),)
    assert parse_verdict({"v": "GO"}).issues == ()


def test_to_json_holds_plain_text_for_any_serializer() -> None:
    import yaml

    from interlock.runtime.dispatch import VerdictValue

    data = Verdict("QA", VerdictValue.NO_GO, (Issue("C", "x"),)).to_json()
    assert type(data["verdict"]) is str
    assert yaml.safe_load(yaml.safe_dump(data)) == data
