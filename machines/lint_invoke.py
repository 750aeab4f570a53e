"""Lint for ``invoke:``: what a state runs, its templates, and the events it raises.

Checks read the IR like :mod:`.lint` (which runs them and owns the code table):

=====  ==========================================================================
M216   not exactly one of ``agent``, ``command`` and ``machine``, or an empty ``command``
M217   both ``prompt`` and ``prompt_file``, ``continue`` without ``agent``, ``cwd`` on a
       ``machine``, or either prompt
       key with ``machine`` (a child machine takes ``input``, not a prompt)
M218   ``prompt_file`` missing or unreadable (relative to the spec file's folder;
       not checked for a spec loaded from text)
M219   Jinja2 syntax error in ``prompt``, the ``prompt_file``, an ``input`` string,
       ``continue``, or a templated ``agent`` name or ``command`` item
M220   ``done.invoke.<id>`` / ``error.invoke.<id>`` listened for where no state
       invokes ``<id>``
M221   two states invoke under one id
M222   ``agent`` not among the agents of interlock.yaml (only when they are given)
M223   ``done.invoke.<id>`` / ``error.invoke.<id>`` listened for in a state that is never
       active while the state invoking ``<id>`` is (warning: only a stale event could
       reach it)
M224   ``machine`` names a spec file (``.yaml``/``.yml``, or a path) that does not exist
       (relative to the spec file's folder; not checked for a spec loaded from text)
M225   ``done.invoke.<id>.<final>`` where ``<id>`` is an agent or a command: only a child
       machine's done event carries a final state
M226   no state that can be active while ``<id>`` runs listens for ``error.invoke.<id>``
       (warning: a failed invocation is journaled, and the invoking state waits on)
M227   ``concurrency`` without ``each``
M228   ``concurrency`` that is neither an integer >= 1 nor one ``{{ expression }}``
M229   ``each`` that is neither a list nor one ``{{ expression }}``
M230   ``done.invoke.<id>.all`` listened for where ``<id>`` has no ``each``
M231   ``item`` or ``index`` read by a template of an invoke without ``each`` (or by
       ``each``/``concurrency`` themselves, evaluated before any child exists)
M232   a transition on a broader descriptor (``done.invoke.<id>``, ``done.invoke``) in a
       state without one on ``done.invoke.<id>.all``: a fan-out's end takes it too (warning)
=====  ==========================================================================

The timeout (S105/M212), the invoke id (S104) and invoke on a final or history state
(M214) are checked with their kin in :mod:`.lint`. Reading the prompt file is the only
I/O, the same kind the loader does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.machines.diagnostics import Diagnostic, Mark, did_you_mean, error, warning
from interlock.machines.events import descriptor_matches
from interlock.machines.ir import (
    ALL_SUFFIX,
    INVOKE_DONE_PREFIX,
    INVOKE_ERROR_PREFIX,
    InvokeIR,
    MachineIR,
    StateKind,
    TransitionKind,
)
from interlock.machines.yamlsrc import MAX_BYTES

if TYPE_CHECKING:
    from interlock.machines.templates import TemplateProblem


def check_invokes(ir: MachineIR, agents: Collection[str] | None = None) -> Iterator[Diagnostic]:
    """Every invoke finding of a machine (unsorted); ``agents`` enables M222."""
    for invoke in _invokes(ir):
        yield from _check_runs(invoke)
        yield from _check_prompt(ir, invoke)
        yield from _check_machine(ir, invoke)
        yield from _check_templated_names(invoke)
        yield from _check_input(invoke)
        yield from _check_each(invoke)
        yield from _check_each_names(invoke)
        if agents is not None:
            yield from _check_agent(invoke, agents)
    yield from _check_duplicate_ids(ir)
    yield from _check_listeners(ir)
    yield from _check_unheard_errors(ir)
    yield from _check_broad_listeners(ir)


def _invokes(ir: MachineIR) -> Iterator[InvokeIR]:
    for state in ir.declared:
        if state.invoke is not None:
            yield state.invoke


def _written(invoke: InvokeIR, name: str) -> bool:
    return invoke.mark_of(name) != invoke.mark


# -- M216 / M217 / M222: what runs ------------------------------------------------------


_RUNS = ("agent", "command", "machine")


def _check_runs(invoke: InvokeIR) -> Iterator[Diagnostic]:
    where = f"the invoke of state {invoke.state!r}"
    given = [name for name in _RUNS if getattr(invoke, name) is not None]
    if len(given) > 1:
        named = " and ".join(f"`{name}:`" for name in given)
        yield error("M216", f"{where} names {'both' if len(given) == 2 else 'all of'} "
                    f"{named}; it runs one of them", invoke.mark_of(given[-1]),
                    "keep one: `agent:` (a name from interlock.yaml `agents:`), `command:` "
                    "(an argv) or `machine:` (a built-in spec's name or a spec file)")
    elif not given:
        yield error("M216", f"{where} names none of `agent:`, `command:` and `machine:`",
                    invoke.mark,
                    "add `agent: <name>` naming one of interlock.yaml `agents:`, "
                    "`command: [program, arg, ...]`, or `machine: <spec>`")
    elif invoke.command is not None and (not invoke.command or not invoke.command[0].strip()):
        yield error("M216", f"{where} has an empty `command:`", invoke.mark_of("command"),
                    "write the argv as a list, program first, e.g. "
                    "`command: [sh, -c, \"make test\"]`")
    if invoke.prompt is not None and invoke.prompt_file is not None:
        yield error("M217", f"{where} gives both `prompt:` and `prompt_file:`",
                    invoke.mark_of("prompt_file"),
                    "keep one: `prompt:` holds the template, `prompt_file:` names a file "
                    "that holds it")
    if invoke.continue_ is not None and invoke.agent is None:
        yield error("M217", f"{where} has `continue:`, which only an `agent:` takes",
                    invoke.mark_of("continue_"),
                    "`continue:` goes on with an agent CLI's own conversation; a command or "
                    "a child machine has none: remove it")
    if invoke.cwd is not None and invoke.machine is not None:
        yield error("M217", f"{where} has `cwd:`, which only an `agent:` or a `command:` "
                    "takes", invoke.mark_of("cwd"),
                    "a child machine runs in its parent's runner: give the folder to it "
                    "in `input:` and to its own invokes as their `cwd:`")
    if invoke.machine is not None:
        for name in ("prompt", "prompt_file"):
            if getattr(invoke, name) is not None:
                yield error("M217", f"{where} runs machine {invoke.machine!r}, which takes "
                            f"no `{name}:`", invoke.mark_of(name),
                            "a child machine's context comes from `input:`; remove "
                            f"`{name}:` (its own invokes have their prompts)")


def machine_file(name: str) -> bool:
    """Whether an invoke's ``machine:`` names a spec file rather than a built-in spec."""
    return name.endswith((".yaml", ".yml")) or "/" in name


