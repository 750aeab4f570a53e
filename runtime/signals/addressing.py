"""Where a signal goes: a session id or a session folder, resolved to the mailbox folder.

:func:`session_mailbox_dir` is the one rule for a session id, which the runner (its
signal feed), ``interlock run``'s hint and ``interlock signal`` all follow: a Ralph
session's folder ``.ralph-sessions/ID/`` (seed 004) when there is one, else
``.interlock/sessions/ID/`` of the working directory. ``interlock signal FOLDER ...``
(anything with a ``/``, or ``.``) posts into that folder. A session nobody knows (not in
the store, no folder) or a folder with no mailbox is refused, listing the known session
ids, so a typo never drops a signal into a folder no runner reads. ``create=True``
(``--create``) makes the mailbox instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from interlock.machines.diagnostics import did_you_mean
from interlock.runtime.signals.model import SignalError, check_identifier

SESSIONS_DIR = Path(".interlock") / "sessions"
RALPH_SESSIONS_DIR = Path(".ralph-sessions")


def session_dir(base: Path, session_id: str) -> Path:
    """The session folder: ``BASE/.interlock/sessions/<id>`` (the id is checked)."""
    return base / SESSIONS_DIR / check_identifier(session_id, "session id")


def session_mailbox_dir(base: Path, session_id: str) -> Path:
    """The folder whose ``signals/`` is session ``session_id``'s mailbox: its Ralph
    folder ``BASE/.ralph-sessions/ID`` when that exists, else ``BASE/.interlock/sessions/ID``
    (the id is checked)."""
    ralph = base / RALPH_SESSIONS_DIR / check_identifier(session_id, "session id")
    return ralph if ralph.is_dir() else session_dir(base, session_id)


class UnknownSession(SignalError):
    """The session id or folder names no known session; the message lists the known ones."""


def is_folder_reference(reference: str) -> bool:
    """A folder is written with a path separator, or is ``.``/``..``; anything else is an id.

    >>> is_folder_reference("s1"), is_folder_reference("./s1"), is_folder_reference(".")
    (False, True, True)
    """
    return "/" in reference or "\\" in reference or reference in (".", "..")


def session_folders(base: Path) -> list[str]:
    """The ids of the session folders under ``BASE/.interlock/sessions/``."""
    root = base / SESSIONS_DIR
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def known_list(known: Iterable[str]) -> str:
    """``known sessions: a, b`` or ``no sessions here yet``."""
    ids = sorted(set(known))
    if not ids:
        return "no sessions here yet"
    shown = ", ".join(ids[:20]) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
    return f"known sessions: {shown}"


def resolve_mailbox_folder(reference: str, base: Path, known: Iterable[str], *,
                           create: bool = False) -> Path:
    """The session folder a signal for ``reference`` goes to.

    ``known``: the session ids of the store. A session id is accepted when it is known or
    has a folder under ``BASE/.interlock/sessions``; a folder when it holds ``signals/``.
    With ``create`` both are accepted as they are (the caller makes the mailbox).
    Raises :class:`SignalError` for an unsafe id, :class:`UnknownSession` otherwise.
    """
    if is_folder_reference(reference):
        folder = Path(reference)
        folder = folder if folder.is_absolute() else base / folder
        if create or (folder / "signals").is_dir():
            return folder
        what = "no such folder" if not folder.exists() else "no signals/ mailbox in it"
        raise UnknownSession(
            f"{reference} is not a session folder ({what}); {known_list(known)} "
            "(use --create to make a mailbox there)")
    check_identifier(reference, "session id")
    ids = set(known) | set(session_folders(base))
    if create or reference in ids or (base / RALPH_SESSIONS_DIR / reference).is_dir():
        return session_mailbox_dir(base, reference)
    close = did_you_mean(reference, ids)
    raise UnknownSession(f"unknown session {reference!r}{f' ({close})' if close else ''}; "
                         f"{known_list(ids)} (use --create to make its mailbox anyway)")
