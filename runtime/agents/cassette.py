"""Cassettes: record every agent invocation to JSONL, replay it without the agent.

A cassette is a JSON Lines file, one :class:`RecordedInvocation` per invocation in the
order they started: its ``seq`` (from 1), the agent's name (a role), the SHA-256 of its
prompt, its argv, every chunk it printed on stdout and stderr with the offset in seconds
from the start, the files it changed under the recorded folder, its exit code (None:
stopped before it exited) and how it ended.

Both sides wrap an agent resolver (``AgentResolver``, docs/invoke.md), so every agent an
``invoke:`` starts goes through them and the engine's invoke machinery (spooling,
completion detection, cancel, adoption) runs for real:

* :class:`CassetteRecorder` numbers each invocation as it starts and swaps the agent's
  argv for the recorder process (``python -m interlock.runtime.agents.record [--root ROOT]
  CASSETTE SEQ NAME DIGEST -- ARGV...``), which runs the real agent, passes its output
  through as it comes, and appends the record (under a lock) when the agent ends.
* :class:`CassettePlayer` matches each invocation to the next record by order, name and
  prompt digest (a mismatch is a :class:`CassetteMismatch` naming the invocation: the
  invoke fails with ``spawn_error``), then swaps the command for the replayer process
  (``python -m interlock.runtime.agents.replay CASSETTE SEQ``), which writes the recorded
  files, prints the recorded chunks with their timing (``speed`` compresses it) and exits
  with the recorded code, or lingers until stopped when the agent was stopped.

The prompt digest is over the prompt sent on stdin; for an agent whose prompt is in its
argv (no stdin), over the argv after the program, joined with NULs.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from interlock.runtime.config.agents import AgentLaunch

if TYPE_CHECKING:
    from interlock.runtime.agents.invoke import AgentResolver, ResolvedAgent

Stream = Literal["stdout", "stderr"]
CASSETTE_VERSION = 1
REPLAY_MODULE = "interlock.runtime.agents.replay"
RECORD_MODULE = "interlock.runtime.agents.record"
#: Folders whose files are never recorded: version control, interlock's state, caches.
SKIPPED_DIRS = frozenset({".git", ".hg", ".interlock", ".venv", "__pycache__",
                          "node_modules", ".mypy_cache", ".ruff_cache", ".pytest_cache"})
MAX_FILE_BYTES = 4 << 20  # a bigger file written by an agent is not recorded
#: Stands for the recorded folder in prompts, output and files, so a cassette recorded in
#: one folder replays in another.
ROOT_PLACEHOLDER = "{{interlock.root}}"


class CassetteError(Exception):
    """A cassette cannot be read or written; the message names the file and line."""


class CassetteMismatch(CassetteError):
    """The invocation being replayed is not the one the cassette recorded next."""


def portable(data: bytes, root: Path | None) -> bytes:
    """``data`` with every occurrence of the folder ``root`` written as the placeholder."""
    if root is None:
        return data
    return data.replace(str(root).encode(), ROOT_PLACEHOLDER.encode())


def localized(data: bytes, root: Path | None) -> bytes:
    """The reverse of :func:`portable`: the placeholder becomes the folder ``root``."""
    if root is None:
        return data
    return data.replace(ROOT_PLACEHOLDER.encode(), str(root).encode())


def prompt_digest(prompt: str | None, argv: Sequence[str], root: Path | None = None) -> str:
    """SHA-256 of the prompt (stdin), or of the argv after the program when there is none,
    with the folder ``root`` written as the placeholder."""
    text = prompt if prompt is not None else "\0".join(argv[1:])
    return hashlib.sha256(portable(text.encode("utf-8", "surrogateescape"), root)).hexdigest()


def _encode(data: bytes) -> dict[str, str]:
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(data).decode("ascii")}


def _decode(item: Mapping[str, Any]) -> bytes:
    if "text" in item:
        return str(item["text"]).encode("utf-8")
    return base64.b64decode(str(item["b64"]))


@dataclass(frozen=True, slots=True)
class Chunk:
    """One read of the agent's output: which stream, seconds from the start, the bytes."""

    stream: Stream
    at: float
    data: bytes

    def to_json(self) -> dict[str, Any]:
        return {"stream": self.stream, "at": round(self.at, 6), **_encode(self.data)}

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> Chunk:
        stream = item["stream"]
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"unknown stream {stream!r}")
        return cls(stream, float(item["at"]), _decode(item))


@dataclass(frozen=True, slots=True)
class FileChange:
    """A file the agent wrote (``data``) or deleted (``data`` None), relative to the root."""

    path: str
    data: bytes | None

    def to_json(self) -> dict[str, Any]:
        if self.data is None:
            return {"path": self.path, "deleted": True}
        return {"path": self.path, **_encode(self.data)}

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> FileChange:
        path = str(item["path"])
        if Path(path).is_absolute() or ".." in Path(path).parts:
            raise ValueError(f"file path {path!r} leaves the root")
        return cls(path, None if item.get("deleted") else _decode(item))


