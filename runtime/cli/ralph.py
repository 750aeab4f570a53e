"""``interlock ralph init | run | resume | status | review | poll``: Ralph sessions (seed 004).

Thin: parse, call the façade (:mod:`interlock.runtime`), print.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from interlock import runtime
from interlock.runtime.cli.output import EXIT_OK, EXIT_USAGE, err, fail
from interlock.runtime.cli.review_options import AnswersOpt, JsonLinesOpt, PollerAgentOpt

ralph_app = typer.Typer(help="Ralph orchestrator sessions (plan, execute, review, replan; "
                        "live signals).", no_args_is_help=True)
EXIT_INTERRUPTED = 130
EXIT_REVIEW_ABORTED = 3  # the review menu's "aborted" (Esc, Ctrl-C, EOF)
STOPPED_REVIEW = (EXIT_REVIEW_ABORTED, EXIT_INTERRUPTED, EXIT_USAGE)

IdArg = Annotated[str, typer.Argument(metavar="ID", help="The Ralph session id.")]
StoreOpt = Annotated[str | None, typer.Option("--store", metavar="URL", help="The store "
                                              "(default: .interlock/state.db).")]


def _duration(text: str | None, option: str) -> float | None:
    if text is None:
        return None
    from interlock.machines.durations import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise typer.Exit(fail(f"{option}: {exc}", EXIT_USAGE)) from None


_held: list[str] | None = None  # notes held back while the review menu has the terminal
_holding = threading.Lock()


def _note(text: str) -> None:
    with _holding:
        if _held is not None:
            _held.append(text)
            return
    err.print(text)


def _menu(agent: str | None, answers: Path | None, as_json: bool, store: str | None,
          codes: list[int]) -> Callable[[runtime.TaskReview], bool]:
    """The review menu on a task's report (its exit code goes to ``codes``); False when
    the human stopped it (Esc, Ctrl-C)."""
    from interlock.runtime.cli.review import run_review

    def review(item: runtime.TaskReview) -> bool:
        if item.report is None:  # nothing to review: a waiting session goes on
            codes.append(fail(str(item.missing), runtime.NotFound.exit_code))
            return True
        code = run_review(str(item.report), item.node, agent, answers, as_json, None,
                          item.unit, store, "10m", 8)
        codes.append(code)
        return code not in STOPPED_REVIEW

    return review


def _review_task(session_id: str, task: str, agent: str | None, answers: Path | None,
                 as_json: bool, store: str | None) -> int:
    """The review menu on a task's report; when the session waits for that task's
    correction, it takes it (``ralph.review_rejections``)."""
    codes: list[int] = []
    try:
        runtime.ralph_review(session_id, _menu(agent, answers, as_json, store, codes),
                             [task], store=store)
    except runtime.InterlockError as exc:
        return fail(str(exc), exc.exit_code)
    return codes[-1] if codes else EXIT_OK


def _terminal_review(session_id: str, store: str | None) -> Callable[[list[str]], bool]:
    """``ralph run``'s review menu for rejected tasks, in its terminal; the runner's notes
    wait meanwhile. False when the human stopped a review (Esc, Ctrl-C)."""
    menu = _menu(None, None, False, store, [])

    def announced(item: runtime.TaskReview) -> bool:
        err.print((f"The Reviewer rejected {item.task}", "bold"),
                  ": review its report (a correction is staged for its next Executor)")
        return menu(item)

    def review(tasks: list[str]) -> bool:
        global _held
        with _holding:
            _held = []
        try:
            try:
                results = runtime.ralph_review(session_id, announced, tasks, store=store)
            except runtime.InterlockError as exc:
                return fail(str(exc), exc.exit_code) not in STOPPED_REVIEW
            return not any(result.stopped for result in results)
        finally:
            with _holding:
                held, _held = _held or [], None
            for text in held:
                err.print(text)

    return review


def _run(session_id: str, store: str | None, **limits: Any) -> int:
    import asyncio

    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    try:
        result = loop.run_until_complete(runtime.ralph_run(
            session_id, store=store, stop=stop, on_note=_note,
            on_review=_terminal_review(session_id, store) if terminal else None, **limits))
    except runtime.InterlockError as exc:
        return fail(str(exc), exc.exit_code)
    finally:
        loop.close()
    if result.outcome == "stopped":
        err.print(f"stopped; Ralph session {session_id} is saved. Continue with: "
                  f"interlock ralph run {session_id}")
    elif result.outcome == "paused":
        err.print(f"Ralph session {session_id} paused: {result.reason or ''}")
    elif result.outcome == "limit":
        err.print(f"limit reached: {result.reason or ''}; continue with: "
                  f"interlock ralph run {session_id} (a higher limit)")
    else:
        err.print(f"Ralph session {session_id} {result.outcome}"
                  + (f": {result.reason}" if result.reason else ""))
    return result.exit_code


@ralph_app.command("init")
def init(
    request: Annotated[str | None, typer.Option("--request", metavar="TEXT",
                                                help="What to build.")] = None,
    request_file: Annotated[Path | None, typer.Option("--request-file", metavar="F",
                                                      help="Read the request from F.")] = None,
    session_id: Annotated[str | None, typer.Option("--id", metavar="ID",
                                                   help="The session id.")] = None,
) -> None:
    """Create .ralph-sessions/<ID>/ for a request and print the ID."""
    if (request is None) == (request_file is None):
        raise typer.Exit(fail("give one of --request TEXT or --request-file F", EXIT_USAGE))
    if request_file is not None:
        try:
            request = request_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise typer.Exit(fail(f"--request-file {request_file}: "
                                  f"{exc.strerror or exc}", EXIT_USAGE)) from None
    try:
        ident = runtime.ralph_init(request or "", session_id=session_id)
    except runtime.InterlockError as exc:
        raise typer.Exit(fail(str(exc), exc.exit_code)) from None
    print(ident)


@ralph_app.command("run")
def run(
    session_id: IdArg,
    max_iterations: Annotated[int | None, typer.Option("--max-iterations", metavar="N",
                                                       min=1)] = None,
    max_runtime: Annotated[str | None, typer.Option("--max-runtime", metavar="D",
                                                    help="e.g. 30m, 2h")] = None,
    max_cost: Annotated[float | None, typer.Option("--max-cost", metavar="USD",
                                                   min=0.0)] = None,
    parallel: Annotated[int | None, typer.Option(
        "--parallel", metavar="N", min=1,
        help="Run up to N tasks of a batch at once, each in its own git worktree "
             "(ralph.parallel; default 1).")] = None,
    replay: Annotated[Path | None, typer.Option("--replay", metavar="CASSETTE")] = None,
    record: Annotated[Path | None, typer.Option("--record", metavar="CASSETTE")] = None,
    wait: Annotated[bool, typer.Option(
        "--wait", help="When an agent fails (not logged in, say), wait for `ralph resume` "
                       "instead of exiting 4.")] = False,
    store: StoreOpt = None,
) -> None:
    """Run the session until COMPLETE or a limit (exit 0 completed, 1 aborted or failed,
    3 limit reached, 4 an agent failed: fix what it says, then run again); Ctrl-C saves
    it. A session paused by a signal waits for `ralph resume`."""
    raise typer.Exit(_run(session_id, store, record=record, replay=replay,
                          max_iterations=max_iterations,
                          max_runtime=_duration(max_runtime, "--max-runtime"),
                          max_cost=max_cost, parallel=parallel, wait=wait))


@ralph_app.command("resume")
def resume(
    session_id: IdArg,
    message: Annotated[str | None, typer.Option("--message", metavar="TEXT",
                                                help="For the subagent re-invoked.")] = None,
    store: StoreOpt = None,
) -> None:
    """Clear a PAUSE; when no runner is alive, run the session here."""
    import asyncio

    try:
        alive = asyncio.run(runtime.ralph_resume(session_id, message=message, store=store))
    except runtime.InterlockError as exc:
        raise typer.Exit(fail(str(exc), exc.exit_code)) from None
    if alive:
        err.print(f"resume sent to the runner of {session_id}")
        raise typer.Exit(EXIT_OK)
    raise typer.Exit(_run(session_id, store))


@ralph_app.command("status")
def status(
    session_id: IdArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    store: StoreOpt = None,
) -> None:
    """The session's state, iteration, tasks and pending signals."""
    import asyncio

    try:
        info = asyncio.run(runtime.ralph_status(session_id, store=store))
    except runtime.InterlockError as exc:
        raise typer.Exit(fail(str(exc), exc.exit_code)) from None
    if as_json:
        sys.stdout.write(json.dumps(info, indent=2, ensure_ascii=False) + "\n")
        return
    of = f" of {info['max_iterations']}" if info.get("max_iterations") else ""
    print(f"{info['id']}: {info['state']} ({info['status']}), iteration {info['iteration']}{of}"
          + (f"; stopped: {info['stop_reason']}" if info.get("stop_reason") else ""))
    for task in info["tasks"]:
        reason = f" — {task['note']}" if task["note"] else ""
        print(f"  [{task['marker']}] {task['id']}: {task['title']}{reason}")
    for task_id in info.get("to_correct") or []:
        print(f"  {task_id} was rejected by its review; stage a correction for its next "
              f"run: interlock ralph review {info['id']} {task_id}")
    for tree in info.get("worktrees") or []:
        conflicts = f" ({', '.join(tree['conflicts'])})" if tree.get("conflicts") else ""
        print(f"  worktree {tree['task']}: {tree['path']} on {tree['branch']}, "
              f"{tree['state']}{conflicts}")
    if info.get("integration"):
        print(f"  the session's work is on branch {info['integration']}; take it with: "
              f"git merge {info['integration']}")
    if info["pending_signals"]:
        print(f"  pending signals: {', '.join(info['pending_signals'])}")
    if info.get("paused_for") and info["state"] == "PAUSED":
        print(f"  paused: {info['paused_for']}")
    if info.get("waiting_for") and not info.get("questions"):
        print(f"  waiting for {info['waiting_for']}; or go on without: interlock ralph "
              f"resume {info['id']}")
    if info.get("questions"):
        print(f"  waiting for {info['waiting_for']}; answer with: interlock ralph resume "
              f"{info['id']} --message \"...\"")
        for question in info["questions"]:
            print(f"    {question.get('id')}: {question.get('prompt')}")


