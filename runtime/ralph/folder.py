"""A Ralph session's folder, ``.ralph-sessions/<ID>/``, as seed 004 names it.

``metadata.yaml`` (``orchestrator.state``, ``status``, ``iteration``), ``request.md``,
``signals/`` (the mailbox), ``iterations/<N>/metadata.yaml`` (``started_at``,
``completed_at``), ``iterations/<N>/progress.md`` (``- [ ] task-id: title``, markers
``[ ] [/] [x] [F]``, a reason after ``[F]``), ``iterations/<N>/tasks/<task>.md``,
``iterations/<N>/reviews/<task>.md``, ``iterations/<N>/knowledge/`` and
``iterations/<N>/invocations/<seq>-<role>.md``. Every write is whole or absent (a
temporary beside the file, then a rename), so a SIGKILL at any point leaves the folder
consistent.

>>> render_progress([Task("T1", "write it", "F", "Aborted by signal")])
'- [F] T1: write it — Aborted by signal\\n'
"""

from __future__ import annotations

import fcntl
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from interlock.runtime.signals.addressing import RALPH_SESSIONS_DIR
from interlock.runtime.signals.mailbox import Mailbox, write_atomically
from interlock.runtime.signals.model import check_identifier

MARKERS = (" ", "/", "x", "F")
_LINE = re.compile(r"^- \[(?P<m>[ /xF])\] (?P<id>[^:\s]+): (?P<title>.*?)(?: — (?P<why>.*))?$")


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


@dataclass(frozen=True, slots=True)
class Task:
    """One line of progress.md."""

    id: str
    title: str
    marker: str = " "
    reason: str | None = None


def render_progress(tasks: list[Task], note: str | None = None) -> str:
    lines = []
    for task in tasks:
        line = f"- [{task.marker}] {task.id}: {task.title}"
        if task.reason:
            line += f" — {task.reason}"
        lines.append(line)
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def parse_progress(text: str) -> tuple[list[Task], str | None]:
    tasks: list[Task] = []
    notes: list[str] = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m is not None:
            tasks.append(Task(m["id"], m["title"], m["m"], m["why"]))
        elif line.strip():
            notes.append(line.strip())
    return tasks, ("\n".join(notes) or None)


def session_folder(root: Path, session_id: str) -> Path:
    return root / RALPH_SESSIONS_DIR / check_identifier(session_id, "Ralph session id")


def write_text(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (parents made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text.encode("utf-8"), durable=False)


# libyaml's loader and dumper when PyYAML has them (the runner rewrites metadata.yaml at
# every state change): the same documents, several times faster
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def write_yaml(path: Path, data: dict[str, Any]) -> None:
    write_text(path, yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                               width=1000))


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except FileNotFoundError:
        return {}
    return data if isinstance(data, dict) else {}


