"""The engine's base error (its own module so that every engine module can raise it)."""

from __future__ import annotations


class SessionError(Exception):
    """A session cannot do what was asked; the message is fit for a user."""
