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
