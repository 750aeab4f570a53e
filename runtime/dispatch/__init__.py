"""Sub-agent dispatch: run a CLI agent, watch its output, decide when it is done.

The room, by concern:

* :mod:`~interlock.runtime.dispatch.polling`: the polling loop (:class:`Dispatch`, which
  feeds the ``polling_state`` machine), :func:`dispatch`, :func:`dispatch_all`;
* :mod:`~interlock.runtime.dispatch.document`: document detection (:func:`check_document`);
* :mod:`~interlock.runtime.dispatch.verdict`: what a review says (:class:`Verdict`,
  :class:`Issue`, :func:`parse_verdict`);
* :mod:`~interlock.runtime.dispatch.result`: :class:`PollingResult` (seed 001) and
  :class:`DispatchResult`;
* :mod:`~interlock.runtime.dispatch.types`: :class:`AgentCommand` and :class:`AgentRegistry`,
  what the loop's users share with it;
* :mod:`~interlock.runtime.config.dispatch`, :mod:`~interlock.runtime.dispatch.process`,
  :mod:`~interlock.runtime.dispatch.output`: settings, the child process, its output.

Every public name is importable from here (``from interlock.runtime.dispatch import
dispatch``). The names are loaded on first use, so importing one light module (the demo
agent imports :mod:`~interlock.runtime.dispatch.verdict`) does not pull in the polling
loop, the engine and the machines.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from interlock.runtime.config.dispatch import (
        CompletionMarkerConfig,
        ConfigError,
        PollingConfiguration,
        load_dispatch_config,
        parse_dispatch_config,
        with_overrides,
    )
    from interlock.runtime.dispatch.document import DocumentCheck, OutputFormat, check_document
    from interlock.runtime.dispatch.polling import (
        Dispatch,
        dispatch,
        dispatch_all,
        new_dispatch_id,
    )
    from interlock.runtime.dispatch.process import AgentProcess, SpawnError, SpawnOptions
    from interlock.runtime.dispatch.result import (
        COMPLETION_METHODS,
        POLLING_STATUSES,
        DispatchResult,
        PollingResult,
        PollingStatus,
    )
    from interlock.runtime.dispatch.types import AgentCommand, AgentRegistry
    from interlock.runtime.dispatch.verdict import (
        SEVERITIES,
        VERDICTS,
        Issue,
        Verdict,
        VerdictValue,
        parse_verdict,
    )

_HOMES: dict[str, tuple[str, ...]] = {
    # the dispatch: section of interlock.yaml lives with the other sections
    "interlock.runtime.config.dispatch": (
        "CompletionMarkerConfig", "ConfigError", "PollingConfiguration",
        "load_dispatch_config", "parse_dispatch_config", "with_overrides"),
    "document": ("DocumentCheck", "OutputFormat", "check_document"),
    "polling": ("Dispatch", "dispatch", "dispatch_all", "new_dispatch_id"),
    "process": ("AgentProcess", "SpawnError", "SpawnOptions"),
    "result": ("COMPLETION_METHODS", "POLLING_STATUSES", "DispatchResult", "PollingResult",
               "PollingStatus"),
    "types": ("AgentCommand", "AgentRegistry"),
    "verdict": ("SEVERITIES", "VERDICTS", "Issue", "Verdict", "VerdictValue", "parse_verdict"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "COMPLETION_METHODS",
    "POLLING_STATUSES",
    "SEVERITIES",
    "VERDICTS",
    "AgentCommand",
    "AgentProcess",
    "AgentRegistry",
    "CompletionMarkerConfig",
    "ConfigError",
    "Dispatch",
    "DispatchResult",
    "DocumentCheck",
    "Issue",
    "OutputFormat",
    "PollingConfiguration",
    "PollingResult",
    "PollingStatus",
    "SpawnError",
    "SpawnOptions",
    "Verdict",
    "VerdictValue",
    "check_document",
    "dispatch",
    "dispatch_all",
    "load_dispatch_config",
    "new_dispatch_id",
    "parse_dispatch_config",
    "parse_verdict",
    "with_overrides",
]


def __getattr__(name: str) -> Any:
    """Load a public name from the module that defines it, on first use."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home = module if "." in module else f"{__name__}.{module}"
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
