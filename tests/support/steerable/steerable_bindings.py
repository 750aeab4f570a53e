"""Bindings for steerable.yaml: STEER and INFO messages are kept in the context."""

from interlock.machines import Call


def note_steer(call: Call) -> None:
    call.context["steers"] = [*call.context["steers"], call.data.get("message")]


BINDINGS = {"note_steer": note_steer}
