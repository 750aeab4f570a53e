"""``interlock dispatch``: run sub-agent commands, print their PollingResults.

A drop-in for a shell orchestrator's ``timeout 180 claude -p ...``: exit 0 when every
agent completed, 1 when one ended in error, 124 when one timed out (and none erred), 2
for a usage or configuration mistake, 130 when interrupted (the agents are stopped).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from interlock import runtime
from interlock.runtime import AgentCommand, DispatchResult
from interlock.runtime.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    err,
    fail,
    report_diagnostics,
)

EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130
SEPARATOR = ":::"  # between commands: interlock dispatch -- cmd1 a ::: cmd2 b


def split_commands(words: Sequence[str]) -> list[tuple[str, ...]]:
    """``a b ::: c d`` -> [(a, b), (c, d)]; an empty command is a usage error."""
    commands: list[tuple[str, ...]] = [()]
    for word in words:
        if word == SEPARATOR:
            commands.append(())
        else:
            commands[-1] = (*commands[-1], word)
    if any(not c for c in commands):
        raise ValueError(f"an empty command (around {SEPARATOR!r}); give each one as "
                         "CMD [ARG...]")
    return commands


def exit_code(results: Sequence[DispatchResult]) -> int:
    statuses = {r.status for r in results}
    if "error" in statuses:
        return EXIT_ERRORS
    if "timeout" in statuses:
        return EXIT_TIMEOUT
    return EXIT_OK


class _ResultDumper(yaml.SafeDumper):
    """Multi-line text (an agent's output) as a literal block, readable as printed."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ResultDumper.add_representer(str, _text)


def _render(results: Sequence[DispatchResult], fmt: str) -> str:
    data: Any = [r.to_json() for r in results]
    if len(results) == 1:
        data = data[0]
    if fmt == "yaml":
        return str(yaml.dump(data, Dumper=_ResultDumper, sort_keys=False, allow_unicode=True,
                             width=100))
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _summary(result: DispatchResult) -> str:
    p = result.polling
    who = f"{result.name}: " if result.name else ""
    verdict = f", verdict {p.verdict.verdict}" if p.verdict and p.verdict.verdict else ""
    why = f" ({result.error})" if result.error else ""
    return (f"{who}{p.status} by {p.completion_method} in {p.elapsed_time:.2f}s"
            f"{verdict}{why}")


async def _run_all(commands: list[AgentCommand], config: runtime.PollingConfiguration,
                   store_url: str | None, record: bool) -> list[DispatchResult]:
    task = asyncio.ensure_future(runtime.dispatch_agents(
        commands, config, record=record, store=store_url,
        on_note=lambda text: err.print((text, "yellow"))))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    return await task


def run_dispatch(words: Sequence[str], *, config_file: Path | None, timeout: str | None,
                 interval: str | None, required_field: str | None, fmt: str,
                 output_format: str | None, prompt_file: str | None, names: Sequence[str],
                 line_buffered: bool, use_pty: bool, store_url: str | None,
                 use_store: bool) -> int:
    try:
        argvs = split_commands(words)
    except ValueError as exc:
        return fail(str(exc), EXIT_USAGE)
    if names and len(names) != len(argvs):
        return fail(f"{len(names)} --name given for {len(argvs)} command(s)", EXIT_USAGE)
    if config_file is not None and not config_file.is_file():
        what = "is a folder" if config_file.is_dir() else "no such file"
        return fail(f"--config {config_file}: {what}", EXIT_USAGE)
    try:
        config = runtime.dispatch_config(config_file, timeout=timeout, interval=interval,
                                         required_field=required_field,
                                         output_format=output_format)
    except runtime.FlagError as exc:
        return fail(exc.message, EXIT_USAGE)
    except runtime.ConfigError as exc:  # stdout is for the results: findings on stderr
        report_diagnostics(exc.diagnostics)
        return EXIT_USAGE
    prompt: str | None = None
    if prompt_file is not None:
        try:
            prompt = (sys.stdin.read() if prompt_file == "-"
                      else Path(prompt_file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            return fail(f"--prompt-file {prompt_file}: cannot read it: {reason}", EXIT_USAGE)
    options = runtime.SpawnOptions(line_buffered=line_buffered, use_pty=use_pty)
    commands = [AgentCommand(argv, prompt=prompt, name=names[i] if names else None,
                             options=options) for i, argv in enumerate(argvs)]
    try:
        results = asyncio.run(_run_all(commands, config, store_url, use_store))
    except asyncio.CancelledError:
        err.print("interrupted; the agents were stopped")
        return EXIT_INTERRUPTED
    except runtime.InterlockError as exc:
        return fail(str(exc), exc.exit_code)
    sys.stdout.write(_render(results, fmt))
    for result in results:
        err.print(_summary(result))
    return exit_code(results)
