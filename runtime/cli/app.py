"""The ``interlock`` command line."""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer._click import exceptions as click  # typer vendors click since 0.2x

from interlock import runtime
from interlock.runtime import DemoAnswerFormat as DemoFormat
from interlock.runtime import DemoVerdict
from interlock.runtime.cli.diagram import Format, run_diagram, run_diagram_all
from interlock.runtime.cli.output import EXIT_USAGE, err, fail
from interlock.runtime.cli.review_options import AnswersOpt, JsonLinesOpt, PollerAgentOpt
from interlock.runtime.cli.validate import run_validate

if TYPE_CHECKING:
    from typer._click.core import Command as ClickCommand

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="interlock",
    help="Workflow engine built on explicit state machines: validate, draw and run YAML specs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings=HELP_OPTIONS,  # inherited by every command and sub-command
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        print(f"interlock {version('interlock')}")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_version,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Workflow engine built on explicit state machines: validate, draw and run YAML specs."""


@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Spec files or folders of specs.")],
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print diagnostics as JSON.")] = False,
    bindings: Annotated[str | None, typer.Option(
        "--bindings", metavar="MODULE[:ATTR]",
        help="Also report guards/actions this module's BINDINGS mapping does not bind.")] = None,
) -> None:
    """Check specs; print FILE:LINE:COL: error|warning CODE: message for each finding.

    Exit 0 when clean (warnings alone: 0 unless --strict), 1 on errors, 2 on usage errors.
    """
    raise typer.Exit(run_validate(paths, strict, as_json, bindings))


@app.command()
def schema(
    out: Annotated[Path | None, typer.Option("-o", "--output", help="Write to a file.")] = None,
) -> None:
    """Print the JSON Schema of spec files (for editors: yaml-language-server)."""
    text = json.dumps(runtime.spec_schema(), indent=2, sort_keys=True) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise typer.Exit(fail(f"-o {out}: cannot write: {exc.strerror or exc}")) from None
        err.print(f"wrote {out}")


@app.command()
def diagram(
    spec: Annotated[str | None, typer.Argument(help="A spec file or built-in spec name.")] = None,
    fmt: Annotated[Format, typer.Option("-f", "--format", help="Output format.")] = Format.MERMAID,
    out: Annotated[Path | None, typer.Option("-o", "--output", help="Output file (or folder "
                                             "with --all).")] = None,
    all_dir: Annotated[Path | None, typer.Option("--all", help="Draw every spec in this folder "
                                                 "into the -o folder (Markdown+Mermaid and SVG)."
                                                 )] = None,
    session: Annotated[str | None, typer.Option("--session", help="Draw this session's spec "
                                                "with its active states highlighted.")] = None,
    store: StoreOpt = None,
) -> None:
    """Draw a spec. Mermaid and DOT are text; SVG and PNG need Graphviz's `dot`."""
    if all_dir is not None:
        if spec is not None or out is None:
            raise typer.Exit(fail("use: interlock diagram --all SPEC_DIR -o OUT_DIR", EXIT_USAGE))
        raise typer.Exit(run_diagram_all(all_dir, out))
    if session is not None:
        from interlock.runtime.cli.diagram import run_diagram_session

        raise typer.Exit(run_diagram_session(session, store, fmt, out))
    if spec is None:
        raise typer.Exit(fail("name a spec to draw, or use --all SPEC_DIR -o OUT_DIR",
                              EXIT_USAGE))
    raise typer.Exit(run_diagram(spec, fmt, out))


StoreOpt = Annotated[str | None, typer.Option(
    "--store", metavar="URL", help="Session store: a .db path, sqlite:///PATH or "
    "postgresql://... (default: .interlock/state.db here).")]
BindingsOpt = Annotated[str | None, typer.Option(
    "--bindings", metavar="MODULE[:ATTR]", help="Python module or file whose BINDINGS "
    "mapping binds the spec's guards and actions.")]
UnboundOpt = Annotated[bool, typer.Option(
    "--allow-unbound", help="Run with unbound actions doing nothing and unbound guards "
    "false (for exploring a spec by hand).")]


