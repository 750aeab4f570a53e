"""The ``command`` adapter: any program that reads the prompt on stdin and prints its
answer on stdout.

Launch: the configured ``command`` argv + ``args``, the prompt on stdin. Read: the answer
is stdout as is; no usage. The completion detector may end the run on a whole document
before the program exits.
"""

from __future__ import annotations

from interlock.runtime.agents.base import Completion
from interlock.runtime.config.agents import AgentConfig, AgentLaunch
from interlock.runtime.engine.agent_output import AgentOutput


class CommandAdapter:
    cli = "command"
    completion: Completion = "document"

    def launch(self, config: AgentConfig, prompt: str) -> AgentLaunch:
        if not config.command:
            raise ValueError("cli: command needs command: the argv to run")
        return config.launch_with(config.command, prompt)

    def read(self, stdout: str, stderr: str = "") -> AgentOutput:
        return AgentOutput(answer=stdout)

    def resume(self, config: AgentConfig, session: str, prompt: str) -> AgentLaunch | None:
        return None
