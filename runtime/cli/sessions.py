"""``interlock run | resume | send | status | log``: sessions from the command line.

Thin: parse, call the façade (:mod:`interlock.runtime`), print.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from interlock import runtime
from interlock.machines import SpecError
from interlock.runtime.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    err,
    fail,
    out,
    print_table,
    report_diagnostics,
    timestamp,
    when,
)

EXIT_INTERRUPTED = 130


class BadArguments(Exception):
    """A user mistake in the arguments: exit 2."""


def parse_json_object(text: str | None, option: str) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadArguments(f"{option} is not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, dict):
        raise BadArguments(f"{option} must be a JSON object, like '{{\"code\": 0}}'")
    return value


def _guard(fn: Callable[[], int]) -> int:
    """Run a command body; user mistakes become a message and an exit code."""
    try:
        return int(fn())
    except BadArguments as exc:
        return fail(str(exc), EXIT_USAGE)
    except SpecError as exc:
        report_diagnostics(exc.diagnostics)
        return EXIT_ERRORS
    except runtime.InterlockError as exc:
        return fail(str(exc), exc.exit_code)


@dataclass(frozen=True)
class SignalOptions:
    """``--signals/--no-signals`` and ``--signals-as`` of run and resume."""

    enabled: bool = True
    identity: str = "ALL"


def _drive(call: Callable[[asyncio.Event], Awaitable[runtime.RunResult]]) -> int:
    """Run a session until it ends or Ctrl-C/SIGTERM; every step is already committed when
    the interrupt lands."""
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        result = loop.run_until_complete(call(stop))
    finally:
        loop.close()
    active = ", ".join(result.active)
    if result.outcome == "stopped":
        err.print(f"stopped; session {result.session_id} is saved in [{active}]. "
                  f"Continue with: interlock resume {result.session_id}")
        return EXIT_INTERRUPTED
    if result.outcome == "failed":
        return fail(result.message or f"session {result.session_id} failed")
    if result.outcome in ("cancelled", "removed"):
        why = f" ({result.message})" if result.message else ""
        err.print(f"session {result.session_id} {result.outcome} in [{active}]{why}")
        return EXIT_OK
    out.print(f"session {result.session_id} finished in [{active}]")
    return EXIT_OK


def _print_step(step: Any) -> None:
    if not step.accepted:
        err.print(("rejected", "yellow"), f" {step.event}: {step.note or ''} "
                  f"(active: {', '.join(step.before)}); journaled, nothing changed")
        return
    moved = (f"  [{', '.join(step.before)}] -> [{', '.join(step.after)}]"
             if step.before != step.after else "")
    why = ""
    if step.event.startswith("error.invoke.") and step.data.get("message"):
        why = f" ({step.data.get('reason')}: {step.data['message']})"
    out.print(f"{step.kind:<6} {step.event}{why}{moved}")


def run_session(spec: str, session_id: str | None, store_url: str | None,
                bindings_ref: str | None, context_json: str | None,
                allow_unbound: bool, migrate: bool = False,
                signals: SignalOptions | None = None, demo: bool = False) -> int:
    options = signals or SignalOptions()

    def body() -> int:
        context = parse_json_object(context_json, "--context")
        return _drive(lambda stop: runtime.start(
            spec, session_id=session_id, context=context, bindings=bindings_ref,
            allow_unbound=allow_unbound, migrate=migrate, signals=options.enabled,
            signals_as=options.identity, store=store_url, stop=stop, on_step=_print_step,
            on_note=err.print, demo=demo))

    return _guard(body)


def resume_session(session_id: str, store_url: str | None, bindings_ref: str | None,
                   allow_unbound: bool, signals: SignalOptions | None = None,
                   retry: bool = False) -> int:
    options = signals or SignalOptions()
    return _guard(lambda: _drive(lambda stop: runtime.resume(
        session_id, bindings=bindings_ref, allow_unbound=allow_unbound, retry=retry,
        signals=options.enabled, signals_as=options.identity, store=store_url, stop=stop,
        on_step=_print_step, on_note=err.print)))


def send_event(session_id: str, event: str, data_json: str | None,
               store_url: str | None) -> int:
    def body() -> int:
        data = parse_json_object(data_json, "--data")
        receipt = asyncio.run(runtime.send(session_id, event, data, store=store_url))
        active = ", ".join(receipt.active)
        if receipt.outcome == "taken":
            err.print(f"taken: {event} -> [{active}]")
            return EXIT_OK
        if receipt.outcome == "queued":
            err.print(f"queued {event} for {session_id}: {receipt.note or ''}")
            return EXIT_OK
        accepts = ", ".join(receipt.accepts) or "none"
        return fail(f"rejected {event}: no active state of [{', '.join(receipt.active)}] "
                    f"accepts it; they accept: {accepts}", EXIT_ERRORS)

    return _guard(body)


def show_status(session_id: str | None, as_json: bool, store_url: str | None) -> int:
    def body() -> int:
        if session_id is not None:
            info = asyncio.run(runtime.status(session_id, store=store_url))
            if as_json:
                json.dump(info.to_json(), sys.stdout, indent=2)
                sys.stdout.write("\n")
            else:
                _print_detail(info, asyncio.run(runtime.log(session_id, store=store_url)))
            return EXIT_OK
        infos = asyncio.run(runtime.sessions(store=store_url))
        if as_json:
            json.dump([i.to_json() for i in infos], sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            _print_table(infos)
        return EXIT_OK

    return _guard(body)


def show_log(session_id: str, follow: bool, as_json: bool, store_url: str | None) -> int:
    async def follow_all() -> None:
        async for entry in runtime.follow(session_id, store=store_url):
            _print_entry(asdict(entry), as_json)

    def body() -> int:
        if follow:
            asyncio.run(follow_all())
        else:
            for entry in asyncio.run(runtime.log(session_id, store=store_url)):
                _print_entry(asdict(entry), as_json)
        return EXIT_OK

    try:
        return _guard(body)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def cancel_session(session_id: str, reason: str | None, store_url: str | None) -> int:
    def body() -> int:
        info = asyncio.run(runtime.cancel(session_id, reason=reason, store=store_url))
        if info.status == "running":
            return fail(f"session {session_id} was asked to cancel but its runner (pid "
                        f"{info.runner.pid if info.runner else '?'}) has not stopped yet")
        err.print(f"session {session_id} is {info.status} in [{', '.join(info.active)}]")
        return EXIT_OK

    return _guard(body)


def remove_session(session_id: str, force: bool, store_url: str | None) -> int:
    def body() -> int:
        asyncio.run(runtime.remove(session_id, force=force, store=store_url))
        err.print(f"removed session {session_id} and its journal")
        return EXIT_OK

    return _guard(body)


def list_sessions(as_json: bool, store_url: str | None, children: bool = False) -> int:
    def body() -> int:
        infos = asyncio.run(runtime.sessions(store=store_url, children=children))
        if as_json:
            json.dump([{"id": i.id, "spec": i.spec_path, "machine": i.machine,
                        "status": i.status, "active": list(i.active),
                        "updated_at": i.updated_at, "parent": i.parent,
                        "children": i.children} for i in infos], sys.stdout, indent=2)
            sys.stdout.write("\n")
            return EXIT_OK
        if not infos:
            err.print("no sessions in this store")
            return EXIT_OK
        print_table(("session", "spec", "status", "states", "updated"), (
            (i.id + (f" (+{i.children} child)" if i.children == 1 else
                     f" (+{i.children} children)" if i.children else ""),
             i.spec_path, i.status, ", ".join(i.active), timestamp(i.updated_at))
            for i in infos))
        if not children and any(i.children for i in infos):
            err.print("child machine sessions are counted beside their parent; "
                      "--all lists them")
        return EXIT_OK

    return _guard(body)


def _print_table(infos: list[runtime.SessionInfo]) -> None:
    if not infos:
        err.print("no sessions in this store")
        return
    print_table(("session", "machine", "status", "active", "timers", "queued"), (
        (i.id, i.machine, i.status, ", ".join(i.active), str(len(i.timers)), str(i.queued))
        for i in infos))


def _print_detail(info: runtime.SessionInfo, journal: list[Any]) -> None:
    runner = ""
    if info.runner is not None:
        runner = f", runner pid {info.runner.pid} on {info.runner.host}"
    print(f"{info.id} ({info.machine}, {info.status}{runner}, step {info.seq})")
    print(f"active: {', '.join(info.active)}")
    for t in info.timers:
        print(f"timer: {t.event} in {t.state} at {when(t.deadline, time.time())}")
    print(f"queued events: {info.queued}")
    if info.failure is not None:
        print(f"failure: {info.failure}")
    if info.inbox is not None:
        print(f"inbox: {info.inbox.delivered} delivered, {info.inbox.pending} not yet taken")
    print("context: " + json.dumps(dict(info.context), sort_keys=True))
    for entry in journal[-10:]:
        _print_entry(asdict(entry), False)


LONG_TEXT = 160  # characters of a journaled string shown in a log line (--json: all)


def _shortened(value: Any) -> Any:
    """``value`` with each long string cut to its start and length (an agent's stdout
    would fill the screen; ``interlock log --json`` has it whole)."""
    if isinstance(value, str) and len(value) > LONG_TEXT:
        return f"{value[:LONG_TEXT]}… ({len(value)} chars)"
    if isinstance(value, Mapping):
        return {key: _shortened(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shortened(item) for item in value]
    return value


def _print_entry(entry: Mapping[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(entry, sort_keys=True), flush=True)
        return
    event = f" {entry['event']}" if entry.get("event") else ""
    data = f" {json.dumps(_shortened(entry['data']), ensure_ascii=False)}" \
        if entry.get("data") else ""
    moved = ""
    if entry.get("before") != entry.get("after"):
        moved = f"  [{', '.join(entry['before'])}] -> [{', '.join(entry['after'])}]"
    note = f"  ({entry['note']})" if entry.get("note") else ""
    print(f"#{entry['seq']:<5} {timestamp(entry['at'])} {entry['kind']:<9}{event}{data}{moved}"
          f"{note}", flush=True)
