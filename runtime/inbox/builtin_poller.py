"""``inbox_poller`` as a durable session: the idle-only poller, journaled and resumable.

The bindings are :meth:`InboxPoller.bindings` (the same guards and actions the in-memory
poller runs), on the inbox the project's ``inbox:`` section names; the machine's timers
(``poll_interval``, ``backoff_delay``, ``request_timeout``) are the session's durable
timers. The session has no agent of its own, so it is always idle; each claimed message
is "enqueued as a prompt" by writing it to ``<session folder>/inbox/<id>.json`` (for an
agent that reads the folder). Send ``start`` to begin (the poller stays disabled unless
``inbox:`` is configured and ``interlock inbox on`` is in force), ``poll.off``/``poll.on``,
``poll.interval {seconds}``, ``poll.ack|done|failed {id}`` and ``shutdown``
(``interlock send``). Lease tokens are held in memory: after a resume, ``poll.done`` acts
as the operator for messages claimed before it.

``--demo`` polls a demo inbox in the session folder holding two messages every 0.2 s,
waits until both were claimed and surfaced, marks the first done (explicitly: the poller
never acks on its own), and shuts down: the session ends in ``stopped``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path
from typing import Any

from interlock.machines import load
from interlock.machines.bindings import Binding, Bindings, Call
from interlock.runtime.config.inbox import PollerConfig, load_poller_config
from interlock.runtime.config.inbox_store import InboxError
from interlock.runtime.engine.builtin import Builtin, BuiltinSetup, DemoDriver
from interlock.runtime.engine.builtin_specs import resolve_spec
from interlock.runtime.engine.clock import SystemClock
from interlock.runtime.inbox.connection import connect
from interlock.runtime.inbox.model import Message
from interlock.runtime.inbox.poller import InboxPoller

LOG = logging.getLogger("interlock.inbox")
SPEC = "inbox_poller"
DEMO_STORE = "demo-inbox.db"
DEMO_TIMEOUT = 60.0
DEMO_MESSAGES = (
    ("review", "alice", "Please look at PR 7 before the release.", "pr-7"),
    ("question", "bob", "Is the staging database back?", None),
)


def prompts_dir(folder: Path) -> Path:
    """Where the durable poller surfaces each claimed message: ``<folder>/inbox/``."""
    return folder / "inbox"


def _surface(folder: Path, message: Message) -> None:
    """Write the message as the prompt an agent reads (rewritten whole: idempotent)."""
    target = prompts_dir(folder)
    target.mkdir(parents=True, exist_ok=True)
    tmp = target / f".{message.id}.tmp"
    tmp.write_text(json.dumps(message.to_json(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(target / f"{message.id}.json")
    LOG.info("inbox: surfaced %s %s from %s", message.id, message.type, message.sender)


def _demo_config(setup: BuiltinSetup) -> PollerConfig:
    """The demo inbox (in the session folder), seeded with two messages once."""
    store = setup.folder / DEMO_STORE
    config = PollerConfig(store=str(store), interval=0.2, request_timeout=5, batch=10,
                          backoff_base=0.2, backoff_max=2)
    fresh = not store.exists()
    inbox = connect(config.store)
    try:
        if fresh:
            for kind, sender, body, correlation in DEMO_MESSAGES:
                inbox.post(kind, sender, body, correlation_id=correlation)
    finally:
        inbox.close()
    return config


def bindings(setup: BuiltinSetup) -> Bindings:
    """The in-memory poller's bindings on the configured (or the demo) inbox."""
    if setup.demo:
        config: PollerConfig = _demo_config(setup)
    else:
        found = load_poller_config(start=setup.root)
        config = found if found is not None else PollerConfig(enabled=False)
    adapter = connect(config.store, timeout=config.request_timeout, root=setup.root)
    enabled = config.enabled
    if enabled:
        with contextlib.suppress(InboxError):  # unreachable now: the first poll backs off
            enabled = bool(adapter.settings().get("enabled", True))
        with contextlib.suppress(InboxError, TypeError, ValueError):
            config = config.model_copy(update={"interval": float(
                adapter.settings().get("interval", config.interval))})
    poller = InboxPoller(adapter, clock=SystemClock(), is_idle=lambda: True,
                         deliver=lambda message: _surface(setup.folder, message),
                         config=config.model_copy(update={"enabled": enabled}))
    bound = poller.bindings()
    bound["reset_backoff"] = _configuring(bound["reset_backoff"], poller.context_from_config())
    return bound


def _configuring(reset_backoff: Binding, configured: dict[str, Any]) -> Binding:
    """``reset_backoff`` (the entry action of ``disabled``, the initial state) that first
    gives the context fields still at the spec's default the ``inbox:`` section's values
    (and the store's ``interval`` setting): a context given explicitly wins."""
    defaults = {name: field.default for name, field in load(resolve_spec(SPEC)).context.items()}

    def action(call: Call) -> None:
        for name, value in configured.items():
            if name in defaults and call.context.get(name) == defaults[name]:
                call.context[name] = value
        reset_backoff(call)

    return action


async def play(driver: DemoDriver) -> None:
    """Start, wait until both demo messages were surfaced, mark the first one done (an
    explicit ``poll.done``), shut down."""
    from interlock.runtime.signals.addressing import session_dir

    await driver.wait_for("disabled")
    driver.send("start")
    await driver.wait_for("waiting", timeout=30)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEMO_TIMEOUT
    while int(driver.context.get("inbox_count", 0)) < len(DEMO_MESSAGES):
        if loop.time() > deadline:
            raise TimeoutError(f"the demo inbox surfaced {driver.context.get('inbox_count')}"
                               f" of {len(DEMO_MESSAGES)} messages in {DEMO_TIMEOUT:g}s")
        await asyncio.sleep(0.02)
    surfaced = sorted(prompts_dir(session_dir(Path.cwd(), driver.session_id)).glob("*.json"))
    first = json.loads(surfaced[0].read_text(encoding="utf-8"))["id"] if surfaced else None
    if first is not None:
        driver.send("poll.done", {"id": first, "reason": "demo: handled"})
    driver.send("shutdown")
    await driver.wait_for("stopped", timeout=30)


BUILTIN = Builtin(
    name=SPEC,
    bindings=bindings,
    demo_context={"adapter": "sqlite", "poll_interval": 0.2, "request_timeout": 5.0,
                  "backoff_base": 0.2, "backoff_max": 2.0},
    demo=play,
)

