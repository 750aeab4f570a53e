"""An offline stand-in for a review sub-agent (claude, opencode, codex).

``interlock demo-agent`` answers like the seeds' reviewers, in compact YAML::

    p: TECHLEAD
    v: CONDITIONAL
    i:
      - H: ...

The answer is a pure function of the role and the prompt (see :func:`make_answer`), and it
is a :class:`~interlock.runtime.dispatch.verdict.Verdict`: the model the dispatcher's
parser reads answers back into, so what the demo agent prints is what a dispatch reports.
Only :func:`run_demo_agent` does I/O: it writes one line at a time with a flush after each, pauses
``delay`` seconds between lines and can linger silently after the answer like a hung CLI.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TextIO

from interlock.runtime.dispatch.verdict import Issue, Verdict, VerdictValue

ROLE_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


class AnswerFormat(StrEnum):
    """How the answer is printed."""

    YAML = "yaml"
    JSON = "json"


DEFAULT_VERDICTS: dict[str, VerdictValue] = {
    "TECHLEAD": VerdictValue.CONDITIONAL,
    "SECURITY": VerdictValue.NO_GO,
    "QA": VerdictValue.GO,
    "ARCHITECT": VerdictValue.CONDITIONAL,
}

ROLE_ISSUES: dict[str, tuple[str, ...]] = {
    "TECHLEAD": (
        "task breakdown mixes refactoring with the feature; split the batch",
        "no rollback step is planned for the config change",
        "the dispatch timeout is hard-coded instead of read from config",
        "error paths of the poller are not covered by any task",
        "two tasks edit the same module in parallel and will conflict",
    ),
    "SECURITY": (
        "agent output is passed to a shell without quoting",
        "session files are created world-readable",
        "the prompt may leak API tokens into the session log",
        "untrusted YAML is loaded without safe_load",
        "signal files are accepted from any user on the host",
    ),
    "QA": (
        "no test covers an agent that exits without output",
        "timeout handling is only tested with a mocked clock",
        "acceptance criteria for partial output are missing",
        "flaky wall-clock assertions in the polling tests",
        "no regression test for the 180 second fixed wait",
    ),
    "ARCHITECT": (
        "the poller owns process I/O and state; keep the machine pure",
        "completion detection is duplicated across the CLIs",
        "config precedence between defaults and overrides is undefined",
        "the store schema has no version for migrations",
        "retries are scattered instead of modelled as transitions",
    ),
}

GENERIC_ISSUES: tuple[str, ...] = (
    "scope of the change is larger than the plan states",
    "the plan does not say how success is measured",
    "a dependency between batches is left implicit",
    "logging is too sparse to diagnose a stuck run",
    "documentation is not updated with the new behaviour",
)

TOPIC_ISSUES: dict[str, tuple[str, ...]] = {
    "security": (
        "threat model for the new entry point is missing",
        "secrets handling is not described in the plan",
    ),
    "test": (
        "tests rely on timing instead of observable events",
        "edge cases of the new behaviour have no test",
    ),
    "timeout": (
        "timeout values are not configurable per agent",
        "a hung agent is only detected after the full timeout",
    ),
    "database": (
        "migration is not reversible",
        "queries run without a transaction boundary",
    ),
    "performance": (
        "no benchmark backs the latency claim",
        "output is buffered in memory without a bound",
    ),
}

TOPIC_WORDS: dict[str, tuple[str, ...]] = {
    "security": ("security", "secure", "auth", "token", "secret", "password"),
    "test": ("test", "tests", "testing", "qa", "coverage"),
    "timeout": ("timeout", "timeouts", "poll", "polling", "hang", "hung"),
    "database": ("database", "sql", "sqlite", "postgres", "postgresql", "migration"),
    "performance": ("performance", "latency", "slow", "fast", "memory"),
}


def normalize_role(role: str) -> str:
    """The persona as printed: one word, uppercased; ``ValueError`` for anything else."""
    word = role.strip()
    if not ROLE_PATTERN.fullmatch(word):
        raise ValueError(f"--role must be one word (letters, digits, '-', '_'), got {role!r}")
    return word.upper()


def default_verdict(role: str) -> VerdictValue:
    """The verdict a role gives when none is asked for: fixed per role, hashed for others."""
    if role in DEFAULT_VERDICTS:
        return DEFAULT_VERDICTS[role]
    verdicts = list(VerdictValue)
    return verdicts[hashlib.sha256(role.encode()).digest()[0] % len(verdicts)]


def prompt_topics(prompt: str) -> list[str]:
    """The topics (keys of :data:`TOPIC_ISSUES`) a prompt mentions, in table order."""
    words = set(re.findall(r"[a-z]+", prompt.lower()))
    return [topic for topic, keys in TOPIC_WORDS.items() if words & set(keys)]


def make_answer(role: str, prompt: str = "", verdict: VerdictValue | None = None) -> Verdict:
    """A deterministic answer for ``role`` (already normalized) and ``prompt``.

    GO has no issues; CONDITIONAL has 2-4 ``H`` (high) issues; NO-GO has 2-4 issues, the
    first ``C`` (critical). Issues about topics the prompt mentions come first.
    """
    chosen = verdict if verdict is not None else default_verdict(role)
    if chosen is VerdictValue.GO:
        return Verdict(role, chosen, ())
    seed = hashlib.sha256(f"{role}\n{prompt}".encode()).digest()
    rng = random.Random(int.from_bytes(seed[:8], "big"))
    count = rng.randint(2, 4)
    topical = [rng.choice(TOPIC_ISSUES[topic]) for topic in prompt_topics(prompt)]
    pool = [text for text in ROLE_ISSUES.get(role, GENERIC_ISSUES) if text not in topical]
    texts = (topical + rng.sample(pool, len(pool)))[:count]
    severities: list[str]
    if chosen is VerdictValue.NO_GO:
        severities = ["C", *(rng.choice(("C", "H")) for _ in texts[1:])]
    else:
        severities = ["H"] * len(texts)
    return Verdict(role, chosen,
                   tuple(Issue(s, t) for s, t in zip(severities, texts, strict=True)))


def _scalar(text: str) -> str:
    """``text`` as a YAML scalar: plain when it reads back as itself, else double-quoted.

    Checked with YAML 1.1's reading on purpose (stricter than the dispatcher's YAML 1.2
    :func:`~interlock.machines.yamlsrc.load_yaml`: ``yes`` or ``ON`` get quoted too), so any
    YAML reader gets the text back; and this module stays light (no machines import, and
    PyYAML only when an answer is written: the CLI imports this module for its options)."""
    import yaml

    try:
        plain_ok = yaml.safe_load(text) == text
    except yaml.YAMLError:
        plain_ok = False
    return text if plain_ok else json.dumps(text)


def _issue_yaml(issue: Issue) -> str:
    if issue.severity is None:
        return f"  - {_scalar(issue.text)}"
    return f"  - {issue.severity}: {_scalar(issue.text)}"


def render(answer: Verdict, fmt: AnswerFormat = AnswerFormat.YAML,
           end_marker: bool = False) -> list[str]:
    """The answer's output lines (without newlines). ``end_marker`` adds YAML's ``...``.

    :func:`~interlock.runtime.dispatch.verdict.parse_verdict` reads them back as ``answer``.
    """
    if fmt is AnswerFormat.JSON:
        doc = {"p": answer.role, "v": answer.verdict,
               "i": [issue.text if issue.severity is None else {issue.severity: issue.text}
                     for issue in answer.issues]}
        return json.dumps(doc, indent=2).splitlines()
    lines = [f"p: {_scalar(answer.role or '')}", f"v: {_scalar(answer.verdict or '')}"]
    if answer.issues:
        lines.append("i:")
        lines += [_issue_yaml(issue) for issue in answer.issues]
    else:
        lines.append("i: []")
    if end_marker:
        lines.append("...")
    return lines


def failure_message(role: str) -> str:
    """The error a failing agent prints (plausible, like a CLI whose backend is down)."""
    return (f"error: {role} review failed: model backend unavailable "
            "(HTTP 503 Service Unavailable); no answer produced")


def write_lines(lines: Sequence[str], out: TextIO, delay: float,
                sleep: Callable[[float], None] = time.sleep) -> None:
    """Write each line with a newline and flush it; pause ``delay`` seconds between lines."""
    for index, line in enumerate(lines):
        if index and delay > 0:
            sleep(delay)
        out.write(line + "\n")
        out.flush()


def run_demo_agent(
    role: str,
    *,
    delay: float = 0.2,
    linger: float = 0.0,
    verdict: VerdictValue | None = None,
    fail: bool = False,
    prompt: str = "",
    fmt: AnswerFormat = AnswerFormat.YAML,
    end_marker: bool = False,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Play one review sub-agent; returns the exit code (0 answered, 1 failed, 2 bad role)."""
    out = stdout if stdout is not None else sys.stdout
    errs = stderr if stderr is not None else sys.stderr
    try:
        name = normalize_role(role)
    except ValueError as exc:
        errs.write(f"error: {exc}\n")
        return 2
    if fail:
        if delay > 0:
            sleep(delay)
        errs.write(failure_message(name) + "\n")
        errs.flush()
        return 1
    write_lines(render(make_answer(name, prompt, verdict), fmt, end_marker), out, delay, sleep)
    if linger > 0:
        sleep(linger)
    return 0
