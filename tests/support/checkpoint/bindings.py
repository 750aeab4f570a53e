"""Bindings for checkpoint.yaml, gated.yaml and idle.yaml."""

from interlock.machines import Call


def note_steer(call: Call) -> None:
    call.context["steers"] = [*call.context["steers"], call.data.get("message")]


def set_ready(call: Call) -> None:
    call.context["ready"] = True


def ready(call: Call) -> bool:
    call.context["looked"] += 1  # impure on purpose: accepts() must not keep this
    return bool(call.context["ready"])


def count_poll(call: Call) -> None:
    call.context["polls"] += 1


BINDINGS = {"note_steer": note_steer, "set_ready": set_ready, "ready": ready,
            "count_poll": count_poll}
