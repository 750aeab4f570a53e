"""The ``claude`` adapter (Claude Code in print mode, streaming JSON).

Launch: ``claude -p --output-format stream-json --verbose [--model M] [--agent A] ARGS``
with the prompt on stdin (print mode reads the prompt from stdin when none is given as an
argument; stream-json needs ``--verbose`` in print mode; ``--agent NAME`` selects a
configured subagent, per the Claude Code CLI reference).

Read, following the documented stream-json format (Claude Code "Run Claude Code
programmatically" / headless docs; the Agent SDK's result message): one JSON object per
line: ``system`` (``subtype: init``), ``assistant`` (``message.content`` blocks, text in
``{"type": "text", "text": ...}``), ``user`` (tool results), then one final ``result``
event: ``{"type": "result", "subtype": "success" | "error_max_turns" |
"error_during_execution", "is_error": bool, "result": TEXT, "total_cost_usd": N,
"usage": {"input_tokens": N, "output_tokens": N, ...}}``. The answer is the result's
``result`` text; before it arrives, the text of the last assistant message so far.
``is_error`` or an ``error*`` subtype is :attr:`AgentOutput.error`.
"""

from __future__ import annotations

from interlock.runtime.agents.base import AgentLaunch, AgentOutput, Completion, Usage
from interlock.runtime.agents.config import AgentConfig
from interlock.runtime.agents.events import amount, count, json_events, mapping


class ClaudeAdapter:
    cli = "claude"
    completion: Completion = "exit"

    def launch(self, config: AgentConfig, prompt: str) -> AgentLaunch:
        head = ["claude", "-p", "--output-format", "stream-json", "--verbose"]
        if config.model:
            head += ["--model", config.model]
        if config.agent:
            head += ["--agent", config.agent]
        return config.launch_with(tuple(head), prompt)

    def read(self, stdout: str) -> AgentOutput:
        answer = ""
        for event in json_events(stdout):
            kind = event.get("type")
            if kind == "assistant":
                blocks = mapping(event.get("message")).get("content")
                texts = [str(b.get("text", "")) for b in blocks or ()
                         if isinstance(b, dict) and b.get("type") == "text"]
                if texts:
                    answer = "".join(texts)
            elif kind == "result":
                return _result(event, answer)
        return AgentOutput(answer=answer)


def _result(event: dict[str, object], answer_so_far: str) -> AgentOutput:
    result = event.get("result")
    text = result if isinstance(result, str) else answer_so_far
    usage = mapping(event.get("usage"))
    subtype = str(event.get("subtype") or "")
    failed = event.get("is_error") is True or subtype.startswith("error")
    error = None
    if failed:
        errors = event.get("errors")
        listed = "; ".join(str(e) for e in errors) if isinstance(errors, list) else ""
        detail = text.strip() or listed or "no result"
        error = f"claude reported {subtype or 'an error'}: {detail}"
    return AgentOutput(
        answer=text,
        usage=Usage(input_tokens=count(usage.get("input_tokens")),
                    output_tokens=count(usage.get("output_tokens")),
                    cost_usd=amount(event.get("total_cost_usd"))),
        error=error,
        final=True,
    )
