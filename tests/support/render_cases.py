"""Small specs that exercise every drawing rule; shared by the renderer tests."""

from __future__ import annotations

import functools
from pathlib import Path

from interlock.machines import MachineIR, SpecError, build_ir, load, loads
from interlock.machines.yamlsrc import too_deep_for_libyaml

from support.paths import ROOT, builtin_spec_paths

FLAT = """\
machine: door
description: A door with a lock.
context:
  close_after: {type: duration, default: 30s}
initial: closed
states:
  closed:
    on:
      open: {target: opened, guard: "!locked", actions: [log_open, count]}
      lock: {guard: has_key, target: locked}
  locked:
    on: {unlock: closed}
  opened:
    entry: [start_timer]
    exit: stop_timer
    after:
      close_after: closed
      90: {target: alarm, guard: "!attended"}
    on:
      draft: {actions: [note_draft]}
      tick: null
  alarm:
    always:
      - {guard: silenced, target: closed, actions: [reset]}
      - {target: broken}
  broken: {type: final}
"""

COMPOUND = """\
machine: job
initial: running
states:
  running:
    entry: [start]
    initial: fetching
    on: {cancel: cancelled}
    states:
      fetching:
        on: {fetched: parsing, failed: error}
      parsing:
        on: {parsed: done}
      done: {type: final}
  cancelled: {type: final}
  error:
    on: {retry: running}
"""

PARALLEL = """\
machine: player
initial: playing
states:
  playing:
    type: parallel
    on: {stop: stopped}
    states:
      audio:
        initial: muted
        states:
          muted: {on: {unmute: loud}}
          loud: {on: {mute: muted}}
      video:
        initial: sd
        states:
          sd: {on: {upgrade: hd}}
          hd: {on: {downgrade: sd, overheat: stopped}}
  stopped:
    on: {play: playing}
"""

HISTORY = """\
machine: editor
initial: editing
states:
  editing:
    initial: typing
    on: {help: help}
    states:
      back: {type: history, default: typing}
      deep_back: {type: history, history: deep, default: typing}
      typing: {on: {select: selecting}}
      selecting:
        initial: word
        states:
          word: {on: {grow: line}}
          line: {}
  help:
    on: {close: back, close_all: deep_back}
"""

# Ids that Mermaid or Graphviz cannot take as they are, and labels full of syntax.
AWKWARD = r"""
machine: awkward
initial: end
states:
  end:
    on:
      "go: now; [x] {y} #1 %% \"q\" 'z' <b> & | \\ ~ `c` * _u_ direction TB":
        target: state
        guard: "!ok-ish"
        actions: ["a:b", "c;d", "--> e"]
  state:
    on: {"-->": note, default: default}
  note:
    initial: my-state
    states:
      my-state: {on: {"e.v": "a.b"}}
      a.b: {on: {x: "1st"}}
      1st: {type: final}
  default:
    on: {again: root_start, "::x": "état"}
  root_start:
    on: {fwd: note_start}
  note_start:
    on: {fwd: "s_end"}
  s_end:
    on: {z: "état"}
  "état":
    description: "A description with \"quotes\", <tags> & a backslash \\"
    entry: ["ent\\ry"]
    on: {"\\": end}
"""

# A spec with faults lint reports: unknown targets, no initial, duplicate ids.
BROKEN = """\
machine: broken
states:
  a:
    on: {go: nowhere, back: b}
  b:
    initial: gone
    states:
      c: {on: {up: a}}
      d: {}
"""

# Invoked agents: an agent, a command, an id that is not the state's, parallel invokes.
INVOKE = """\
machine: crew
initial: working
states:
  working:
    entry: [log_start]
    invoke: {id: work, agent: executor, prompt: "Task: {{ context.task }}"}
    exit: [log_stop]
    on:
      done.invoke.work: reviewing
      error.invoke.work: failed
  reviewing:
    type: parallel
    invoke: {agent: "lead:reviewer"}
    on: {error.invoke: failed}
    states:
      security:
        initial: scanning
        states:
          scanning:
            invoke: {command: ["/usr/bin/env", "semgrep", "--config=auto"]}
            on: {done.invoke.scanning: scanned}
          scanned: {type: final}
      style:
        initial: linting
        states:
          linting:
            invoke: {id: lint, command: [ruff, check]}
            on: {done.invoke.lint: linted}
          linted: {type: final}
  failed: {type: final}
"""

# Fan-outs (each:): a machine per item of a context list, at most N at once (the
# container's title carries it), and a command per item of a literal list, all at once.
FANOUT = """\
machine: batches
context:
  batch: {type: list, default: []}
  parallel: {type: int, default: 2}
initial: executing
states:
  executing:
    initial: running
    invoke:
      id: executors
      machine: ralph_subagent
      each: "{{ context.batch }}"
      concurrency: "{{ context.parallel }}"
      input: {task: "{{ item }}", number: "{{ index + 1 }}"}
    on:
      done.invoke.executors.all: checking
      error.invoke.executors: {actions: [note]}
    states:
      running: {}
  checking:
    invoke:
      id: check
      command: [make, "{{ item }}"]
      prompt: "Check {{ item }} ({{ index }} of {{ context.batch | length }})"
      each: [lint, test, docs]
    on:
      done.invoke.check.all: done
      error.invoke.check: done
  done: {type: final}
"""

CASES: dict[str, str] = {
    "flat": FLAT,
    "compound": COMPOUND,
    "parallel": PARALLEL,
    "history": HISTORY,
    "awkward": AWKWARD,
    "broken": BROKEN,
    "invoke": INVOKE,
    "fanout": FANOUT,
}


def case(name: str) -> MachineIR:
    return build_ir(loads(CASES[name], f"<{name}>"))


def builtin_irs() -> list[tuple[str, MachineIR]]:
    """Every built-in spec (globbed now: specs/ is still growing)."""
    return [(p.name, build_ir(load(p))) for p in builtin_spec_paths()]


def broken_corpus_irs() -> list[tuple[str, MachineIR]]:
    """The lint corpus specs that load (their faults are lint's; drawing must not fail).
    Text nested deeper than libyaml takes is not tried: it nests far beyond MAX_DEPTH, so
    it never loads, and PyYAML's Python scanner takes most of a second to say so (in every
    pytest worker's collection; test_broken_specs checks that file's diagnostic)."""
    out = []
    for path in sorted((ROOT / "tests" / "machines" / "broken").glob("*.yaml")):
        if too_deep_for_libyaml(path.read_text(encoding="utf-8", errors="replace")):
            continue
        try:
            out.append((path.name, build_ir(load(path))))
        except SpecError:
            continue
    return out


@functools.cache
def all_irs() -> tuple[tuple[str, MachineIR], ...]:
    """The cases, the built-in specs and the loadable broken corpus, built once per
    process (the IRs are frozen): collection and several tests read them."""
    return tuple([(name, case(name)) for name in CASES] + builtin_irs()
                 + [(f"broken/{n}", ir) for n, ir in broken_corpus_irs()])


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
