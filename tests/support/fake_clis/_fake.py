"""Shared parts of the fake agent CLIs in this folder (stdlib only).

The real ``claude``, ``codex``, ``opencode`` and ``gemini`` CLIs run in the real-CLI
suites against the scripted model server (interlock.testing); these fakes, executables
with the same names, keep the fast adapter suite (test_adapter_contract.py) free of node:
they check the flags interlock passes and print what the real CLI prints for that mode
(each fake's docstring names the format; tests/support/captured/ has the real output).
Their answer is a small YAML document computed from the prompt, so a test can tell the
prompt arrived whole:

    verdict: accept
    cli: claude
    words: 7
    first: "Review the plan ..."

Environment: ``FAKE_CLI_ERROR=1`` makes a fake report an error the way its CLI does;
``FAKE_CLI_LOG=FILE`` makes it write its argv and stdin there as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

USAGE = {"input_tokens": 1200, "output_tokens": 85}
COST_USD = 0.0123


def answer_text(cli: str, prompt: str) -> str:
    """The YAML answer a fake gives for ``prompt``: a small echo document."""
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