SignalsOpt = Annotated[bool, typer.Option(
    "--signals/--no-signals", help="Consume live signals from the session folder's mailbox.")]
SignalsAsOpt = Annotated[str, typer.Option(
    "--signals-as", metavar="TARGET", help="Also take signals addressed to TARGET (besides "
    "ALL).")]


@app.command()
def run(
    spec: Annotated[str, typer.Argument(help="A spec file or built-in spec name.")],
    session: Annotated[str | None, typer.Option("--session", help="Session id: start it "
                                                "with this id, or continue it.")] = None,
    store: StoreOpt = None,
    bindings: BindingsOpt = None,
    context: Annotated[str | None, typer.Option("--context", metavar="JSON",
                                                help="Initial context values.")] = None,
    allow_unbound: UnboundOpt = False,
    migrate: Annotated[bool, typer.Option("--migrate", help="Continue a session whose spec "
                                          "file changed, on the new spec.")] = False,
    signals: SignalsOpt = True,
    signals_as: SignalsAsOpt = "ALL",
    demo: Annotated[bool, typer.Option("--demo", help="Run a built-in spec offline and "
                                       "unattended: demo agents, and scripted stand-ins for "
                                       "the outside world.")] = False,
) -> None:
    """Start (or continue) a session and run it until a final state or Ctrl-C.

    Live signals dropped into .interlock/sessions/ID/signals/inputs/ (interlock signal)
    arrive as events signal.STEER, signal.PAUSE, ... within milliseconds.
    """
    from interlock.runtime.cli.sessions import SignalOptions, run_session

    raise typer.Exit(run_session(spec, session, store, bindings, context, allow_unbound,
                                 migrate, SignalOptions(signals, signals_as), demo))


@app.command()
def resume(
    session: Annotated[str, typer.Argument(help="The session id.")],
    store: StoreOpt = None,
    bindings: BindingsOpt = None,
    allow_unbound: UnboundOpt = False,
    signals: SignalsOpt = True,
    signals_as: SignalsAsOpt = "ALL",
    retry: Annotated[bool, typer.Option("--retry", help="Deliver the events that failed "
                                        "(the session's dead letters) again first.")] = False,
) -> None:
    """Continue a stopped, crashed or failed session where its last step left it.

    A failed session goes on without the event that failed; --retry delivers it again
    (after you fixed the bindings).
    """
    from interlock.runtime.cli.sessions import SignalOptions, resume_session

    raise typer.Exit(resume_session(session, store, bindings, allow_unbound,
                                    SignalOptions(signals, signals_as), retry))


@app.command()
def cancel(
    session: Annotated[str, typer.Argument(help="The session id.")],
    reason: Annotated[str | None, typer.Option("--reason", metavar="TEXT",
                                               help="Why; kept in the journal.")] = None,
    store: StoreOpt = None,
) -> None:
    """Cancel a session: a live runner stops within a second (timers cancelled, child
    processes stopped), a stopped or failed one is marked cancelled."""
    from interlock.runtime.cli.sessions import cancel_session

    raise typer.Exit(cancel_session(session, reason, store))


@app.command("rm")
def rm(
    session: Annotated[str, typer.Argument(help="The session id.")],
    force: Annotated[bool, typer.Option("--force", help="Also a running one (its runner "
                                        "stops).")] = False,
    store: StoreOpt = None,
) -> None:
    """Delete a session and its journal (a running one only with --force)."""
    from interlock.runtime.cli.sessions import remove_session

    raise typer.Exit(remove_session(session, force, store))


@app.command("sessions")
def sessions_(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    every: Annotated[bool, typer.Option(
        "--all", help="List the child machine sessions invokes started, too.")] = False,
    store: StoreOpt = None,
) -> None:
    """List the sessions: id, spec, status, active states, last update."""
    from interlock.runtime.cli.sessions import list_sessions

    raise typer.Exit(list_sessions(as_json, store, every))


