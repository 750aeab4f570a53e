"""The offline demo role agents' answers (seed 004's Ralph roles), as pure functions.

Each role reads its prompt for a few marker lines (each at the start of a line) and
answers with one small typed YAML document. Nothing here does I/O: the executor's files and
the librarian's promotions come back as :class:`Effects` for
:mod:`interlock.runtime.agents.role_agent` to carry out.

Markers: ``Request:`` (starts the request: the rest of that line and the lines after it up
to a blank line or another marker; without it the whole prompt minus marker lines is the
request), ``Task: ID TITLE``, ``STEER: message`` and ``INFO: message`` (pending signals;
:func:`interlock.runtime.engine.prompts.signal_lines` prints them so), ``Workdir: PATH``,
``Knowledge: PATH``, ``Docs: PATH``, ``Mode: stage|promote``, ``Batch size: N`` (the
Planner's batches; 2 when absent), ``Conflict: PATH`` (a file the Merger resolves).

>>> plan("Request: parse the file; write the report\\ntest it")["batches"]
[['T1', 'T2'], ['T3']]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Literal

from interlock.runtime.agents.ralph_protocol import classify_steer

MARKERS: tuple[str, ...] = ("Request", "Task", "STEER", "INFO", "Workdir", "Knowledge", "Docs",
                            "Mode", "Batch size", "Conflict")
_MARKER = re.compile(rf"^({'|'.join(MARKERS)})[ \t]*:[ \t]?(.*)$")
_BULLET = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
BATCH_SIZE = 2


@dataclass(frozen=True)
class PromptSignal:
    """A STEER or INFO message found in the prompt."""

    type: Literal["STEER", "INFO"]
    message: str


@dataclass(frozen=True)
class PromptFacts:
    """What the marker lines of a prompt say."""

    request: str
    tasks: tuple[tuple[str, str], ...] = ()  # (id, title)
    signals: tuple[PromptSignal, ...] = ()
    workdir: str = "."
    knowledge: str | None = None
    docs: str = ".docs"
    mode: str = "stage"
    questions: tuple[str, ...] = ()
    batch_size: int = BATCH_SIZE
    conflicts: tuple[str, ...] = ()

    @property
    def knowledge_dir(self) -> str:
        return self.knowledge or str(PurePath(self.workdir) / "knowledge")


@dataclass(frozen=True)
class Effects:
    """Files to write (path -> text) and to copy (source -> destination)."""

    writes: dict[str, str] = field(default_factory=dict)
    copies: dict[str, str] = field(default_factory=dict)


def parse_prompt(prompt: str) -> PromptFacts:
    """The facts the marker lines of ``prompt`` give."""
    values: dict[str, str] = {}
    tasks: list[tuple[str, str]] = []
    signals: list[PromptSignal] = []
    conflicts: list[str] = []
    request: list[str] | None = None
    rest: list[str] = []
    in_request = False
    for line in prompt.splitlines():
        m = _MARKER.match(line)
        if m is None:
            if in_request and line.strip():
                assert request is not None
                request.append(line.strip())
                continue
            in_request = False
            rest.append(line)
            continue
        key, value = m.group(1), m.group(2).strip()
        in_request = key == "Request"
        if key == "Request":
            request = [value] if value else []
        elif key == "Task":
            ident, _, title = value.partition(" ")
            if ident:
                tasks.append((ident, title.strip() or ident))
        elif key in ("STEER", "INFO"):
            signals.append(PromptSignal(key, value))  # type: ignore[arg-type]
        elif key == "Conflict":
            conflicts.append(value)
        else:
            values.setdefault(key, value)
    body = request if request is not None else rest
    questions = tuple(line.strip() for line in rest if line.strip().endswith("?"))
    return PromptFacts(
        request="\n".join(line for line in body if line.strip()).strip(),
        tasks=tuple(tasks), signals=tuple(signals),
        workdir=values.get("Workdir") or ".", knowledge=values.get("Knowledge") or None,
        docs=values.get("Docs") or ".docs", mode=(values.get("Mode") or "stage").lower(),
        questions=questions, conflicts=tuple(conflicts),
        batch_size=_count(values.get("Batch size"), BATCH_SIZE))


def _count(text: str | None, default: int) -> int:
    return int(text) if text is not None and text.isdigit() and int(text) > 0 else default


def clauses(request: str) -> list[str]:
    """The request's lines and ``;``-clauses, bullets stripped, empty ones dropped."""
    parts = (part for line in request.splitlines() for part in line.split(";"))
    return [text for part in parts if (text := _BULLET.sub("", part.strip()).strip())]


