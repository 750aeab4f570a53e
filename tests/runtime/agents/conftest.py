"""Fixtures of the agents room: each real agent CLI against the scripted model server."""

from support.real_clis import every_real_cli, real_cli  # noqa: F401  (fixtures)
