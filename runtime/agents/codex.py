"""The ``codex`` adapter (OpenAI Codex CLI, ``codex exec --json``).

Launch: ``codex exec --json [--model M] [--profile A] ARGS -`` with the prompt on stdin
(``-`` as the prompt makes ``codex exec`` read it from stdin). Codex has no agent flag;
``agent:`` names a Codex config profile (``--profile``), its closest equivalent.

Read, following the documented ``codex exec --json`` JSONL events (codex docs/exec.md,
"JSON output mode"): ``thread.started``, ``turn.started``, ``item.started`` /
``item.updated`` / ``item.completed`` with an ``item`` whose ``type`` is
``agent_message`` (``text``), ``reasoning``, ``command_execution``, ...,
``turn.completed`` with ``usage: {input_tokens, cached_input_tokens, output_tokens}``,
``turn.failed`` with ``error: {message}``, and ``error`` with ``message``. The answer is
the text of the last completed ``agent_message`` item; usage sums every turn.completed.
"""

from __future__ import annotations

from interlock.runtime.agents.base import AgentLaunch, AgentOutput, Completion, Usage
from interlock.runtime.agents.config import AgentConfig
from interlock.runtime.agents.events import add, count, json_events, mapping


class CodexAdapter:
    cli = "codex"
    completion: Completion = "exit"

    def launch(self, config: AgentConfig, prompt: str) -> AgentLaunch:
        head = ["codex", "exec", "--json"]
        if config.model:
            head += ["--model", config.model]
        if config.agent:
            head += ["--profile", config.agent]
        return config.launch_with(tuple(head), prompt, ("-",))

    def read(self, stdout: str) -> AgentOutput:
        answer = ""
        inputs: int | None = None
        outputs: int | None = None
        error: str | None = None
        final = False
        for event in json_events(stdout):
            kind = event.get("type")
            if kind == "item.completed":
                item = mapping(event.get("item"))
                if item.get("type", item.get("item_type")) in ("agent_message",
                                                               "assistant_message"):
                    answer = str(item.get("text", ""))
            elif kind == "turn.completed":
                usage = mapping(event.get("usage"))
                inputs = add(inputs, count(usage.get("input_tokens")))
                outputs = add(outputs, count(usage.get("output_tokens")))
                final = True
            elif kind == "turn.failed":
                error = "codex turn failed: " + str(
                    mapping(event.get("error")).get("message") or "no message")
                final = True
            elif kind == "error":
                error = "codex error: " + str(event.get("message") or "no message")
        return AgentOutput(answer=answer, usage=Usage(inputs, outputs), error=error,
                           final=final)
