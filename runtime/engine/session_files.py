"""A session's folder and the files in it, read safely.

The engine keeps a session's files (its invocations' spool folders) in its folder:
``.interlock/sessions/<id>`` beside a SQLite store's file (else in the working folder); a
child machine session's is ``<parent folder>/invocations/<NNNN>-<invoke id>``. Pages
(``interlock ui``) list these files and serve one by its path relative to the folder:
:func:`file_in` refuses anything that is not a regular file inside the folder once
symlinks are resolved (``..``, an absolute path, a symlink out).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from interlock.runtime.engine.machine_ids import parent_id
from interlock.runtime.store.base import SessionNotFound, SessionStore, StoreConnection

__all__ = ["FILE_LIMIT", "FolderFile", "file_in", "files_in", "folder_of", "session_folder"]

FILE_LIMIT = 2000  # files listed per folder at most


def folder_of(store: StoreConnection, session_id: str) -> Path:
    """``.interlock/sessions/<id>``: beside a SQLite store's file, else in the working
    folder (the folder of a session that is nobody's child)."""
    path = getattr(store, "path", None)
    base = path.parent if isinstance(path, Path) else Path.cwd() / ".interlock"
    return base / "sessions" / session_id


def session_folder(store: SessionStore, session_id: str) -> Path:
    """The folder of ``session_id``: a child machine session's is inside its parent's
    (when the parent is in the store), any other's :func:`folder_of`."""
    parent = parent_id(session_id)
    if parent is not None:
        try:
            store.get(parent)
        except SessionNotFound:
            return folder_of(store, session_id)
        return session_folder(store, parent) / "invocations" / session_id[len(parent) + 1:]
    return folder_of(store, session_id)


@dataclass(frozen=True, slots=True)
class FolderFile:
    """A regular file of a folder: its path relative to the folder (``/``-separated),
    its size in bytes and when it was last modified (seconds since the epoch)."""

    path: str
    size: int
    modified: float


def files_in(folder: Path, limit: int = FILE_LIMIT) -> list[FolderFile]:
    """The regular files under ``folder``, sorted by path, at most ``limit``; symlinks
    are neither listed nor followed."""
    found: list[FolderFile] = []
    if not folder.is_dir():
        return found
    for top, dirs, names in os.walk(folder, followlinks=False):
        dirs.sort()
        for name in sorted(names):
            path = Path(top) / name
            try:
                stat = path.lstat()
            except OSError:
                continue
            if path.is_symlink() or not path.is_file():
                continue
            found.append(FolderFile(path.relative_to(folder).as_posix(), stat.st_size,
                                    stat.st_mtime))
            if len(found) >= limit:
                return found
    return found


def file_in(folder: Path, relative: str) -> Path | None:
    """The regular file ``relative`` names inside ``folder``; None for an absolute path,
    a ``..`` part, a NUL, or a path that leaves the folder once symlinks are resolved."""
    parts = PurePosixPath(relative).parts
    if not parts or "\x00" in relative or relative.startswith("/") or ".." in parts \
            or "\\" in relative:
        return None
    try:
        base = folder.resolve(strict=True)
        candidate = (base / Path(*parts)).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, or a symlink loop
        return None
    if not candidate.is_relative_to(base) or not candidate.is_file():
        return None
    return candidate
