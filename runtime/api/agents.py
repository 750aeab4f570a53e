"""Agents through the façade: check, before any call, that each agent can run.

A plain function: it reads files and runs each CLI's own local commands (``--version``,
its login status...), a few seconds at most; no model is called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from interlock.runtime.agents.preflight import AgentCheck, Finding, UnknownAgent, check_project
from interlock.runtime.api.common import root_of
from interlock.runtime.api.errors import UsageError
from interlock.runtime.config.ralph import load_ralph_config

__all__ = ["AgentCheck", "Finding", "agents_check"]


def agents_check(names: Sequence[str] | None = None, *, root: Path | str | None = None,
                 roles: bool = False, merger: bool | None = None,
                 environ: Mapping[str, str] | None = None) -> list[AgentCheck]:
    """Check the agents of ``ROOT/interlock.yaml`` (default: the working folder): each of
    ``names``, else every agent under ``agents:`` (the offline demo roles when there is
    none); with ``roles``, the five Ralph roles, where a role without an agent is a
    problem, and the Merger when ``merger`` (None: when interlock.yaml's
    ``ralph.parallel`` is above 1). One :class:`AgentCheck` each (``.ok``, ``.line()``,
    ``.findings``), in order.
    ``environ``: the environment the agents inherit (default: this process's).

    UsageError for a name that is no agent (or role); SpecError (located diagnostics) for
    a broken ``agents:`` (or ``ralph:``) section."""
    folder = root_of(root)
    try:
        if merger is None:
            merger = roles and load_ralph_config(folder).parallel > 1
        return check_project(folder, names, roles=roles, merger=merger, environ=environ)
    except UnknownAgent as exc:
        raise UsageError(str(exc)) from None
