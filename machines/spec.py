"""The spec model: what a YAML spec may say, as pydantic models with source marks.

The model checks shape and types only. Names, durations and everything about the
machine the spec describes (targets, reachability, ...) are checked by :mod:`.lint`
over the IR, where every node still knows its mark.

Shorthands accepted on input and normalized here:

* ``on: {go: done}`` -> ``on: {go: [{target: done}]}``
* ``on: {go: {guard: ok, target: done}}`` -> a one-element list
* ``on: {tick: null}`` -> a targetless (internal) transition with no actions
* ``entry: start_clock`` -> ``entry: [start_clock]``
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictInt, field_validator

from interlock.machines.diagnostics import Mark

UNKNOWN_MARK = Mark("<unknown>", 1, 1)

StateType = Literal["atomic", "compound", "parallel", "final", "history"]
ContextType = Literal["int", "float", "str", "bool", "list", "dict", "duration", "any"]
HistoryDepth = Literal["shallow", "deep"]


class Node(BaseModel):
    """Base of every spec node: strict keys, plus the marks of the node and its fields."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_default=False)

    _mark: Mark = PrivateAttr(default=UNKNOWN_MARK)
    _field_marks: dict[str, Mark] = PrivateAttr(default_factory=dict)
    # Marks of the keys inside mapping fields, e.g. ("on", "go") -> where `go:` is written.
    _key_marks: dict[tuple[str, str], Mark] = PrivateAttr(default_factory=dict)

    @property
    def mark(self) -> Mark:
        return self._mark

    def mark_of(self, name: str) -> Mark:
        """The mark of one field's value (the node's own mark when it was not written)."""
        return self._field_marks.get(name, self._mark)

    def key_mark_of(self, name: str, key: str) -> Mark:
        """The mark of one key of a mapping field (``on``, ``after``, ...), else the field's."""
        return self._key_marks.get((name, key), self.mark_of(name))


def _as_list(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return value


def _as_transitions(value: Any) -> Any:
    """Normalize one transition entry (str, mapping, null or list) to a list of mappings."""
    if value is None:
        return [{}]
    if isinstance(value, str):
        return [{"target": value}]
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [{"target": v} if isinstance(v, str) else v for v in value]
    return value


class TransitionSpec(Node):
    """One candidate transition; several candidates for one event are tried in order."""

    target: str | None = Field(
        default=None, description="Target state id; absent means targetless (internal)."
    )
    guard: str | None = Field(
        default=None,
        description="Name of a bound guard; prefix with '!' to negate it.",
    )
    actions: list[str] = Field(default_factory=list, description="Names of bound actions.")
    description: str | None = None

    _as_list = field_validator("actions", mode="before")(_as_list)


Transitions = list[TransitionSpec]


class ContextField(Node):
    """A typed field of a session's context."""

    type: ContextType = "any"
    default: Any = None
    description: str | None = None


class InvokeSpec(Node):
    """An agent, a program or a child machine the state runs while it is active (XState's
    invoke, SCXML's <invoke>).

    Started when the state is entered, cancelled when it is left; it reports back with
    ``done.invoke.<id>`` (finished; a machine's carries its final state,
    ``done.invoke.<id>.<final state>``) or ``error.invoke.<id>`` (failed).
    """

    id: str | None = Field(
        default=None,
        description="Names the events it raises, done.invoke.<id> and error.invoke.<id>; "
        "unique in the machine. Default: the state's id.")
    agent: str | None = Field(
        default=None,
        description="The agent to run: a name from the `agents:` of interlock.yaml (or a "
        "Jinja2 template over `context` giving one). Exactly one of agent, command and "
        "machine.")
    command: list[str] | None = Field(
        default=None,
        description="The program to run, as an argv list (program first), instead of an "
        "agent; an item may be a Jinja2 template over `context`. Exactly one of agent, "
        "command and machine.")
    machine: str | None = Field(
        default=None,
        description="A child machine to run as a session of its own: a built-in spec's name "
        "or a spec file relative to this spec's folder. `input` is its context; it raises "
        "done.invoke.<id>.<final state> with its context as `output`. Exactly one of "
        "agent, command and machine.")
    prompt: str | None = Field(
        default=None,
        description="The prompt: a Jinja2 template (StrictUndefined) rendered from "
        "`context`, `input` and `signals` (pending STEER/INFO messages). Or prompt_file.")
    prompt_file: str | None = Field(
        default=None,
        description="A file holding the prompt template, relative to the spec file's "
        "folder. Or prompt.")
    input: dict[str, Any] = Field(
        default_factory=dict,
        description="Named values handed to the agent and to the prompt as `input` (a child "
        "machine's context); strings in them are Jinja2 templates rendered from `context`, "
        "and a string that is one `{{ expression }}` alone gives the expression's value "
        "(a list, a mapping, a number) as it is.")
    cwd: str | None = Field(
        default=None,
        description="For an agent or a command: the folder it runs in, a Jinja2 template "
        "over `context` (a task's git worktree, say); an empty result or no `cwd` runs it "
        "where the agent's own settings say (its `cwd:` in interlock.yaml), else in the "
        "runner's folder.")
    continue_: str | None = Field(
        default=None, alias="continue",
        description="For an agent: a Jinja2 template over `context`; when it renders "
        "non-empty and this invoke's previous call in the session left a conversation its "
        "CLI can continue (claude, codex, gemini), that conversation goes on with this text "
        "(a steer, say) instead of starting over with `prompt`.")
    timeout: str | None = Field(
        default=None,
        description="How long it may run before error.invoke.<id>: a duration (90, 30s, "
        "10m, 1h30m) or the name of an int, float or duration context field. Default: "
        "the dispatch settings.")
    on_resume: Literal["adopt", "restart", "fail"] = Field(
        default="adopt",
        description="What a runner resumed after a crash does with an invocation still "
        "running: adopt (reattach to the same process), restart (stop it, start a new "
        "one), or fail (raise error.invoke.<id> with reason runner_lost).")
    each: str | list[Any] | None = Field(
        default=None,
        description="Fan-out: run one child per item of a list, a `{{ expression }}` over "
        "`context` (evaluated when the state is entered) or a YAML list. Each child's "
        "templates see `item` and `index`; each child's end raises done.invoke.<id> (or "
        "error.invoke.<id>) with `item` and `index` in its data, and the last one's "
        "done.invoke.<id>.all, once, with every child's outcome in item order.")
    concurrency: StrictInt | str | None = Field(
        default=None,
        description="With `each`: how many children run at once, an integer >= 1 or a "
        "`{{ expression }}` over `context` giving one. Default: all at once.")

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) \
            else value