def _check_machine(ir: MachineIR, invoke: InvokeIR) -> Iterator[Diagnostic]:
    name = invoke.machine
    spec_file = Path(ir.file)
    if name is None or not machine_file(name) or not spec_file.is_file():
        return
    path = spec_file.parent / name
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        yield error("M224", f"machine {name!r} of the invoke of state {invoke.state!r} "
                    f"{what} ({path})", invoke.mark_of("machine"),
                    _nearby(path, name) or "`machine:` is a built-in spec's name, or a spec "
                    f"file relative to the spec file's folder, {spec_file.parent}")


def _check_agent(invoke: InvokeIR, agents: Collection[str]) -> Iterator[Diagnostic]:
    if invoke.agent is None or invoke.agent in agents or _is_template(invoke.agent):
        return  # a templated name is known only when the invoke starts
    known = sorted(agents)
    hint = did_you_mean(invoke.agent, known) or (
        f"the agents of interlock.yaml are: {', '.join(known)}" if known
        else "interlock.yaml defines no `agents:`; add one, or use `command:`")
    yield error("M222", f"agent {invoke.agent!r} of the invoke of state {invoke.state!r} is "
                "not defined in interlock.yaml `agents:`", invoke.mark_of("agent"), hint)


# -- M218 / M219: templates -------------------------------------------------------------