@dataclass(frozen=True, slots=True)
class RecordedInvocation:
    """One recorded invocation."""

    seq: int
    name: str | None
    prompt_sha256: str
    argv: tuple[str, ...]
    chunks: tuple[Chunk, ...]
    exit_code: int | None
    ended_at: float
    status: str
    completion_method: str | None
    files: tuple[FileChange, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"version": CASSETTE_VERSION, "seq": self.seq, "name": self.name,
                "prompt_sha256": self.prompt_sha256, "argv": list(self.argv),
                "exit": self.exit_code, "ended_at": round(self.ended_at, 6),
                "status": self.status, "completion_method": self.completion_method,
                "chunks": [c.to_json() for c in self.chunks],
                "files": [f.to_json() for f in self.files]}

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> RecordedInvocation:
        exit_code = item["exit"]
        return cls(seq=int(item["seq"]), name=item.get("name"),
                   prompt_sha256=str(item["prompt_sha256"]),
                   argv=tuple(str(a) for a in item["argv"]),
                   chunks=tuple(Chunk.from_json(c) for c in item["chunks"]),
                   exit_code=None if exit_code is None else int(exit_code),
                   ended_at=float(item["ended_at"]), status=str(item["status"]),
                   completion_method=item.get("completion_method"),
                   files=tuple(FileChange.from_json(f) for f in item.get("files", ())))

    def label(self) -> str:
        return f"invocation {self.seq}" + (f" ({self.name})" if self.name else "")


def read_cassette(path: Path | str) -> list[RecordedInvocation]:
    """Every record of the cassette at ``path``, in ``seq`` order (parallel invocations
    are written as they end, numbered as they started). Raises :class:`CassetteError`
    naming ``FILE:LINE`` for a line that is not a record."""
    file = Path(path)
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CassetteError(f"{file}: cannot read the cassette: {exc.strerror or exc}") from None
    records: list[RecordedInvocation] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if item.get("version") != CASSETTE_VERSION:
                raise ValueError(f"unsupported cassette version {item.get('version')!r}")
            record = RecordedInvocation.from_json(item)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            reason = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise CassetteError(f"{file}:{number}: not a cassette record: {reason}") from None
        records.append(record)
    records.sort(key=lambda r: r.seq)
    if [r.seq for r in records] != list(range(1, len(records) + 1)):
        raise CassetteError(f"{file}: the invocations are not numbered 1 to {len(records)}")
    return records


# ---------------------------------------------------------------------------------------
# the files an agent writes


def _files(root: Path) -> Iterator[Path]:
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        for name in names:
            yield Path(folder) / name


def folder_state(root: Path) -> dict[str, tuple[int, int]]:
    """Each file under ``root`` (relative path) with its size and mtime."""
    state: dict[str, tuple[int, int]] = {}
    for path in _files(root):
        try:
            info = path.stat()
        except FileNotFoundError:
            continue
        state[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns)
    return state


def changed_files(root: Path, before: Mapping[str, tuple[int, int]]) -> list[FileChange]:
    """The files under ``root`` written or deleted since ``before`` was taken."""
    after = folder_state(root)
    changes: list[FileChange] = []
    for name in sorted(after):
        if before.get(name) == after[name] or after[name][0] > MAX_FILE_BYTES:
            continue
        try:
            changes.append(FileChange(name, portable((root / name).read_bytes(), root)))
        except OSError:
            continue
    changes += [FileChange(name, None) for name in sorted(set(before) - set(after))]
    return changes


def apply_changes(root: Path, changes: Sequence[FileChange]) -> None:
    """Write (or delete) recorded files under ``root`` (the placeholder becomes ``root``)."""
    for change in changes:
        target = root / change.path
        if change.data is None:
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(localized(change.data, root))


# ---------------------------------------------------------------------------------------
# recording and replaying, around an agent resolver


def launch_digest(launch: AgentLaunch, root: Path | None = None) -> str:
    """:func:`prompt_digest` of an agent launch."""
    return prompt_digest(launch.stdin, launch.argv, root)


def append_record(path: Path, record: RecordedInvocation) -> None:
    """Append ``record`` to the cassette at ``path`` (several recorder processes may end at
    once: each line is written whole, under an exclusive lock)."""
    line = (json.dumps(record.to_json(), ensure_ascii=False) + "\n").encode("utf-8")
    with path.open("ab") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        out.write(line)
        out.flush()
        os.fsync(out.fileno())


