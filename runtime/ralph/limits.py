"""The engine's limits and safety nets, as pure policy.

* :func:`check` says whether a session must stop before its next invocation:
  ``max_iterations``, ``max_runtime``, ``max_cost`` or ``no_progress``, with a line a
  person can read. The engine enforces it; the agent is never asked.
* :func:`progress_digest` fingerprints the tasks done and accepted and the project's
  files (their contents), so "nothing changed" is measured, not claimed (a parallel
  batch's work, in its worktrees, shows as its tasks done and accepted);
  :class:`ProgressWatch` counts invocations in a row that led to no state not seen
  before: an agent that rewrites the same files, or a loop that goes round the same
  states (rejected, replanned, redone the same way), makes no progress.
* :func:`is_transient` classifies an agent failure by exit code or output pattern, and
  :func:`backoff_delay` gives the capped exponential backoff with full jitter before a
  retry (an injectable RNG; nothing here sleeps or reads the time).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml

from interlock.machines.durations import format_duration
from interlock.machines.yamlsrc import load_yaml
from interlock.runtime.agents.ralph_protocol import review_verdict
from interlock.runtime.config.ralph import RalphConfig, RetryPolicy
from interlock.runtime.ralph.folder import parse_progress

StopKind = Literal["max_iterations", "max_runtime", "max_cost", "no_progress"]
STOP_KINDS: tuple[str, ...] = ("max_iterations", "max_runtime", "max_cost", "no_progress")

#: Folders never part of the project's progress: the session itself, interlock's own
#: state, version control and caches.
IGNORED_DIRS = frozenset({".ralph-sessions", ".interlock", ".git", ".hg", ".venv",
                          "__pycache__", "node_modules", ".mypy_cache", ".ruff_cache",
                          ".pytest_cache"})


@dataclass(frozen=True, slots=True)
class ProgressSnapshot:
    """Where a session stands, as the engine measured it: iterations finished, when it
    started (clock seconds), what it has cost so far (USD), and how many invocations in a
    row changed neither progress.md nor the project's files."""

    iterations_done: int
    started_at: float
    cost_usd: float = 0.0
    invocations_without_progress: int = 0


@dataclass(frozen=True, slots=True)
class StopReason:
    """Why the engine ended a session: ``kind`` for programs, ``detail`` for people."""

    kind: StopKind
    detail: str

    def to_json(self) -> dict[str, Any]:
        """The form written to metadata.yaml (``stop: {reason, detail}``)."""
        return {"reason": self.kind, "detail": self.detail}


def check(snapshot: ProgressSnapshot, config: RalphConfig, now: float) -> StopReason | None:
    """The first limit ``snapshot`` has reached at ``now``, or None to go on. Call it
    before every invocation (and before starting an iteration).

    >>> config = RalphConfig(max_iterations=3)
    >>> check(ProgressSnapshot(3, started_at=0.0), config, now=10.0).detail
    'reached max_iterations: 3 iterations done, the limit is 3'
    >>> check(ProgressSnapshot(2, started_at=0.0), config, now=10.0) is None
    True
    """
    if config.max_iterations is not None and snapshot.iterations_done >= config.max_iterations:
        return StopReason("max_iterations", (
            f"reached max_iterations: {snapshot.iterations_done} iterations done, "
            f"the limit is {config.max_iterations}"))
    elapsed = max(0.0, now - snapshot.started_at)
    if config.max_runtime is not None and elapsed >= config.max_runtime:
        return StopReason("max_runtime", (
            f"reached max_runtime: ran {format_duration(round(elapsed, 3))}, "
            f"the limit is {format_duration(config.max_runtime)}"))
    if config.max_cost is not None and snapshot.cost_usd >= config.max_cost:
        return StopReason("max_cost", (
            f"reached max_cost: spent ${snapshot.cost_usd:.2f}, "
            f"the limit is ${config.max_cost:.2f}"))
    limit = config.no_progress_limit
    if limit is not None and snapshot.invocations_without_progress >= limit:
        return StopReason("no_progress", (
            f"no progress: {snapshot.invocations_without_progress} invocations in a row "
            f"finished no task and changed none of the project's files (limit {limit})"))
    return None


# ---------------------------------------------------------------------------------------
# progress


def _git_files(project: Path) -> list[str] | None:
    """The project's files as git sees them (tracked, plus untracked not ignored), or
    None when ``project`` is not in a git work tree (asked of git only when a ``.git``
    is in the project or above it, or ``GIT_DIR`` is set: starting git to hear "not a
    repository" cost more than the rest of a digest)."""
    if not _may_be_git(project):
        return None
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=project, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return sorted({p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p})