def plan(prompt: str) -> dict[str, Any]:
    """Planner: one task per line or ``;``-clause of the request, in batches of the size
    the prompt asks for (``Batch size: N``; 2 without)."""
    facts = parse_prompt(prompt)
    tasks = [{"id": f"T{n}", "title": title}
             for n, title in enumerate(clauses(facts.request), start=1)]
    ids = [task["id"] for task in tasks]
    size = facts.batch_size
    return {"tasks": tasks, "batches": [ids[i:i + size] for i in range(0, len(ids), size)]}


def _first_task(facts: PromptFacts) -> tuple[str, str]:
    if facts.tasks:
        return facts.tasks[0]
    titles = clauses(facts.request)
    return "T1", titles[0] if titles else "the request"


def execute(prompt: str) -> tuple[dict[str, Any], Effects]:
    """Executor: writes ``WORKDIR/<task>.md``, stages ``KNOWLEDGE/<task>.md``; a STEER is
    classified (seed 004 §3.1): a scope change blocks, redo restarts, anything else is
    applied as a constraint."""
    facts = parse_prompt(prompt)
    ident, title = _first_task(facts)
    steers = [s.message for s in facts.signals if s.type == "STEER"]
    infos = [s.message for s in facts.signals if s.type == "INFO"]
    kind = classify_steer(steers[-1]) if steers else None
    answer: dict[str, Any] = {"task": ident}
    if kind == "scope":
        answer.update(status="blocked", report=f"{ident} stopped: the scope changed",
                      files=[], staged=[], blockers=[f"STEER scope change: {steers[-1]}"],
                      steer=kind)
        return answer, Effects()
    work = str(PurePath(facts.workdir) / f"{ident}.md")
    note = str(PurePath(facts.knowledge_dir) / f"{ident}.md")
    constraints = [*steers, *infos]
    report = f"{ident} done: {title}"
    if kind == "invalidated":
        report += f" (restarted due to STEER: {steers[-1]})"
    elif constraints:
        report += f" (with {len(constraints)} constraint{'s' if len(constraints) > 1 else ''})"
    lines = [f"# {ident}: {title}", "", "Done by the demo executor."]
    lines += [f"- constraint: {text}" for text in constraints]
    answer.update(status="done", report=report, files=[work], staged=[note], blockers=[])
    if kind is not None:
        answer["steer"] = kind
    effects = Effects(writes={
        work: "\n".join(lines) + "\n",
        note: f"# {title}\n\nLearned while doing {ident}: {title}.\n",
    })
    return answer, effects


def review(prompt: str) -> dict[str, Any]:
    """Reviewer: accepts (a script can make it reject)."""
    facts = parse_prompt(prompt)
    return {"verdict": "accept", "tasks": [ident for ident, _ in facts.tasks], "findings": []}


def ask(prompt: str) -> dict[str, Any]:
    """Questioner: one text question per line of the prompt that ends in ``?``; without
    any, a confirm and a select question about the request. A prompt with an
    ``Interview: STAGE`` line is a poller interview's (seed 000): see :func:`poll`."""
    if _INTERVIEW.search(prompt):
        return poll(prompt)
    facts = parse_prompt(prompt)
    if facts.questions:
        return {"questions": [{"id": f"q{n}", "kind": "text", "prompt": text, "options": []}
                              for n, text in enumerate(facts.questions, start=1)]}
    return {"questions": [
        {"id": "q1", "kind": "confirm", "prompt": "Proceed with the request as written?",
         "options": []},
        {"id": "q2", "kind": "select", "prompt": "How much should the first iteration cover?",
         "options": [{"key": "minimal", "label": "The smallest useful slice"},
                     {"key": "full", "label": "Everything the request asks for"}]},
    ]}


def librarian(prompt: str, staged: list[str]) -> tuple[dict[str, Any], Effects]:
    """Librarian: ``Mode: stage`` lists the staged notes (``staged``: their names in the
    knowledge folder); ``Mode: promote`` copies them to the docs folder, reconciling the
    notes carried forward from earlier iterations (``carried-i<N>-<name>``): one restaged
    since supersedes its carried copy, otherwise the carried note is promoted under its
    own name, its ``carried_from`` marker kept."""
    facts = parse_prompt(prompt)
    if facts.mode != "promote":
        return {"mode": "stage", "staged": staged, "promoted": []}, Effects()
    copies: dict[str, str] = {}
    reconciled: dict[str, str] = {}
    for name in staged:
        found = _CARRIED.match(name)
        target = found.group(1) if found else name
        if found and target in staged:
            reconciled[name] = f"superseded by {target}, staged since"
            continue
        if found:
            reconciled[name] = f"promoted as {target}"
        copies[str(PurePath(facts.knowledge_dir) / name)] = str(PurePath(facts.docs) / target)
    return ({"mode": "promote", "staged": staged, "promoted": list(copies.values()),
             "reconciled": reconciled}, Effects(copies=copies))


