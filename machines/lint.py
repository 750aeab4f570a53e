"""Lint: every check on a spec's machine, each a Diagnostic with a source mark.

Checks read the IR (a :class:`Spec` is flattened first). Each is a small generator;
:func:`lint` runs them all and returns the findings sorted by position.

=====  ==========================================================================
S104   identifiers: machine, states, context fields, guards, actions, events
S105   ``after:`` key that is neither a duration nor an identifier
M201   transition target / history default that is not a (suitable) state
M202   missing ``initial`` (top level or compound with several children)
M203   ``initial`` that is not a direct, non-history child
M204   duplicate state id
M205   unreachable state (warning)
M206   trap state: not final, no way out (warning)
M207   final state with transitions
M208   history state without ``default``
M209   candidate hidden by an earlier unguarded one (warning)
M210   cycle of unguarded ``always`` transitions
M211   guard or action not in the bindings (only when bindings are given)
M212   ``after:`` key naming an unknown or non-numeric context field
M213   reserved event names (``after.*``, ``done.*``, ``error.*``) other than those the
       engine raises (``error.execution``, ``done.invoke.<id>``, ``error.invoke.<id>``)
M214   a field the state's kind does not allow
M215   context default that does not match its type
M216   ``invoke:`` with not exactly one of ``agent``, ``command`` and ``machine``, or an
       empty command
M217   ``invoke:`` with both ``prompt`` and ``prompt_file``, either with ``machine``, or
       ``continue`` without ``agent``
M218   ``invoke:`` ``prompt_file`` missing or unreadable (only for a spec read from a file)
M219   Jinja2 syntax error in an invoke's ``prompt``, ``prompt_file``, ``input`` string
       or ``continue``
M220   ``done.invoke.<id>`` / ``error.invoke.<id>`` where no state invokes ``<id>``
M221   duplicate invoke id
M222   invoke ``agent`` not in interlock.yaml ``agents:`` (only when agents are given)
M223   ``done.invoke.<id>`` / ``error.invoke.<id>`` where ``<id>`` never runs (warning)
M224   invoke ``machine`` naming a spec file that does not exist
M225   ``done.invoke.<id>.<final>`` for an invoke that is not a machine
M226   no state active while an invoke runs hears its ``error.invoke`` (warning)
M227   ``concurrency`` without ``each``
M228   ``concurrency`` that is not an integer >= 1 or one ``{{ expression }}``
M229   ``each`` that is not a list or one ``{{ expression }}``
M230   ``done.invoke.<id>.all`` for an invoke without ``each``
M231   ``item``/``index`` in a template of an invoke without ``each``
M232   a broader descriptor hears a fan-out's ``done.invoke.<id>.all`` (warning)
=====  ==========================================================================

S104 also covers an invoke's ``id``, S105 and M212 its ``timeout`` (a duration or a
context field, like an ``after:`` key), M214 an ``invoke:`` on a final or history state.
The invoke checks live in :mod:`.lint_invoke`.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from itertools import pairwise

from interlock.machines.context import TYPE_HINTS, article, fits, is_delay, kind_of
from interlock.machines.diagnostics import (
    Diagnostic,
    Mark,
    did_you_mean,
    error,
    sort_diagnostics,
    warning,
)
from interlock.machines.events import engine_raised, reserved_reason
from interlock.machines.ir import (
    InvokeIR,
    MachineIR,
    StateIR,
    StateKind,
    TransitionIR,
    TransitionKind,
    build_ir,
)
from interlock.machines.lint_invoke import check_invokes
from interlock.machines.memo import PerIR
from interlock.machines.spec import Spec

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EVENT = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*(?:\.\*)?")
_DELAY_TYPES = ("int", "float", "duration")
_TRANSITION_FIELDS: dict[TransitionKind, str] = {
    TransitionKind.EVENT: "on",
    TransitionKind.AFTER: "after",
    TransitionKind.ALWAYS: "always",
}


def lint(
    target: Spec | MachineIR,
    bindings: Mapping[str, object] | None = None,
    agents: Collection[str] | None = None,
) -> list[Diagnostic]:
    """Every problem in a machine, errors and warnings, sorted by position.

    ``bindings`` (guard and action names) enables M211, ``agents`` (the names of
    interlock.yaml ``agents:``) M222; when None, those names are not checked.
    """
    ir = build_ir(target) if isinstance(target, Spec) else target
    found = list(_machine_findings(ir) if agents is None else _findings(ir, agents))
    if bindings is not None:
        found.extend(_check_bindings(ir, bindings))
    return sort_diagnostics(dict.fromkeys(found))


def _findings(ir: MachineIR, agents: Collection[str] | None) -> list[Diagnostic]:
    tree = _Tree(ir)
    found: list[Diagnostic] = []
    for check in _CHECKS:
        found.extend(check(ir, tree))
    found.extend(check_invokes(ir, agents))
    return found


#: What lint finds in an IR itself, found once per IR.
_machine_findings = PerIR(lambda ir: _findings(ir, None))


# -- helpers ---------------------------------------------------------------------------


class _Tree:
    """The state tree, rebuilt from parent links so that duplicate ids cannot loop it.

    ``ir.states`` keeps the first state declared under each id; here every such state
    is the child of its parent, so the tree is acyclic even when ids are duplicated.
    """

    def __init__(self, ir: MachineIR) -> None:
        self.ir = ir
        self._children: dict[str | None, list[str]] = {}
        for sid, state in ir.states.items():
            self._children.setdefault(state.parent, []).append(sid)

    def children(self, sid: str | None) -> list[str]:
        """Children of a state (``None``: the top level), in document order."""
        return self._children.get(sid, [])

    def regions(self, sid: str | None) -> list[str]:
        """Children that are not history pseudo-states."""
        return [c for c in self.children(sid) if not self.ir.states[c].is_history]

    def ancestors(self, sid: str) -> list[str]:
        """Proper ancestors, nearest first."""
        chain: list[str] = []
        parent = self.ir.states[sid].parent
        while parent is not None and parent in self.ir.states:
            chain.append(parent)
            parent = self.ir.states[parent].parent
        return chain

    def descendants(self, sid: str) -> list[str]:
        out: list[str] = []
        stack = list(reversed(self.children(sid)))
        while stack:
            current = stack.pop()
            out.append(current)
            stack.extend(reversed(self.children(current)))
        return out

    def is_descendant(self, sid: str, ancestor: str | None) -> bool:
        """Whether ``sid`` lies strictly inside ``ancestor`` (``None``: the machine)."""
        return ancestor is None or ancestor in self.ancestors(sid)

    def initial_children(self, sid: str | None) -> list[str]:
        """What default entry enters below ``sid``: its initial, else (lenient) every child.

        A missing or wrong ``initial`` is reported by M202/M203; entering every child then
        keeps reachability from piling warnings on top of that error.
        """
        regions = self.regions(sid)
        initial = self.ir.initial if sid is None else self.ir.states[sid].initial
        return [initial] if initial in regions else regions

    def leaves(self) -> list[str]:
        return [sid for sid, s in self.ir.states.items()
                if not s.is_history and not self.children(sid)]


def _describe(t: TransitionIR) -> str:
    """How a user finds a transition in the YAML."""
    if t.kind is TransitionKind.EVENT:
        return f"the {t.event!r} transition of state {t.source!r}"
    if t.kind is TransitionKind.AFTER:
        delay = t.delay.text if t.delay else t.event
        return f"the `after: {delay}` transition of state {t.source!r}"
    return f"the `always` transition of state {t.source!r}"


def _at(mark: Mark) -> str:
    return f"line {mark.line}, column {mark.column}"


def _written(state: StateIR, name: str) -> bool:
    """Whether a field was written: its value has a mark of its own, apart from the key's."""
    return state.mark_of(name) != state.mark