def _may_be_git(project: Path) -> bool:
    if os.environ.get("GIT_DIR"):
        return True
    folder = project.resolve()
    return any((parent / ".git").exists() for parent in (folder, *folder.parents))


def _walked_files(project: Path) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(project):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIRS)
        rel = Path(folder).relative_to(project)
        found += [str(rel / f) if str(rel) != "." else f for f in files]
    return sorted(found)


def project_files(project: Path | str) -> list[str]:
    """The project's files, relative paths, sorted: git's view when it is a git work tree,
    else a walk; never anything under :data:`IGNORED_DIRS`."""
    root = Path(project)
    files = _git_files(root)
    if files is None:
        files = _walked_files(root)
    return [f for f in files if not IGNORED_DIRS.intersection(Path(f).parts)]


class FileFacts:
    """What a file's content gives (its hash, a review's verdict), remembered by the
    file's (path, size, mtime): an unchanged file is read once per process however often
    the digest is taken."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str, int, int], str] = {}

    def get(self, kind: str, path: Path, read: Callable[[Path], str]) -> str:
        """``read(path)``, or what it gave for the same file unchanged (``kind`` keeps
        the facts of one file apart). Raises OSError like ``stat``."""
        info = path.stat()
        key = (kind, str(path), info.st_size, info.st_mtime_ns)
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = read(path)
        return known


SEEN_KEPT = 256  # digests a ProgressWatch remembers
SEEN_CHARS = 16  # of each (64 bits of SHA-256: enough to tell states apart)


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def done_tasks(progress_md: Path | str) -> list[str]:
    """The tasks progress.md marks done (``- [x] T1: title``), as ``T1: title`` lines."""
    try:
        text = Path(progress_md).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [f"{t.id}: {t.title}" for t in parse_progress(text)[0] if t.marker == "x"]


def accepted_reviews(reviews: Path | str, facts: FileFacts | None = None) -> list[str]:
    """The tasks whose review in ``reviews`` (an iteration's folder of them) accepts the
    work, read as the orchestrator reads it (:func:`review_verdict`); ``facts`` keeps
    the verdicts of unchanged reviews between calls."""
    folder = Path(reviews)
    facts = facts or FileFacts()
    accepted: list[str] = []
    for review in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        try:
            verdict = facts.get("verdict", review, _verdict)
        except OSError:
            continue
        if verdict == "accept":
            accepted.append(review.stem)
    return accepted


def _verdict(review: Path) -> str:
    try:
        answer = load_yaml(review.read_text(encoding="utf-8"))
    except (ValueError, yaml.YAMLError):
        return ""  # being written, or not a review: not an acceptance
    return review_verdict(answer) if isinstance(answer, dict) else ""


def progress_digest(project: Path | str, progress_md: Path | str | None = None, *,
                    facts: FileFacts | None = None, reviews: Path | None = None) -> str:
    """A SHA-256 over the tasks progress.md marks done, the tasks ``reviews`` accept and
    each project file's path and content (``facts`` keeps what unchanged files gave
    between calls). Equal digests: nothing done is different, whatever was rewritten. A
    task failed, blocked or rejected, a replan that words the same work anew: none of
    them is progress, so a loop of failing iterations ends at the limit even when its
    planner never writes the same plan twice."""
    root = Path(project)
    facts = facts or FileFacts()
    digest = hashlib.sha256()
    if progress_md is not None:
        for line in done_tasks(progress_md):
            digest.update(f"done {line}\n".encode())
    if reviews is not None:
        for task in accepted_reviews(reviews, facts):
            digest.update(f"accepted {task}\n".encode())
    digest.update(b"\0files\0")
    for name in project_files(root):
        path = root / name
        try:
            content = facts.get("sha256", path, _file_hash)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            continue  # listed by git, deleted since; or not a readable file
        digest.update(f"{name}\0{content}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


class ProgressWatch:
    """Counts invocations in a row that led to no state not seen before (the same
    digest as the last one, or as any earlier one: a loop).

    >>> watch = ProgressWatch("a")
    >>> watch.observe("a"), watch.observe("b"), watch.observe("a"), watch.observe("c")
    (1, 0, 1, 0)
    """

    def __init__(self, digest: str | None = None, *, count: int = 0,
                 seen: list[str] | None = None) -> None:
        self.digest = digest
        self.count = count
        self.seen: list[str] = list(seen or ([digest[:SEEN_CHARS]] if digest else []))

    def observe(self, digest: str, invocations: int = 1) -> int:
        """Record the digest after ``invocations`` that ended together (one digest for
        all: a new state counts as their progress); returns invocations without
        progress."""
        key = digest[:SEEN_CHARS]
        if key in self.seen:
            self.count += invocations
        else:
            self.seen = [*self.seen, key][-SEEN_KEPT:]
            self.count = 0
        self.digest = digest
        return self.count


# ---------------------------------------------------------------------------------------
# transient failures and backoff


class Random(Protocol):
    def uniform(self, a: float, b: float) -> float: ...


def is_transient(exit_code: int | None, output: str, policy: RetryPolicy) -> bool:
    """Whether a failed invocation (``exit_code`` not 0, or None for no exit) is one to
    retry: its exit code is listed, or its output matches a listed pattern.

    >>> policy = RetryPolicy(exit_codes=(75,), output_patterns=("No messages returned",))
    >>> is_transient(75, "", policy), is_transient(1, "Error: No messages returned", policy)
    (True, True)
    >>> is_transient(1, "syntax error", policy), is_transient(0, "No messages returned", policy)
    (False, False)
    """
    if exit_code == 0:
        return False
    if exit_code is not None and exit_code in policy.exit_codes:
        return True
    return any(re.search(p, output, re.MULTILINE) for p in policy.output_patterns)


def backoff_ceiling(retry: int, policy: RetryPolicy) -> float:
    """The longest wait before retry number ``retry`` (from 1): base * 2**(retry-1),
    capped at max_delay."""
    if retry < 1:
        raise ValueError("retries count from 1")
    exponent = min(retry - 1, 64)
    return float(min(policy.max_delay, policy.base_delay * 2.0 ** exponent))


def backoff_delay(retry: int, policy: RetryPolicy, rng: Random | None = None) -> float:
    """The wait before retry ``retry``: uniform in [0, ceiling] ("full jitter").

    >>> policy = RetryPolicy(base_delay=1, max_delay=5)
    >>> [backoff_ceiling(n, policy) for n in (1, 2, 3, 4)]
    [1.0, 2.0, 4.0, 5.0]
    """
    return (rng or random).uniform(0.0, backoff_ceiling(retry, policy))


def backoff_schedule(policy: RetryPolicy, rng: Random | None = None) -> list[float]:
    """The waits between the ``policy.attempts`` tries (one fewer than the tries)."""
    return [backoff_delay(n, policy, rng) for n in range(1, policy.attempts)]



class SessionLimits:
    """The limits of one session as the engine tracks them: call :meth:`invocation_done`
    after each agent invocation (with the progress digest and its cost),
    :meth:`iteration_done` after each iteration, and :meth:`check` before the next
    invocation. :meth:`to_json`/:meth:`from_json` keep the counts across a resume (in
    metadata.yaml)."""

    def __init__(self, config: RalphConfig, started_at: float, *, iterations_done: int = 0,
                 cost_usd: float = 0.0, digest: str | None = None,
                 without_progress: int = 0, seen: list[str] | None = None) -> None:
        self.config = config
        self.started_at = started_at
        self.iterations_done = iterations_done
        self.cost_usd = cost_usd
        self.watch = ProgressWatch(digest, count=without_progress, seen=seen)

    def invocation_done(self, digest: str, cost_usd: float | None = None, *,
                        invocations: int = 1) -> int:
        """Record ``invocations`` that ended together (a parallel batch's); returns
        invocations in a row without progress."""
        self.cost_usd += cost_usd or 0.0
        return self.watch.observe(digest, invocations)

    def iteration_done(self) -> None:
        self.iterations_done += 1

    def snapshot(self) -> ProgressSnapshot:
        return ProgressSnapshot(self.iterations_done, self.started_at, self.cost_usd,
                                self.watch.count)

    def check(self, now: float) -> StopReason | None:
        return check(self.snapshot(), self.config, now)

    def to_json(self) -> dict[str, Any]:
        return {"started_at": self.started_at, "iterations_done": self.iterations_done,
                "cost_usd": self.cost_usd, "progress_digest": self.watch.digest,
                "invocations_without_progress": self.watch.count,
                "progress_seen": list(self.watch.seen)}

    @classmethod
    def from_json(cls, config: RalphConfig, data: dict[str, Any]) -> SessionLimits:
        seen = [str(d) for d in data.get("progress_seen") or []]
        return cls(config, float(data["started_at"]),
                   iterations_done=int(data.get("iterations_done", 0)),
                   cost_usd=float(data.get("cost_usd", 0.0)),
                   digest=data.get("progress_digest"),
                   without_progress=int(data.get("invocations_without_progress", 0)),
                   seen=seen)