_CARRIED = re.compile(r"^carried-i\d+-(.+)$")


# -- the poller interview (seed 000) --------------------------------------------------------

_INTERVIEW = re.compile(r"^Interview:[ \t]*(\w+)", re.M)
_LINE = re.compile(r"^(Trigger|Category|Section|Issues|Round):[ \t]*(.*)$", re.M)
_TOP: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "retry": ("What's wrong?", [("A", "Output too shallow"), ("B", "Facts are wrong"),
                                ("C", "Wrong format"), ("D", "Off topic")]),
    "deepen": ("Which section needs depth?", [("A", "Performance"), ("B", "Examples"),
                                              ("C", "Edge cases"), ("D", "Sources")]),
    "redirect": ("What direction instead?", [("A", "Simpler approach"),
                                             ("B", "Different data source"),
                                             ("C", "Another audience"),
                                             ("D", "Start from the tests")]),
}
_NARROW = ("What's missing?", [("A", "Performance benchmarks for the sprite sheet"),
                               ("B", "Worked examples"), ("C", "Error handling"),
                               ("D", "References")])
_REFINE = {
    "wrong_section": "Put it under 'Rendering' instead of a new section",
    "wrong_metric": "Focus on 36-hex render time specifically",
    "too_specific": "Give higher-level guidance, not exact numbers",
}


def _options(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"key": key, "label": label} for key, label in pairs]


def poll(prompt: str) -> dict[str, Any]:
    """The demo poller: the category and narrowing questions of seed 000 as typed select
    questions, then a suggested fix (``Interview: suggest``) and refinements from the Close
    branch's issues (``Interview: refine``, ``Issues: wrong_metric, ...``)."""
    found = _INTERVIEW.search(prompt)
    stage = found.group(1).lower() if found else "category"
    lines = {key.lower(): value.strip() for key, value in _LINE.findall(prompt)}
    trigger = lines.get("trigger", "retry") or "retry"
    if stage == "category":
        text, pairs = _TOP.get(trigger, _TOP["retry"])
        return {"questions": [{"id": "category", "kind": "select", "prompt": text,
                               "options": _options(pairs)}]}
    if stage == "narrow":
        text, pairs = _NARROW
        return {"questions": [{"id": "narrow", "kind": "select", "prompt": text,
                               "options": _options(pairs)}]}
    category = lines.get("category") or "output too shallow"
    section = lines.get("section") or "more detail"
    fix = f"Add a '{section.split()[0].title()}' section: {section}"
    if stage == "refine":
        issues = [i.strip() for i in lines.get("issues", "").split(",") if i.strip()]
        corrections = [_REFINE[i] for i in issues if i in _REFINE]
        return {"questions": [],
                "interpretation": f"You said: {category.lower()}. Missing: {section}. "
                                  f"Refined fix: {'; '.join(corrections) or fix}.",
                "corrections": corrections, "context_additions": []}
    return {"questions": [],
            "interpretation": f"You said: {category.lower()}. Missing: {section}. "
                              f"Suggested fix: {fix}.",
            "corrections": [fix],
            "context_additions": ["wiki/research/sprite-formats.md#performance"]}


_CONFLICT = re.compile(r"^<<<<<<< [^\n]*\n(.*?)^=======\n(.*?)^>>>>>>> [^\n]*\n?",
                       re.MULTILINE | re.DOTALL)


def keep_both(text: str) -> str:
    """``text`` with each git conflict block replaced by both of its sides, ours first."""
    return _CONFLICT.sub(lambda m: m.group(1) + m.group(2), text)


def merge(prompt: str, contents: dict[str, str]) -> tuple[dict[str, Any], Effects]:
    """Merger: each ``Conflict: PATH`` of the prompt (relative to ``Workdir:``; ``contents``
    holds their text) resolved by keeping both sides of every conflict block."""
    facts = parse_prompt(prompt)
    writes = {str(PurePath(facts.workdir) / path): keep_both(contents[path])
              for path in facts.conflicts if path in contents}
    resolved = [path for path in facts.conflicts if path in contents]
    answer = {"status": "done" if resolved else "blocked",
              "report": (f"merged by keeping both sides: {', '.join(resolved)}" if resolved
                         else "no conflicted file to resolve"),
              "files": resolved, "staged": [],
              "blockers": [] if resolved else ["no conflicted file given"]}
    return answer, Effects(writes=writes)
