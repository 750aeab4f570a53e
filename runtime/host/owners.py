"""Who owns a lease or an agent record: ``host:pid:tag``, and whether that owner is dead.

Only an owner on this host can be known dead (its pid no longer exists); one elsewhere is
always presumed alive, so its lease runs out by time instead.
"""

from __future__ import annotations

import os
import socket
import uuid


def default_owner(tag: str | None = None) -> str:
    """This process as an owner: ``host:pid:tag`` (a random tag when none is given)."""
    return f"{socket.gethostname()}:{os.getpid()}:{tag or uuid.uuid4().hex[:6]}"


def owner_is_dead(owner: str) -> bool:
    """Whether ``owner`` (``host:pid:tag``) is a process of this host that is gone."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
