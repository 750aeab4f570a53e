"""A demo role agent's script: what its answers add and how its calls fail (see
:mod:`interlock.runtime.agents.role_agent`)."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from interlock.machines.diagnostics import SpecError, error
from interlock.machines.yamlsrc import parse_yaml


class RoleScript(BaseModel):
    """A demo agent's script (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default: dict[str, Any] = Field(default_factory=dict)
    answers: list[dict[str, Any]] = Field(default_factory=list)
    tasks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    fail_times: Annotated[int, Field(strict=True, ge=0)] = 0
    exit_code: Annotated[int, Field(strict=True, ge=1, le=255)] = 1
    fail_message: str = "model backend unavailable (HTTP 503 Service Unavailable)"
    hang: Annotated[bool, Field(strict=True)] = False
    linger: Annotated[float, Field(ge=0)] = 0.0


def load_script(path: Path) -> RoleScript:
    """Read and check a script; raises :class:`SpecError` with located diagnostics."""
    document = parse_yaml(path.read_bytes(), str(path))
    try:
        return RoleScript.model_validate(document.data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            name = ".".join(str(p) for p in loc) or "script"
            mark = (document.source.key(loc) if err["type"] == "extra_forbidden"
                    else document.source.value(loc))
            message = str(err["msg"]).replace("Input should be", "expected")
            problems.append(error("A506", f"{name}: {message}", mark))
        raise SpecError(problems) from None


def next_call(script: Path) -> int:
    """Count one more call of ``script`` (in ``SCRIPT.calls``); returns its number, from 1."""
    counter = script.with_name(script.name + ".calls")
    with counter.open("a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        text = handle.read().strip()
        number = (int(text) if text.isdigit() else 0) + 1
        handle.seek(0)
        handle.truncate()
        handle.write(f"{number}\n")
        handle.flush()
    return number


def scripted(base: dict[str, Any], script: RoleScript, call: int,
             task: str | None) -> dict[str, Any]:
    """``base`` with the script's default, per-task and per-call answers merged in."""
    merged = {**base, **script.default}
    if task is not None:
        merged.update(script.tasks.get(task, {}))
    index = call - script.fail_times - 1
    if 0 <= index < len(script.answers):
        merged.update(script.answers[index])
    return merged