@app.command()
def send(
    session: Annotated[str, typer.Argument(help="The session id.")],
    event: Annotated[str, typer.Argument(help="The event name, e.g. start or signal.STEER.")],
    data: Annotated[str | None, typer.Option("--data", metavar="JSON",
                                             help="Event data, a JSON object.")] = None,
    store: StoreOpt = None,
) -> None:
    """Deliver an event: a running session takes it at once, a stopped one on resume."""
    from interlock.runtime.cli.sessions import send_event

    raise typer.Exit(send_event(session, event, data, store))


@app.command()
def status(
    session: Annotated[str | None, typer.Argument(help="One session (all when omitted).")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    store: StoreOpt = None,
) -> None:
    """Active states, context, armed timers and the last events of sessions."""
    from interlock.runtime.cli.sessions import show_status

    raise typer.Exit(show_status(session, as_json, store))


@app.command()
def log(
    session: Annotated[str, typer.Argument(help="The session id.")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new "
                                         "entries until the session finishes.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    store: StoreOpt = None,
) -> None:
    """The session's journal: every event, timer and step, in order."""
    from interlock.runtime.cli.sessions import show_log

    raise typer.Exit(show_log(session, follow, as_json, store))


@app.command()
def specs() -> None:
    """List the built-in specs and where they live."""
    for path in runtime.builtin_specs():
        print(f"{path.stem:24} {path}")


@app.command()
def demo(
    workdir: Annotated[Path, typer.Option("--dir", help="Where to write the demo's files.")] = Path(
        "interlock-demo"),
) -> None:
    """Run the offline demo on the built-in specs (no network, no real agent)."""
    if workdir.exists() and not workdir.is_dir():
        raise typer.Exit(fail(f"--dir {workdir}: not a folder", EXIT_USAGE))
    raise typer.Exit(runtime.run_demo(workdir))


class ResultFormat(StrEnum):
    JSON = "json"
    YAML = "yaml"


class AgentFormat(StrEnum):
    YAML = "yaml"
    JSON = "json"
    TEXT = "text"


@app.command(context_settings={"allow_interspersed_args": False})
def dispatch(
    command: Annotated[list[str], typer.Argument(
        metavar="-- CMD [ARG...] [::: CMD [ARG...]]...",
        help="The agent command as argv words (no shell); ':::' separates parallel commands.")],
    config_file: Annotated[Path | None, typer.Option(
        "--config", metavar="FILE", help="A project file with a `dispatch:` section "
        "(default: the nearest interlock.yaml).")] = None,
    timeout: Annotated[str | None, typer.Option(
        "--timeout", metavar="S", help="dispatchTimeout: the hard limit, in seconds (5) or "
        "a duration (90s, 3m); any positive value here (interlock.yaml: >= 10 s).")] = None,
    interval: Annotated[str | None, typer.Option(
        "--interval", metavar="S", help="pollingInterval in seconds or a duration (>= 1 s)."
        )] = None,
    required_field: Annotated[str | None, typer.Option(
        "--required-field", metavar="F", help="The key a complete answer holds (default v).")]
    = None,
    fmt: Annotated[ResultFormat, typer.Option(
        "--format", case_sensitive=False, help="How to print the PollingResult.")]
    = ResultFormat.JSON,
    output_format: Annotated[AgentFormat | None, typer.Option(
        "--output-format", case_sensitive=False, help="What the agent prints (outputFormat; "
        "default yaml).")] = None,
    prompt_file: Annotated[str | None, typer.Option(
        "--prompt-file", metavar="FILE|-", help="Send this file ('-': our stdin) to each "
        "agent's stdin (default: agents get /dev/null).")] = None,
    names: Annotated[list[str] | None, typer.Option(
        "--name", metavar="NAME", help="Label a result (repeat once per command).")] = None,
    line_buffered: Annotated[bool, typer.Option(
        "--line-buffered", help="Run agents under `stdbuf -oL -eL`.")] = False,
    use_pty: Annotated[bool, typer.Option(
        "--pty", help="Give agents a pseudo-terminal for stdout (line-buffers most programs).")]
    = False,
    store: Annotated[str | None, typer.Option(
        "--store", metavar="URL", help="Where running agents are recorded (default "
        "./.interlock/state.db).")] = None,
    no_store: Annotated[bool, typer.Option(
        "--no-store", help="Record nothing: agents orphaned by a crash are not cleaned up.")]
    = False,
) -> None:
    """Run sub-agent CLIs, detect completion from their output, print the PollingResult.

    Exit 0 completed, 1 error, 124 timeout, 2 usage or configuration error, 130 interrupted.
    """
    from interlock.runtime.cli.dispatch import run_dispatch

    raise typer.Exit(run_dispatch(
        command, config_file=config_file, timeout=timeout, interval=interval,
        required_field=required_field, fmt=fmt.value,
        output_format=output_format.value if output_format else None,
        prompt_file=prompt_file, names=names or [], line_buffered=line_buffered,
        use_pty=use_pty, store_url=store, use_store=not no_store))


@app.command("signal")
def signal_(
    session: Annotated[str, typer.Argument(
        metavar="SESSION", help="A session id (its folder .interlock/sessions/ID here) or a "
        "session folder (holds signals/; write it with a '/', e.g. ./work/s1).")],
    kind: Annotated[str, typer.Argument(metavar="TYPE", help="STEER, INFO, PAUSE, ABORT, "
                                        "APPROVE or SKIP.")],
    message: Annotated[str | None, typer.Argument(help="The message (STEER and INFO need "
                                                  "one).")] = None,
    target: Annotated[str, typer.Option("--target", metavar="T", help="ALL, or the consumer "
                                        "it is for.")] = "ALL",
    iteration: Annotated[int | None, typer.Option("--iteration", metavar="N", min=0,
                                                  help="The iteration it applies to.")] = None,
    task: Annotated[str | None, typer.Option(
        "--task", metavar="T", help="Only for the subagent working on task T (a Ralph "
        "session's parallel batch).")] = None,
    wait: Annotated[float | None, typer.Option("--wait", metavar="S", min=0.0, help="Block "
                                               "until handled; print the receipt (exit 124 "
                                               "on timeout).")] = None,
    create: Annotated[bool, typer.Option("--create", help="Make the mailbox of a session "
                                         "or folder nobody knows yet, instead of refusing."
                                         )] = False,
    store: StoreOpt = None,
) -> None:
    """Post a live signal into a session's mailbox (atomically: tmp/, fsync, rename).

    An unknown session id or a folder without a mailbox is refused (exit 1), listing the
    known sessions, unless --create.
    """
    from interlock.runtime.cli.signals import send_signal

    raise typer.Exit(send_signal(session, kind, message, target, iteration, wait,
                                 create=create, store_url=store, task=task))


@app.command("ui")
def ui(
    host: Annotated[str, typer.Option("--host", metavar="HOST", help="Where to listen: "
                                      "127.0.0.1 (this machine only); any other host needs "
                                      "a token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", min=0, max=65535,
                                      help="The port (0: any free one).")] = 8642,
    token: Annotated[str | None, typer.Option("--token", metavar="TOKEN", help="Ask every "
                                              "request for this token (made and printed "
                                              "when --host is not 127.0.0.1).")] = None,
    store: StoreOpt = None,
) -> None:
    """Serve a live web page of the sessions: each statechart lit as it runs, the
    timeline, the agents' calls, the files, signal buttons, the Questioner's questions.

    Prints the URL to open (with ?token=... when there is one); Ctrl-C stops it.
    Exit 1 when the port is taken.
    """
    from interlock.runtime.cli.ui import serve

    raise typer.Exit(serve(host, port, token, store))


from interlock.runtime.cli.agents import agents_app  # noqa: E402

app.add_typer(agents_app, name="agents")

from interlock.runtime.cli.ralph import ralph_app  # noqa: E402

app.add_typer(ralph_app, name="ralph")


@app.command("watch")
def watch_(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The Ralph session id.")],
    interval: Annotated[float, typer.Option("--interval", metavar="S", min=0.05,
                                            help="Seconds between redraws.")] = 0.5,
    store: StoreOpt = None,
) -> None:
    """A live view of a Ralph session (state, tasks, agent, signals) until it ends."""
    from interlock.runtime.cli.ralph import watch

    raise typer.Exit(watch(session_id, interval, store))

mailbox_app = typer.Typer(help="Live-signal mailboxes.", no_args_is_help=True)
app.add_typer(mailbox_app, name="mailbox")


@mailbox_app.command("consume")
def mailbox_consume(
    session_dirs: Annotated[list[Path], typer.Argument(metavar="SESSION_DIR...",
                                                       help="Session folders to serve.")],
    identity: Annotated[str, typer.Option("--as", metavar="TARGET", help="The target name "
                                          "this consumer answers to, besides ALL.")] = "ALL",
    types: Annotated[str | None, typer.Option("--types", metavar="T,...", help="Signal types "
                                              "to take (default STEER,INFO,PAUSE,ABORT).")]
    = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON line per handled "
                                          "signal.")] = False,
    once: Annotated[bool, typer.Option("--once", help="Handle what is there now, then "
                                       "exit.")] = False,
    count: Annotated[int | None, typer.Option("--count", metavar="N", min=1, help="Exit "
                                              "after N signals.")] = None,
    scan_interval: Annotated[float, typer.Option("--scan-interval", metavar="S", min=0.05,
                                                 help="Seconds between reconciliation "
                                                 "scans.")] = 2.0,
) -> None:
    """Handle signals as they arrive and print each one; several consumers on one mailbox
    never handle a signal twice."""
    from interlock.runtime.cli.signals import consume

    raise typer.Exit(consume(session_dirs, identity, types, as_json, once, count,
                             scan_interval))


