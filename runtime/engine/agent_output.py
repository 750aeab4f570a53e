"""What an agent's run yields, as its adapter reads it: the answer, the usage, the failure
the CLI reported. The engine's invoke events carry these; the adapters (runtime/agents)
produce them, the process handlers (runtime/dispatch) deliver them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

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
