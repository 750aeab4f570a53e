"""``interlock review`` and ``interlock staged``: the review menu and staged corrections.

Thin: parse, call the façade (:mod:`interlock.runtime`), print. Exit codes of review:
0 resolved / accepted / configured / routed, 1 failed, 2 usage, 3 aborted, 4 timed out,
5 round limit, 130 interrupted (the poller agent at work is stopped; --resume continues).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from interlock import runtime
from interlock.machines.durations import parse_duration
from interlock.runtime.cli.output import EXIT_ERRORS, EXIT_USAGE, err, fail, out
from interlock.runtime.cli.sessions import _guard

EXIT_INTERRUPTED = 130


def _read_output(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise runtime.UsageError(f"no output file {source}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise runtime.UsageError(f"cannot read the output {source}: {exc}") from None


def _seconds(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise runtime.UsageError(f"--answer-timeout: {exc}") from None


def run_review(output: str | None, node: str | None, agent: str | None, answers: Path | None,
               as_json: bool, resume: str | None, unit: str, store: str | None,
               answer_timeout: str, max_rounds: int) -> int:
    def body() -> int:
        if answers is not None and as_json:
            raise runtime.UsageError("use one of --answers FILE and --json")
        if max_rounds < 1:
            raise runtime.UsageError("--max-rounds must be at least 1")
        text = ""
        if resume is None:
            if output is None or node is None:
                raise runtime.UsageError("use: interlock review OUTPUT --node NODE "
                                         "(or --resume POLLER_ID)")
            if output == "-" and as_json:
                raise runtime.UsageError("--json reads the answers from stdin: give OUTPUT as "
                                         "a file, not -")
            text = _read_output(output)
        scripted = runtime.load_answers(answers) if answers is not None else None
        front: Any = runtime.JsonLines() if as_json else None
        if front is None and scripted is not None:
            front = runtime.ScriptedAnswers(scripted, source=str(answers),
                                            out=sys.stdout)
        if front is None:
            if output == "-" or not sys.stdin.isatty():
                raise runtime.UsageError("the terminal UI needs a terminal: use --answers "
                                         "FILE or --json")
            front = runtime.terminal_ui()
        if resume is not None:
            outcome = runtime.resume_blocking(resume, front=front, agent=agent, store=store)
        else:
            assert node is not None
            outcome = runtime.review_blocking(
                text, node, front=front, agent=agent, unit=unit,
                store=store, max_rounds=max_rounds,
                answer_timeout=_seconds(answer_timeout))
        if not as_json:
            text = f"{outcome.resolution}"
            if outcome.poller_id:
                text += f" (poller {outcome.poller_id})"
            if outcome.staged and node:
                text += f"; staged: interlock staged {node}"
            if outcome.message:
                text += f": {outcome.message}"
            err.print(text)
        return outcome.exit_code

    try:
        return _guard(body)
    except ValueError as exc:  # an --answers item that does not fit its question
        return fail(str(exc), EXIT_USAGE)
    except KeyboardInterrupt as exc:  # the poller agent at work, if any, is stopped
        poller_id = getattr(exc, "poller_id", None)
        hint = (f"; continue with: interlock review --resume {poller_id}" if poller_id
                else "")
        err.print(f"interrupted{hint}")
        return EXIT_INTERRUPTED


def run_staged(node: str, as_json: bool, consume: bool, store: str | None) -> int:
    def body() -> int:
        call = runtime.sync.consume_staged if consume else runtime.sync.staged
        config = call(node, store=store)
        if config is None:
            if not as_json:
                err.print(f"nothing staged for {node}")
            return EXIT_ERRORS
        if as_json or consume:
            sys.stdout.write(json.dumps(config, ensure_ascii=False, sort_keys=True) + "\n")
        else:
            for key in ("action", "corrections", "context_additions", "model", "harness",
                        "tools", "resolved_at", "poller_id"):
                if key in config:
                    out.print((key, "bold"), f": {json.dumps(config[key])}")
        return 0

    return _guard(body)
