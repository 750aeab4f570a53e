"""Sub-agents through the façade: run agent commands, each as a process group, and get
their PollingResults (seed 001) as soon as their answers are known complete."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from interlock.runtime.api.common import opened_store, root_of
from interlock.runtime.config.dispatch import (
    ConfigError,
    FlagError,
    PollingConfiguration,
    load_dispatch_config,
    parse_dispatch_config,
    with_overrides,
)
from interlock.runtime.dispatch import AgentCommand, DispatchResult, dispatch_all
from interlock.runtime.dispatch.process import SpawnOptions
from interlock.runtime.dispatch.registry import StoreRegistry
from interlock.runtime.engine.orphans import reap_orphans

SPILL_DIR = Path(".interlock") / "dispatch"

__all__ = ["AgentCommand", "ConfigError", "DispatchResult", "FlagError",
           "PollingConfiguration", "SpawnOptions", "dispatch_agents", "dispatch_config",
           "parse_dispatch_config"]


def dispatch_config(config_file: Path | None = None, *, timeout: float | str | None = None,
                    interval: float | str | None = None, required_field: str | None = None,
                    output_format: str | None = None) -> PollingConfiguration:
    """The ``dispatch:`` settings of ``config_file`` (default: the nearest interlock.yaml),
    with overrides; ConfigError (located diagnostics) when they are invalid."""
    return with_overrides(load_dispatch_config(config_file), timeout=timeout,
                          interval=interval, required_field=required_field,
                          output_format=output_format)


async def dispatch_agents(
    commands: Sequence[AgentCommand], config: PollingConfiguration | None = None, *,
    record: bool = True, store: str | None = None, root: Path | str | None = None,
    on_note: Callable[[str], None] | None = None,
) -> list[DispatchResult]:
    """Run ``commands`` at once and return their results, in order. With ``record`` (the
    default), running agents are recorded in the store so that agents orphaned by a crash
    are stopped by the next dispatch, run or resume (which happens first here too)."""
    config = config or parse_dispatch_config(None)
    base = root_of(root)
    if not record:
        return await dispatch_all(commands, config, spill_dir=base / SPILL_DIR)
    with opened_store(store, base) as opened:
        for reaped in reap_orphans(opened, grace=config.terminate_grace):
            if on_note is not None:
                on_note(f"stopped {reaped.describe()}")
        return await dispatch_all(commands, config, spill_dir=base / SPILL_DIR,
                                  registry=StoreRegistry(opened))
