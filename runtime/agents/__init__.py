"""Agents: adapters for agent CLIs (claude, codex, opencode, gemini, any command) and the
offline demo role agents, their ``agents:`` configuration and prompt rendering.

The API the runtime calls (see docs/agents.md):

* :func:`interlock.runtime.config.agents.load_agents` / ``default_agents`` / ``resolve_agent``
* :func:`interlock.runtime.agents.adapters.adapter_for`, ``agent_command``, ``polling_for``,
  ``read_result``
* :func:`interlock.runtime.engine.prompts.render_prompt` (``PromptError``)
* :mod:`interlock.runtime.agents.cassette`: ``CassetteRecorder``, ``CassettePlayer``,
  ``cassette``, ``read_cassette`` (record and replay invocations; the replayer
  process is :mod:`interlock.runtime.agents.replay`)

Nothing is re-exported here, so importing a submodule stays cheap and free of cycles.
"""
