"""The model APIs the scripted server speaks, one module per wire protocol."""

from __future__ import annotations

from interlock.testing.model_server import Wire
from interlock.testing.wire.anthropic import AnthropicWire
from interlock.testing.wire.gemini import GeminiWire
from interlock.testing.wire.openai_chat import ChatCompletionsWire
from interlock.testing.wire.openai_responses import ResponsesWire

WIRES: tuple[Wire, ...] = (AnthropicWire(), ResponsesWire(), GeminiWire(), ChatCompletionsWire())

__all__ = ["WIRES", "AnthropicWire", "ChatCompletionsWire", "GeminiWire", "ResponsesWire"]
