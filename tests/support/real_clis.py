"""The real agent CLIs (pinned, installed from npm) run against the scripted model server.

``tests/tools/install_agent_clis.sh`` installs them (``make test`` runs it through
scripts/bootstrap.sh) into ``.cache/agent-clis`` or ``$INTERLOCK_AGENT_CLIS``. Without them
a real-CLI test skips locally and fails in CI.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.config.agents import AgentConfig
from interlock.testing import ModelServer
from interlock.testing.clis import CLIS, cli_env

from support.paths import IN_CI, ROOT

CLI_HOME = Path(os.environ.get("INTERLOCK_AGENT_CLIS", ROOT / ".cache" / "agent-clis"))
CLI_BIN = CLI_HOME / "node_modules" / ".bin"


def require_cli(cli: str) -> Path:
    """The installed ``cli``; skip without it locally, fail in CI."""
    exe = CLI_BIN / cli
    if not exe.exists():
        message = (f"the real {cli} CLI is not installed in {CLI_BIN}: run "
                   "tests/tools/install_agent_clis.sh")
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return exe


def cli_path() -> str:
    """PATH with the installed CLIs first, then the system's (node, git, sh)."""
    return os.pathsep.join([str(CLI_BIN), os.environ.get("PATH", os.defpath)])


@dataclass
class RealCli:
    """One real CLI with its own home, a working folder, and the scripted server."""

    cli: str
    server: ModelServer
    home: Path
    workdir: Path

    @property
    def env(self) -> dict[str, str]:
        return cli_env(self.cli, self.server.url, self.home, path=cli_path())

    def config(self, **settings: Any) -> AgentConfig:
        """An agent of this CLI (``settings`` as in interlock.yaml) running in the
        working folder against the server."""
        env = {**self.env, **settings.pop("env", {})}
        return AgentConfig.model_validate({"cli": self.cli, "cwd": str(self.workdir),
                                           "timeout": "60s", **settings, "env": env})


# gemini and opencode take seconds to start (about 2 s and 4 s a call here): their full
# contract runs after `make test` in .ci/run (`-m slow_cli`); one case runs by default.
SLOW = ("gemini", "opencode")


def _params(every: bool) -> list[Any]:
    return [pytest.param(cli, marks=() if every or cli not in SLOW else pytest.mark.slow_cli)
            for cli in CLIS]


def _real_cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RealCli]:
    cli = str(request.param)
    require_cli(cli)
    workdir = tmp_path / "work"
    workdir.mkdir()
    with ModelServer() as server:
        yield RealCli(cli, server, tmp_path / "home", workdir)


@pytest.fixture(params=_params(every=False))
def real_cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RealCli]:
    """Each real CLI in turn, with a fresh server (script it through ``server.script``);
    gemini and opencode marked ``slow_cli``."""
    yield from _real_cli(request, tmp_path)


@pytest.fixture(params=_params(every=True))
def every_real_cli(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RealCli]:
    """Each real CLI in turn, none marked: the case every default run keeps."""
    yield from _real_cli(request, tmp_path)
