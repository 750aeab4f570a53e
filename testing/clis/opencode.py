"""opencode against the scripted server: a custom provider in its global config.

opencode reads ``$XDG_CONFIG_HOME/opencode/opencode.json`` (its global config; ``cli_env``
sets ``XDG_CONFIG_HOME`` to ``HOME/.config``). There a ``provider`` entry named
:data:`PROVIDER` uses the ``@ai-sdk/openai-compatible`` package, which the opencode binary
bundles (nothing is installed at run time), with ``options.baseURL`` the server's ``/v1``
(it POSTs ``/v1/chat/completions``) and ``options.apiKey`` the placeholder key, so no login
(``auth.json``) is needed; ``model`` and ``small_model`` (the session title) are its one
model, with a price so that ``step_finish`` reports a cost. ``autoupdate`` and ``share``
are off.

Other traffic, all off (read from the opencode 1.18.33 binary's bundled source):
``OPENCODE_DISABLE_MODELS_FETCH`` (the models.dev catalog refresh; the bundled snapshot is
used), ``OPENCODE_DISABLE_AUTOUPDATE``, ``OPENCODE_DISABLE_SHARE``,
``OPENCODE_DISABLE_LSP_DOWNLOAD``, ``OPENCODE_DISABLE_CLAUDE_CODE`` (no ``~/.claude``
prompts or skills). At start opencode also installs ``@opencode-ai/plugin`` from npm into
each config folder (``Npm.install``: skipped when the folder holds ``node_modules/`` and a
``package-lock.json`` whose root lists every ``package.json`` dependency), so those are
written here too, and ``~/.npmrc`` says ``offline=true`` so any other npm fetch fails at
once instead of going out.

Retries: a failed model call (HTTP 429, 5xx, a cut stream) is retried by opencode's
session loop, 5 times at most, after the ``retry-after-ms`` / ``retry-after`` header's
delay, else 2 s doubling each time (packages/opencode/src/session/retry.ts:
``RETRY_INITIAL_DELAY`` 2000, ``RETRY_BACKOFF_FACTOR`` 2, ``RETRY_MAX_RETRIES`` 5); no
setting bounds it, so a scripted failure carries ``retry_after`` to fail in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from interlock.testing.clis import API_KEY

PROVIDER = "scripted"
MODEL_ID = "scripted-model"
MODEL = f"{PROVIDER}/{MODEL_ID}"
PLUGIN = "@opencode-ai/plugin"
VERSION = "1.18.33"  # the pinned opencode (tests/tools/agent-clis/package.json)


def config(url: str) -> dict[str, Any]:
    """The ``opencode.json`` pointing opencode at the server at ``url``."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": MODEL,
        "small_model": MODEL,
        "provider": {PROVIDER: {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Scripted model server",
            "options": {"baseURL": f"{url}/v1", "apiKey": API_KEY},
            "models": {MODEL_ID: {
                "name": "Scripted model",
                "tool_call": True,
                "limit": {"context": 200000, "output": 32000},
                "cost": {"input": 3, "output": 15},  # USD per million tokens
            }},
        }},
    }


def prepare(home: Path, url: str) -> dict[str, str]:
    folder = home / ".config" / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "opencode.json").write_text(json.dumps(config(url), indent=2) + "\n",
                                          encoding="utf-8")
    _skip_plugin_install(folder)
    (home / ".npmrc").write_text("offline=true\n", encoding="utf-8")
    return {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE": "1"}


def _skip_plugin_install(folder: Path) -> None:
    """What makes opencode's start-up ``npm install @opencode-ai/plugin`` in ``folder`` a
    no-op: a ``node_modules`` folder, and a lockfile listing the dependency."""
    (folder / "node_modules").mkdir(exist_ok=True)
    dependencies = {PLUGIN: VERSION}
    (folder / "package.json").write_text(
        json.dumps({"dependencies": dependencies}, indent=2) + "\n", encoding="utf-8")
    (folder / "package-lock.json").write_text(json.dumps({
        "lockfileVersion": 3, "requires": True,
        "packages": {"": {"dependencies": dependencies}}}, indent=2) + "\n", encoding="utf-8")