def _first_per_event(state: StateIR, kind: TransitionKind) -> Iterator[TransitionIR]:
    """The first candidate of each event (or ``after`` key) of one state."""
    seen: set[str | None] = set()
    for t in state.transitions:
        if t.kind is kind and t.event not in seen:
            seen.add(t.event)
            yield t


# -- S104: identifiers -----------------------------------------------------------------


def _identifier_problem(name: str) -> str | None:
    if not name:
        return "is empty"
    if keyword.iskeyword(name):
        return "is a Python keyword"
    if name.startswith("__"):
        return "starts with '__', which is reserved"
    if not _IDENTIFIER.fullmatch(name):
        return "must start with a letter or '_' and hold only letters, digits and '_'"
    return None


def _suggest_identifier(name: str) -> str | None:
    fixed = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "_"
    if fixed[0].isdigit():
        fixed = f"_{fixed}"
    if keyword.iskeyword(fixed):
        fixed += "_"
    ok = fixed != name and _identifier_problem(fixed) is None
    return f"for example {fixed!r}" if ok else None


def _identifier(what: str, name: str, mark: Mark) -> Iterator[Diagnostic]:
    """S104 when ``name`` is not an identifier; ``what`` names it for the user."""
    problem = _identifier_problem(name)
    if problem is not None:
        yield error("S104", f"{what} is not a valid identifier: it {problem}", mark,
                    _suggest_identifier(name))