class RalphFolder:
    """The files of one Ralph session."""

    def __init__(self, root: Path, session_id: str) -> None:
        self.root = root
        self.id = session_id
        self.path = session_folder(root, session_id)

    # -- paths --------------------------------------------------------------------------

    @property
    def metadata_path(self) -> Path:
        return self.path / "metadata.yaml"

    @property
    def request_path(self) -> Path:
        return self.path / "request.md"

    @property
    def docs(self) -> Path:
        """Promoted knowledge lives in the project, beside the sessions folder."""
        return self.root / ".docs"

    @property
    def workdir(self) -> Path:
        """Where the executor works: the project folder."""
        return self.root

    def iteration(self, n: int) -> Path:
        return self.path / "iterations" / str(n)

    def mailbox(self) -> Mailbox:
        return Mailbox(self.path)

    def exists(self) -> bool:
        return self.metadata_path.is_file()

    # -- session ------------------------------------------------------------------------

    def create(self, request: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.mailbox()
        write_text(self.request_path, request.rstrip() + "\n")
        write_yaml(self.metadata_path, {
            "session_id": self.id, "orchestrator": {"state": "PLANNING"},
            "status": "running", "iteration": 1, "created_at": now_iso()})

    def request(self) -> str:
        return self.request_path.read_text(encoding="utf-8").strip()

    def metadata(self) -> dict[str, Any]:
        return read_yaml(self.metadata_path)

    def update_metadata(self, **fields: Any) -> dict[str, Any]:
        """Set (None: remove) ``fields`` of metadata.yaml (see :meth:`edit_metadata`)."""

        def change(data: dict[str, Any]) -> None:
            for key, value in fields.items():
                if key == "state":
                    data.setdefault("orchestrator", {})["state"] = value
                elif value is None:
                    data.pop(key, None)
                else:
                    data[key] = value

        return self.edit_metadata(change)

    def edit_metadata(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """metadata.yaml read, changed in place by ``change`` and written back, one edit at
        a time across threads and processes (a lock file beside it), so none is lost."""
        with self._locked(".metadata.lock"):
            data = self.metadata()
            change(data)
            write_yaml(self.metadata_path, data)
        return data

    @contextmanager
    def _locked(self, name: str) -> Iterator[None]:
        """Hold the lock file ``name`` in the session folder: one holder at a time across
        threads (each child session steps in its own) and processes."""
        self.path.mkdir(parents=True, exist_ok=True)
        with (self.path / name).open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def record_worktree(self, task: str, line: dict[str, Any] | None) -> None:
        """Set (None: drop) ``task``'s line in metadata.yaml's ``worktrees``."""
        self._edit_worktrees({task: line})

    def forget_worktrees(self, tasks: list[str]) -> None:
        """Drop ``tasks`` from metadata.yaml's ``worktrees`` (they were removed)."""
        if tasks:
            self._edit_worktrees(dict.fromkeys(tasks))

    def _edit_worktrees(self, lines: dict[str, dict[str, Any] | None]) -> None:
        """Set (None: drop) each task's line of ``worktrees``, in one edit."""

        def change(data: dict[str, Any]) -> None:
            trees = dict(data.get("worktrees") or {})
            for task, line in lines.items():
                if line is None:
                    trees.pop(task, None)
                else:
                    trees[task] = line
            if trees:
                data["worktrees"] = trees
            else:
                data.pop("worktrees", None)

        self.edit_metadata(change)

    # -- iterations ---------------------------------------------------------------------

    def open_iteration(self, n: int) -> None:
        meta = self.iteration(n) / "metadata.yaml"
        if not meta.exists():
            write_yaml(meta, {"iteration": n, "started_at": now_iso()})
        for sub in ("tasks", "reviews", "knowledge", "invocations"):
            (self.iteration(n) / sub).mkdir(parents=True, exist_ok=True)

    def close_iteration(self, n: int) -> None:
        meta = self.iteration(n) / "metadata.yaml"
        data = read_yaml(meta)
        if "completed_at" not in data:
            data["completed_at"] = now_iso()
            write_yaml(meta, data)

    def progress(self, n: int) -> list[Task]:
        try:
            text = (self.iteration(n) / "progress.md").read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return parse_progress(text)[0]

    def write_progress(self, n: int, tasks: list[Task], note: str | None = None) -> None:
        write_text(self.iteration(n) / "progress.md", render_progress(tasks, note))

    def edit_progress(self, n: int, change: Callable[[list[Task]], list[Task]],
                      note: str | None = None) -> None:
        """progress.md's tasks read, changed by ``change`` and written back under a lock:
        the Executors of a parallel batch mark their tasks at the same time."""
        with self._locked(".progress.lock"):
            self.write_progress(n, change(self.progress(n)), note)

    def mark(self, n: int, task_id: str, marker: str, reason: str | None = None,
             note: str | None = None) -> None:
        self.edit_progress(n, lambda tasks: [
            Task(t.id, t.title, marker, reason) if t.id == task_id else t for t in tasks], note)

    def note_correction(self, n: int, task_id: str, resolution: str) -> None:
        """One line in ``iterations/<n>/corrections.md``: how the human's review of a
        rejected task ended (the correction itself is staged in the store)."""
        path = self.iteration(n) / "corrections.md"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = f"# Corrections of the tasks rejected before iteration {n}\n\n"
        write_text(path, text + f"- {task_id}: {resolution} ({now_iso()})\n")

    def staged(self, n: int) -> list[str]:
        folder = self.iteration(n) / "knowledge"
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if p.is_file())
