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

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from interlock.runtime.config.agents import AgentConfig, AgentLaunch

# Why a CLI's call failed, where its own output says (AgentOutput.reason): the first four
# are the user's to fix (never retried), the last two pass (retried with backoff).
FailureReason = Literal["auth", "permission_denied", "not_found", "invalid_request",
                        "rate_limited", "unavailable"]
FAILURE_REASONS: tuple[str, ...] = ("auth", "permission_denied", "not_found",
                                    "invalid_request", "rate_limited", "unavailable")
TRANSIENT_REASONS: frozenset[str] = frozenset({"rate_limited", "unavailable"})
MUST_FIX_REASONS: frozenset[str] = frozenset(FAILURE_REASONS) - TRANSIENT_REASONS


@dataclass(frozen=True, slots=True)
class Usage:
    """What one invocation cost, as far as the CLI says (None: not reported)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens,
                "costUsd": self.cost_usd}


@dataclass(frozen=True, slots=True)
class AgentOutput:
    """An agent's output as read by its adapter: the answer text (for a streaming JSON CLI,
    the final message's text, not the event stream), the usage, and the error the CLI
    reported in its own output, if any. ``final``: the output holds the CLI's last event
    (claude's ``result``, codex's ``turn.completed``/``turn.failed``, opencode's closing
    ``step_finish``, gemini's whole JSON object), so the answer is whole even if the process
    lingers before exiting; always False for adapters that print the answer itself.
    ``reason`` classifies ``error`` where the CLI's words allow (``auth``, ``rate_limited``,
    ...); ``denials`` names each tool call the CLI refused (``Write /w/hello.txt``), even
    when the call otherwise succeeded; ``session`` is the CLI's conversation id, which a
    steer continues (:meth:`Adapter.resume`)."""

    answer: str
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    final: bool = False
    reason: FailureReason | None = None
    denials: tuple[str, ...] = ()
    session: str | None = None


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
