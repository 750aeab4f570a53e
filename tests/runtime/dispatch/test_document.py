"""Document detection: a whole review document, never a `v:` line that cuts off the issues."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interlock.runtime.dispatch import document
from interlock.runtime.dispatch.document import DocumentCheck, check_document
from interlock.runtime.dispatch.verdict import Issue, Verdict, parse_verdict

SEED = "p: TECHLEAD\nv: GO\ni:\n  - C: missing migration\n  - H: no test for the timeout\n"


def yaml_check(text: str, **kw: Any) -> DocumentCheck:
    return check_document(text, output_format="yaml", min_output_length=0, **kw)


def json_check(text: str, **kw: Any) -> DocumentCheck:
    return check_document(text, output_format="json", min_output_length=0, **kw)


# --- the seed's sample ------------------------------------------------------------------------


def test_seed_sample_is_complete_but_not_closed() -> None:
    check = yaml_check(SEED)
    assert check.complete and not check.ended_by_marker
    assert check.document == {
        "p": "TECHLEAD",
        "v": "GO",
        "i": [{"C": "missing migration"}, {"H": "no test for the timeout"}],
    }
    assert check.reason == ""


def test_v_line_alone_is_not_the_end() -> None:
    """Every prefix ending after `v: GO\\n` parses, but none is closed: wait for silence."""
    after_v = SEED.index("v: GO\n") + len("v: GO\n")
    for cut in range(after_v, len(SEED) + 1):
        check = yaml_check(SEED[:cut])
        assert not check.ended_by_marker, SEED[:cut]
        if SEED[:cut].endswith("\n"):
            assert check.complete, SEED[:cut]


@pytest.mark.parametrize("closing", ["...\n", "---\n", "...   \n"])
def test_document_end_marker_closes(closing: str) -> None:
    check = yaml_check(SEED + closing)
    assert check.complete and check.ended_by_marker
    assert yaml_check(SEED + closing.rstrip("\n")).ended_by_marker is False  # newline not yet


def test_next_document_without_field_is_incomplete() -> None:
    check = yaml_check(SEED + "---\np: SECOND\n")
    assert not check.complete
    assert "last document" in check.reason


def test_leading_document_start_marker_does_not_close() -> None:
    check = yaml_check("---\n" + SEED)
    assert check.complete and not check.ended_by_marker


def test_prose_after_end_marker_keeps_it_closed() -> None:
    check = yaml_check(SEED + "...\nThat's all.\n")
    assert check.complete and check.ended_by_marker


def test_trailing_prose_without_marker_is_complete_but_open() -> None:
    check = yaml_check(SEED + "Hope this helps!\n")
    assert check.complete and not check.ended_by_marker
    assert check.document is not None and len(check.document["i"]) == 2


def test_json_closed_and_unclosed() -> None:
    closed = json_check('{"p": "X", "v": "GO", "i": []}\n')
    assert closed.complete and closed.ended_by_marker
    assert closed.document == {"p": "X", "v": "GO", "i": []}
    assert not json_check('{"p": "X", "v": "GO", "i": [').complete
    assert not json_check('{"p": "X", "v": "G').complete
    no_newline = json_check('{"p": "X", "v": "GO", "i": []}')
    assert no_newline.complete and not no_newline.ended_by_marker


def test_json_with_prose_around() -> None:
    text = 'Here is my review:\n{"p": "X",\n "v": "NO-GO",\n "i": [{"C": "x"}]}\nDone.\n'
    check = json_check(text)
    assert check.complete and not check.ended_by_marker  # text follows the object
    assert check.document is not None and check.document["v"] == "NO-GO"


def test_json_skips_braces_in_prose() -> None:
    check = json_check('I will print {json} now: {"p": "X", "v": "GO"}\n')
    assert check.complete and check.ended_by_marker


def test_json_nested_object_is_not_taken_for_the_document() -> None:
    text = '{\n  "p": "X",\n  "i": [\n    {"v": "GO"}\n'
    assert not json_check(text).complete


def test_json_lines_second_object_holds_field() -> None:
    check = json_check('{"type": "start"}\n{"p": "X", "v": "GO"}\n')
    assert check.complete and check.ended_by_marker
    assert check.document == {"p": "X", "v": "GO"}


# --- what agent CLIs print --------------------------------------------------------------------


def test_fenced_yaml_with_prose() -> None:
    text = "Here is my review:\n\n```yaml\n" + SEED + "```\nLet me know.\n"
    check = yaml_check(text)
    assert check.complete and check.ended_by_marker
    assert check.document is not None and check.document["p"] == "TECHLEAD"
    open_fence = yaml_check("Here is my review:\n\n```yaml\n" + SEED)
    assert open_fence.complete and not open_fence.ended_by_marker


def test_fenced_json() -> None:
    check = json_check('Result:\n```json\n{"p": "X", "v": "GO",\n "i": []}\n```\n')
    assert check.complete and check.ended_by_marker


def test_other_fences_are_ignored() -> None:
    text = "Run this:\n```bash\nls\n```\nReview:\n```yaml\n" + SEED + "```\n"
    check = yaml_check(text)
    assert check.complete and check.ended_by_marker


def test_leading_prose_without_fence() -> None:
    check = yaml_check("Here is my review of tasks.md:\n\n" + SEED)
    assert check.complete
    assert check.document is not None and set(check.document) == {"p", "v", "i"}


def test_windows_newlines_and_bom() -> None:
    text = "\ufeff" + (SEED + "...\n").replace("\n", "\r\n")
    check = yaml_check(text)
    assert check.complete and check.ended_by_marker
    assert check.document is not None and check.document["v"] == "GO"
    jcheck = json_check('\ufeff{"v": "GO"}\r\n')
    assert jcheck.complete and jcheck.ended_by_marker


def test_text_format_takes_either() -> None:
    assert check_document(SEED, output_format="text", min_output_length=0).complete
    check = check_document('{"v": "GO"}\n', output_format="text", min_output_length=0)
    assert check.complete and check.ended_by_marker


def test_min_output_length_counts_bytes() -> None:
    assert not check_document(SEED, min_output_length=len(SEED) + 1).complete
    assert check_document(SEED, min_output_length=len(SEED)).complete
    wide = SEED.replace("missing migration", "移行がない")  # 3 bytes a character
    assert check_document(wide, min_output_length=len(wide.encode()) - 1).complete
    assert "shorter" in check_document("v: GO\n").reason


def test_field_not_at_top_level_or_empty() -> None:
    assert not yaml_check("p: X\nmeta:\n  v: GO\n").complete
    assert not yaml_check("p: X\nv:\n").complete
    assert yaml_check("p: X\nv:\n").reason.endswith("no value yet")
    assert not yaml_check("- v: GO\n").complete
    assert not yaml_check("dev: x\n").complete  # `v:` inside another key


def test_custom_required_field() -> None:
    assert yaml_check("verdict: GO\n", required_field="verdict").complete
    assert not yaml_check("v: GO\n", required_field="verdict").complete


@pytest.mark.parametrize(
    "text",
    [
        "v: " + "[" * 100_000,
        "v:\n" + "- " * 100_000 + "x",
        "v: " + "{" * 100_000,
        '{"v": ' + "[" * 100_000,
        "a: &a [1, 2]\nb: &b [*a, *a]\nv: *b\n",
        "v: !!python/object/apply:os.system ['true']\n",
        "v: GO\n%YAML 1.2\n---\n",
        "\x00v: \x00",
        "v: 'unterminated\n",
    ],
)
def test_hostile_inputs_do_not_raise(text: str) -> None:
    for fmt in ("yaml", "json", "text"):
        check = check_document(text, output_format=fmt, min_output_length=0)
        assert isinstance(check, DocumentCheck)
    assert not yaml_check("v: !!python/object/apply:os.system ['true']\n").complete


# --- cost -------------------------------------------------------------------------------------


@dataclass
class Counter:
    calls: list[int]

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(text: str, *args: Any) -> Any:
            self.calls.append(len(text))
            return fn(text, *args)

        return counted


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Counter:
    counter = Counter([])
    monkeypatch.setattr(document, "load_yaml", counter.wrap(document.load_yaml))
    monkeypatch.setattr(document, "_decode_json", counter.wrap(document._decode_json))
    return counter


BIG_LOG = "".join(f"step {n}: compiling module {n} ... ok\n" for n in range(130_000))


def test_large_output_without_key_is_not_parsed(parses: Counter) -> None:
    assert len(BIG_LOG) > 5_000_000
    for fmt in ("yaml", "json", "text"):
        check = check_document(BIG_LOG, output_format=fmt)
        assert not check.complete and "absent" in check.reason
    assert parses.calls == []


def test_large_output_with_key_only_inside_words_is_not_parsed(parses: Counter) -> None:
    text = BIG_LOG + "dev: 1\nrev: 2\n"
    assert not check_document(text).complete
    assert parses.calls == []


def test_large_output_parses_only_the_last_document(parses: Counter) -> None:
    text = BIG_LOG.replace(": ", " - ") + "---\n" + SEED + "...\n"
    check = check_document(text)
    assert check.complete and check.ended_by_marker
    assert parses.calls and max(parses.calls) <= len(SEED)


# --- generated review documents ---------------------------------------------------------------

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
PHRASE = st.lists(WORD, min_size=1, max_size=6).map(lambda ws: "x" + " ".join(ws))


@st.composite
def reviews(draw: st.DrawFn) -> tuple[str, str, str, list[tuple[str, str]]]:
    """(document, role, verdict, issues) in the seed's compact YAML."""
    role = draw(st.sampled_from(["TECHLEAD", "SECURITY", "QA", "ARCH"]))
    verdict = draw(st.sampled_from(["GO", "CONDITIONAL", "NO-GO"]))
    issues = draw(st.lists(st.tuples(st.sampled_from("CHML"), PHRASE), max_size=6))
    body = f"p: {role}\nv: {verdict}\n"
    body += "i:\n" + "".join(f"  - {sev}: {text}\n" for sev, text in issues) if issues else ""
    if not issues and draw(st.booleans()):
        body += "i: []\n"
    return body, role, verdict, issues


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    review=reviews(),
    fenced=st.booleans(),
    prose=st.sampled_from(["", "Here is my review:\n", "Review of tasks.md follows.\n\n"]),
    closing=st.sampled_from(["", "...\n", "---\n"]),
    crlf=st.booleans(),
)
def test_prefixes_of_generated_reviews(
    review: tuple[str, str, str, list[tuple[str, str]]],
    fenced: bool,
    prose: str,
    closing: str,
    crlf: bool,
) -> None:
    body, role, verdict, issues = review
    head = prose + ("```yaml\n" if fenced else "")
    full = head + body + closing + ("```\n" if fenced else "")
    closed = bool(closing) or fenced
    nl = "\r\n" if crlf else "\n"

    def check(text: str) -> DocumentCheck:
        return yaml_check(text.replace("\n", nl))

    whole = check(full)
    assert whole.complete and whole.ended_by_marker is closed
    assert whole.document is not None
    got = parse_verdict(whole.document)
    assert (got.role, got.verdict, got.verdict_recognized) == (role, verdict, True)
    assert [(i.severity, i.text) for i in got.issues] == issues
    # every prefix from the end of the `v:` line up to the first closing line: never closed
    after_v = len(head) + body.index("\n", body.index("v: ")) + 1
    closed_at = len(head + body + closing) if closing else len(full)
    for cut in range(after_v, closed_at):
        prefix = check(full[:cut])
        assert not prefix.ended_by_marker, full[:cut]
        if full[:cut].endswith("\n") and cut <= len(head) + len(body):
            assert prefix.complete, full[:cut]