from interlock.runtime.cli.inbox import inbox_app  # noqa: E402

app.add_typer(inbox_app, name="inbox")


@app.command("demo-agent")
def demo_agent(
    role: Annotated[str, typer.Option("--role", help="The reviewer persona: TECHLEAD, SECURITY, "
                                      "QA, ARCHITECT or any word (uppercased).")],
    delay: Annotated[float, typer.Option("--delay", min=0.0, metavar="S",
                                         help="Pause between output lines.")] = 0.2,
    linger: Annotated[float, typer.Option("--linger", min=0.0, metavar="S", help="After the "
                                          "answer, stay alive silently (a hung CLI).")] = 0.0,
    verdict: Annotated[DemoVerdict | None, typer.Option(
        "--verdict", case_sensitive=False, help="The verdict (default: fixed per role).")] = None,
    fail_: Annotated[bool, typer.Option("--fail", help="Print an error to stderr and exit 1 "
                                        "without an answer.")] = False,
    prompt: Annotated[str | None, typer.Option("--prompt", metavar="TEXT", help="The task "
                                               "(default: stdin unless it is a terminal).")]
    = None,
    fmt: Annotated[DemoFormat, typer.Option("--format", case_sensitive=False,
                                            help="Answer format.")] = DemoFormat.YAML,
    end_marker: Annotated[bool, typer.Option("--end-marker", help="End the YAML document "
                                             "with '...'.")] = False,
) -> None:
    """An offline review sub-agent: prints a seed-style answer (p:, v:, i:) at a chosen pace."""
    if prompt is None:
        prompt = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    raise typer.Exit(runtime.run_demo_agent(role, delay=delay, linger=linger, verdict=verdict,
                                    fail=fail_, prompt=prompt, fmt=fmt, end_marker=end_marker))


