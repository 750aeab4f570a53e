"""Shared parts of the fake agent CLIs in this folder (stdlib only).

The real ``claude``, ``codex``, ``opencode`` and ``gemini`` CLIs need the network and an
account, so they cannot run here. These fakes are executables with the same names that
check the flags interlock passes and print what the real CLI documents for that mode
(each fake's docstring names the format it follows). Their answer is a small YAML
document computed from the prompt, so a test can tell the prompt arrived whole:

    verdict: accept
    cli: claude
    words: 7
    first: "Review the plan ..."

A prompt that makes the fake a Ralph role (``You are Ralph-Executor ...``) gets that role's
work instead, as the offline demo role does it (interlock's ``role_agent``; the fake must
then run on a Python where interlock is installed: put its ``bin`` on PATH too), so a
Ralph session runs the same with fake CLIs as with the demo agents.

Environment: ``FAKE_CLI_ERROR=1`` makes a fake report an error the way its CLI does;
``FAKE_CLI_LOG=FILE`` makes it write its argv and stdin there as JSON.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

USAGE = {"input_tokens": 1200, "output_tokens": 85}
COST_USD = 0.0123


_RALPH_ROLE = re.compile(r"^You are Ralph-(Planner|Executor|Reviewer|Questioner|Librarian)\b")


def answer_text(cli: str, prompt: str) -> str:
    """The YAML answer a fake gives for ``prompt``: for a prompt that makes it a Ralph role
    (``You are Ralph-Executor ...``), the role's work, done like the offline demo role
    does it (files written), when interlock is importable; else a small echo document."""
    role = _RALPH_ROLE.match(prompt.strip())
    if role is not None:
        try:
            from interlock.runtime.agents.role_agent import answer, carry_out
        except ImportError:  # the fake runs on a Python without interlock
            pass
        else:
            document, effects = answer(role.group(1).lower(), prompt)
            if document.get("status", "done") == "done":
                carry_out(effects)
            import yaml

            return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    first = prompt.strip().splitlines()[0] if prompt.strip() else ""
    return (f"verdict: accept\ncli: {cli}\nwords: {len(prompt.split())}\n"
            f"first: {json.dumps(first)}\n")


def failing() -> bool:
    return os.environ.get("FAKE_CLI_ERROR", "") not in ("", "0")


def log_call(argv: list[str], stdin: str | None) -> None:
    path = os.environ.get("FAKE_CLI_LOG")
    if path:
        Path(path).write_text(json.dumps({"argv": argv, "stdin": stdin}), encoding="utf-8")


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def usage_error(cli: str, message: str, code: int = 2) -> NoReturn:
    sys.stderr.write(f"{cli}: error: {message}\n")
    sys.exit(code)


def option(argv: list[str], name: str) -> str | None:
    """The value after ``name`` in ``argv`` (None when absent)."""
    if name in argv:
        index = argv.index(name)
        if index + 1 < len(argv):
            return argv[index + 1]
    return None
