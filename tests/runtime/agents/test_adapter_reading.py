"""Adapters' ``read`` on hand-written streams: multi-step runs, partial output, odd lines.

The streams follow each CLI's documented format (see the adapter modules' docstrings);
the contract suite runs the fake CLIs for the common path.
"""

from __future__ import annotations

import json
from typing import Any

from interlock.runtime.agents.claude import ClaudeAdapter
from interlock.runtime.agents.codex import CodexAdapter
from interlock.runtime.agents.gemini import GeminiAdapter
from interlock.runtime.agents.opencode import OpencodeAdapter
from interlock.runtime.engine.agent_output import Usage


def jsonl(*events: dict[str, Any]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def test_claude_answer_so_far_then_the_result() -> None:
    head = jsonl({"type": "system", "subtype": "init"},
                 {"type": "assistant", "message": {"content": [
                     {"type": "tool_use", "name": "Read"}]}},
                 {"type": "assistant", "message": {"content": [
                     {"type": "text", "text": "verdict: "}, {"type": "text", "text": "accept"}]}})
    early = ClaudeAdapter().read(head + "warning: not json\n")
    assert early.answer == "verdict: accept" and not early.final and early.usage == Usage()
    done = ClaudeAdapter().read(head + jsonl({
        "type": "result", "subtype": "success", "is_error": False, "result": "verdict: accept\n",
        "total_cost_usd": 0.5, "usage": {"input_tokens": 3, "output_tokens": 4}}))
    assert done.final and done.answer == "verdict: accept\n" and done.usage == Usage(3, 4, 0.5)


def test_claude_max_turns_is_an_error() -> None:
    out = ClaudeAdapter().read(jsonl({"type": "result", "subtype": "error_max_turns",
                                      "is_error": False, "num_turns": 8}))
    assert out.error == "claude: error_max_turns"


def test_codex_keeps_the_last_agent_message_and_sums_usage() -> None:
    out = CodexAdapter().read(jsonl(
        {"type": "item.completed", "item": {"type": "agent_message", "text": "first"}},
        {"type": "item.completed", "item": {"type": "command_execution", "command": "ls"}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "second"}},
        {"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 2}},
        {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 1}}))
    assert out.answer == "second" and out.usage == Usage(15, 3) and out.final
    legacy = CodexAdapter().read(jsonl(
        {"type": "item.completed", "item": {"item_type": "assistant_message", "text": "old"}}))
    assert legacy.answer == "old" and not legacy.final


def test_opencode_answer_is_the_last_step_with_text() -> None:
    events = [
        {"type": "step_start", "part": {}},
        {"type": "text", "part": {"text": "Let me look."}},
        {"type": "tool_use", "part": {"tool": "read"}},
        {"type": "step_finish", "part": {"reason": "tool-calls", "cost": 0.25,
                                         "tokens": {"input": 100, "output": 10}}},
    ]
    middle = OpencodeAdapter().read(jsonl(*events))
    assert middle.answer == "Let me look." and not middle.final
    events += [
        {"type": "step_start", "part": {}},
        {"type": "text", "part": {"text": "verdict: "}},
        {"type": "text", "part": {"text": "accept\n"}},
        {"type": "step_finish", "part": {"reason": "stop", "cost": 0.5,
                                         "tokens": {"input": 200, "output": 20}}},
    ]
    out = OpencodeAdapter().read(jsonl(*events))
    assert out.answer == "verdict: accept\n" and out.final
    assert out.usage == Usage(300, 30, 0.75)


def test_gemini_sums_models_and_waits_for_the_whole_object() -> None:
    doc = {"response": "verdict: accept\n", "stats": {"models": {
        "gemini-2.5-pro": {"tokens": {"prompt": 7, "candidates": 3}},
        "gemini-2.5-flash": {"tokens": {"prompt": 1, "candidates": 1}}}}}
    text = "Loaded cached credentials.\n" + json.dumps(doc, indent=2)
    out = GeminiAdapter().read(text)
    assert out.answer == "verdict: accept\n" and out.usage == Usage(8, 4) and out.final
    assert GeminiAdapter().read(text[:-1]).answer == ""
    failed = GeminiAdapter().read(json.dumps({"error": {"message": "quota", "code": 429}}))
    assert failed.error == "gemini error: quota" and failed.answer == ""