def template_mark(value: Mark, text: str, line: int) -> Mark:
    """Where template line ``line`` of a YAML string whose value starts at ``value`` is.

    A string holding a line break is taken for a block scalar (``|`` or ``>``): its
    first line is the one under the indicator, and the column is not known, so it is 1.
    A string without one is on the value's line.
    """
    if "\n" not in text:
        return value
    return Mark(value.file, value.line + line, 1)


def _syntax(text: str, value: Mark, what: str) -> Iterator[Diagnostic]:
    problem = _syntax_error(text)
    if problem is not None:
        yield error("M219", f"Jinja2 syntax error in {what}: {problem.message}",
                    template_mark(value, text, problem.line),
                    "templates are Jinja2: {{ context.field }}, {% if ... %}...{% endif %}")


def _check_prompt(ir: MachineIR, invoke: InvokeIR) -> Iterator[Diagnostic]:
    if invoke.prompt is not None:
        yield from _syntax(invoke.prompt, invoke.mark_of("prompt"),
                           f"the prompt of state {invoke.state!r}")
    if invoke.prompt_file is not None:
        yield from _check_prompt_file(ir, invoke, invoke.prompt_file)


def _check_prompt_file(ir: MachineIR, invoke: InvokeIR, name: str) -> Iterator[Diagnostic]:
    spec_file = Path(ir.file)
    if not spec_file.is_file():  # loaded from text: there is no folder to resolve against
        return
    path = spec_file.parent / name
    mark = invoke.mark_of("prompt_file")
    what = f"prompt_file {name!r} of the invoke of state {invoke.state!r}"
    folder = f"prompt_file is relative to the spec file's folder, {spec_file.parent}"
    if not path.exists():
        yield error("M218", f"{what} does not exist ({path})", mark,
                    _nearby(path, name) or folder)
        return
    if not path.is_file():
        yield error("M218", f"{what} is not a file ({path})", mark, folder)
        return
    try:
        raw = path.read_bytes()
        if len(raw) > MAX_BYTES:
            yield error("M218", f"{what} is {len(raw)} bytes; templates are limited to "
                        f"{MAX_BYTES} bytes", mark)
            return
        text = raw.decode("utf-8")
    except OSError as exc:
        yield error("M218", f"{what} cannot be read: {exc.strerror or exc}", mark)
        return
    except UnicodeDecodeError as exc:
        yield error("M218", f"{what} is not UTF-8 text (byte 0x{raw[exc.start]:02x})", mark)
        return
    problem = _syntax_error(text)
    if problem is not None:
        yield error("M219", f"Jinja2 syntax error in {what}: {problem.message}",
                    Mark(str(path), problem.line, 1),
                    f"the file is named at {mark}")
    elif not invoke.fans_out:
        yield from _each_names_read(invoke, text, what, lambda line: Mark(str(path), line, 1),
                                    f"the file is named at {mark}; ")


def _nearby(path: Path, name: str) -> str | None:
    """A did-you-mean from the files next to where the prompt file was looked for."""
    try:
        names = [p.name for p in path.parent.iterdir()] if path.parent.is_dir() else []
    except OSError:
        return None
    spelled = {str(Path(name).parent / n): n for n in names}
    return did_you_mean(name, spelled)


def _is_template(text: str) -> bool:
    return "{{" in text or "{%" in text