class StateSpec(Node):
    """A state. Its kind is ``type``, or inferred: with ``states`` it is compound."""

    type: StateType | None = Field(default=None, description="Inferred when absent.")
    description: str | None = None
    tags: list[str] = Field(default_factory=list)
    initial: str | None = Field(default=None, description="Initial child of a compound state.")
    states: dict[str, StateSpec] = Field(default_factory=dict)
    entry: list[str] = Field(default_factory=list, description="Actions run on entry.")
    exit: list[str] = Field(default_factory=list, description="Actions run on exit.")
    on: dict[str, Transitions] = Field(
        default_factory=dict, description="Transitions by event name (dotted; prefix match)."
    )
    always: Transitions = Field(
        default_factory=list, description="Eventless transitions, tried after every step."
    )
    after: dict[str, Transitions] = Field(
        default_factory=dict,
        description="Delayed transitions by duration (500ms, 3m, 1h30m) or context field.",
    )
    history: HistoryDepth | None = Field(
        default=None, description="For type: history, shallow (default) or deep."
    )
    default: str | None = Field(
        default=None, description="For type: history, the state entered when none is recorded."
    )
    invoke: InvokeSpec | None = Field(
        default=None, description="An agent started when the state is entered and "
        "cancelled when it is left; it raises done.invoke.<id> or error.invoke.<id>."
    )

    _lists = field_validator("entry", "exit", "tags", mode="before")(_as_list)

    @field_validator("on", "after", mode="before")
    @classmethod
    def _normalize_events(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {(str(k) if not isinstance(k, str) else k): _as_transitions(v)
                    for k, v in value.items()}
        return value

    @field_validator("always", mode="before")
    @classmethod
    def _normalize_always(cls, value: Any) -> Any:
        return _as_transitions(value) if value is not None else []

    @property
    def kind(self) -> StateType:
        if self.type is not None:
            return self.type
        return "compound" if self.states else "atomic"


class Spec(Node):
    """A machine: the root of a spec file."""

    machine: str = Field(description="Machine name (an identifier).")
    version: int = Field(default=1, description="Spec format version; 1 is the only one.")
    description: str | None = None
    tags: list[str] = Field(default_factory=list)
    context: dict[str, ContextField] = Field(
        default_factory=dict, description="Typed data model of a session."
    )
    initial: str | None = Field(default=None, description="Initial top-level state.")
    states: dict[str, StateSpec] = Field(description="Top-level states by id.")

    _file: str = PrivateAttr(default="<unknown>")
    _lists = field_validator("tags", mode="before")(_as_list)

    @property
    def file(self) -> str:
        return self._file

    def walk_states(self) -> Iterator[tuple[tuple[str, ...], StateSpec]]:
        """Every state with its path of ids from the root, parents before children."""

        def walk(
            states: dict[str, StateSpec], prefix: tuple[str, ...]
        ) -> Iterator[tuple[tuple[str, ...], StateSpec]]:
            for sid, state in states.items():
                yield (*prefix, sid), state
                yield from walk(state.states, (*prefix, sid))

        yield from walk(self.states, ())


StateSpec.model_rebuild()
Spec.model_rebuild()
