"""Bindings for the fault specs (recorder.yaml, handled.yaml).

``BINDINGS``: ``record`` raises ValueError on the event with n == 3 (the third event of
the tests); ``FIXED`` is the same with that bug fixed. ``spawn`` starts a child process
(``sleep 60``) and returns; ``wait`` starts one and waits for it: what a cancel must stop.
The pids go to the file named by the event's ``pidfile`` (the test reads them).
"""

import subprocess
from pathlib import Path

from interlock.machines import Call


def record(call: Call) -> None:
    call.context["seen"].append(call.data["n"])  # rolled back when the step fails
    if call.data["n"] == 3:
        raise ValueError("boom")


def record_fixed(call: Call) -> None:
    call.context["seen"].append(call.data["n"])


def note_error(call: Call) -> None:
    call.context["errors"].append(dict(call.data))


def tick(call: Call) -> None:
    pass


def _child(call: Call) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(["sleep", "60"], start_new_session=bool(call.data.get("group")))
    with Path(call.data["pidfile"]).open("a") as out:
        out.write(f"{child.pid}\n")
    return child


def spawn(call: Call) -> None:
    _child(call)


def wait(call: Call) -> None:
    _child(call).wait()


BINDINGS = {"record": record, "note_error": note_error, "tick": tick, "spawn": spawn,
            "wait": wait}
FIXED = {**BINDINGS, "record": record_fixed}
