"""codex against the scripted server: a model provider in ``$CODEX_HOME/config.toml``.

codex reads its configuration from ``$CODEX_HOME/config.toml`` (default ``~/.codex``;
codex-rs/core/src/config/mod.rs): ``model_provider = "scripted"`` names a
``[model_providers.scripted]`` entry whose ``base_url`` is the server's ``/v1`` and whose
``wire_api = "responses"`` makes codex POST ``/v1/responses``; ``env_key`` names the
variable holding the API key (sent as ``Authorization: Bearer``), so no login
(``auth.json``) is needed. Retries are bounded per provider: ``request_max_retries``
(default 4: an HTTP 429/5xx or a refused connection, retried with backoff) and
``stream_max_retries`` (default 5: each retried stream repeats those requests, so a
steady 500 makes 30 requests over ~25 s by default); ``stream_idle_timeout_ms`` (default
300000). Off: analytics, feedback, the plugin marketplace sync (it reaches
api.github.com and chatgpt.com) and ``unbounded_connection_retries`` (a stable feature,
on by default: an unreachable server is retried forever, "Reconnecting... waiting for
network").
"""

from __future__ import annotations

import json
from pathlib import Path

from interlock.testing.clis import API_KEY

PROVIDER = "scripted"
KEY_VARIABLE = "INTERLOCK_SCRIPTED_API_KEY"


def config_toml(url: str, *, retries: int = 1, model: str | None = None) -> str:
    """The config.toml pointing codex at the server at ``url``. ``model``: else codex's
    default (gpt-6.2-sol in 0.171), whose tools come through codex's JavaScript "code
    mode" ``exec`` tool; ``gpt-5.5``, say, is offered ``exec_command`` and
    ``apply_patch`` directly. The scripted server answers either way."""
    lines = [f"model = {json.dumps(model)}"] if model else []
    lines += [
        f'model_provider = "{PROVIDER}"',
        "check_for_update_on_startup = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
        "unbounded_connection_retries = false",
        "",
        f"[model_providers.{PROVIDER}]",
        'name = "Scripted model server"',
        f"base_url = {json.dumps(url + '/v1')}",
        'wire_api = "responses"',
        f'env_key = "{KEY_VARIABLE}"',
        f"request_max_retries = {retries}",
        f"stream_max_retries = {retries}",
        "stream_idle_timeout_ms = 20000",
    ]
    return "\n".join(lines) + "\n"


def prepare(home: Path, url: str) -> dict[str, str]:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(config_toml(url), encoding="utf-8")
    return {"CODEX_HOME": str(codex_home), KEY_VARIABLE: API_KEY}