@app.command()
def review(
    output: Annotated[str | None, typer.Argument(help="The unit's output: a file, or - for "
                                                 "stdin.")] = None,
    node: Annotated[str | None, typer.Option("--node", help="The node whose output it is "
                                             "(key into staged_configs).")] = None,
    agent: PollerAgentOpt = None,
    answers: AnswersOpt = None,
    as_json: JsonLinesOpt = False,
    resume_id: Annotated[str | None, typer.Option("--resume", metavar="POLLER_ID",
                                                  help="Continue a killed interview.")] = None,
    unit: Annotated[str, typer.Option("--unit", help="The unit that owns the node.")] = "",
    answer_timeout: Annotated[str, typer.Option("--answer-timeout", metavar="DURATION",
                                                help="How long one question waits.")] = "10m",
    max_rounds: Annotated[int, typer.Option("--max-rounds", help="Interpretations before "
                                            "the poller gives up.")] = 8,
    store: StoreOpt = None,
) -> None:
    """Review a unit's output: accept, retry, deepen, redirect, config or route.

    Retry, deepen and redirect fork a poller interview that stages a correction in
    staged_configs[NODE]. Exit 0 resolved (or accepted, configured, routed), 1 failed,
    3 aborted, 4 timed out, 5 round limit, 130 interrupted.
    """
    from interlock.runtime.cli.review import run_review

    raise typer.Exit(run_review(output, node, agent, answers, as_json, resume_id, unit, store,
                                answer_timeout, max_rounds))


