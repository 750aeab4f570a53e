"""The inbox poller inside a session (issue 13): opt-in, idle-only, exactly-once delivery.

When the project's ``interlock.yaml`` has an ``inbox:`` section, a session run through
the façade (``runtime.start``/``resume``, ``interlock run``/``resume``) gets a
:class:`SessionInbox` beside its runner: an :class:`~interlock.runtime.inbox.poller.
InboxPoller` whose

* ``is_idle`` is *the runner waits on no invoked agent* (``Runner.working()``: none
  runs, and no fan-out has children still to come) *and its active states take the
  delivery event*, so a poll that falls due while an agent works makes no adapter call,
  and nothing is claimed that the session could not take (a spec that never listens for
  ``inbox.message`` never claims a message from a shared inbox);
* ``deliver`` offers the claimed message to the session as the event ``inbox.message``
  (:func:`message_event`: the seed's fields, plus ``lease_token`` and ``lease_until``
  for the binding that acks), keyed ``inbox:<message id>`` (``Store.offer``: once per
  message, ever), and wakes the runner. A message the session already got is never
  claimed again, even after a restart or once its lease ran out (the token the session
  holds then stays the current one until someone else claims the message).

Nothing is acked automatically: the session's own bindings ack, done or fail the message
with :func:`mark_delivered` (or ``interlock inbox done ID``).

A Ralph session takes inbox messages as INFO context instead: ``SessionInbox(...,
shape=info_event)`` delivers ``signal.INFO`` (target ALL) whose ``message`` is the
message rendered as one paragraph, which the orchestrator's ``ingest_info`` adds to
``info_messages`` (see docs/inbox.md, "Ralph sessions").
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from interlock.machines.diagnostics import SpecError
from interlock.runtime.config.inbox import PollerConfig, load_poller_config
from interlock.runtime.config.inbox_store import InboxError
from interlock.runtime.engine.host import HostPlugin, SessionHost
from interlock.runtime.engine.runner import Runner, RunOutcome
from interlock.runtime.inbox.base import InboxAdapter
from interlock.runtime.inbox.deliveries import INBOX_EVENT, INBOX_SIGNAL_TAG, INFO_EVENT
from interlock.runtime.inbox.model import Message, MessageLease, Status
from interlock.runtime.inbox.poller import InboxPoller
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import Signal, make_signal
from interlock.runtime.store import EventQueue, open_store
from interlock.runtime.store.base import StoreError

KEY_PREFIX = "inbox:"  # Store.offer keys: inbox:<message id>
STOP_TIMEOUT = 15.0  # seconds stop() waits for a tick under way (adapter calls are bounded)
LOG = logging.getLogger("interlock.inbox")

Shape = Callable[[Message, MessageLease], tuple[str, dict[str, Any]]]
NoteCallback = Callable[[str], None]


def message_event(message: Message, lease: MessageLease) -> tuple[str, dict[str, Any]]:
    """``inbox.message`` with the seed's fields (``id, type, from, status, body,
    correlation_id, payload_ref``), ``lease_until`` and ``lease_token``."""
    data = message.to_json()
    for key in ("owner", "created_at", "updated_at"):
        data.pop(key, None)
    data["lease_token"] = lease.token
    data["lease_until"] = lease.lease_until
    return INBOX_EVENT, data


def info_text(message: Message) -> str:
    """A message as one INFO paragraph: ``[inbox TYPE from SENDER] BODY (refs)``."""
    refs = [f"{k}: {v}" for k, v in (("correlation_id", message.correlation_id),
                                     ("payload_ref", message.payload_ref)) if v]
    text = f"[inbox {message.type} from {message.sender}] {message.body}".rstrip()
    return text + (f" ({', '.join(refs)})" if refs else "")


def info_event(message: Message, lease: MessageLease) -> tuple[str, dict[str, Any]]:
    """``signal.INFO`` shaped like a live signal's event (``signal_id, target, message,
    iteration``; target ALL) for a Ralph session, with the ``inbox.message`` data under
    ``inbox`` for a binding that acks."""
    return INFO_EVENT, {"signal_id": f"inbox-{message.id}", "target": "ALL",
                        "message": info_text(message), "iteration": None,
                        "inbox": message_event(message, lease)[1]}




def inbox_signal(message: Message) -> Signal:
    """The INFO signal a message becomes when it is posted into a session's mailbox (a
    Ralph session's): stamped with the message's creation time, its id ending in
    ``inbox`` and a digest of the message id, so a message posted twice (a redelivery
    after a crash) is one signal, taken once."""
    digest = hashlib.sha256(message.id.encode("utf-8")).hexdigest()[:27]
    created = datetime.fromtimestamp(message.created_at or 0.0, UTC)
    return make_signal("INFO", message=info_text(message), now=created,
                       random_part=f"{INBOX_SIGNAL_TAG}{digest}")


def mark_delivered(adapter: InboxAdapter, data: Mapping[str, Any], status: Status | str, *,
                   reason: str | None = None) -> Message:
    """Ack, done or fail a message the session got, fenced by its lease token: ``data``
    is the ``inbox.message`` event's data (or an INFO delivery's, or a copy kept in the
    context). Raises StaleLease once someone else has claimed the message since."""
    fields = data.get("inbox", data) if isinstance(data.get("inbox"), Mapping) else data
    token = fields.get("lease_token")
    return adapter.update_status(str(fields["id"]), Status(status),
                                 str(token) if token else None, reason=reason)


class SessionInbox(HostPlugin):
    """An :class:`InboxPoller` beside one runner, a plugin of its session's host (see the
    module docstring).

    ``store`` must be a store connection of its own (the poller works in worker
    threads); it is closed by :meth:`stop`, like the adapter. ``is_idle`` replaces the
    default gate (a Ralph runner: no subagent in flight). With ``mailbox`` (a Ralph
    session's), each message is posted there as an INFO signal (:func:`inbox_signal`)
    and marked done: the mailbox keeps it until a checkpoint takes it, so the gate need
    not wait for one.
    """

    def __init__(self, runner: Runner, store: EventQueue, config: PollerConfig, *,
                 root: Path | None = None, adapter: InboxAdapter | None = None,
                 shape: Shape = message_event, is_idle: Callable[[], bool] | None = None,
                 on_note: NoteCallback | None = None, mailbox: Mailbox | None = None,
                 **options: Any) -> None:
        self.runner = runner
        self.store = store
        self.shape = shape
        self.mailbox = mailbox
        self.event = INFO_EVENT if mailbox is not None else shape(_PROBE, _PROBE_LEASE)[0]
        self.delivered = 0  # offered by this poller (not counting repeats)
        self.note = on_note
        self._gate = is_idle
        if adapter is None:
            from interlock.runtime.inbox.connection import connect

            adapter = connect(config.store, timeout=config.request_timeout, root=root)
        self.poller = InboxPoller(adapter, clock=options.pop("clock", runner.clock),
                                  is_idle=self.is_idle, deliver=self._deliver,
                                  config=config, skip=self._already_delivered, **options)
        self._task: asyncio.Task[None] | None = None

    def is_idle(self) -> bool:
        """No invocation in flight, and the session takes the delivery event now."""
        gate = self._gate or (lambda: not self.runner.working())
        return gate() and (self.mailbox is not None or self.runner.accepts(self.event))

    def _key(self, message: Message) -> str:
        return f"{KEY_PREFIX}{message.id}"

    def _already_delivered(self, message: Message) -> bool:
        return self.store.delivered(self.runner.session_id, self._key(message))

    def _deliver(self, message: Message) -> None:
        lease = self.poller.leases.pop(message.id)[1]  # the session holds it from now on
        message = replace(message, status=Status.IN_PROGRESS, lease_until=lease.lease_until,
                          owner=self.poller.owner)  # as the claim left it
        if self.mailbox is not None:
            self._post(self.mailbox, message, lease)
            return
        event, data = self.shape(message, lease)
        try:
            item = self.store.offer(self.runner.session_id, event, data, time.time(),
                                    self._key(message), wake=False)  # woken below
        except StoreError as exc:  # not offered: once the lease runs out it comes back
            LOG.warning("inbox: could not deliver %s to session %s: %s", message.id,
                        self.runner.session_id, exc)
            return
        self.runner.wake()
        if item is not None:
            self.delivered += 1
            if self.note is not None:
                self.note(f"inbox: {message.type} from {message.sender} ({message.id}) -> "
                          f"{event}")

    def _post(self, mailbox: Mailbox, message: Message, lease: MessageLease) -> None:
        """Post the message into the mailbox as INFO (once: the same message makes the same
        signal), then mark it done; a failure leaves it to come back after its lease."""
        signal = inbox_signal(message)
        try:
            if not any((folder / signal.file_name).exists()
                       for folder in (mailbox.inputs, mailbox.processed)):
                mailbox.post(signal)
            self.poller.adapter.update_status(message.id, Status.DONE, lease.token,
                                              reason=f"posted as signal {signal.id}")
        except (OSError, InboxError) as exc:
            LOG.warning("inbox: could not post %s to %s: %s", message.id, mailbox.inputs, exc)
            return
        self.delivered += 1
        if self.note is not None:
            self.note(f"inbox: {message.type} from {message.sender} ({message.id}) -> "
                      f"INFO in {mailbox.inputs}")

    async def start(self, host: SessionHost | None = None) -> None:
        """Run the poller on the running event loop until :meth:`stop`."""
        self._task = asyncio.create_task(self.poller.run())

    async def stop(self, outcome: RunOutcome | None = None) -> None:
        """Stop polling (claimed, unfinished messages stay with the session), close."""
        self.poller.stop()
        task, self._task = self._task, None
        try:
            if task is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT)
                if task.done() and not task.cancelled() and task.exception() is not None:
                    LOG.warning("inbox poller of %s ended: %s", self.runner.session_id,
                                task.exception())
        finally:
            with contextlib.suppress(Exception):
                self.poller.adapter.close()
            self.store.close()


_PROBE = Message("0" * 32, "probe", "probe", Status.IN_PROGRESS)
_PROBE_LEASE = MessageLease("probe", 0.0)


def attach_inbox(runner: Runner, store: str | None, root: Path,
                 on_note: NoteCallback | None = None, *,
                 mailbox: Mailbox | None = None) -> SessionInbox | None:
    """The session's inbox poller when ``root``'s interlock.yaml has ``inbox:`` (None
    otherwise: opt-in). SpecError for a bad section (the runner is closed first); an
    inbox that cannot be opened is noted and the session runs without it."""
    try:
        config = load_poller_config(start=root)
    except SpecError:
        runner.close()  # the caller's runner never ran: let its lease go
        raise
    if config is None:
        return None
    queue = open_store(store, root)  # a connection of its own
    try:
        inbox = SessionInbox(runner, queue, config, root=root, on_note=on_note,
                             mailbox=mailbox)
    except InboxError as exc:
        queue.close()
        if on_note is not None:
            on_note(f"inbox: not polling: {exc}")
        return None
    if on_note is not None:
        on_note(f"inbox: polling {inbox.poller.adapter} every {config.interval:g}s while "
                f"the session is idle (delivered as {inbox.event})")
    return inbox