def _check_templated_names(invoke: InvokeIR) -> Iterator[Diagnostic]:
    """An ``agent:`` name and ``command:`` items may be templates over the context."""
    if invoke.agent is not None and _is_template(invoke.agent):
        yield from _syntax(invoke.agent, invoke.mark_of("agent"),
                           f"the agent name of the invoke of state {invoke.state!r}")
    for item in invoke.command or ():
        if _is_template(item):
            yield from _syntax(item, invoke.mark_of("command"),
                               f"the command of the invoke of state {invoke.state!r}")
    if invoke.continue_ is not None:
        yield from _syntax(invoke.continue_, invoke.mark_of("continue_"),
                           f"`continue:` of the invoke of state {invoke.state!r}")
    if invoke.cwd is not None:
        yield from _syntax(invoke.cwd, invoke.mark_of("cwd"),
                           f"`cwd:` of the invoke of state {invoke.state!r}")


def _check_input(invoke: InvokeIR) -> Iterator[Diagnostic]:
    for key, value in invoke.input.items():
        mark = invoke.mark_of(f"input.{key}")
        for text in _strings(value):
            yield from _syntax(text, mark, f"input {key!r} of the invoke of state "
                               f"{invoke.state!r}")


def _strings(value: Any) -> Iterator[str]:
    """Every string inside an input value (nested lists and mappings included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


# -- M227 - M231: fan-out (each:) ---------------------------------------------------------

# One ``{{ expression }}`` and nothing else: its value as it is (a list, a number).
_ALONE = re.compile(r"^\s*\{\{(?:(?!\}\}|\{\{|\{%|\{#).)*\}\}\s*$", re.DOTALL)
_BARE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def expression_alone(text: str) -> bool:
    """Whether ``text`` is one ``{{ expression }}`` alone, whose value is taken as it is."""
    return _ALONE.match(text) is not None


def _as_expression(text: str, example: str) -> str:
    """The hint for a value that should have been a ``{{ expression }}``."""
    name = text.strip()
    if _BARE_NAME.match(name) and "." in name:
        return f'write it as an expression, "{{{{ {name} }}}}"'
    return f'write one expression, such as "{{{{ {example} }}}}"'


def _check_each(invoke: InvokeIR) -> Iterator[Diagnostic]:
    where = f"the invoke of state {invoke.state!r}"
    concurrency = invoke.concurrency
    if invoke.each is None:
        if concurrency is not None:
            yield error("M227", f"{where} has `concurrency:` but no `each:`: only a fan-out "
                        "runs children at once", invoke.mark_of("concurrency"),
                        'add `each: "{{ context.batch }}"` to run one child per item, or '
                        "remove `concurrency:`")
        return
    if isinstance(invoke.each, str):
        if not expression_alone(invoke.each):
            yield error("M229", f"`each:` of {where} is {invoke.each!r}: neither a list nor "
                        "one `{{ expression }}` giving one", invoke.mark_of("each"),
                        _as_expression(invoke.each, "context.batch") + ", or a YAML list")
        else:
            yield from _syntax(invoke.each, invoke.mark_of("each"), f"`each:` of {where}")
    if isinstance(concurrency, int) and concurrency < 1:
        yield error("M228", f"`concurrency: {concurrency}` of {where} runs no child: it must "
                    "be at least 1", invoke.mark_of("concurrency"),
                    "1 runs the children one at a time; leave `concurrency:` out to run "
                    "them all at once")
    elif isinstance(concurrency, str):
        if not expression_alone(concurrency):
            yield error("M228", f"`concurrency:` of {where} is {concurrency!r}: neither an "
                        "integer nor one `{{ expression }}` giving one",
                        invoke.mark_of("concurrency"),
                        "write an integer such as 2, or "
                        + _as_expression(concurrency, "context.parallel").removeprefix("write "))
        else:
            yield from _syntax(concurrency, invoke.mark_of("concurrency"),
                               f"`concurrency:` of {where}")


def _each_names_read(invoke: InvokeIR, text: str, what: str, at: Callable[[int], Mark],
                     hint: str = "") -> Iterator[Diagnostic]:
    """M231 for a template of an invoke without ``each:`` that reads item or index
    (``at``: where a line of the template is)."""
    from interlock.machines.templates import EACH_NAMES, template_names

    read = {name: line for name, line in template_names(text).items() if name in EACH_NAMES}
    if read:
        names = " and ".join(f"`{name}`" for name in read)
        yield error("M231", f"{what} reads {names}, which only the children of a fan-out "
                    "have, and this invoke has no `each:`", at(min(read.values())),
                    hint + "add `each:` to run one child per item of a list, or read the "
                    "value from `context`")


def _each_templates(invoke: InvokeIR) -> Iterator[tuple[str, Mark, str]]:
    """Every template of an invoke a child renders: (text, mark, what)."""
    where = f"of the invoke of state {invoke.state!r}"
    if invoke.prompt is not None:
        yield invoke.prompt, invoke.mark_of("prompt"), f"the prompt {where}"
    for key, value in invoke.input.items():
        for text in _strings(value):
            yield text, invoke.mark_of(f"input.{key}"), f"input {key!r} {where}"
    if invoke.command:
        yield " ".join(invoke.command), invoke.mark_of("command"), f"the command {where}"
    if invoke.agent is not None:
        yield invoke.agent, invoke.mark_of("agent"), f"the agent name {where}"
    if invoke.continue_ is not None:
        yield invoke.continue_, invoke.mark_of("continue_"), f"`continue:` {where}"
    if invoke.cwd is not None:
        yield invoke.cwd, invoke.mark_of("cwd"), f"`cwd:` {where}"


def _check_each_names(invoke: InvokeIR) -> Iterator[Diagnostic]:
    from interlock.machines.templates import EACH_NAMES, template_names

    if not invoke.fans_out:
        for text, mark, what in _each_templates(invoke):
            if _is_template(text):
                yield from _each_names_read(invoke, text, what,
                                            functools.partial(template_mark, mark, text))
        return
    for name in ("each", "concurrency"):
        text = getattr(invoke, name)
        if not isinstance(text, str):
            continue
        for read in sorted(set(template_names(text)) & set(EACH_NAMES)):
            yield error("M231", f"`{name}:` of the invoke of state {invoke.state!r} reads "
                        f"`{read}`: it is evaluated when the state is entered, before any "
                        "child exists", invoke.mark_of(name),
                        "`item` and `index` are for the children's templates: `input:`, "
                        "`prompt:`, `command:`; read what you need from `context`")


# -- M220 / M221: ids and their events ---------------------------------------------------


def _check_duplicate_ids(ir: MachineIR) -> Iterator[Diagnostic]:
    first: dict[str, InvokeIR] = {}
    for state in ir.states.values():  # duplicate state ids are M204's business
        invoke = state.invoke
        if invoke is None:
            continue
        earlier = first.setdefault(invoke.id, invoke)
        if earlier is not invoke:
            at = invoke.mark_of("id") if _written(invoke, "id") else invoke.mark
            yield error(
                "M221",
                f"invoke id {invoke.id!r} of state {invoke.state!r} is already used by the "
                f"invoke of state {earlier.state!r} (line {earlier.mark.line}); "
                f"{invoke.done_event} could not tell them apart",
                at,
                "give one of them its own `id:`; an invoke's id defaults to its state's id",
            )


def _listened_id(event: str) -> str | None:
    """The invoke id a descriptor names (``done.invoke.work`` -> ``work``), else None.

    ``done.invoke``, ``done.invoke.*`` and ``error`` hear every invoke: they name no id.
    """
    descriptor = event.removesuffix(".*").removesuffix(".")
    for prefix in (INVOKE_DONE_PREFIX, INVOKE_ERROR_PREFIX):
        if descriptor.startswith(prefix + "."):
            return descriptor[len(prefix) + 1:] or None
    return None


def _lineage(ir: MachineIR, sid: str) -> list[str]:
    """The state and its ancestors, nearest first (guarded: a broken tree cannot loop)."""
    chain = [sid]
    parent = ir.states[sid].parent if sid in ir.states else None
    while parent is not None and parent in ir.states and parent not in chain:
        chain.append(parent)
        parent = ir.states[parent].parent
    return chain


def _coactive(ir: MachineIR, a: str, b: str) -> bool:
    """Whether states ``a`` and ``b`` can be active at once: one holds the other, or they
    lie in different regions of a parallel state."""
    lineage_a, lineage_b = _lineage(ir, a), _lineage(ir, b)
    if a in lineage_b or b in lineage_a:
        return True
    common = next((s for s in lineage_a if s in lineage_b), None)
    return common is not None and ir.states[common].kind is StateKind.PARALLEL


def _heard_ids(event: str, ids: list[str], machines: set[str]) -> list[str]:
    """The invoke ids whose events ``event`` hears: ``done.invoke.<id>`` (and its
    prefixes), or ``done.invoke.<id>.<final>`` for a machine's (``.all`` for any
    fan-out's: the caller has refused it for the others)."""
    kind = event.split(".", 1)[0]
    heard = [i for i in ids if descriptor_matches(event, f"{kind}.invoke.{i}")]
    if not heard and kind == "done":
        listened = _listened_id(event) or ""
        heard = [i for i in ids if listened.startswith(i + ".")
                 and (i in machines or listened == f"{i}.{ALL_SUFFIX}")]
    return heard