def _check_identifiers(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    yield from _identifier(f"machine name {ir.name!r}", ir.name, ir.mark_of("machine"))
    for field in ir.context.values():
        yield from _identifier(f"context field {field.name!r}", field.name, field.mark)
    for state in ir.declared:
        yield from _identifier(f"state id {state.id!r}", state.id, state.mark)
        yield from _check_event_names(state)
        invoke = state.invoke
        if invoke is not None and invoke.mark_of("id") != invoke.mark:
            yield from _identifier(f"invoke id {invoke.id!r} of state {state.id!r}",
                                   invoke.id, invoke.mark_of("id"))
    for name, what, mark in _callables(ir):
        yield from _identifier(what, name, mark)


def _check_event_names(state: StateIR) -> Iterator[Diagnostic]:
    for t in _first_per_event(state, TransitionKind.EVENT):
        event = t.event or ""
        if not _EVENT.fullmatch(event):
            yield error(
                "S104",
                f"event name {event!r} in state {state.id!r} is not valid: write dot-separated "
                "words of letters, digits, '_' or '-' (like 'job.done'), optionally ending "
                "in '.*'",
                t.mark_of("event"),
            )


# -- S105 / M212: after keys -----------------------------------------------------------


def _check_delays(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    for state in ir.declared:
        for t in _first_per_event(state, TransitionKind.AFTER):
            if t.delay is not None and t.delay.seconds is None:
                yield from _check_delay_key(ir, f"`after:` key {t.delay.text!r} in state "
                                            f"{state.id!r}", t.delay.text, t.mark_of("event"))
        if state.invoke is not None:
            yield from _check_timeout(ir, state.invoke)


def _check_timeout(ir: MachineIR, invoke: InvokeIR) -> Iterator[Diagnostic]:
    timeout = invoke.timeout
    if timeout is None:
        return
    what = f"`timeout:` {timeout.text!r} of the invoke of state {invoke.state!r}"
    if timeout.seconds is None:
        yield from _check_delay_key(ir, what, timeout.text, invoke.mark_of("timeout"))
    elif timeout.seconds <= 0:
        yield error("S105", f"{what} is zero: the invocation would time out at once",
                    invoke.mark_of("timeout"),
                    "write a positive duration such as 10m, or remove `timeout:` to use "
                    "the dispatch settings")


def _check_delay_key(ir: MachineIR, what: str, key: str, mark: Mark) -> Iterator[Diagnostic]:
    """S105/M212 for a delay or timeout that is not a literal duration; ``what`` names it."""
    if _identifier_problem(key) is not None:
        yield error(
            "S105",
            f"{what} is neither a duration nor a context field name",
            mark,
            "write a duration such as 500ms, 30s, 3m or 1h30m, or the name of an int, "
            "float or duration context field",
        )
        return
    field = ir.context.get(key)
    if field is None:
        numeric = [f.name for f in ir.context.values() if f.type in _DELAY_TYPES]
        yield error(
            "M212",
            f"{what} is not a duration and names no context field",
            mark,
            did_you_mean(key, numeric)
            or f"declare it under `context:` as `{key}: {{type: duration, default: 30s}}`",
        )
    elif field.type not in _DELAY_TYPES:
        yield error(
            "M212",
            f"{what} names context field {key!r} of type {field.type}; a delay must be "
            "int or float (seconds) or duration",
            mark,
            f"change the field's type to duration, or write a duration instead of {key!r}",
        )
    elif field.default is not None and not is_delay(field.default):
        yield error(
            "M212",
            f"{what} names context field {key!r} whose default {field.default!r} is not a "
            "valid delay",
            mark,
            "give the field a non-negative number of seconds or a duration such as 30s",
        )


# -- M201: targets and history defaults ------------------------------------------------


def _check_targets(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    for state in ir.declared:
        for t in state.transitions:
            if t.target is not None and t.target not in ir.states:
                yield error(
                    "M201",
                    f"target {t.target!r} of {_describe(t)} is not a state",
                    t.mark_of("target"),
                    did_you_mean(t.target, ir.states) or "targets are state ids",
                )
        if state.is_history and state.default is not None:
            yield from _check_history_default(ir, tree, state, state.default)


def _check_history_default(
    ir: MachineIR, tree: _Tree, state: StateIR, default: str
) -> Iterator[Diagnostic]:
    mark = state.mark_of("default")
    parent = state.parent
    if default not in ir.states:
        yield error("M201", f"default {default!r} of history state {state.id!r} is not a state",
                    mark, did_you_mean(default, ir.states))
    elif ir.states[default].is_history:
        yield error("M201", f"default {default!r} of history state {state.id!r} is itself a "
                    "history state; name a real state", mark)
    elif parent is not None and not tree.is_descendant(default, parent):
        inside = [s for s in tree.descendants(parent) if not ir.states[s].is_history]
        yield error(
            "M201",
            f"default {default!r} of history state {state.id!r} is not inside {parent!r}; "
            f"a history default must be a state within the history state's parent",
            mark,
            did_you_mean(default, inside) or f"one of: {', '.join(inside[:8])}",
        )


# -- M202 / M203: initial states -------------------------------------------------------


def _check_initials(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    yield from _check_top_initial(ir, tree)
    for state in ir.declared:
        if state.kind is StateKind.COMPOUND and state.children:
            yield from _check_compound_initial(ir, state)


def _check_top_initial(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    regions = [sid for sid in ir.top if sid in ir.states and not ir.states[sid].is_history]
    if not ir.top:
        yield error("M202", "the machine has no states", ir.mark_of("states"),
                    "add at least one state under `states:`")
    elif ir.initial is None:
        yield _missing_initial("the machine", "top-level", regions, ir.mark_of("states"))
    elif ir.initial not in regions:
        yield _wrong_initial(ir, "the machine", "a top-level state", ir.initial, regions,
                             ir.mark_of("initial"))


def _check_compound_initial(ir: MachineIR, state: StateIR) -> Iterator[Diagnostic]:
    regions = [c for c in state.children if c in ir.states and not ir.states[c].is_history]
    if state.initial is None:
        yield _missing_initial(f"compound state {state.id!r}", "child", regions, state.mark)
    elif state.initial not in regions:
        yield _wrong_initial(ir, f"state {state.id!r}", f"a child of {state.id!r}",
                             state.initial, regions, state.mark_of("initial"))


def _missing_initial(owner: str, level: str, regions: list[str], mark: Mark) -> Diagnostic:
    if not regions:
        return error("M202", f"{owner} has no {level} state to start in (only history states)",
                     mark, "add a state that is not `type: history`")
    return error(
        "M202",
        f"{owner} has {len(regions)} {level} states and no `initial:`",
        mark,
        f"add `initial: {regions[0]}`; the candidates are {', '.join(regions)}",
    )


def _wrong_initial(
    ir: MachineIR, owner: str, wanted: str, initial: str, regions: list[str], mark: Mark
) -> Diagnostic:
    state = ir.states.get(initial)
    if state is None:
        why = "is not a state"
    elif state.is_history:
        why = "is a history state"
    elif state.parent is not None:
        why = f"is inside {state.parent!r}"
    else:
        why = "is a top-level state"
    hint = did_you_mean(initial, regions) or (
        f"one of: {', '.join(regions)}" if regions else None)
    return error("M203", f"initial {initial!r} of {owner} {why}; it must be {wanted}", mark,
                 hint)


# -- M204: duplicate ids ---------------------------------------------------------------


def _check_duplicates(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    first: dict[str, StateIR] = {}
    for state in ir.declared:
        earlier = first.setdefault(state.id, state)
        if earlier is not state:
            where = f"inside {earlier.parent!r}" if earlier.parent else "at the top level"
            yield error(
                "M204",
                f"state id {state.id!r} is already used by the state {where} at "
                f"{_at(earlier.mark)}",
                state.mark,
                "state ids are unique across the whole machine, even under different "
                "parents; rename one of them",
            )


# -- M205: reachability ----------------------------------------------------------------


def _domain(tree: _Tree, source: str, target: str) -> str | None:
    """The transition domain: nearest compound proper ancestor of the source holding
    the target (``None``: the whole machine)."""
    for ancestor in tree.ancestors(source):
        if (tree.ir.states[ancestor].kind is StateKind.COMPOUND
                and tree.is_descendant(target, ancestor)):
            return ancestor
    return None


class _Reach:
    """The states some run can enter, from the initial configuration onwards."""

    def __init__(self, tree: _Tree) -> None:
        self.tree = tree
        self.states = tree.ir.states
        self.reached: set[str] = set()
        self._pending: list[str] = []  # reached, transitions not followed yet
        self._defaulted: set[str] = set()
        self._targeted: set[tuple[str, str | None]] = set()

    def run(self) -> set[str]:
        for sid in self.tree.initial_children(None):
            self.enter_default(sid)
        while self._pending:
            sid = self._pending.pop()
            for t in self.states[sid].transitions:
                if t.target is not None and t.target in self.states:
                    self.enter_target(t.target, _domain(self.tree, sid, t.target))
        return self.reached

    def reach(self, sid: str) -> None:
        if sid not in self.reached:
            self.reached.add(sid)
            self._pending.append(sid)

    def enter_target(self, sid: str, domain: str | None) -> None:
        """Enter ``sid`` from ``domain``: the ancestors below it, and their other regions."""
        if (sid, domain) in self._targeted:
            return
        self._targeted.add((sid, domain))
        path = [sid, *self.tree.ancestors(sid)]
        for below, ancestor in pairwise(path):
            if ancestor == domain:
                break
            self.reach(ancestor)
            if self.states[ancestor].kind is StateKind.PARALLEL:
                for region in self.tree.regions(ancestor):
                    if region != below:
                        self.enter_default(region)
        self.enter_default(sid)

    def enter_default(self, sid: str) -> None:
        """Enter ``sid`` and whatever default entry enters below it."""
        if sid in self._defaulted:
            return
        self._defaulted.add(sid)
        self.reach(sid)
        state = self.states[sid]
        if state.is_history:
            if state.default is not None and state.default in self.states:
                self.enter_target(state.default, state.parent)
            else:
                for child in self.tree.initial_children(state.parent):
                    self.enter_default(child)
        elif state.kind is StateKind.PARALLEL:
            for child in self.tree.regions(sid):
                self.enter_default(child)
        else:
            for child in self.tree.initial_children(sid):
                self.enter_default(child)


def _check_reachable(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    reached = _Reach(tree).run()
    for sid, state in ir.states.items():
        if sid in reached or (state.parent is not None and state.parent not in reached):
            continue
        if state.is_history:
            yield warning("M205", f"history state {sid!r} is unreachable: no transition "
                          "targets it", state.mark,
                          f"target it from a transition, e.g. `on: {{resume: {sid}}}`, "
                          "or remove it")
        else:
            yield warning("M205", f"state {sid!r} is unreachable: no transition from the "
                          "initial state leads to it or into it", state.mark,
                          "add a transition that targets it, or remove it")


# -- M206: trap states -----------------------------------------------------------------


def _coactive(tree: _Tree, sid: str) -> Iterator[str]:
    """States that can be active together with ``sid``: it, its ancestors, other regions."""
    yield sid
    below = sid
    for ancestor in tree.ancestors(sid):
        yield ancestor
        if tree.ir.states[ancestor].kind is StateKind.PARALLEL:
            for region in tree.children(ancestor):
                if region != below:
                    yield region
                    yield from tree.descendants(region)
        below = ancestor


def _has_way_out(tree: _Tree, sid: str) -> bool:
    """Whether some transition can leave ``sid`` (an unknown target counts: M201 says so)."""
    for source in _coactive(tree, sid):
        for t in tree.ir.states[source].transitions:
            target = t.target
            if target is None or target == sid:
                continue
            if target not in tree.ir.states or tree.is_descendant(
                    sid, _domain(tree, source, target)):
                return True
    return False


def _check_traps(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    for sid, state in ir.states.items():
        if state.kind is StateKind.ATOMIC and not tree.children(sid) \
                and not _has_way_out(tree, sid):
            yield warning(
                "M206",
                f"state {sid!r} is a trap: it is not final and no transition leads out of it",
                state.mark,
                "add a transition to another state, or make it `type: final`",
            )


# -- M207 / M208 / M214: what each kind of state may say -------------------------------


def _check_finals(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    for state in ir.declared:
        if state.is_final:
            for kind in _kinds_present(state):
                field = _TRANSITION_FIELDS[kind]
                yield error(
                    "M207",
                    f"final state {state.id!r} has `{field}:` transitions; a final state is "
                    "never left, so they can never fire",
                    state.mark_of(field),
                    "remove them, or make the state non-final",
                )


def _kinds_present(state: StateIR) -> list[TransitionKind]:
    return [k for k in TransitionKind if any(t.kind is k for t in state.transitions)]


def _check_history_defaults(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    for state in ir.declared:
        if state.is_history and state.default is None:
            where = f"a state inside {state.parent!r}" if state.parent else "a state"
            yield error(
                "M208",
                f"history state {state.id!r} has no `default:`",
                state.mark,
                f"add `default: <state>`, {where} to enter while no history is recorded",
            )


def _check_kind_fields(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    for state in ir.declared:
        problems = _KIND_CHECKS.get(state.kind)
        if problems is not None:
            yield from problems(ir, state)
        if not state.is_history:
            yield from _history_fields_elsewhere(state)


def _final_fields(ir: MachineIR, state: StateIR) -> Iterator[Diagnostic]:
    if state.children:
        yield _kind_field(state, "states", "child states")
    if state.initial is not None:
        yield _kind_field(state, "initial", "an `initial:`")
    if state.invoke is not None:
        yield error("M214", f"final state {state.id!r} cannot have an `invoke:`: a final "
                    "state does no more work", state.mark_of("invoke"),
                    "invoke in the state before it, or remove `invoke:`")


def _history_fields(ir: MachineIR, state: StateIR) -> Iterator[Diagnostic]:
    if state.children:
        yield _kind_field(state, "states", "child states")
    if state.initial is not None:
        yield _kind_field(state, "initial", "an `initial:`")
    for hook, actions in (("entry", state.entry), ("exit", state.exit)):
        if actions:
            yield _kind_field(state, hook, f"`{hook}:` actions")
    if state.invoke is not None:
        yield _kind_field(state, "invoke", "an `invoke:`")
    for kind in _kinds_present(state):
        field = _TRANSITION_FIELDS[kind]
        yield _kind_field(state, field, f"`{field}:` transitions")
    parent = ir.states.get(state.parent) if state.parent else None
    if parent is None:
        yield error("M214", f"history state {state.id!r} is at the top level", state.mark,
                    "put it inside the compound state whose history it remembers")
    elif parent.kind is not StateKind.COMPOUND:
        yield error("M214", f"history state {state.id!r} is inside {parent.id!r}, a "
                    f"{parent.kind} state; history belongs in compound states", state.mark)


def _atomic_fields(ir: MachineIR, state: StateIR) -> Iterator[Diagnostic]:
    if state.children:
        yield error("M214", f"state {state.id!r} is `type: atomic` but has child states",
                    state.mark_of("type"), "remove `type: atomic`; a state with children "
                    "is compound")
    elif state.initial is not None:
        yield error("M214", f"state {state.id!r} has `initial: {state.initial}` but no child "
                    "states", state.mark_of("initial"),
                    "remove `initial:`, or add the child states under `states:`")


def _container_fields(ir: MachineIR, state: StateIR) -> Iterator[Diagnostic]:
    if not state.children:
        yield error("M214", f"state {state.id!r} is `type: {state.kind}` but has no child "
                    "states", state.mark_of("type"),
                    "add child states under `states:`, or remove `type:`")
    if state.kind is StateKind.PARALLEL and state.initial is not None:
        yield error("M214", f"parallel state {state.id!r} has `initial:`; a parallel state "
                    "enters all its children", state.mark_of("initial"), "remove `initial:`")


def _history_fields_elsewhere(state: StateIR) -> Iterator[Diagnostic]:
    for field in ("history", "default"):
        if (field == "default" and state.default is not None) or (
                field == "history" and _written(state, "history")):
            yield error(
                "M214",
                f"state {state.id!r} has `{field}:` but is not a history state",
                state.mark_of(field),
                f"add `type: history`, or remove `{field}:`",
            )


def _kind_field(state: StateIR, field: str, what: str) -> Diagnostic:
    return error("M214", f"{state.kind} state {state.id!r} cannot have {what}",
                 state.mark_of(field), f"remove `{field}:` from {state.id!r}")


_KIND_CHECKS: dict[StateKind, Callable[[MachineIR, StateIR], Iterator[Diagnostic]]] = {
    StateKind.FINAL: _final_fields,
    StateKind.HISTORY: _history_fields,
    StateKind.ATOMIC: _atomic_fields,
    StateKind.COMPOUND: _container_fields,
    StateKind.PARALLEL: _container_fields,
}


# -- M209: hidden candidates -----------------------------------------------------------


def _descriptor(event: str | None) -> tuple[str, ...]:
    """Event tokens, with a trailing ``.*`` dropped (``job.*`` matches what ``job`` does)."""
    return tuple((event or "").removesuffix(".*").split("."))


def _covers(earlier: TransitionIR, later: TransitionIR) -> bool:
    """Whether every event ``later`` listens for also selects ``earlier`` (dotted prefix)."""
    if earlier.kind is not later.kind:
        return False
    if earlier.kind is TransitionKind.EVENT:
        prefix = _descriptor(earlier.event)
        return _descriptor(later.event)[: len(prefix)] == prefix
    return earlier.event == later.event


def _check_hidden(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    for state in ir.declared:
        unguarded: list[TransitionIR] = []
        for t in state.transitions:
            hider = next((u for u in unguarded if _covers(u, t)), None)
            if hider is not None:
                yield warning(
                    "M209",
                    f"{_describe(t)} can never fire: {_describe(hider)} at "
                    f"{_at(hider.mark)} has no guard and is tried first",
                    t.mark,
                    "give the earlier one a guard, or move this one before it",
                )
            elif t.guard is None:
                unguarded.append(t)


# -- M210: eventless loops -------------------------------------------------------------


def _always_taken(tree: _Tree, leaf: str) -> TransitionIR | None:
    """The eventless transition a leaf takes when every guard is false, if any."""
    for sid in (leaf, *tree.ancestors(leaf)):
        for t in tree.ir.states[sid].transitions:
            if t.kind is TransitionKind.ALWAYS and t.guard is None:
                return t
    return None


def _entered_leaves(tree: _Tree, sid: str) -> set[str]:
    """Leaves that default entry of ``sid`` makes active."""
    leaves: set[str] = set()
    seen: set[str] = set()
    stack = [sid]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        state = tree.ir.states[current]
        if state.is_history:
            default = state.default
            stack.append(default if default is not None and default in tree.ir.states
                         else state.parent or current)
        elif not tree.children(current):
            leaves.add(current)
        elif state.kind is StateKind.PARALLEL:
            stack.extend(tree.regions(current))
        else:
            stack.extend(tree.initial_children(current))
    return leaves


def _strong_components(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (machines may be deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            nxt = next((s for s in successors if s not in index or s in on_stack), None)
            if nxt is not None and nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(graph[nxt]))))
            elif nxt is not None:
                low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def _check_eventless_loops(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    taken: dict[str, TransitionIR] = {}
    graph: dict[str, set[str]] = {}
    leaves = tree.leaves()
    for leaf in leaves:
        t = _always_taken(tree, leaf)
        graph[leaf] = set()
        if t is None:
            continue
        taken[leaf] = t
        if t.target is not None and t.target in ir.states:
            graph[leaf] = _entered_leaves(tree, t.target) & set(leaves)
    yield from _targetless_loops(taken.values())
    for component in _strong_components(graph):
        if len(component) > 1 or component[0] in graph[component[0]]:
            yield _loop(sorted({id(taken[s]): taken[s] for s in component}.values(),
                               key=lambda t: t.mark))


def _targetless_loops(taken: Iterable[TransitionIR]) -> Iterator[Diagnostic]:
    for t in {id(t): t for t in taken if t.target is None}.values():
        yield error("M210", f"{_describe(t)} has no guard and no target: it is taken again "
                    "after every step, forever", t.mark,
                    "add a guard that becomes false, or a target")


def _loop(transitions: list[TransitionIR]) -> Diagnostic:
    steps = ", ".join(f"{t.source} -> {t.target}" for t in transitions)
    return error(
        "M210",
        f"unguarded eventless loop: the `always` transitions {steps} are taken again and "
        "again without waiting for an event",
        transitions[0].mark,
        "give one of them a guard, or wait for an event instead",
    )


# -- M211: bindings --------------------------------------------------------------------


def _check_bindings(ir: MachineIR, bindings: Mapping[str, object]) -> Iterator[Diagnostic]:
    for name, what, mark in _callables(ir):
        if name not in bindings:
            yield error("M211", f"{what} is not bound", mark,
                        did_you_mean(name, bindings)
                        or f"register a callable named {name!r} in the bindings")


def _callables(ir: MachineIR) -> Iterator[tuple[str, str, Mark]]:
    """Every guard and action name, with a phrase that names it and where it is used."""
    for state in ir.declared:
        for hook, actions in (("entry", state.entry), ("exit", state.exit)):
            for action in actions:
                yield (action, f"{hook} action {action!r} of state {state.id!r}",
                       state.mark_of(hook))
        for t in state.transitions:
            if t.guard is not None:
                yield t.guard.name, f"guard {t.guard.name!r} of {_describe(t)}", \
                    t.mark_of("guard")
            for action in t.actions:
                yield action, f"action {action!r} of {_describe(t)}", t.mark_of("actions")


# -- M213: reserved events -------------------------------------------------------------


def _check_reserved_events(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    for state in ir.declared:
        for t in _first_per_event(state, TransitionKind.EVENT):
            event = t.event or ""
            reason = reserved_reason(event)
            if reason is not None and not engine_raised(event):
                yield error("M213", f"event name {event!r} in state {state.id!r} is reserved",
                            t.mark_of("event"), reason)


# -- M215: context defaults ------------------------------------------------------------


def _check_context_defaults(ir: MachineIR, tree: _Tree) -> Iterator[Diagnostic]:
    for field in ir.context.values():
        if not fits(field.type, field.default):
            yield error(
                "M215",
                f"default {field.default!r} of context field {field.name!r} is not "
                f"{article(field.type)} (it is {kind_of(field.default)})",
                field.mark_of("default"),
                TYPE_HINTS.get(field.type),
            )


_CHECKS: tuple[Callable[[MachineIR, _Tree], Iterator[Diagnostic]], ...] = (
    _check_identifiers,
    _check_delays,
    _check_targets,
    _check_initials,
    _check_duplicates,
    _check_reachable,
    _check_traps,
    _check_finals,
    _check_history_defaults,
    _check_kind_fields,
    _check_hidden,
    _check_eventless_loops,
    _check_reserved_events,
    _check_context_defaults,
)
