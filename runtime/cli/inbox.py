"""``interlock inbox``: the ``/poll`` commands (list, post, ack, done, failed, on, off,
interval) and ``serve``. Calls only the inbox's function API."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer

from interlock import runtime
from interlock.runtime import InboxMessage as Message
from interlock.runtime import MessageStatus as Status
from interlock.runtime.cli.output import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, err, fail

T = TypeVar("T")

inbox_app = typer.Typer(help="The shared inbox: queued messages for agents (seed 002's "
                        "/poll commands) and its HTTP server.", no_args_is_help=True)

StoreOpt = Annotated[str | None, typer.Option(
    "--store", metavar="URL", help="Inbox store: sqlite:///PATH, postgresql://..., "
    "http://HOST:PORT or arango://HOST:PORT/DB?messagesCollection=NAME "
    "(default: .interlock/inbox.db here).")]
ReasonOpt = Annotated[str | None, typer.Option("--reason", metavar="TEXT",
                                               help="Why (kept in the message's journal).")]
IdArg = Annotated[str, typer.Argument(metavar="ID", help="The message id.")]
COLUMNS = ("id", "type", "from", "status", "correlation_id", "payload_ref")


def _call(body: Callable[[], T]) -> T:
    """Run an API call; a refusal becomes a one-line error and an exit code."""
    try:
        return body()
    except (runtime.InboxConfigError, runtime.BadRequest) as exc:
        raise typer.Exit(fail(str(exc), EXIT_USAGE)) from None
    except runtime.InboxError as exc:
        raise typer.Exit(fail(str(exc), EXIT_ERRORS)) from None


def _row(message: Message) -> list[str]:
    data = message.to_json()
    return ["" if data[c] is None else str(data[c]) for c in COLUMNS]


@inbox_app.command("list")
def list_(
    status: Annotated[str | None, typer.Option("--status", metavar="S", help="Only this "
                                               "status: " + ", ".join(s.value for s in Status)
                                               + ".")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
    store: StoreOpt = None,
) -> None:
    """List messages: id, type, from, status, correlation_id, payload_ref."""
    messages = _call(lambda: runtime.list_messages(status, store=store))
    if as_json:
        json.dump([m.to_json() for m in messages], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    rows = [list(COLUMNS), *(_row(m) for m in messages)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())


@inbox_app.command("post")
def post(
    body: Annotated[str, typer.Argument(metavar="[BODY]", help="The message text "
                                        "('-': read stdin).")] = "",
    type_: Annotated[str, typer.Option("--type", metavar="T", help="The message type.")] = "",
    sender: Annotated[str, typer.Option("--from", metavar="F", help="Who sends it.")] = "",
    correlation_id: Annotated[str | None, typer.Option("--correlation-id", metavar="C")]
    = None,
    payload_ref: Annotated[str | None, typer.Option("--payload-ref", metavar="R")] = None,
    store: StoreOpt = None,
) -> None:
    """Queue a message; prints its id."""
    if not type_:
        raise typer.Exit(fail("--type is required", EXIT_USAGE))
    if not sender:
        raise typer.Exit(fail("--from is required", EXIT_USAGE))
    text = sys.stdin.read() if body == "-" else body
    print(_call(lambda: runtime.post_message(type_, sender, text, correlation_id=correlation_id,
                                     payload_ref=payload_ref, store=store)))


def _mark(message_id: str, status: Status, reason: str | None, store: str | None) -> None:
    message = _call(lambda: runtime.mark_message(message_id, status, reason=reason, store=store))
    err.print(f"{message.id} {message.status}")


@inbox_app.command("ack")
def ack(message_id: IdArg, reason: ReasonOpt = None, store: StoreOpt = None) -> None:
    """Acknowledge a message (as the operator)."""
    _mark(message_id, Status.ACKED, reason, store)


@inbox_app.command("done")
def done(message_id: IdArg, reason: ReasonOpt = None, store: StoreOpt = None) -> None:
    """Mark a message done (final)."""
    _mark(message_id, Status.DONE, reason, store)


@inbox_app.command("failed")
def failed(message_id: IdArg, reason: ReasonOpt = None, store: StoreOpt = None) -> None:
    """Mark a message failed (final)."""
    _mark(message_id, Status.FAILED, reason, store)


@inbox_app.command("on")
def on(store: StoreOpt = None) -> None:
    """Turn polling on for the pollers that use this store."""
    _call(lambda: runtime.set_enabled(True, store=store))
    err.print("inbox polling on")


@inbox_app.command("off")
def off(store: StoreOpt = None) -> None:
    """Turn polling off for the pollers that use this store."""
    _call(lambda: runtime.set_enabled(False, store=store))
    err.print("inbox polling off")


@inbox_app.command("interval")
def interval(
    duration: Annotated[str, typer.Argument(metavar="DURATION", help="e.g. 30s, 2m, 1.5.")],
    store: StoreOpt = None,
) -> None:
    """Set the time between polls."""
    seconds = _call(lambda: runtime.set_interval(duration, store=store))
    err.print(f"inbox poll interval {seconds:g} s")


@inbox_app.command("serve")
def serve(
    store: StoreOpt = None,
    host: Annotated[str, typer.Option("--host", metavar="H", help="Address to bind.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="P", help="Port (0: a free one).")]
    = 8765,
) -> None:
    """Serve the store over HTTP (Starlette + uvicorn) until Ctrl-C or SIGTERM; prints
    `listening on http://HOST:PORT` when ready."""
    _call(lambda: runtime.serve_inbox(store, host, port))
    raise typer.Exit(EXIT_OK)
