"""Each agent CLI's own home and configuration, pointing it at a scripted model server.

:func:`cli_env` writes what the CLI reads (its settings file, a provider entry) under a
home folder of the caller's and returns the environment to run it with: that HOME, the
server's address, a placeholder key, telemetry and updates off. One module per CLI, each
with ``prepare(home, url) -> env``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Protocol

CLIS: tuple[str, ...] = ("claude", "codex", "gemini", "opencode")
API_KEY = "sk-interlock-scripted"  # what the CLIs send; the scripted server takes any key


class _Prepare(Protocol):
    def __call__(self, home: Path, url: str) -> dict[str, str]: ...


def cli_env(cli: str, url: str, home: Path, *, path: str | None = None) -> dict[str, str]:
    """The environment that runs ``cli`` against the server at ``url`` with ``home`` as
    its home (created; the CLI's configuration written there). ``path``: PATH to set
    (where the CLI and node are found)."""
    if cli not in CLIS:
        raise ValueError(f"no scripted setup for cli {cli!r}; one of {', '.join(CLIS)}")
    home.mkdir(parents=True, exist_ok=True)
    module = importlib.import_module(f"interlock.testing.clis.{cli}")
    prepare: _Prepare = module.prepare
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local" / "share"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local" / "state"),
           "NO_COLOR": "1", **prepare(home, url.rstrip("/"))}
    if path is not None:
        env["PATH"] = path
    return env