def _check_listeners(ir: MachineIR) -> Iterator[Diagnostic]:
    ids = list(dict.fromkeys(invoke.id for invoke in _invokes(ir)))
    machines = {invoke.id for invoke in _invokes(ir) if invoke.machine is not None}
    fanouts = {invoke.id for invoke in _invokes(ir) if invoke.fans_out}
    invokers: dict[str, list[str]] = {}
    for invoke in _invokes(ir):
        invokers.setdefault(invoke.id, []).append(invoke.state)
    for state in ir.declared:
        seen: set[str] = set()
        for t in state.transitions:
            event = t.event
            if t.kind is not TransitionKind.EVENT or event is None or event in seen:
                continue
            seen.add(event)
            invoke_id = _listened_id(event)
            if invoke_id is None:
                continue
            whole = invoke_id.removesuffix(f".{ALL_SUFFIX}")
            if event.startswith(INVOKE_DONE_PREFIX + ".") and whole != invoke_id \
                    and whole in ids and whole not in fanouts:
                yield error("M230", f"state {state.id!r} listens for {event!r}, but invoke "
                            f"{whole!r} has no `each:`: only a fan-out raises "
                            f"'done.invoke.{whole}.{ALL_SUFFIX}' (when its last child ends)",
                            t.mark_of("event"),
                            f"add `each:` to the invoke of {invokers[whole][0]!r}, or listen "
                            f"for 'done.invoke.{whole}'; a child machine's final state may "
                            f"not be named `{ALL_SUFFIX}`")
                continue
            heard = _heard_ids(event, ids, machines)
            if heard:
                yield from _check_heard(ir, state.id, event, t.mark_of("event"),
                                        [s for i in heard for s in invokers[i]])
                continue
            parent = next((i for i in ids if invoke_id.startswith(i + ".")), None)
            if parent is not None:
                yield error("M225", f"state {state.id!r} listens for {event!r}, but invoke "
                            f"{parent!r} runs an agent or a command: only a child "
                            "machine's done event carries a final state",
                            t.mark_of("event"), f"listen for 'done.invoke.{parent}' and "
                            "read the answer from the event's data")
                continue
            hint = did_you_mean(invoke_id, ids) or (
                f"the invoke ids are: {', '.join(ids)}; an id defaults to its state's id"
                if ids else "no state has `invoke:`; add one, or remove this transition")
            yield error("M220", f"state {state.id!r} listens for {event!r}, but no state "
                        f"invokes an agent with id {invoke_id!r}", t.mark_of("event"), hint)


