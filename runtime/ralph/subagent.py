"""The guards and actions of a subagent session (specs/ralph_subagent.yaml).

A subagent invocation is a session of ``ralph_subagent`` that the orchestrator invokes as a
child machine; its ``implementing`` state invokes the role's agent (a process) and its
``gating`` state the backpressure gates. These bindings only keep its context and the
session folder in step (progress.md markers, the Executor's report, the review, the
invocation record); they never run anything. The folder is the one of the Ralph session
named by ``context.session`` under ``root``.

The STEER decision tree (seed 004 §3.1): a message starting ``scope:`` is a scope change
the engine enforces at once (the call is stopped, the task blocked and escalated); any
other STEER stops the call and restarts Implement with the message among the constraints:
``redo:`` says the work is invalidated, otherwise the agent decides whether the message
invalidates its work, adds to it, or changes the scope (it then answers blocked with
``STEER scope change: ...``); the report records the branch taken.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any, Protocol

import yaml

from interlock.machines.bindings import Bindings, Call
from interlock.machines.durations import format_duration
from interlock.runtime.agents.ralph_protocol import classify_steer
from interlock.runtime.config.ralph import RalphConfig
from interlock.runtime.engine.agent_output import TRANSIENT_REASONS
from interlock.runtime.engine.prompts import render_prompt
from interlock.runtime.ralph.folder import RalphFolder, Task, write_text
from interlock.runtime.ralph.gates import GateReport, gate_decision
from interlock.runtime.ralph.isolation import STAGED_IN_WORKTREE, Isolation
from interlock.runtime.ralph.limits import backoff_delay, is_transient
from interlock.runtime.ralph.state import CallRecord, SubagentContext, guard, spent, typed
from interlock.runtime.signals.staged import staged_prompt, task_node

PROMPTS = Path(__file__).parent / "prompts"
DAY = 86_400.0  # the invoke timeout of an agent when invocation_timeout is off
State = SubagentContext
BRANCHES = {"invalidated": "(a) work invalidated: Implement restarted",
            "additive": "(b) additive: appended to the constraints",
            "scope": "(c) scope change: blocked, escalated"}


def _message(c: Call) -> str:
    return str((c.data or {}).get("message") or "")


class StagedConfigs(Protocol):
    """Where a review stages corrections (the store: ``staged_configs``)."""

    def staged_config(self, node: str) -> dict[str, Any] | None: ...

    def consume_staged_config(self, node: str) -> dict[str, Any] | None: ...


def subagent_bindings(root: Path, config: RalphConfig, *, default_session: str = "",
                      staged: StagedConfigs | None = None,
                      rng: random.Random | None = None) -> Bindings:
    """The bindings of every subagent session of the Ralph sessions under ``root``
    (``default_session``: the Ralph session of one whose ``session`` is empty).
    ``staged``: the corrections staged by ``interlock ralph review ID TASK``; the
    Executor's prompt for that task shows one, and Verify takes it (seed 000's unit)."""
    jitter = rng or random.Random()

    def folder(s: State) -> RalphFolder:
        return RalphFolder(root, s.session or default_session)

    # -- steps --------------------------------------------------------------------------

    def read_context(c: Call, s: State) -> None:
        s.invocation_timeout = config.invocation_timeout or DAY
        s.gates_timeout = sum(g.timeout for g in config.gates) + 60.0
        s.python = sys.executable
        if s.workdir in ("", "."):  # else the task's worktree, given by the orchestrator
            s.workdir = str(folder(s).workdir)
        folder(s).open_iteration(s.iteration)

    def mark_wip(c: Call, s: State) -> None:
        if s.executor_task is not None:
            folder(s).mark(s.iteration, s.executor_task, "/")

    def staged_node(s: State) -> str | None:
        if staged is None or s.executor_task is None:
            return None
        return task_node(s.session or default_session, s.executor_task)

    def compose_prompt(c: Call, s: State) -> None:
        node = staged_node(s)
        correction = staged.staged_config(node) if staged is not None and node else None
        s.correction = staged_prompt(correction) if correction else None
        continuing, s.continuing = s.continuing, False
        context = _as_dict(c, s)
        s.prompt = render_prompt(PROMPTS / f"{s.role}.j2", context=context,
                                 input=_prompt_input(s), signals=_signals(s))
        # After a STEER stopped the call: what continues the agent's own conversation
        # (the invoke's `continue:`, where its CLI can); the full prompt otherwise.
        s.steer_prompt = render_prompt(
            PROMPTS / "steer.j2", context=context, input={"steer": s.steer_messages[-1]},
        ) if continuing and s.steer_messages else ""

    def _prompt_input(s: State) -> dict[str, Any]:
        where, n = folder(s), s.iteration
        brief = s.brief
        base: dict[str, Any] = {
            "session": where.id, "mode": s.mode,
            "task": s.task.model_dump(mode="json", exclude_unset=True) if s.task else None,
            "workdir": s.workdir if s.workdir not in ("", ".") else str(where.workdir),
            "knowledge": str(_knowledge(where, n, s.workdir)),
            "docs": str(where.docs), "resumed": s.pause_message or "",
            "gate_feedback": s.gate_feedback or "",
            "approval": brief.approval or "", "answers": brief.answers or "",
            "blockers": list(brief.blockers),
            "correction": s.correction or "",
            "conflicts": list(brief.conflicts),
        }
        if s.role == "planner":
            replan = brief.replan if s.mode == "replan" else None
            if replan:
                lines = [t.title for t in replan.remaining]
                base.update(replan=replan.model_dump(mode="json", by_alias=True,
                                                     exclude_unset=True),
                            blockers=list(replan.blockers))
            else:
                lines = [ln for ln in where.request().splitlines() if ln.strip()]
                base.update(replan={"from": n, "remaining": []})
            base["request_lines"] = lines or ["(nothing left to do)"]
            base["batch_size"] = config.planned_batch_size
        if s.role == "reviewer" and s.task_id:
            report = where.iteration(n) / "tasks" / f"{s.task_id}.md"
            base["report"] = report.read_text(encoding="utf-8") if report.exists() else ""
            own = s.workdir not in ("", ".", str(where.workdir))  # the task's own worktree
            base["diff"] = Isolation(where, worktrees=True).diff(s.task_id) if own else ""
        return base

    # -- the agent call -----------------------------------------------------------------

    def record_call(c: Call, s: State) -> None:
        data = dict(c.data or {})
        result = dict(data.get("result") or {})
        usage = dict(data.get("usage") or {})
        answer = data.get("answer") if isinstance(data.get("answer"), dict) else None
        text = (yaml.safe_dump(answer, sort_keys=False, allow_unicode=True) if answer
                else str(result.get("stdout") or ""))
        s.calls.append(CallRecord(
            prompt=s.prompt, text=text, usage=usage, exit=result.get("exitCode"),
            elapsed=result.get("elapsedTime"), method=result.get("completionMethod"),
            attempt=s.attempts + 1, error=_failure(c, s) if data.get("reason") else None))
        s.cost_usd = spent(s.calls).cost_usd or 0.0
        if data.get("reason") is None:
            s.answer = answer or {}

    def _failure(c: Call, s: State) -> str:
        data = dict(c.data or {})
        reason = data.get("reason")
        if reason == "timeout":
            return f"timed out after {format_duration(float(s.invocation_timeout))}"
        return str(data.get("message") or reason or "the agent call failed")

    def record_stopped_call(c: Call, s: State) -> None:
        """The call a signal stopped (its prompt, no answer), for the record."""
        s.calls.append(CallRecord(
            prompt=s.prompt, text="", usage={}, exit=None, elapsed=None,
            method=f"{c.event or 'a signal'} ({_message(c)})", attempt=s.attempts + 1,
            error=None))

    def transient_failure(c: Call, s: State) -> bool:
        """A failure to try again: one the CLI called transient (rate limited, the API
        unavailable), or one the retry policy's exit codes or patterns call so; never
        one the user must fix (auth, a refused permission, an unknown model)."""
        data = dict(c.data or {})
        reason = data.get("reason")
        if s.attempts + 1 >= config.retry.attempts:
            return False
        if reason in TRANSIENT_REASONS:
            return True
        if reason not in ("exit_nonzero", "spawn_error", "invalid_answer", "agent_error"):
            return False
        result = dict(data.get("result") or {})
        output = f"{result.get('stdout') or ''}\n{result.get('stderr') or ''}"
        exit_code = result.get("exitCode")
        return is_transient(exit_code if exit_code is not None else -1, output, config.retry)

    def schedule_retry(c: Call, s: State) -> None:
        s.attempts += 1
        s.retry_delay = backoff_delay(s.attempts, config.retry, jitter)

    def record_call_failure(c: Call, s: State) -> None:
        s.error = _failure(c, s)
        s.error_reason = (c.data or {}).get("reason")

    # -- signals ------------------------------------------------------------------------

    def ingest_info(c: Call, s: State) -> None:
        text = _message(c)
        if text and text not in s.info_messages and text not in s.learned:
            s.learned.append(text)

    def ingest_steer(c: Call, s: State) -> None:
        s.steer_messages.append(_message(c))

    def note_restart(c: Call, s: State) -> None:
        s.restarts += 1
        s.continuing = True
        s.attempts = 0
        if classify_steer(_message(c)) == "invalidated":
            s.steer_branch = "invalidated"

    def steer_changes_scope(c: Call, s: State) -> bool:
        return classify_steer(_message(c)) == "scope"

    def record_scope_blocker(c: Call, s: State) -> None:
        blocker = f"STEER scope change: {_message(c)}"
        s.steer_messages.append(_message(c))
        s.blockers = [blocker]
        s.blocked_reason, s.steer_branch = "scope_change", "scope"
        if s.executor_task is not None:
            folder(s).mark(s.iteration, s.executor_task, "F", blocker)

    def mark_task_aborted(c: Call, s: State) -> None:
        if s.executor_task is not None:
            folder(s).mark(s.iteration, s.executor_task, "F", "Aborted by signal")

    def record_abort_blocker(c: Call, s: State) -> None:
        s.blockers = ["Aborted by signal"]
        s.blocked_reason = "aborted"

    def hold_pause(c: Call, s: State) -> None:
        s.pause_held = True
        s.held_message = (c.data or {}).get("message")

    def pause_is_held(c: Call, s: State) -> bool:
        return s.pause_held

    def save_progress(c: Call, s: State) -> None:
        ident = s.executor_task
        folder(s).edit_progress(s.iteration, lambda tasks: [
            Task(t.id, t.title, " ") if t.id == ident and t.marker == "/" else t
            for t in tasks], "Paused by signal.")

    def record_step_failure(c: Call, s: State) -> None:
        data = dict(c.data or {})
        s.error = str(data.get("message") or data.get("error") or "a step failed")

    # -- gates --------------------------------------------------------------------------

    def is_executor(c: Call, s: State) -> bool:
        return s.role == "executor"

    def needs_gates(c: Call, s: State) -> bool:
        answer = s.answer or {}
        return (s.role in ("executor", "merger") and bool(config.gates)
                and str(answer.get("status", "done")) == "done")

    def gates_passed(c: Call, s: State) -> bool:
        return bool(((c.data or {}).get("answer") or {}).get("passed"))

    def record_gates(c: Call, s: State) -> None:
        s.gate_runs += 1
        s.gate_reports.append((c.data or {}).get("answer") or {"passed": False})

    def gate_attempts_left(c: Call, s: State) -> bool:
        report = GateReport.from_json((c.data or {}).get("answer") or {})
        runs = s.gate_runs + 1  # this run is recorded after
        return gate_decision(report, runs, config.gate_attempts).action == "retry"

    def hold_gate_feedback(c: Call, s: State) -> None:
        report = GateReport.from_json((c.data or {}).get("answer") or {})
        s.gate_feedback = report.feedback()
        s.attempts = 0

    def fail_by_gates(c: Call, s: State) -> None:
        reports = s.gate_reports
        names = sorted({r["name"] for rep in reports for r in rep.get("results") or []
                        if not r.get("passed")})
        s.gates_failed = True
        s.error = (f"gates: gates failed {len(reports)} time(s): "
                   f"{', '.join(names) or 'the gates could not run'}")

    def record_gates_error(c: Call, s: State) -> None:
        s.gate_runs += 1
        s.gate_reports.append({"passed": False, "results": [], "error": _message(c)})

    def gates_failed(c: Call, s: State) -> bool:
        return s.gates_failed

    # -- verify and the records ---------------------------------------------------------

    def verify(c: Call, s: State) -> None:
        where = folder(s)
        answer = s.answer or {}
        s.verified = True
        node = staged_node(s)
        if s.correction and staged is not None and node:
            staged.consume_staged_config(node)  # applied: taken once
        if s.role == "reviewer" and s.task_id:
            write_text(where.iteration(s.iteration) / "reviews" / f"{s.task_id}.md",
                       yaml.safe_dump(answer, sort_keys=False, allow_unicode=True))
        ident = s.executor_task
        if ident is None:
            return
        if s.steer_branch is None and answer.get("steer") in BRANCHES:
            s.steer_branch = answer["steer"]
        if s.gates_failed:
            where.mark(s.iteration, ident, "F", str(s.error))
        elif answer.get("status") == "blocked":
            blockers = [str(b) for b in answer.get("blockers") or ["blocked"]]
            s.blockers = blockers
            scope = any(b.startswith("STEER scope change:") for b in blockers)
            s.blocked_reason = "scope_change" if scope else "blocked"
            where.mark(s.iteration, ident, "F", blockers[0])
        else:
            where.mark(s.iteration, ident, "x")
        _write_report(s)

    def answer_blocked(c: Call, s: State) -> bool:
        answer = s.answer or {}
        return s.role == "executor" and answer.get("status") == "blocked" \
            and not s.gates_failed

    def mark_task_failed(c: Call, s: State) -> None:
        if s.executor_task is not None:
            folder(s).mark(s.iteration, s.executor_task, "F", str(s.error or "failed"))
            _write_report(s)

    def write_report(c: Call, s: State) -> None:
        _write_report(s)

    def _write_report(s: State) -> None:
        """The Executor's report, iterations/<N>/tasks/<task>.md, with the branch taken."""
        ident = s.executor_task
        if ident is None or s.task is None:
            return
        answer = s.answer or {}
        status = ("failed" if s.error else "blocked" if s.blockers else "completed")
        lines = [f"# {ident}: {s.task.title or ident}", "", f"status: {status}",
                 "", str(answer.get("report") or s.error or "")]
        if s.steer_messages:
            lines += ["", "## STEER", *(f"- {m}" for m in s.steer_messages)]
            branch = BRANCHES.get(str(s.steer_branch))
            lines.append(f"- branch taken: {branch or 'none reported by the agent'}")
        if s.restarts:
            lines.append(f"- Implement restarted {s.restarts} time(s) by STEER")
        if s.blockers:
            lines += ["", "## Blockers", *(f"- {b}" for b in s.blockers)]
        for k, report in enumerate(s.gate_reports, start=1):
            results = report.get("results") or []
            lines += ["", f"## Gates, run {k}: {'passed' if report.get('passed') else 'failed'}"]
            lines += [f"- {r['name']}: exit {r['exit']}" for r in results]
            if report.get("error"):
                lines.append(f"- {report['error']}")
        write_text(folder(s).iteration(s.iteration) / "tasks" / f"{ident}.md",
                   "\n".join(lines).rstrip() + "\n")

    def write_record(c: Call, s: State) -> None:
        """iterations/<N>/invocations/<seq>-<role>.md: every call's prompt, answer, usage."""
        final = c.target or "ended"  # the final state whose entry this is
        head = f"# Invocation {s.seq}: {s.agent}" + (f" on {s.task_id}" if s.task_id else "")
        parts = [head, "", f"outcome: {final}" + (
            f" ({s.blocked_reason})" if s.blocked_reason else "")]
        for k, call in enumerate(s.calls, start=1):
            usage = yaml.safe_dump(call.usage, default_flow_style=True).strip()
            elapsed = float(call.elapsed or 0.0)
            ended = (f"exit {call.exit}" if call.exit is not None
                     else f"ended by {call.method or 'a stop'}")
            parts += ["", f"## Call {k} (attempt {call.attempt}, {elapsed:.3f}s, "
                      f"{ended})", "", "### Prompt", "", "```",
                      call.prompt.rstrip(), "```", "", "### Answer", "", "```",
                      call.text.rstrip(), "```", "", f"usage: {usage}"]
            if call.error:
                parts.append(f"error: {call.error}")
        if s.error and not s.calls:
            parts += ["", f"error: {s.error}"]
        write_text(folder(s).iteration(s.iteration) / "invocations" / f"{s.seq:03d}-{s.role}.md",
                   "\n".join(parts) + "\n")

    actions = {
        "read_context": read_context, "mark_wip": mark_wip, "compose_prompt": compose_prompt,
        "record_call": record_call, "record_stopped_call": record_stopped_call,
        "schedule_retry": schedule_retry, "record_call_failure": record_call_failure,
        "ingest_info": ingest_info, "ingest_steer": ingest_steer, "note_restart": note_restart,
        "record_scope_blocker": record_scope_blocker, "mark_task_aborted": mark_task_aborted,
        "record_abort_blocker": record_abort_blocker, "hold_pause": hold_pause,
        "save_progress": save_progress, "record_step_failure": record_step_failure,
        "record_gates": record_gates, "hold_gate_feedback": hold_gate_feedback,
        "fail_by_gates": fail_by_gates, "record_gates_error": record_gates_error,
        "verify": verify, "mark_task_failed": mark_task_failed, "write_report": write_report,
        "write_record": write_record,
    }
    guards = {
        "transient_failure": transient_failure, "steer_changes_scope": steer_changes_scope,
        "pause_is_held": pause_is_held, "is_executor": is_executor,
        "needs_gates": needs_gates, "gates_passed": gates_passed,
        "gate_attempts_left": gate_attempts_left, "gates_failed": gates_failed,
        "answer_blocked": answer_blocked,
    }
    return {**{name: typed(State, fn) for name, fn in actions.items()},
            **{name: guard(State, fn) for name, fn in guards.items()}}


def _as_dict(c: Call, s: State) -> dict[str, Any]:
    """The context as the prompt templates read it: the session's dict with the typed
    fields as they stand now."""
    return {**c.context, **s.model_dump(mode="json", by_alias=True, exclude_unset=True)}


def _signals(s: State) -> list[dict[str, Any]]:
    """The INFO and STEER messages this invocation's prompt shows."""
    infos = [*s.info_messages, *(i for i in s.learned if i not in s.info_messages)]
    return ([{"type": "INFO", "message": m} for m in infos]
            + [{"type": "STEER", "message": m} for m in s.steer_messages])


def _knowledge(where: RalphFolder, n: int, workdir: str) -> Path:
    """Where an agent stages knowledge notes: the iteration's knowledge folder, or, for a
    task working in its own worktree, :data:`STAGED_IN_WORKTREE` inside it (an agent CLI
    may write only under its working folder; the runner moves the notes to the
    iteration's folder when the task ends: :meth:`Isolation.settle`)."""
    if workdir not in ("", ".", str(where.workdir)):
        return Path(workdir) / STAGED_IN_WORKTREE
    return where.iteration(n) / "knowledge"
