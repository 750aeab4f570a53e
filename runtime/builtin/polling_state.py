"""``polling_state`` as a durable session: one sub-agent dispatch, journaled and resumable.

The dispatcher (:mod:`interlock.runtime.dispatch.polling`) drives the same spec in memory;
here the machine is an ordinary session (the runner, the store, the journal) and the
dispatcher's parts feed it through the store's event queue instead: :class:`SessionDispatch` is a
:class:`~interlock.runtime.dispatch.polling.Dispatch` whose events (``chunk``, ``marker``,
``poll``, ``silence``, ``exited``) are queued for the runner (the session port) rather than
sent to an in-memory session, and whose bindings run on the runner's event loop (async
bindings), where the agent's pipes, pidfd and tick timers live. The machine's own timers
(``dispatch_timeout``, ``idle_timeout``) are the session's durable timers.

What the session needs from its context, besides the spec's fields: ``command`` (the
agent's argv, a list), optionally ``prompt`` (written to its stdin), ``name``,
``terminate_grace`` and ``output_memory_cap``. ``build_result`` leaves the run's
PollingResult (the dispatcher's result JSON: the seed's camelCase fields, the verdict,
then name, dispatchId, argv, error, output) in the context as ``result``.

Resume after a crash: the agent's pipes died with the runner that read them, so its output
can no longer be followed. The agent's process group is recorded in the store; the next
start or resume stops it (the orphan reaper), and the resumed session starts the command
again, its timers still counting from the first start (dispatch_timeout stays the hard
limit) and its counters kept. A session that crashed before ``start`` was taken waits for
it as before.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

from interlock.machines.bindings import Binding, Bindings, Call
from interlock.runtime.config.dispatch import PollingConfiguration, parse_dispatch_config
from interlock.runtime.dispatch.polling import Dispatch, new_dispatch_id
from interlock.runtime.dispatch.process import SpawnOptions
from interlock.runtime.dispatch.types import AgentCommand
from interlock.runtime.engine.builtin import Builtin, BuiltinSetup, DemoDriver, SessionPort

FINAL_STATES = ("completed", "timeout", "error")
log = logging.getLogger(__name__)


def config_of(context: Mapping[str, Any]) -> PollingConfiguration:
    """The dispatch configuration a session's context describes (ConfigError if invalid)."""
    markers = dict(context.get("completion_markers") or {})
    data: dict[str, Any] = {
        "dispatch_timeout": context.get("dispatch_timeout"),
        "polling_interval": context.get("polling_interval"),
        "idle_timeout": context.get("idle_timeout"),
        "min_output_length": context.get("min_output_length"),
        "output_format": context.get("output_format"),
        "terminate_grace": context.get("terminate_grace"),
        "output_memory_cap": context.get("output_memory_cap"),
        "completion_markers": {
            "yaml": markers.get("yaml"), "json": markers.get("json"),
            "required_field": markers.get("required_field"),
            "min_silence_cycles": context.get("min_silence_cycles"),
        },
    }
    data["completion_markers"] = {k: v for k, v in data["completion_markers"].items()
                                  if v is not None}
    return parse_dispatch_config({k: v for k, v in data.items() if v is not None})


def command_of(context: Mapping[str, Any]) -> AgentCommand:
    """The agent to run, from the context's ``command`` (argv list), ``prompt``, ``name``."""
    argv = context.get("command")
    if not isinstance(argv, list | tuple) or not argv or not all(
            isinstance(a, str) for a in argv):
        raise ValueError(f"context field 'command' must be the agent's argv, a non-empty "
                         f"list of strings; got {argv!r}")
    prompt = context.get("prompt")
    name = context.get("name")
    return AgentCommand(tuple(argv), prompt=prompt if isinstance(prompt, str) else None,
                        name=name if isinstance(name, str) else None,
                        options=SpawnOptions())


def status_of(context: Mapping[str, Any]) -> str:
    """The final state the spec enters for how the run ended (build_result's status)."""
    method = context.get("completion_method")
    if method == "marker" or (method == "exit" and context.get("exit_code") == 0):
        return "completed"
    if method in ("timeout", "idle"):
        return "timeout"
    return "error"


