"""Fan-out: one child invocation per item of a list, at most ``concurrency`` at once.

``invoke: {id: executors, machine: ralph_subagent, each: "{{ context.batch }}",
concurrency: "{{ context.parallel }}", input: {task: "{{ item }}"}}`` (XState's spawned
actors, Step Functions' Map state). The manager (:class:`~interlock.runtime.engine.invoke.
Invoker`) runs it; each child is an ordinary invocation of the invoke's kind, started by
its handler with an :class:`~interlock.runtime.engine.invoke_handler.Item`, so that its
templates see ``item`` and ``index``. This module holds what a fan-out is made of:

* :func:`evaluate` turns ``each:`` and ``concurrency:`` into the list and the limit when
  the state is entered (a :class:`FanoutError` when they do not give a list and an
  integer >= 1); the list is kept in the store's ``fanouts`` row, so a runner resumed
  after a crash runs over the same items whatever the context says by then;
* :class:`Fanout` is one run of it in memory: its children by index, the events they
  raised (kept on their rows too, ``result``), which indices are still to start;
* :func:`child_data` is what a child's event carries besides a single invoke's data
  (``item``, ``index``), :func:`all_data` the data of ``done.invoke.<id>.all``.

Events: each child's end raises what a single invoke raises (``done.invoke.<id>``, a
machine's ``done.invoke.<id>.<final>``, ``error.invoke.<id>``) keyed by the child's
invocation id; when the last one has ended, ``done.invoke.<id>.all`` once, keyed by the
fan-out's id (an empty list raises it at once). A list that cannot be evaluated raises
``error.invoke.<id>`` (``spawn_error``, ``index`` null) and no ``.all``. See docs/invoke.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlock.machines.ir import ALL_SUFFIX, InvokeIR
from interlock.runtime.engine.invoke_handler import Flight, Item, base_data, empty_result
from interlock.runtime.store.base import FanoutRecord, InvocationRecord

__all__ = ["Fanout", "FanoutError", "all_data", "child_data", "evaluate"]


class FanoutError(Exception):
    """``each:`` or ``concurrency:`` did not give a list or an integer >= 1."""


def _value(text: Any, context: Mapping[str, Any], what: str) -> Any:
    from interlock.runtime.engine.prompts import PromptError, render_input  # Jinja2

    try:
        return render_input({what: text}, context=context)[what]
    except PromptError as exc:
        raise FanoutError(str(exc)) from None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def evaluate(invoke: InvokeIR, context: Mapping[str, Any]) -> tuple[list[Any], int | None]:
    """The items of a fan-out and at most how many run at once (None: all), from its
    ``each:`` (one ``{{ expression }}`` or a list whose strings are templates) and
    ``concurrency:`` over ``context``. Raises :class:`FanoutError`."""
    each = invoke.each
    items = _value(each if isinstance(each, str) else list(each or ()), context, "each")
    if not isinstance(items, list | tuple):
        raise FanoutError(f"`each:` of invoke {invoke.id!r} gave {type(items).__name__} "
                          f"{_shown(items)}, not a list")
    limit = invoke.concurrency
    if isinstance(limit, str):
        limit = _value(limit, context, "concurrency")
        if (isinstance(limit, str) and limit.strip().isdigit()) \
                or (isinstance(limit, float) and limit.is_integer()):
            limit = int(limit)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise FanoutError(f"`concurrency:` of invoke {invoke.id!r} gave {_shown(limit)}, "
                          "not an integer >= 1")
    return list(items), limit


def spool_order(record: InvocationRecord) -> tuple[str, str]:
    """Rows in the order their invocations were opened (the spool folder's number, since
    a manual clock gives several the same start time)."""
    return Path(record.spool).name, record.id


@dataclass
class Fanout:
    """One run of a fan-out: its row, its invoke, its children by index (the latest one
    of each), the events they raised by index, the invocation ids of all its children
    (any of them answers for it), and ``finished`` once nothing more of it is to come
    (its ``.all`` offered, its list refused, or it was cancelled)."""

    record: FanoutRecord
    invoke: InvokeIR
    children: dict[int, Flight] = field(default_factory=dict)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    invocations: set[str] = field(default_factory=set)
    finished: bool = False

    @property
    def size(self) -> int:
        return len(self.record.items)

    def item(self, index: int) -> Item:
        return Item(self.record.id, index, self.record.items[index])

    def to_start(self) -> list[Item]:
        """The children to start now: the indices not yet started, in order, as many as
        the concurrency leaves room for."""
        if self.finished:
            return []
        running = sum(1 for f in self.children.values() if not f.finished)
        room = (self.record.concurrency or self.size) - running
        pending = [i for i in range(self.size)
                   if i not in self.children and i not in self.results]
        return [self.item(i) for i in pending[:max(room, 0)]]

    @property
    def complete(self) -> bool:
        """Every child has ended (its event is kept)."""
        return len(self.results) == self.size


def child_data(item: Item, data: Mapping[str, Any]) -> dict[str, Any]:
    """A child's event data: what a single invoke's event carries, plus ``item`` and
    ``index``."""
    return {**data, "item": item.value, "index": item.index}


def child_suffix(suffix: str | None) -> str | None:
    """A child machine's final state in its event's name: a final state named ``all``
    is left out (``done.invoke.<id>``; the data's ``state`` says it), since
    ``done.invoke.<id>.all`` is the fan-out's own."""
    return None if suffix == ALL_SUFFIX else suffix


def all_data(fanout: Fanout) -> dict[str, Any]:
    """The data of ``done.invoke.<id>.all``: ``outcomes``, every child's event in item
    order (its data, with ``event``, the event's name, and ``ok``, false for an error);
    ``items``; ``done`` and ``failed``, how many ended each way; and ``invocation``, the
    fan-out's id."""
    outcomes = []
    for index in range(fanout.size):
        result = fanout.results[index]
        event = str(result.get("event") or "")
        outcomes.append({**result.get("data", {}), "event": event,
                         "ok": not event.startswith("error.")})
    failed = sum(1 for o in outcomes if not o["ok"])
    return {"outcomes": outcomes, "items": list(fanout.record.items),
            "done": len(outcomes) - failed, "failed": failed,
            "invocation": fanout.record.id}


def each_error_data(fanout_id: str, message: str) -> dict[str, Any]:
    """The data of the ``error.invoke.<id>`` of a fan-out whose list or concurrency could
    not be evaluated (no child started; no ``.all`` follows)."""
    result = empty_result("error", "spawn", f"interlock: {message}\n")
    return {**base_data(fanout_id, result), "reason": "spawn_error", "message": message,
            "item": None, "index": None}
