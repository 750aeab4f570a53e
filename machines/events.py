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