def _check_unheard_errors(ir: MachineIR) -> Iterator[Diagnostic]:
    """M226: an invoke's failure that no state active beside it hears (not for an invoke
    on a final or history state: M214 refuses those)."""
    for invoke in _invokes(ir):
        if ir.states[invoke.state].kind in (StateKind.FINAL, StateKind.HISTORY):
            continue
        event = f"{INVOKE_ERROR_PREFIX}.{invoke.id}"
        if any(t.kind is TransitionKind.EVENT and t.event is not None
               and descriptor_matches(t.event, event) and _coactive(ir, state.id, invoke.state)
               for state in ir.declared for t in state.transitions):
            continue
        yield warning("M226", f"state {invoke.state!r} invokes {invoke.id!r}, but no state "
                      f"active while it runs listens for {event!r}: a failed invocation is "
                      "journaled and the state waits on", invoke.mark,
                      f"add `on: {{{event}: <state>}}` to {invoke.state!r} or an ancestor; "
                      "`error.invoke` there hears every invoke under it")


def _check_broad_listeners(ir: MachineIR) -> Iterator[Diagnostic]:
    """M232: a transition that hears a fan-out's ``.all`` by dotted prefix where no
    transition on the ``.all`` itself (in the same state, or one inside it) takes it."""
    for invoke in _invokes(ir):
        if not invoke.fans_out or invoke.state not in ir.states:
            continue
        event = invoke.all_event
        for state in ir.declared:
            if state.id not in ir.states or not _coactive(ir, state.id, invoke.state):
                continue
            broad = next((t for t in state.transitions
                          if t.kind is TransitionKind.EVENT and t.guard is None
                          and t.event is not None and t.event.startswith(INVOKE_DONE_PREFIX)
                          and descriptor_matches(t.event, event)
                          and t.event.removesuffix(".*") != event), None)
            if broad is None or _takes_all(ir, state.id, event):
                continue
            yield warning("M232", f"state {state.id!r} listens for {broad.event!r}, which "
                          f"hears {event!r} too (dotted prefix): the end of the fan-out "
                          f"{invoke.id!r} takes this transition as if it were one more child",
                          broad.mark_of("event"),
                          f"add `{event}: ...` to {state.id!r} before it, since the first "
                          "transition that matches is taken; or give it a guard that skips "
                          "an event without `index`")


