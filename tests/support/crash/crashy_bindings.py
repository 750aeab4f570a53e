"""Bindings for crashy.yaml: each action does a little work (the run takes ~1-2 s, so
SIGKILL lands mid-run) and records what it saw in the context."""

import time

from interlock.machines import Call

WORK = 0.004  # seconds of "work" per action: the workload being interrupted


def record(call: Call) -> None:
    time.sleep(WORK)
    call.context["count"] += 1
    call.context["seen"].append(call.data["n"])


def count_lap(call: Call) -> None:
    time.sleep(WORK)
    call.context["laps"] += 1


def tock(call: Call) -> None:
    call.context["tocks"] += 1


BINDINGS = {"record": record, "count_lap": count_lap, "tock": tock}