class SessionDispatch(Dispatch):
    """A :class:`Dispatch` whose machine is a durable session reached through ``port``.

    Everything here runs on the runner's event loop: the bindings are async, so the
    runner's worker thread hands each one to the loop and waits for it.
    """

    def __init__(self, setup: BuiltinSetup) -> None:
        super().__init__(AgentCommand(("unset",)), PollingConfiguration(),
                         spill_dir=setup.folder / "dispatch")
        self.setup = setup
        self.port: SessionPort = setup.port
        self._ended = True  # no run under way (before start, and once stopped)
        setup.port.watch(self.watch)

    # -- the session side ---------------------------------------------------------------

    def _send(self, event: str, data: dict[str, Any] | None = None) -> None:
        if not self._ended:
            self.port.send(event, data)

    def finished(self) -> bool:
        return self._ended

    def guarded(self, callback: Callable[..., object], *args: Any) -> None:
        """A loop callback (a read, a tick, the exit): a failure (the store unreachable,
        say) is logged and told, and the session's own timers still bound the run."""
        try:
            callback(*args)
        except Exception as exc:
            log.exception("polling_state %s: %s failed", self.setup.session_id,
                          getattr(callback, "__name__", "callback"))
            if self.port.note is not None:
                self.port.note(f"{self.setup.session_id}: {type(exc).__name__}: {exc}")

    def _begin(self, context: Mapping[str, Any]) -> None:
        """Start the agent the context names, with the ticks that follow it: a fresh
        dispatch (its own id, output buffer and spill folder) on the runner's loop."""
        from interlock.runtime.dispatch.registry import StoreRegistry

        self.buffer.close()
        dispatch_id = new_dispatch_id()
        registry = (StoreRegistry(self.port.store, session_id=self.setup.session_id)
                    if self.port.store is not None else None)
        Dispatch.__init__(self, command_of(context), config_of(context),
                          spill_dir=self.setup.folder / "dispatch", registry=registry,
                          dispatch_id=dispatch_id)
        self._loop = asyncio.get_running_loop()
        self._start = self._now()
        self._ended = False
        self._spawn()
        self.arm("poll", self._start + self.config.polling_interval, self._poll)

    async def end(self) -> None:
        """Stop the ticks and the agent's whole process group (TERM, then KILL)."""
        self._ended = True
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        if self.process is not None:
            await asyncio.shield(self._stop_process())
            self.process = None

    async def watch(self, driver: DemoDriver) -> None:
        """Beside the runner for one run: after a crash, start the agent again (its pipes
        are gone); when the run ends, leave no agent behind."""
        try:
            active = driver.active
            if "active" in active and not any(s in active for s in FINAL_STATES):
                if self.port.note is not None:
                    self.port.note(f"{self.setup.session_id}: the agent of the interrupted "
                                   "run is gone; starting it again")
                self._begin(driver.context)
            await asyncio.Event().wait()  # until the run ends and cancels this
        finally:
            await self.end()

    # -- bindings -----------------------------------------------------------------------

    def bindings(self) -> Bindings:
        base = self._bindings()

        def spawn(call: Call) -> None:
            from interlock.runtime.dispatch.process import SpawnError

            try:
                self._begin(call.context)
            except SpawnError as exc:
                self.error = str(exc)
                self._ended = True
                call.raise_event("spawn_failed", message=str(exc))

        def terminate(call: Call) -> Any:
            return self.end()

        def build_result(call: Call) -> None:
            result = self.result_of(status_of(call.context), call.context)
            self.buffer.close()
            call.context["result"] = result.to_json()

        def stop_clock(call: Call) -> None:
            if self._loop is not None:
                call.context["elapsed_time"] = round(self._now() - self._start, 6)

        own = {"spawn_subagent": spawn, "terminate_subagent": terminate,
               "build_result": build_result, "stop_clock": stop_clock}
        return {name: _on_loop(own.get(name, fn)) for name, fn in base.items()}


def _on_loop(fn: Callable[[Call], Any]) -> Binding:
    """``fn`` as an async binding: the runner awaits it on its event loop (where the
    agent's descriptors and timers are), and it may itself return an awaitable."""

    async def call(c: Call) -> Any:
        result = fn(c)
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            return await result
        return result

    call.__name__ = getattr(fn, "__name__", "binding")
    return call


def bindings(setup: BuiltinSetup) -> Bindings:
    """The bindings of one polling_state session (one dispatch at a time)."""
    return SessionDispatch(setup).bindings()


DEMO_PROMPT = "Review the plan in plan.md: is the adaptive polling design ready to build?\n"

# The demo agent, offline: `interlock demo-agent` run by this Python.
DEMO_CONTEXT: dict[str, Any] = {
    "command": [sys.executable, "-m", "interlock.runtime.cli", "demo-agent", "--role", "QA",
                "--delay", "0.6"],
    "prompt": DEMO_PROMPT,
    "name": "QA",
    "dispatch_timeout": 60,
    "polling_interval": 1,
    "idle_timeout": 20,
    "terminate_grace": 2,
}


async def demo(driver: DemoDriver) -> None:
    """The dispatcher's part: send ``start`` (once; a resumed demo is past it)."""
    if "pending" in driver.active:
        driver.send("start")


BUILTIN = Builtin(name="polling_state", bindings=bindings, demo_context=DEMO_CONTEXT,
                  demo=demo)
