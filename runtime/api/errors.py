"""The façade's errors: one base class, each with the exit code a command line would use."""

from __future__ import annotations

EXIT_ERROR = 1
EXIT_USAGE = 2


class InterlockError(Exception):
    """Something the caller asked for cannot be done; ``str()`` is one line fit for a user."""

    exit_code = EXIT_ERROR


class UsageError(InterlockError):
    """The request itself is wrong (a bad id, a bad value, a missing file): exit 2."""

    exit_code = EXIT_USAGE


class NotFound(InterlockError):
    """No session, spec or mailbox of that name."""


class Conflict(InterlockError):
    """The session is in a state that refuses the request (a live runner, finished, ...)."""


class AgentsNotReady(InterlockError):
    """An agent cannot run as configured (its CLI missing, logged out, a role without an
    agent...): exit 4, fix what each line says first."""

    exit_code = 4


class StepFailed(InterlockError):
    """A session failed: an action or guard raised and no state handles error.execution."""
