"""Gemini CLI against the scripted server: an API key and ``GOOGLE_GEMINI_BASE_URL``.

Gemini CLI reads ``$GEMINI_CLI_HOME/.gemini/settings.json`` (``GEMINI_CLI_HOME`` falls
back to the OS home; ``packages/core/src/utils/paths.ts``). There: the API-key auth type
(``security.auth.selectedType: gemini-api-key``, the key from ``GEMINI_API_KEY``), usage
statistics (Clearcut) and telemetry off, no auto-update or update check, and
``general.maxAttempts`` (the chat's retry bound, default 10, initial backoff 5 s:
``packages/core/src/utils/retry.ts``) at :data:`MAX_ATTEMPTS` so a 429 or 500 fails in
seconds. ``GOOGLE_GEMINI_BASE_URL`` is where the ``@google/genai`` client sends its
requests (``packages/core/src/core/contentGenerator.ts``). ``TMPDIR`` under the home keeps
the error reports the CLI writes on every API error (``gemini-client-error-*.json``) out of
the machine's /tmp. With these, the CLI connects to nothing but the server (strace).
"""

from __future__ import annotations

import json
from pathlib import Path

from interlock.testing.clis import API_KEY

MAX_ATTEMPTS = 1  # no retries: one request per failure (users get 10)


def settings() -> dict[str, object]:
    """The ``settings.json`` the scripted runs use."""
    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False,
                    "maxAttempts": MAX_ATTEMPTS},
        "ide": {"enabled": False},
    }


def prepare(home: Path, url: str) -> dict[str, str]:
    folder = home / ".gemini"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.json").write_text(json.dumps(settings(), indent=2) + "\n",
                                          encoding="utf-8")
    tmp = home / "tmp"  # the CLI's error reports (gemini-client-error-*.json) go there
    tmp.mkdir(exist_ok=True)
    return {"GEMINI_API_KEY": API_KEY, "GOOGLE_GEMINI_BASE_URL": url,
            "GEMINI_CLI_HOME": str(home), "GEMINI_TELEMETRY_ENABLED": "false",
            "TMPDIR": str(tmp)}
