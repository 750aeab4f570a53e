"""``interlock run | resume | send | status | log``: sessions from the command line."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from interlock.machines import SpecError, build_ir, loads
from interlock.machines.bindings import Bindings, Call
from interlock.machines.events import reserved_reason
from interlock.runtime.builtin.specs import resolve_spec
from interlock.runtime.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    err,
    fail,
    print_diagnostics,
)
from interlock.runtime.engine.bindings_loader import BindingsError, load_bindings
from interlock.runtime.engine.runner import Runner, SessionBusy, SpecChanged
from interlock.runtime.engine.session import SessionError, Step
from interlock.runtime.engine.snapshot import Snapshot, SnapshotError
from interlock.runtime.store import SessionNotFound, Store, StoreError, open_store

if TYPE_CHECKING:
    from interlock.runtime.signals.session_feed import SessionFeed

EXIT_INTERRUPTED = 130
out = Console(highlight=False, soft_wrap=True)


class Usage(Exception):
    """A user mistake in the arguments: exit 2."""


def parse_json_object(text: str | None, option: str) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Usage(f"{option} is not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, dict):
        raise Usage(f"{option} must be a JSON object, like '{{\"code\": 0}}'")
    return value


def _bindings(spec_text: str, spec_path: str, ref: str | None,
              allow_unbound: bool) -> Bindings:
    bound: dict[str, Any] = dict(load_bindings(ref)) if ref else {}
    if allow_unbound:
        ir = build_ir(loads(spec_text, spec_path))
        missing_guards = [g for g in ir.guards if g not in bound]
        missing_actions = [a for a in ir.actions if a not in bound]
        for name in missing_actions:
            bound[name] = _noop
        for name in missing_guards:
            bound[name] = _false
        if missing_guards or missing_actions:
            err.print(f"[yellow]unbound:[/] {len(missing_actions)} action(s) do nothing, "
                      f"{len(missing_guards)} guard(s) are false (--allow-unbound)")
    return bound


def _noop(call: Call) -> None:
    return None


def _false(call: Call) -> bool:
    return False


@contextmanager
def _store(url: str | None) -> Iterator[Store]:
    store = open_store(url, Path.cwd())
    try:
        yield store
    finally:
        store.close()


def _check_session_id(session_id: str) -> None:
    """Session ids name folders (the session's mailbox): no '/', no '..'."""
    from interlock.runtime.signals.model import SignalError, check_identifier

    try:
        check_identifier(session_id, "--session")
    except SignalError as exc:
        raise Usage(str(exc)) from None


def _reap(store: Store) -> None:
    """Stop agent process groups that a dead runner or dispatcher left behind."""
    from interlock.runtime.host.orphans import reap_orphans

    for reaped in reap_orphans(store):
        err.print(f"[yellow]stopped[/] {escape(reaped.describe())}")


def _guard(fn: Any) -> int:
    """Run a command body; user mistakes become a message and an exit code."""
    try:
        return int(fn())
    except Usage as exc:
        return fail(str(exc), EXIT_USAGE)
    except SpecError as exc:
        print_diagnostics(exc.diagnostics)
        return fail("the spec has errors")
    except (BindingsError, SessionNotFound) as exc:
        return fail(str(exc), EXIT_USAGE if isinstance(exc, BindingsError) else EXIT_ERRORS)
    except (SessionBusy, SpecChanged, SessionError, SnapshotError, StoreError) as exc:
        return fail(str(exc))


@dataclass(frozen=True)
class SignalOptions:
    """``--signals/--no-signals`` and ``--signals-as`` of run and resume."""

    enabled: bool = True
    identity: str = "ALL"


def _feed(runner: Runner, store_url: str | None, options: SignalOptions) -> SessionFeed | None:
    """A live-signal consumer for the session's mailbox, with a store connection of its
    own, or None when signals are off."""
    if not options.enabled:
        return None
    from interlock.runtime.signals.model import SignalError, check_identifier
    from interlock.runtime.signals.session_feed import SessionFeed, session_dir

    try:
        check_identifier(options.identity, "--signals-as")
        folder = session_dir(Path.cwd(), runner.session_id)
    except SignalError as exc:
        raise Usage(str(exc)) from None
    feed = SessionFeed(runner, open_store(store_url, Path.cwd()), folder,
                       identity=options.identity)
    err.print(f"signals: {escape(str(feed.mailbox.inputs))} (interlock signal "
              f"{escape(str(folder))} STEER 'message')")
    return feed


def _drive(runner: Runner, feed: SessionFeed | None = None) -> int:
    """Run until final or Ctrl-C; every step is already committed when Ctrl-C lands."""
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    interrupted = False

    def on_signal() -> None:
        nonlocal interrupted
        interrupted = True
        stop.set()

    def on_step(step: Step) -> None:
        _print_step(step)
        if feed is not None and step.before != step.after:
            feed.stepped()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    if feed is not None:
        feed.start()
    try:
        loop.run_until_complete(runner.run(stop, on_step=on_step))
    finally:
        if feed is not None:
            feed.stop()
            feed.store.close()
        runner.close()
        loop.close()
    active = escape(", ".join(runner.session.active))
    if interrupted:
        err.print(f"stopped; session {runner.session_id} is saved in \\[{active}]. "
                  f"Continue with: interlock resume {runner.session_id}")
        return EXIT_INTERRUPTED
    out.print(f"session {runner.session_id} finished in \\[{active}]")
    return EXIT_OK


def _print_step(step: Step) -> None:
    if not step.accepted:
        err.print(f"[yellow]rejected[/] {escape(step.event)}: {escape(step.note or '')} "
                  f"(active: {escape(', '.join(step.before))}); journaled, nothing changed")
        return
    moved = (f"  \\[{escape(', '.join(step.before))}] -> \\[{escape(', '.join(step.after))}]"
             if step.before != step.after else "")
    out.print(f"{step.kind:<6} {escape(step.event)}{moved}")


def run_session(spec: str, session_id: str | None, store_url: str | None,
                bindings_ref: str | None, context_json: str | None,
                allow_unbound: bool, migrate: bool = False,
                signals: SignalOptions | None = None) -> int:
    def body() -> int:
        context = parse_json_object(context_json, "--context")
        if session_id is not None:
            _check_session_id(session_id)
        path = resolve_spec(spec)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise Usage(f"cannot read spec {path}: {exc}") from None
        bindings = _bindings(text, str(path), bindings_ref, allow_unbound)
        with _store(store_url) as store:
            _reap(store)
            runner, opened = Runner.open(store, text, str(path), session_id=session_id,
                                         bindings=bindings, context=context, migrate=migrate)
            verb = "started" if opened.created else "resumed"
            active = escape(", ".join(runner.session.active))
            err.print(f"session {runner.session_id} {verb} \\[{active}] (store: {store.url})")
            return _drive(runner, _feed(runner, store_url, signals or SignalOptions()))

    return _guard(body)


def resume_session(session_id: str, store_url: str | None, bindings_ref: str | None,
                   allow_unbound: bool, signals: SignalOptions | None = None) -> int:
    def body() -> int:
        with _store(store_url) as store:
            _reap(store)
            row = store.get(session_id)
            bindings = _bindings(row.spec_text, row.spec_path, bindings_ref, allow_unbound)
            runner, _ = Runner.open(store, None, row.spec_path, session_id=session_id,
                                    bindings=bindings)
            active = escape(", ".join(runner.session.active))
            err.print(f"session {session_id} resumed \\[{active}]")
            return _drive(runner, _feed(runner, store_url, signals or SignalOptions()))

    return _guard(body)


def send_event(session_id: str, event: str, data_json: str | None,
               store_url: str | None) -> int:
    def body() -> int:
        data = parse_json_object(data_json, "--data")
        reason = reserved_reason(event)
        if reason is not None:
            raise Usage(f"{event!r} is reserved for the engine: {reason}")
        with _store(store_url) as store:
            row = store.get(session_id)
            if row.status == "finished":
                raise SessionError(f"session {session_id} has finished; it takes no events")
            item = store.enqueue(session_id, event, data, _now())
            err.print(f"queued {event} for {session_id} (#{item}); a running session takes "
                      "it at once, a stopped one when it is resumed")
            return EXIT_OK

    return _guard(body)


def show_status(session_id: str | None, as_json: bool, store_url: str | None) -> int:
    def body() -> int:
        with _store(store_url) as store:
            rows = [store.get(session_id)] if session_id else store.list()
            views = [_view(store, row, detail=session_id is not None) for row in rows]
        if as_json:
            json.dump(views if session_id is None else views[0], sys.stdout, indent=2)
            sys.stdout.write("\n")
        elif session_id is None:
            _print_table(views)
        else:
            _print_detail(views[0])
        return EXIT_OK

    return _guard(body)


def show_log(session_id: str, follow: bool, as_json: bool, store_url: str | None,
             poll: float = 0.2) -> int:
    def body() -> int:
        with _store(store_url) as store:
            store.get(session_id)
            seen = -1
            while True:
                for entry in store.journal(session_id, after_seq=seen):
                    _print_entry(asdict(entry), as_json)
                    seen = max(seen, entry.seq)
                if not follow or store.get(session_id).status == "finished":
                    return EXIT_OK
                asyncio.run(asyncio.sleep(poll))

    try:
        return _guard(body)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _now() -> float:
    import time

    return time.time()


def _view(store: Store, row: Any, detail: bool) -> dict[str, Any]:
    snapshot = Snapshot.from_json(row.snapshot)
    view: dict[str, Any] = {
        "id": row.id, "machine": row.spec_name, "status": row.status, "seq": row.seq,
        "active": list(snapshot.configuration), "spec": row.spec_path,
        "updated_at": row.updated_at,
        "timers": [{"event": t.event, "state": t.state, "deadline": t.deadline}
                   for t in snapshot.timers],
        "queued": len(store.inbox(row.id)),
    }
    if detail:
        view["context"] = dict(snapshot.context)
        view["last_events"] = [asdict(e) for e in store.journal(row.id)[-10:]]
    return view


def _print_table(views: list[dict[str, Any]]) -> None:
    if not views:
        err.print("no sessions in this store")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("session", "machine", "status", "active", "timers", "queued"):
        table.add_column(column)
    for v in views:
        table.add_row(v["id"], v["machine"], v["status"], ", ".join(v["active"]),
                      str(len(v["timers"])), str(v["queued"]))
    out.print(table)


def _print_detail(v: Mapping[str, Any]) -> None:
    print(f"{v['id']} ({v['machine']}, {v['status']}, step {v['seq']})")
    print(f"active: {', '.join(v['active'])}")
    for t in v["timers"]:
        print(f"timer: {t['event']} in {t['state']} at {t['deadline']:.3f}")
    print(f"queued events: {v['queued']}")
    print("context: " + json.dumps(v["context"], sort_keys=True))
    for e in v["last_events"]:
        _print_entry(e, False)


def _print_entry(entry: Mapping[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(entry, sort_keys=True), flush=True)
        return
    event = f" {entry['event']}" if entry.get("event") else ""
    data = f" {json.dumps(entry['data'])}" if entry.get("data") else ""
    moved = ""
    if entry.get("before") != entry.get("after"):
        moved = f"  [{', '.join(entry['before'])}] -> [{', '.join(entry['after'])}]"
    note = f"  ({entry['note']})" if entry.get("note") else ""
    print(f"#{entry['seq']:<5} {entry['kind']:<9}{event}{data}{moved}{note}", flush=True)