@settings(max_examples=40, deadline=None)
@given(review=reviews(), prose=st.booleans())
def test_prefixes_of_generated_json(
    review: tuple[str, str, str, list[tuple[str, str]]], prose: bool
) -> None:
    _, role, verdict, issues = review
    doc = {"p": role, "v": verdict, "i": [{sev: text} for sev, text in issues]}
    full = ("My verdict:\n" if prose else "") + json.dumps(doc, indent=2) + "\n"
    whole = json_check(full)
    assert whole.complete and whole.ended_by_marker and whole.document == doc
    for cut in range(len(full) - 1):
        prefix = json_check(full[:cut])
        assert not prefix.complete and not prefix.ended_by_marker, full[:cut]


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(
        st.text(),
        st.binary().map(lambda b: b.decode("utf-8", errors="replace")),
        st.lists(
            st.sampled_from(
                [
                    "v: GO",
                    "v:",
                    "p: X",
                    "---",
                    "...",
                    "```yaml",
                    "```",
                    "{",
                    "}",
                    '"v": 1',
                    "  - C: a",
                    "- ",
                    "[",
                    "]",
                    "\r",
                    "\ufeff",
                    "i:",
                    "&a",
                    "*a",
                    "\t",
                    "#",
                ]
            )
        ).map("\n".join),
    ),
    fmt=st.sampled_from(["yaml", "json", "text"]),
    min_len=st.integers(0, 200),
)
def test_never_raises(text: str, fmt: str, min_len: int) -> None:
    check = check_document(text, output_format=fmt, min_output_length=min_len)  # type: ignore[arg-type]
    assert isinstance(check, DocumentCheck)
    assert check.complete or not check.ended_by_marker
    assert (check.document is not None) is check.complete
    if check.document is not None:
        assert check.document.get("v") is not None
        parse_verdict(check.document)  # never raises either


