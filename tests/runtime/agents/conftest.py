"""Fixtures of the agents room: each real agent CLI against the scripted model server."""

from support.real_clis import real_cli  # noqa: F401  (a fixture)