@app.command()
def staged(
    node: Annotated[str, typer.Argument(help="The node (e.g. node_14).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print it as JSON.")] = False,
    consume: Annotated[bool, typer.Option("--consume", help="Print it as JSON and remove it "
                                          "(one transaction).")] = False,
    store: StoreOpt = None,
) -> None:
    """Show the staged config of NODE (exit 1 when nothing is staged)."""
    from interlock.runtime.cli.review import run_staged

    raise typer.Exit(run_staged(node, as_json, consume, store))


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user mistakes end with one line and an exit code, never a trace.

    Usage errors (an unknown option, a bad option value, a missing argument) exit 2 with
    ``error: interlock CMD: <what is wrong> (see: interlock CMD -h)``.
    """
    command = _command_tree(sys.argv[1:] if argv is None else argv)
    try:
        code = command.main(args=argv, prog_name="interlock", standalone_mode=False)
    except click.NoArgsIsHelpError as exc:
        sys.stdout.write(exc.ctx.get_help() + "\n")
        code = EXIT_USAGE
    except click.UsageError as exc:
        code = fail(usage_message(exc), EXIT_USAGE)
    except click.ClickException as exc:
        code = fail(exc.format_message(), exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        err.print("interrupted")
        code = 130
    except BrokenPipeError:
        code = 0
    except OSError as exc:  # last resort: a file or folder the user named cannot be used
        where = f"{exc.filename}: " if exc.filename else ""
        code = fail(f"{where}{exc.strerror or exc}")
    if argv is None:  # the process's own command line: the process ends here
        _skip_final_collection()
    sys.exit(code if isinstance(code, int) else 0)


def _command_tree(args: list[str]) -> ClickCommand:
    """The click command of ``app``, built with only the command the arguments name when
    they start with one: typer builds every command's options from its signature (about
    80 of them, 20-30 ms of each call). Anything else (no arguments, ``--help``,
    ``--version``, a mistyped name, which click answers with the names there are) gets
    the whole tree."""
    name = args[0] if args and not args[0].startswith("-") else None
    if name is not None:
        commands = [c for c in app.registered_commands
                    if (c.name or typer.main.get_command_name(
                        getattr(c.callback, "__name__", ""))) == name]
        groups = [g for g in app.registered_groups if g.name == name]
        if commands or groups:
            named = copy.copy(app)
            named.registered_commands, named.registered_groups = commands, groups
            return typer.main.get_command(named)
    return typer.main.get_command(app)


def _skip_final_collection() -> None:
    """Collect the young garbage, then freeze every object left, so that the interpreter's
    last collection at exit does not walk all that the imports built (about 40 ms of
    every ``interlock`` call, an eighth of a ``status``: ``bench/cli_call.py``). Old
    garbage in cycles is left to the OS; every file interlock writes is closed by then."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    gc.collect(1)
    gc.freeze()


def usage_message(exc: click.UsageError) -> str:
    """One line naming the command, the option or argument and what is wrong with it."""
    where = exc.ctx.command_path if exc.ctx is not None else "interlock"
    text = " ".join(exc.format_message().split())
    text = text.replace("Value error, ", "").rstrip(".")
    return f"{where}: {text[:1].lower()}{text[1:]} (see: {where} -h)"
