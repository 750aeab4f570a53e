"""Claude Code against the scripted server: ``ANTHROPIC_BASE_URL`` and an API key.

``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` turns off telemetry, error reporting and the
auto-updater's checks (Claude Code's settings reference); its settings live under
``$HOME/.claude``. ``CLAUDE_CODE_MAX_RETRIES=1``: Claude Code retries a failed API call
(429, 5xx, a cut stream) up to 10 times with backoff by default, minutes against a
server scripted to fail; once is enough to see it retry.
"""

from __future__ import annotations

from pathlib import Path

from interlock.testing.clis import API_KEY


def prepare(home: Path, url: str) -> dict[str, str]:
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    return {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": API_KEY,
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_RETRIES": "1"}
