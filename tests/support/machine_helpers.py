"""Child machine tests (``invoke: machine:``): a parent spec invoking a child spec whose
state invokes the fixture agent, and a machine resolver that knows that child."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from interlock.machines import Call
from interlock.runtime.agents.invoke import process_handlers
from interlock.runtime.engine.invoke_machine import ChildMachine, MachineError, MachineRequest
from interlock.runtime.engine.runner import Runner
from interlock.runtime.store.base import Store

from support.invoke_helpers import run_until


def child_spec(argv: list[str], *, fail_on: str = "never") -> str:
    """asking (invokes the agent) -> answered | refused; `boom` raises in an action."""
    return f"""
machine: child
initial: asking
context:
  topic: {{type: str, default: none}}
  task: {{type: any, default: null}}
  answer: {{type: any, default: null}}
states:
  asking:
    invoke:
      id: agent
      command: {json.dumps(argv)}
      prompt: "Topic {{{{ context.topic }}}} task {{{{ context.task.id }}}}"
    on:
      done.invoke.agent: {{target: answered, actions: [keep_answer]}}
      error.invoke.agent: refused
      {fail_on}: {{actions: [explode]}}
  answered: {{type: final}}
  refused: {{type: final}}
"""


PARENT = """
machine: parent
initial: working
context:
  topic: {type: str, default: parsing}
  task: {type: any, default: {id: T7, title: parse}}
  seen: {type: any, default: null}
states:
  working:
    invoke:
      id: step
      machine: child
      input: {topic: "{{ context.topic }}", task: "{{ context.task }}"}
      on_resume: ON_RESUME
    on:
      done.invoke.step.answered: {target: passed, actions: [keep]}
      done.invoke.step: {target: other, actions: [keep]}
      error.invoke.step: {target: failed, actions: [keep]}
      leave: left
  passed: {type: final}
  other: {type: final}
  failed: {type: final}
  left: {type: final}
"""


def fanout_parent(*, concurrency: int = 2, topic: str = "{{ item.id }}") -> str:
    """A parent that fans the child machine out over three tasks (``input``: ``topic``
    and the task itself), at most ``concurrency`` at once; its ``.all`` data is kept as
    ``seen``, then it is final."""
    return f"""
machine: parent
initial: working
context:
  tasks: {{type: list, default: [{{id: T1, n: 0}}, {{id: T2, n: 1}}, {{id: T3, n: 2}}]}}
  seen: {{type: any, default: null}}
states:
  working:
    invoke:
      id: step
      machine: child
      each: "{{{{ context.tasks }}}}"
      concurrency: {concurrency}
      input: {{topic: "{topic}", task: "{{{{ item }}}}"}}
    on:
      done.invoke.step.all: {{target: passed, actions: [keep]}}
      done.invoke.step: null
      error.invoke.step: null
  passed: {{type: final}}
"""


def keep(call: Call) -> None:
    call.context["seen"] = dict(call.data)


def keep_answer(call: Call) -> None:
    call.context["answer"] = call.data.get("answer")


def explode(call: Call) -> None:
    raise RuntimeError("the child's action broke")


class Machines:
    """A machine resolver that knows one child spec and counts its calls."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.calls: list[tuple[str, str]] = []
        self.requests: list[MachineRequest] = []

    def __call__(self, request: MachineRequest) -> ChildMachine:
        self.calls.append((request.name, request.parent_spec))
        self.requests.append(request)
        if request.name != "child":
            raise MachineError(f"no machine {request.name!r}")
        return ChildMachine(self.spec, str(Path(request.parent_spec).parent / "child.yaml"),
                            bindings={"keep_answer": keep_answer, "explode": explode})


def open_parent(store: Store, tmp_path: Path, machines: Machines, *,
                on_resume: str = "adopt", spec: str | None = None,
                owner: str | None = None) -> Runner:
    text = (spec or PARENT).replace("ON_RESUME", on_resume)
    runner, _ = Runner.open(store, text, str(tmp_path / "parent.yaml"), session_id="p1",
                            bindings={"keep": keep}, folder=tmp_path / "session",
                            machines=machines, owner=owner, invokers=process_handlers())
    return runner


def run_parent(store: Store, tmp_path: Path, machines: Machines, **options: Any) -> Runner:
    """Open the parent (:func:`open_parent`) and run it to a final state; the closed
    runner."""
    runner = open_parent(store, tmp_path, machines, **options)
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    return runner
