"""``interlock demo``: the offline tour on the embedded defaults.

It validates and compiles every built-in spec on both targets, draws them, and replays
one PollingState dispatch whose sub-agent prints its verdict line (``v: GO``) *before*
its issue list: the seed's "``v:`` means done" rule would have cut the answer there;
interlock's machine waits for a complete document followed by silence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from interlock.machines import Call, SpecError, build_ir, compile, lint, load
from interlock.machines.compile import Target
from interlock.runtime.builtin import builtin_specs

from .output import EXIT_ERRORS, EXIT_OK

# What a reviewer sub-agent prints, in the chunks it arrives in (seed 003's compact YAML).
AGENT_OUTPUT = ["p: TECHLEAD\n", "v: CONDITIONAL\n", "i:\n",
                "  - C: polling interval is fixed at 1s\n", "  - H: no idle timeout\n"]


def _targets(path: Path) -> tuple[str, str]:
    """Whether the spec compiles on each target, or why not."""
    results = []
    targets: tuple[Target, ...] = ("statemachine", "transitions")
    for target in targets:
        try:
            compile(load(path), target=target)
            results.append("[green]compiles[/]")
        except SpecError as exc:
            first = exc.diagnostics[0]
            results.append(f"[yellow]refused[/] {first.code} line {first.mark.line}")
    return results[0], results[1]


def _specs_table(console: Console) -> bool:
    table = Table(title="Built-in specs", title_justify="left")
    for column in ("spec", "states", "events", "lint", "statemachine", "transitions"):
        table.add_column(column)
    clean = True
    for path in builtin_specs():
        ir = build_ir(load(path))
        findings = lint(ir)
        clean = clean and not findings
        table.add_row(path.stem, str(len(ir.states)), str(len(ir.events)),
                      "[green]clean[/]" if not findings else f"[red]{len(findings)} finding(s)[/]",
                      *_targets(path))
    console.print(table)
    return clean


def _draw(console: Console, out_dir: Path) -> None:
    from interlock.runtime.diagrams import sync_diagrams
    from interlock.runtime.graphviz import GraphvizError

    try:
        written = sync_diagrams(builtin_specs(), out_dir)
    except GraphvizError as exc:
        console.print(f"[yellow]diagrams skipped:[/] {exc}")
        return
    console.print(f"Diagrams: {len(written)} files in {out_dir}/ (Mermaid in .md, SVG via dot)")


def _polling_bindings() -> dict[str, Any]:
    """Just enough of a dispatcher's bindings to replay a run without a process."""
    buffer: list[str] = []

    def document_complete(call: Call) -> bool:
        text = "".join(buffer)
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError:
            return False
        field = call.context["completion_markers"]["required_field"]
        return isinstance(document, dict) and field in document

    def buffer_chunk(call: Call) -> None:
        buffer.append(call.data["text"])

    def count(name: str) -> Any:
        def action(call: Call) -> None:
            call.context[name] += 1
        return action

    def set_field(name: str, value: Any) -> Any:
        def action(call: Call) -> None:
            call.context[name] = value
        return action

    def build_result(call: Call) -> None:
        call.context["stdout"] = "".join(buffer)

    bindings: dict[str, Any] = {
        "document_complete": document_complete,
        "silence_reached": lambda call: (call.context["silence_cycles"] + 1
                                         >= call.context["min_silence_cycles"]),
        "exit_ok": lambda call: call.data.get("code") == 0,
        "buffer_chunk": buffer_chunk,
        "count_poll": count("poll_count"),
        "count_silence": count("silence_cycles"),
        "reset_silence": set_field("silence_cycles", 0),
        "mark_completion_detected": set_field("completion_detected", True),
        "clear_completion_detected": set_field("completion_detected", False),
        "note_marker_completion": set_field("completion_method", "marker"),
        "build_result": build_result,
    }
    machine = build_ir(load(_builtin("polling_state")))
    for name in machine.actions:
        bindings.setdefault(name, lambda call: None)
    return bindings


def _builtin(name: str) -> Path:
    return next(p for p in builtin_specs() if p.stem == name)


def _replay(console: Console) -> bool:
    machine = compile(load(_builtin("polling_state")), bindings=_polling_bindings())
    run = machine.new()
    steps: list[tuple[str, dict[str, Any]]] = [("start", {})]
    for chunk in AGENT_OUTPUT:
        steps.append(("chunk", {"text": chunk}))
        steps.append(("marker", {}))  # the dispatcher hints after every line
        steps.append(("poll", {}))
    steps += [("silence", {}), ("silence", {})]
    table = Table(title="PollingState replay (scripted events, no process)", title_justify="left")
    for column in ("event", "data", "active states"):
        table.add_column(column)
    for event, data in steps:
        run.send(event, **data)
        shown = repr(data["text"]) if data else ""
        table.add_row(event, shown, ", ".join(sorted(run.configuration)))
    console.print(table)
    stdout = run.context.get("stdout", "")
    complete = "completed" in run.configuration and "H: no idle timeout" in stdout
    verdict = ("[green]completed by marker with the whole issue list[/]" if complete
               else "[red]did not complete as expected[/]")
    console.print(f"Result: {verdict}; poll_count={run.context['poll_count']}, "
                  f"completion_method={run.context['completion_method']}")
    return complete


def run_demo(workdir: Path) -> int:
    console = Console(highlight=False)
    console.print("[bold]interlock demo[/]: offline, on the built-in specs\n")
    clean = _specs_table(console)
    _draw(console, workdir / "diagrams")
    ok = _replay(console)
    console.print("\nNext: [bold]interlock validate specs/ --strict[/], "
                  "[bold]interlock diagram polling_state -f svg -o ps.svg[/]")
    return EXIT_OK if clean and ok else EXIT_ERRORS