# --- compact review YAML (a second `: ` in a value) -------------------------------------------

COMPACT = (
    "p: TECHLEAD\n"
    "v: CONDITIONAL\n"
    "i:\n"
    "  - C: Missing test: the parser ignores tabs\n"
    '  - H: see docs/foo.md: section "x: y"\n'
)


def test_compact_review_with_second_colon_is_complete() -> None:
    check = yaml_check(COMPACT)
    assert check.complete and not check.ended_by_marker and check.reason == ""
    assert check.document is not None
    assert parse_verdict(check.document) == Verdict(
        role="TECHLEAD",
        verdict="CONDITIONAL",
        issues=(
            Issue("C", "Missing test: the parser ignores tabs"),
            Issue("H", 'see docs/foo.md: section "x: y"'),
        ),
    )
    text = check_document(COMPACT, output_format="text", min_output_length=0)
    assert text.complete and text.document == check.document


def test_compact_review_keeps_marker_fence_and_prose_rules() -> None:
    assert yaml_check(COMPACT + "...\n").ended_by_marker
    assert not yaml_check(COMPACT + "...").ended_by_marker  # newline not yet
    fenced = yaml_check("Review:\n```yaml\n" + COMPACT + "```\nBye.\n")
    assert fenced.complete and fenced.ended_by_marker
    prose = yaml_check("Here it is:\n\n" + COMPACT + "Hope this helps!\n")
    assert prose.complete and not prose.ended_by_marker
    assert prose.document is not None and len(prose.document["i"]) == 2
    after_v = COMPACT.index("v: CONDITIONAL\n") + len("v: CONDITIONAL\n")
    for cut in range(after_v, len(COMPACT) + 1):
        check = yaml_check(COMPACT[:cut])
        assert not check.ended_by_marker, COMPACT[:cut]
        if COMPACT[:cut].endswith("\n"):
            assert check.complete, COMPACT[:cut]
    assert not check_document(COMPACT, min_output_length=len(COMPACT) + 1).complete


