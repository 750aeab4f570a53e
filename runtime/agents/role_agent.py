"""The offline demo role agent as a process: ``python -m interlock.runtime.agents.role_agent``.

``--role planner|executor|reviewer|questioner|librarian`` chooses the answer
(:mod:`interlock.runtime.agents.roles`), the prompt comes on stdin, the answer goes to
stdout as YAML closed by ``...`` (or JSON with ``--format json``), one line at a time,
``--delay`` seconds apart. ``--script FILE`` (a YAML file) scripts the answers::

    default: {verdict: reject}          # merged into every answer
    answers:                            # merged into the 1st, 2nd, ... answer given
      - {status: blocked, blockers: [needs a database]}
    tasks:                              # merged into the answer about that Task: id
      T2: {status: done}
    fail_times: 1                       # the first N calls fail ...
    exit_code: 3                        # ... with this exit code (default 1)
    fail_message: backend unavailable   # ... printing this on stderr
    hang: true                          # print nothing and never exit (until killed)
    linger: 30                          # after the answer, stay alive silently 30 s

Calls are counted in ``FILE.calls`` (next to the script, under a lock), so a script's
sequence (``answers``, ``fail_times``) runs across processes; a script without one counts
nothing. Without a script the same prompt gives the same answer.
Exit codes: 0 answered, the script's ``exit_code`` for a scripted failure, 2 for a bad
script or role.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

from interlock.runtime.agents import roles
from interlock.runtime.config.role_names import ALL_ROLES

HANG_STEP = 3600.0


def _staged(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_file())


def carry_out(effects: roles.Effects) -> None:
    """Write and copy the files a role's answer needs."""
    for target, text in effects.writes.items():
        path = Path(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for source, target in effects.copies.items():
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def answer(role: str, prompt: str) -> tuple[dict[str, Any], roles.Effects]:
    """The role's unscripted answer to ``prompt`` and what it has to write."""
    if role == "planner":
        return roles.plan(prompt), roles.Effects()
    if role == "executor":
        return roles.execute(prompt)
    if role == "reviewer":
        return roles.review(prompt), roles.Effects()
    if role == "questioner":
        return roles.ask(prompt), roles.Effects()
    facts = roles.parse_prompt(prompt)
    if role == "merger":
        return roles.merge(prompt, _texts(Path(facts.workdir), facts.conflicts))
    return roles.librarian(prompt, _staged(Path(facts.knowledge_dir)))


def _texts(folder: Path, names: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in names:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            found[name] = (folder / name).read_text(encoding="utf-8")
    return found


def write_lines(lines: Sequence[str], out: TextIO, delay: float,
                sleep: Callable[[float], None]) -> None:
    """Write each line and flush it; pause ``delay`` seconds between lines."""
    for index, line in enumerate(lines):
        if index and delay > 0:
            sleep(delay)
        out.write(line + "\n")
        out.flush()


def render(doc: Mapping[str, Any], fmt: str) -> list[str]:
    """The answer's lines: YAML (block style, keys in order, closed by ``...``) or JSON."""
    if fmt == "json":
        return json.dumps(doc, indent=2).splitlines()
    return [*yaml.safe_dump(dict(doc), sort_keys=False, allow_unicode=True).splitlines(), "..."]


def run(role: str, prompt: str, *, delay: float = 0.0, script: Path | None = None,
        fmt: str = "yaml", stdout: TextIO | None = None, stderr: TextIO | None = None,
        sleep: Callable[[float], None] = time.sleep) -> int:
    """Play one role agent call; returns the exit code."""
    out = stdout if stdout is not None else sys.stdout
    errs = stderr if stderr is not None else sys.stderr
    if role not in ALL_ROLES:
        errs.write(f"error: --role must be one of {', '.join(ALL_ROLES)}, got {role!r}\n")
        return 2
    linger = 0.0
    doc, effects = answer(role, prompt)
    if script is not None:
        # The script's module (pydantic) loads only for a scripted agent: most calls have
        # none, and this process starts once per call.
        from interlock.machines.diagnostics import SpecError
        from interlock.runtime.agents.role_script import load_script, next_call, scripted

        try:
            plan = load_script(script)
        except OSError as exc:
            errs.write(f"error: {script}: cannot read the script: {exc.strerror or exc}\n")
            return 2
        except SpecError as exc:
            errs.write(f"{exc}\n")
            return 2
        call = next_call(script) if plan.answers or plan.fail_times else 1
        while plan.hang:
            sleep(HANG_STEP)
        if call <= plan.fail_times:
            if delay > 0:
                sleep(delay)
            errs.write(f"error: {role} failed (call {call}): {plan.fail_message}\n")
            errs.flush()
            return plan.exit_code
        facts = roles.parse_prompt(prompt)
        doc = scripted(doc, plan, call, facts.tasks[0][0] if facts.tasks else None)
        linger = plan.linger
    if doc.get("status", "done") == "done":  # a scripted blocked/paused executor writes nothing
        try:
            carry_out(effects)
        except OSError as exc:
            errs.write(f"error: {role} cannot write its files: {exc}\n")
            return 1
    write_lines(render(doc, fmt), out, delay, sleep)
    if linger > 0:
        sleep(linger)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="role_agent", description="An offline demo role agent: prompt on stdin, answer "
        "on stdout.")
    parser.add_argument("--role", required=True, help=", ".join(ALL_ROLES))
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between lines")
    parser.add_argument("--script", type=Path, help="a YAML script of answers and failures")
    parser.add_argument("--format", choices=("yaml", "json", "text"), default="yaml")
    args = parser.parse_args(argv)
    prompt = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    with contextlib.suppress(BrokenPipeError):
        return run(args.role, prompt, delay=max(args.delay, 0.0), script=args.script,
                   fmt=args.format)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