def _takes_all(ir: MachineIR, sid: str, event: str) -> bool:
    """Whether ``sid`` or a state inside it has a transition on exactly ``event``."""
    return any(t.kind is TransitionKind.EVENT and t.event is not None
               and t.event.removesuffix(".*") == event
               for s in (sid, *ir.descendants(sid)) for t in ir.states[s].transitions)


def _check_heard(
    ir: MachineIR, listener: str, event: str, mark: Mark, invoking: list[str]
) -> Iterator[Diagnostic]:
    """M223: the listener is never active while any state it hears is (so is never told)."""
    if listener not in ir.states or any(_coactive(ir, listener, s) for s in invoking):
        return
    yield warning(
        "M223",
        f"state {listener!r} listens for {event!r}, but is never active while "
        f"{invoking[0]!r} (which invokes it) is: leaving {invoking[0]!r} cancels the "
        "invocation, so this transition could only hear a stale event",
        mark,
        f"move the transition to {invoking[0]!r} or to a state around it",
    )


def _syntax_error(text: str) -> TemplateProblem | None:
    """Jinja2's complaint about ``text``, if any (Jinja2 loads only for a spec with
    templates to check: every CLI call lints, few have any)."""
    from interlock.machines.templates import template_syntax_error

    return template_syntax_error(text)