class CassetteRecorder:
    """Records every agent invocation of the resolvers it wraps as the next record of the
    cassette at ``path`` (created, or truncated unless ``append``). ``root``: the folder
    whose file changes are recorded (None: none)."""

    def __init__(self, path: Path | str, *, root: Path | str | None = None,
                 append: bool = False) -> None:
        self.path = Path(path).resolve()
        self.root = None if root is None else Path(root).resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if append and self.path.exists():
            self.seq = len(read_cassette(self.path))
        else:
            self.path.write_text("", encoding="utf-8")
            self.seq = 0
        self._lock = threading.Lock()

    def wrap(self, base: AgentResolver) -> AgentResolver:
        def resolve(name: str, prompt: str) -> ResolvedAgent:
            resolved = base(name, prompt)
            with self._lock:
                self.seq += 1
                seq = self.seq
            launch = resolved.launch
            argv = [sys.executable, "-m", RECORD_MODULE]
            if self.root is not None:
                argv += ["--root", str(self.root)]
            argv += [str(self.path), str(seq), name, launch_digest(launch, self.root), "--",
                     *launch.argv]
            return replace(resolved, launch=replace(launch, argv=tuple(argv)))

        return resolve


class CassettePlayer:
    """Serves every agent invocation of the resolvers it wraps from the next record of the
    cassette at ``path``. ``speed`` divides the recorded timing (2.0: twice as fast);
    ``root`` is where the recorded files are written (None: not written)."""

    def __init__(self, path: Path | str, *, root: Path | str | None = None,
                 speed: float = 1.0, continued: bool = False) -> None:
        if speed <= 0:
            raise ValueError("speed must be more than 0")
        self.path = Path(path).resolve()
        self.records = read_cassette(self.path)
        self.root = None if root is None else Path(root).resolve()
        self.speed = speed
        self.seq = 0
        self._resuming = continued  # the first invocation finds where the last run ended
        self._lock = threading.Lock()

    def next_record(self, name: str, digest: str) -> RecordedInvocation:
        """The record for the invocation of agent ``name`` whose prompt has ``digest``, the
        next one in order; raises :class:`CassetteMismatch` when the cassette is done or
        the invocation differs. For a ``continued`` session (it ran before: its first
        invocations are played already, or adopted), the first invocation is the first
        record with that name and prompt, and the order goes on from there."""
        with self._lock:
            if self._resuming:
                self._resuming = False
                self.seq = next((r.seq - 1 for r in self.records
                                 if r.name == name and r.prompt_sha256 == digest), 0)
            seq = self.seq + 1
            label = f"invocation {seq} ({name})"
            if seq > len(self.records):
                raise CassetteMismatch(f"{self.path}: {label} is not recorded: the cassette "
                                       f"holds {len(self.records)} invocation(s)")
            record = self.records[seq - 1]
            if record.name != name:
                raise CassetteMismatch(f"{self.path}: {label}: recorded for agent "
                                       f"{record.name!r}, not {name!r}")
            if digest != record.prompt_sha256:
                raise CassetteMismatch(
                    f"{self.path}: {label}: the prompt differs from the recorded one "
                    f"(sha256 {digest[:12]} now, {record.prompt_sha256[:12]} recorded for "
                    f"{record.label()})")
            self.seq = seq
            return record

    def wrap(self, base: AgentResolver) -> AgentResolver:
        def resolve(name: str, prompt: str) -> ResolvedAgent:
            resolved = base(name, prompt)
            record = self.next_record(name, launch_digest(resolved.launch, self.root))
            argv = [sys.executable, "-m", REPLAY_MODULE, str(self.path), str(record.seq),
                    "--speed", repr(self.speed)]
            if self.root is not None:
                argv += ["--root", str(self.root)]
            launch = AgentLaunch(tuple(argv), stdin=resolved.launch.stdin)
            return replace(resolved, launch=launch)

        return resolve

    @property
    def unplayed(self) -> int:
        """Records not replayed yet (a replayed session that ends early leaves some)."""
        return len(self.records) - self.seq


def cassette(*, record: Path | str | None = None, replay: Path | str | None = None,
             root: Path | str | None = None, speed: float = 1.0,
             continued: bool = False) -> CassetteRecorder | CassettePlayer | None:
    """The recorder for ``--record FILE`` or the player for ``--replay FILE`` (None:
    neither given). ``continued``: the session ran before, so the recorder appends after
    the records already in the file and the player resumes at the record of the first
    invocation made now. Raises ValueError when both are given, :class:`CassetteError`
    for a bad cassette."""
    if record is not None and replay is not None:
        raise ValueError("--record and --replay cannot be used together")
    if record is not None:
        return CassetteRecorder(record, root=root, append=continued)
    if replay is not None:
        return CassettePlayer(replay, root=root, speed=speed, continued=continued)
    return None