def test_compact_review_top_level_second_colon() -> None:
    check = yaml_check("p: QA\ns: done: all good\nv: NO-GO\nn: 5\ni: []\n")
    assert check.complete
    assert check.document == {"p": "QA", "s": "done: all good", "v": "NO-GO", "n": 5, "i": []}
    verdict = yaml_check("p: QA\nv: GO: with notes\n").document
    assert verdict is not None and verdict["v"] == "GO: with notes"


def test_compact_review_still_needs_the_field() -> None:
    assert not yaml_check("p: a: b\nv:\n").complete
    assert yaml_check("p: a: b\nv: ~\n").reason.endswith("no value yet")
    assert not yaml_check("p: a: b\nmeta:\n  v: GO\n").complete


@pytest.mark.parametrize(
    "text",
    [
        "p: X\nv: GO\ni:\n  - C: a: b\n    file: x.py\n",  # nested mapping in an item
        "p: X\nv: GO\nmeta:\n  x: a: b\n",  # nested mapping
        'p: X\nv: GO\ni:\n  - C: "a: b\n',  # broken quote
        "p: X\nv: GO\ni:\n  - C: a: b\n  - [x, y\n",  # broken flow collection
        "p: X\nv: GO\ns: [a: b\n",
        "p: X\nv: GO\ni:\n  - C: a: b\n   - H: c\n",  # items at two indentations
        "p: X\nv: GO\ns: a: b\n  more text\n",  # continuation line
        "p: X\nv: GO\ns: a: b\n\tt: c\n",  # tab indentation
        "p: X\nv: GO\ns: a: b\n- orphan item\n",  # list item under a valued key
        "p: X\nv: GO\ns: !!python/object/apply:os.system ['true']: x\n",
        "p: X\nv: *alias: x\n",
    ],
)
def test_otherwise_broken_yaml_stays_incomplete(text: str) -> None:
    check = yaml_check(text)
    assert not check.complete and check.document is None
    assert check.reason.startswith("YAML does not parse: ") and "line" in check.reason


