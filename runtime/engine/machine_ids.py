"""How a child machine is named: its session id (its parent's, a dot, its invocation
folder's name: ``<parent>.<NNNN>-<invoke id>``) and the argv of its invocation row.

Light on purpose: reading a session's status, its children and its files needs these
names, not the machinery that runs child machines (:mod:`.invoke_machine`).
"""

from __future__ import annotations

import re
from pathlib import Path

from interlock.runtime.store.base import InvocationRecord

MACHINE_ARGV = "machine"  # argv[0] of a child machine's invocation row: ("machine", name)


def is_machine(record: InvocationRecord) -> bool:
    """Whether an invocation row is a child machine's (not an agent's process)."""
    return record.argv[:1] == (MACHINE_ARGV,)


def child_session_id(parent_id: str, spool: str) -> str:
    """The child session's id: the parent's, a dot, the invocation folder's name."""
    return f"{parent_id}.{Path(spool).name}"


_CHILD_ID = re.compile(r"^(?P<parent>.+)\.\d{4}-[A-Za-z_][A-Za-z0-9_]*$")


def parent_id(session_id: str) -> str | None:
    """The id of the session that would have invoked ``session_id``, read from its shape
    (``<parent>.<NNNN>-<invoke id>``: :func:`child_session_id`); None for a plain id.

    >>> parent_id("s.0003-executor"), parent_id("s")
    ('s', None)
    """
    found = _CHILD_ID.match(session_id)
    return found.group("parent") if found else None
