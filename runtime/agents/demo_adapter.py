"""The ``demo`` adapter: the offline role agents of :mod:`interlock.runtime.agents.role_agent`.

Launch: ``PYTHON -m interlock.runtime.agents.role_agent --role ROLE [--delay S]
[--script FILE] [--format json] ARGS`` with the prompt on stdin, run by the interpreter
interlock itself runs on (no network, no CLI to install). Read: the answer is stdout as
is (a YAML document; its required top-level key per role is
:data:`interlock.runtime.agents.ralph_protocol.REQUIRED_FIELD`); no usage.
"""

from __future__ import annotations

import sys

from interlock.runtime.agents.base import Completion
from interlock.runtime.config.agents import AgentConfig, AgentLaunch
from interlock.runtime.engine.agent_output import AgentOutput

ENTRY_MODULE = "interlock.runtime.agents.role_agent"


class DemoAdapter:
    cli = "demo"
    completion: Completion = "document"

    def launch(self, config: AgentConfig, prompt: str) -> AgentLaunch:
        if config.role is None:
            raise ValueError("cli: demo needs role")
        head = [sys.executable, "-m", ENTRY_MODULE, "--role", config.role]
        if config.delay > 0:
            head += ["--delay", f"{config.delay:g}"]
        if config.script:
            head += ["--script", config.script]
        if config.output_format == "json":
            head += ["--format", "json"]
        launch = config.launch_with(tuple(head), prompt)
        return AgentLaunch(argv=launch.argv, stdin=launch.stdin,
                           env={"PYTHONUNBUFFERED": "1", **launch.env}, cwd=launch.cwd)

    def read(self, stdout: str, stderr: str = "") -> AgentOutput:
        return AgentOutput(answer=stdout)

    def resume(self, config: AgentConfig, session: str, prompt: str) -> AgentLaunch | None:
        return None