def test_refused_yaml_gets_no_lenient_reading() -> None:
    check = yaml_check("a: &x foo\nb: *x\nv: GO\ni:\n  - C: a: b\n")
    assert not check.complete and "anchors" in check.reason


def test_compact_reading_is_bounded(parses: Counter) -> None:
    text = "".join(f"k{n}: v\n" for n in range(5000)) + "s: a: b\nv: GO\n"
    assert not yaml_check(text).complete
    assert len(parses.calls) <= 2


VALUES = [
    "GO", "NO-GO", "CONDITIONAL", "NO", "yes", "5", "-1", "1.5", ".inf", "0x1F", "null",
    "~", "", "true", "False", "2024-01-01", "'quoted: x'", '"dq\\tx"', "'it''s'", "[a, b]",
    "{C: x}", "x # comment", "plain text, with punctuation.", "a-b.c", "--- x", "...",
    "docs/foo.md#L3", "50%",
]  # fmt: skip
KEYS = ["p", "v", "i", "x.y", "a-b", "'q k'", '"dq"', "5", "true", "C", "file"]
VALUE = st.one_of(st.sampled_from(VALUES), PHRASE)


@st.composite
def compact_documents(draw: st.DrawFn) -> str:
    """Documents in the compact shape that strict YAML accepts."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        key = draw(st.sampled_from(KEYS))
        if draw(st.booleans()):
            lines.append(f"{key}: {draw(VALUE)}".rstrip())
            continue
        lines.append(f"{key}:")
        pad = " " * draw(st.sampled_from([0, 2, 4]))
        for _ in range(draw(st.integers(0, 4))):
            if draw(st.booleans()):
                lines.append(f"{pad}- {draw(st.sampled_from(KEYS))}: {draw(VALUE)}".rstrip())
            else:
                lines.append(f"{pad}- {draw(VALUE)}".rstrip())
            if draw(st.integers(0, 5)) == 0:
                lines.append(draw(st.sampled_from(["", "# note", f"{pad}# note"])))
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None)
@given(text=compact_documents())
def test_compact_reading_agrees_with_strict_yaml(text: str) -> None:
    strict = document.load_yaml(text)
    assert document._compact_review(text.split("\n")) == strict


@pytest.mark.parametrize(
    "text",
    [
        SEED,
        COMPACT.replace(": the", " the").replace(': section "x: y"', ""),
        "v: GO\ni:\n- C: x # c\n- plain\n-\n- ''\ni: # later\n  - 1\n",
    ],
)
def test_compact_reading_agrees_on_samples(text: str) -> None:
    assert document._compact_review(text.split("\n")) == document.load_yaml(text)


def test_ampersand_and_asterisk_in_quoted_text_are_not_aliases() -> None:
    check = yaml_check("p: QA\nv: GO\ni:\n  - H: 'fish &chips and *stars*'\n...\n")
    assert check.complete and check.ended_by_marker
    assert check.document == {"p": "QA", "v": "GO", "i": [{"H": "fish &chips and *stars*"}]}
