"""The ``gemini`` adapter (Gemini CLI headless mode, ``--output-format json``).

Launch: ``gemini --output-format json [--model M] ARGS -p PROMPT`` (headless mode runs
when a prompt is given with ``-p``). Gemini CLI has no agent flag; ``agent:`` is not used.

Read, following the documented headless JSON output (geminicli.com/docs/cli/headless):
one JSON object printed at the end: ``response`` (the model's final answer), ``stats``
(``models: {NAME: {tokens: {prompt, candidates, total, ...}, api: {...}}}``, summed over
models here) and, when the request failed, ``error`` (``{type, message, code}``). Until
the object is complete the answer is empty.
"""

from __future__ import annotations

from interlock.runtime.agents.base import AgentLaunch, AgentOutput, Completion, Usage
from interlock.runtime.agents.config import AgentConfig
from interlock.runtime.agents.events import add, count, json_document, mapping


class GeminiAdapter:
    cli = "gemini"
    completion: Completion = "exit"

    def launch(self, config: AgentConfig, prompt: str) -> AgentLaunch:
        head = ["gemini", "--output-format", "json"]
        if config.model:
            head += ["--model", config.model]
        return config.launch_with(tuple(head), None, ("-p", prompt))

    def read(self, stdout: str) -> AgentOutput:
        doc = json_document(stdout)
        if doc is None:
            return AgentOutput(answer="")
        response = doc.get("response")
        inputs: int | None = None
        outputs: int | None = None
        for model in mapping(mapping(doc.get("stats")).get("models")).values():
            tokens = mapping(mapping(model).get("tokens"))
            inputs = add(inputs, count(tokens.get("prompt")))
            outputs = add(outputs, count(tokens.get("candidates")))
        error = None
        if doc.get("error") is not None:
            detail = mapping(doc.get("error"))
            error = f"gemini error: {detail.get('message') or doc.get('error')}"
        return AgentOutput(answer=response if isinstance(response, str) else "",
                           usage=Usage(inputs, outputs), error=error, final=True)
