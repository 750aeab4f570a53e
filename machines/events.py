"""Event descriptors: SCXML dotted-prefix matching, the one rule every part uses."""

from __future__ import annotations


def descriptor_matches(descriptor: str, event: str) -> bool:
    """Whether a transition's event descriptor matches an event name.

    A descriptor matches the event with the same name and every event that extends it by
    whole dotted tokens; ``.*`` or a trailing ``.`` spell the same thing; ``*`` matches all.

    >>> descriptor_matches("signal", "signal.STEER"), descriptor_matches("signal", "signals")
    (True, False)
    """
    if descriptor == "*":
        return True
    if descriptor.endswith(".*"):
        descriptor = descriptor[:-2]
    elif descriptor.endswith("."):
        descriptor = descriptor[:-1]
    if not descriptor:
        return True
    return event == descriptor or event.startswith(descriptor + ".")


RESERVED_PREFIXES: dict[str, str] = {
    "after": "timer events are named after.<state>.<n>; write delays under `after:` and "
             "rename the event",
    "done": "done.* names completion events such as done.state.<id>; rename the event",
    "error": "error.* names errors the engine raises, such as error.execution; rename the "
             "event",
}


def reserved_reason(event: str) -> str | None:
    """Why an event name is reserved for the engine (``after``, ``after.*``, ``done.*``,
    ``error.*``), or None when anyone may use it."""
    head, dot, _ = event.partition(".")
    if head in RESERVED_PREFIXES and (dot or head == "after"):
        return RESERVED_PREFIXES[head]
    return None


# Events the engine raises that a spec may listen for (SCXML's error.execution, invoke's
# done/error events): ``error`` and ``error.*`` match every error the engine raises.
ENGINE_EVENT_PREFIXES: tuple[str, ...] = ("error.execution", "error.invoke", "done.invoke")


def engine_raised(descriptor: str) -> bool:
    """Whether a transition listening for ``descriptor`` hears events the engine raises
    (so the reserved name is legitimate there).

    >>> engine_raised("error.execution"), engine_raised("done.invoke.work"), engine_raised("error")
    (True, True, True)
    >>> engine_raised("done.state.active"), engine_raised("error.custom")
    (False, False)
    """
    if descriptor.endswith(".*"):
        descriptor = descriptor[:-2]
    if descriptor in ("error", "done.invoke", "error.invoke"):
        return True
    return any(descriptor == p or descriptor.startswith(p + ".") for p in ENGINE_EVENT_PREFIXES)
