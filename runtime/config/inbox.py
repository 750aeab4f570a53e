"""The ``inbox:`` section of interlock.yaml: it turns the poller on (absent: off)::

    inbox:
      store: postgresql://...      # default: .interlock/inbox.db (URLs: config/inbox_store)
      interval: 30s                # between polls while healthy
      lease: 5m                    # lease taken on claim
      request_timeout: 10s         # per adapter request (HTTP)
      backoff_base: 1s
      backoff_max: 5m
      batch: 10                    # messages fetched per poll
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from interlock.machines.diagnostics import SpecError, error
from interlock.machines.settings import Duration, Section, section_diagnostics
from interlock.machines.yamlsrc import SourceMap
from interlock.runtime.config.inbox_store import InboxConfigError, parse_store_url
from interlock.runtime.config.project_file import project_section, read_project_file

SECTION = "inbox"


# -- the inbox: section --------------------------------------------------------------


class PollerConfig(BaseModel):
    """The ``inbox:`` section: where the store is and how the poller paces itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    store: str | None = None
    enabled: bool = True
    interval: Duration = Field(default=30.0, gt=0)
    lease: Duration = Field(default=300.0, gt=0)
    request_timeout: Duration = Field(default=10.0, gt=0)
    backoff_base: Duration = Field(default=1.0, gt=0)
    backoff_max: Duration = Field(default=300.0, gt=0)
    batch: int = Field(default=10, ge=1, le=1000)

    @field_validator("store")
    @classmethod
    def _store(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_store_url(value)
            except InboxConfigError as exc:
                raise ValueError(str(exc)) from None
        return value


POLLER = Section(SECTION, PollerConfig, unknown_key="C002", invalid_value="C002",
                 invalid_duration="C002", missing="C002",
                 unknown_key_message="{name}: unknown key")


def parse_poller_config(data: Any, source: SourceMap | None = None) -> PollerConfig | None:
    """The poller config from the section's data; None when the section is absent (the
    poller is opt-in). Raises SpecError whose diagnostics point at FILE:LINE:COL."""
    source = source if source is not None else SourceMap("<string>")
    if data is None:
        return None
    if data is True or data == {}:
        return PollerConfig()
    if not isinstance(data, Mapping):
        raise SpecError([error("C001", f"inbox must be a mapping of settings, got "
                               f"{type(data).__name__}", source.value((SECTION,)))])
    try:
        return PollerConfig.model_validate(data)
    except ValidationError as exc:
        raise SpecError(section_diagnostics(exc, POLLER, source, (SECTION,))) from None


def load_poller_config(path: Path | None = None, *, start: Path | None = None
                       ) -> PollerConfig | None:
    """The ``inbox:`` section of the project file (found from ``start`` when no ``path``);
    None when there is no file or no section."""
    from interlock.runtime.config.dispatch import find_project_config

    if path is None:
        path = find_project_config(start)
        if path is None:
            return None
    data, source = project_section(read_project_file(path), str(path), SECTION)
    return parse_poller_config(data, source)
