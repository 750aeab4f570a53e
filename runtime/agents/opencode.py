"""The ``opencode`` adapter (``opencode run --format json``).

Launch: ``opencode run --format json [--model provider/model] [--agent A] ARGS -- PROMPT``
(the prompt is the message argument; ``--`` keeps a prompt that starts with ``-`` from
being read as a flag). The JSON format is always asked for: only it reports usage.

Read, following the ``--format json`` events of ``opencode run`` (packages/opencode/src/
cli/cmd/run.ts): one JSON object per line with ``type``, ``timestamp``, ``sessionID`` and a
``part``: ``step_start``, ``text`` (``part.text``), ``tool_use`` (``part.tool``,
``part.state``), ``step_finish`` (``part.reason``, ``part.cost``, ``part.tokens: {input,
output, reasoning, cache: {read, write}}``) and ``error`` (``error: {name, data:
{message}}``). The answer is the text of the last step that printed text; usage sums the
step_finish tokens and costs. A ``step_finish`` whose reason is not ``tool-calls`` ends the
run (``final``).
"""

from __future__ import annotations

from interlock.runtime.agents.base import AgentLaunch, AgentOutput, Completion, Usage
from interlock.runtime.agents.config import AgentConfig
from interlock.runtime.agents.events import add, amount, count, json_events, mapping


class OpencodeAdapter:
    cli = "opencode"
    completion: Completion = "exit"

    def launch(self, config: AgentConfig, prompt: str) -> AgentLaunch:
        head = ["opencode", "run", "--format", "json"]
        if config.model:
            head += ["--model", config.model]
        if config.agent:
            head += ["--agent", config.agent]
        return config.launch_with(tuple(head), None, ("--", prompt))

    def read(self, stdout: str) -> AgentOutput:
        answer = ""
        step = ""
        inputs: int | None = None
        outputs: int | None = None
        cost: float | None = None
        error: str | None = None
        final = False
        for event in json_events(stdout):
            kind = event.get("type")
            part = mapping(event.get("part"))
            if kind == "step_start":
                step = ""
                final = False
            elif kind == "text":
                step += str(part.get("text", ""))
                answer = step
            elif kind == "step_finish":
                tokens = mapping(part.get("tokens"))
                inputs = add(inputs, count(tokens.get("input")))
                outputs = add(outputs, count(tokens.get("output")))
                final = part.get("reason") != "tool-calls"  # a tool call: another step follows
                spent = amount(part.get("cost"))
                if spent is not None:
                    cost = spent if cost is None else cost + spent
            elif kind == "error":
                detail = mapping(event.get("error"))
                message = mapping(detail.get("data")).get("message") or detail.get("name")
                error = f"opencode error: {message or 'no message'}"
                final = True
        return AgentOutput(answer=answer, usage=Usage(inputs, outputs, cost), error=error,
                           final=final)