@ralph_app.command("clean")
def clean(
    session_id: IdArg,
    force: Annotated[bool, typer.Option(
        "--force", help="Also remove worktrees and branches whose work is not merged.")
    ] = False,
    store: StoreOpt = None,
) -> None:
    """Remove the git worktrees and task branches of a session that is not running (the
    integration branch ralph/<ID> stays); refuses while unmerged work remains unless
    --force."""
    try:
        removed = runtime.ralph_clean(session_id, force=force, store=store)
    except runtime.InterlockError as exc:
        raise typer.Exit(fail(str(exc), exc.exit_code)) from None
    err.print(f"removed {len(removed)} worktree(s)"
              + (f": {', '.join(removed)}" if removed else ""))


@ralph_app.command("review")
def review(
    session_id: IdArg,
    task: Annotated[str, typer.Argument(metavar="TASK", help="The task id (T2).")],
    agent: PollerAgentOpt = None,
    answers: AnswersOpt = None,
    as_json: JsonLinesOpt = False,
    store: StoreOpt = None,
) -> None:
    """Review a task's report (the review menu, seed 000); a staged correction goes to the
    next Executor invocation for that task, which shows it in its prompt and takes it. A
    session waiting for this task's correction goes on."""
    raise typer.Exit(_review_task(session_id, task, agent, answers, as_json, store))


@ralph_app.command("poll")
def poll(
    session_id: IdArg,
    role: Annotated[str, typer.Option("--as", metavar="ROLE", help="executor, planner, ... "
                                      "or Ralph-Executor, ...")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """Take the signals meant for a running agent (STEER, INFO, PAUSE, ABORT)."""
    try:
        taken = runtime.ralph_poll(session_id, role=role)
    except runtime.InterlockError as exc:
        raise typer.Exit(fail(str(exc), exc.exit_code)) from None
    for item in taken:
        if as_json:
            print(json.dumps(item, ensure_ascii=False))
        else:
            print(f"{item['type']}: {item['message'] or ''}")


def watch(session_id: str, interval: float, store: str | None) -> int:
    """``interlock watch ID``: the live view until the session ends (Ctrl-C leaves)."""
    try:
        runtime.ralph_watch(session_id, interval=interval, store=store)
    except runtime.InterlockError as exc:
        return fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return EXIT_OK
