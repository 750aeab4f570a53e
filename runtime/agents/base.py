"""The agent adapter contract: a SubAgentCommand becomes a launch, a CLI's output an answer.

An adapter knows one agent CLI (claude, codex, opencode, gemini, any command, the offline
demo agents): which argv runs it with a prompt, and how to read what it printed back into
the answer text the completion detector parses, plus the usage (tokens, cost) where the
CLI reports it. Adapters do no I/O of their own: the dispatcher runs the launch as a
process group and polls its output; the adapter only builds and reads.

Configuration comes from ``agents:`` in ``interlock.yaml``, one :class:`AgentConfig` per
name, with seed 001's SubAgentCommand fields (``cli``, ``model``, ``agent``,
``outputFormat``; the prompt comes from the invoking state) plus ``args``, ``env``, ``cwd``.
"""

from __future__ import annotations

from typing import Literal, Protocol

from interlock.runtime.config.agents import AgentConfig, AgentLaunch
from interlock.runtime.engine.agent_output import AgentOutput

Completion = Literal["exit", "document"]


class Adapter(Protocol):
    """One agent CLI. ``launch`` and ``read`` are pure.

    ``completion`` says how the dispatcher knows the agent is done: ``"exit"`` for a CLI
    that prints an event stream (claude, codex, opencode, gemini: the raw stdout is never
    a YAML answer, so only the exit ends the run and ``read(stdout).answer`` gives the
    answer so far), ``"document"`` for one that prints the answer itself (command, demo:
    the completion detector may end the run on a whole document before the exit).
    """

    cli: str  # one of AGENT_CLIS
    completion: Completion

    def launch(self, config: AgentConfig, prompt: str) -> AgentLaunch:
        """The process to start for ``config`` with ``prompt``."""

    def read(self, stdout: str, stderr: str = "") -> AgentOutput:
        """The answer, usage and reported error in everything the agent printed so far
        (some CLIs print their errors on stderr)."""

    def resume(self, config: AgentConfig, session: str, prompt: str) -> AgentLaunch | None:
        """The process that continues the CLI's conversation ``session`` with ``prompt``
        (a steer), or None when the CLI cannot continue one."""
