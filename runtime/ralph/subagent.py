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
from interlock.runtime.agents.base import TRANSIENT_REASONS
from interlock.runtime.agents.prompts import render_prompt
from interlock.runtime.agents.ralph_protocol import classify_steer
from interlock.runtime.interview.staged import staged_prompt, task_node
from interlock.runtime.ralph.config import RalphConfig
from interlock.runtime.ralph.folder import RalphFolder, Task, write_text
from interlock.runtime.ralph.gates import GateReport, gate_decision
from interlock.runtime.ralph.limits import backoff_delay, is_transient

PROMPTS = Path(__file__).parent / "prompts"
DAY = 86_400.0  # the invoke timeout of an agent when invocation_timeout is off
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

    def folder(c: Call) -> RalphFolder:
        return RalphFolder(root, str(c.context.get("session") or default_session))

    def n(c: Call) -> int:
        return int(c.context.get("iteration") or 1)

    def task_id(c: Call) -> str | None:
        task = c.context.get("task")
        return str(task["id"]) if isinstance(task, dict) and "id" in task else None

    def executor_task(c: Call) -> str | None:
        return task_id(c) if c.context.get("role") == "executor" else None

    # -- steps --------------------------------------------------------------------------

    def read_context(c: Call) -> None:
        ctx = c.context
        ctx["invocation_timeout"] = config.invocation_timeout or DAY
        ctx["gates_timeout"] = sum(g.timeout for g in config.gates) + 60.0
        ctx["python"] = sys.executable
        ctx["workdir"] = str(folder(c).workdir)
        folder(c).open_iteration(n(c))

    def mark_wip(c: Call) -> None:
        ident = executor_task(c)
        if ident is not None:
            folder(c).mark(n(c), ident, "/")

    def staged_node(c: Call) -> str | None:
        ident = executor_task(c)
        if staged is None or ident is None:
            return None
        return task_node(str(c.context.get("session") or default_session), ident)

    def compose_prompt(c: Call) -> None:
        node = staged_node(c)
        correction = staged.staged_config(node) if staged is not None and node else None
        c.context["correction"] = staged_prompt(correction) if correction else None
        c.context["prompt"] = render_prompt(PROMPTS / f"{c.context['role']}.j2",
                                            context=dict(c.context), input=_prompt_input(c),
                                            signals=_signals(c.context))
        # After a STEER stopped the call: what continues the agent's own conversation
        # (the invoke's `continue:`, where its CLI can); the full prompt otherwise.
        steers = c.context.get("steer_messages") or []
        c.context["steer_prompt"] = render_prompt(
            PROMPTS / "steer.j2", context=dict(c.context), input={"steer": steers[-1]},
        ) if c.context.pop("continuing", False) and steers else ""

    def _prompt_input(c: Call) -> dict[str, Any]:
        ctx, where = c.context, folder(c)
        brief = dict(ctx.get("brief") or {})
        base: dict[str, Any] = {
            "session": where.id, "mode": ctx.get("mode"), "task": ctx.get("task"),
            "workdir": str(where.workdir), "knowledge": str(where.iteration(n(c)) / "knowledge"),
            "docs": str(where.docs), "resumed": ctx.get("pause_message") or "",
            "gate_feedback": ctx.get("gate_feedback") or "",
            "approval": brief.get("approval") or "", "answers": brief.get("answers") or "",
            "blockers": list(brief.get("blockers") or []),
            "correction": ctx.get("correction") or "",
        }
        role = ctx.get("role")
        if role == "planner":
            replan = brief.get("replan") if ctx.get("mode") == "replan" else None
            if replan:
                lines = [t["title"] for t in replan.get("remaining", [])]
                base.update(replan=replan, blockers=list(replan.get("blockers", [])))
            else:
                lines = [ln for ln in where.request().splitlines() if ln.strip()]
                base.update(replan={"from": n(c), "remaining": []})
            base["request_lines"] = lines or ["(nothing left to do)"]
        if role == "reviewer" and task_id(c):
            report = where.iteration(n(c)) / "tasks" / f"{task_id(c)}.md"
            base["report"] = report.read_text(encoding="utf-8") if report.exists() else ""
        return base

    # -- the agent call -----------------------------------------------------------------

    def record_call(c: Call) -> None:
        ctx, data = c.context, dict(c.data or {})
        result = dict(data.get("result") or {})
        usage = dict(data.get("usage") or {})
        answer = data.get("answer") if isinstance(data.get("answer"), dict) else None
        ctx["cost_usd"] = float(ctx.get("cost_usd") or 0.0) + float(usage.get("costUsd") or 0)
        text = (yaml.safe_dump(answer, sort_keys=False, allow_unicode=True) if answer
                else str(result.get("stdout") or ""))
        ctx["calls"].append({
            "prompt": ctx["prompt"], "text": text, "usage": usage,
            "exit": result.get("exitCode"), "elapsed": result.get("elapsedTime"),
            "method": result.get("completionMethod"),
            "attempt": int(ctx.get("attempts") or 0) + 1,
            "error": _failure(c) if data.get("reason") else None})
        if data.get("reason") is None:
            ctx["answer"] = answer or {}

    def _failure(c: Call) -> str:
        data = dict(c.data or {})
        reason = data.get("reason")
        if reason == "timeout":
            return f"timed out after {format_duration(float(c.context['invocation_timeout']))}"
        return str(data.get("message") or reason or "the agent call failed")

    def record_stopped_call(c: Call) -> None:
        """The call a signal stopped (its prompt, no answer), for the record."""
        ctx = c.context
        ctx["calls"].append({
            "prompt": ctx["prompt"], "text": "", "usage": {}, "exit": None, "elapsed": None,
            "method": f"{c.event or 'a signal'} ({_message(c)})",
            "attempt": int(ctx.get("attempts") or 0) + 1, "error": None})

    def transient_failure(c: Call) -> bool:
        """A failure to try again: one the CLI called transient (rate limited, the API
        unavailable), or one the retry policy's exit codes or patterns call so; never
        one the user must fix (auth, a refused permission, an unknown model)."""
        data = dict(c.data or {})
        reason = data.get("reason")
        tries = int(c.context.get("attempts") or 0) + 1
        if tries >= config.retry.attempts:
            return False
        if reason in TRANSIENT_REASONS:
            return True
        if reason not in ("exit_nonzero", "spawn_error", "invalid_answer", "agent_error"):
            return False
        result = dict(data.get("result") or {})
        output = f"{result.get('stdout') or ''}\n{result.get('stderr') or ''}"
        exit_code = result.get("exitCode")
        return is_transient(exit_code if exit_code is not None else -1, output, config.retry)

    def schedule_retry(c: Call) -> None:
        c.context["attempts"] = int(c.context.get("attempts") or 0) + 1
        c.context["retry_delay"] = backoff_delay(c.context["attempts"], config.retry, jitter)

    def record_call_failure(c: Call) -> None:
        c.context["error"] = _failure(c)
        c.context["error_reason"] = (c.data or {}).get("reason")

    # -- signals ------------------------------------------------------------------------

    def ingest_info(c: Call) -> None:
        text = _message(c)
        if text and text not in c.context["info_messages"] and text not in c.context["learned"]:
            c.context["learned"].append(text)

    def ingest_steer(c: Call) -> None:
        c.context["steer_messages"].append(_message(c))

    def note_restart(c: Call) -> None:
        c.context["restarts"] = int(c.context.get("restarts") or 0) + 1
        c.context["continuing"] = True
        c.context["attempts"] = 0
        if classify_steer(_message(c)) == "invalidated":
            c.context["steer_branch"] = "invalidated"

    def steer_changes_scope(c: Call) -> bool:
        return classify_steer(_message(c)) == "scope"

    def record_scope_blocker(c: Call) -> None:
        ctx = c.context
        blocker = f"STEER scope change: {_message(c)}"
        ctx["steer_messages"].append(_message(c))
        ctx["blockers"] = [blocker]
        ctx.update(blocked_reason="scope_change", steer_branch="scope")
        ident = executor_task(c)
        if ident is not None:
            folder(c).mark(n(c), ident, "F", blocker)

    def mark_task_aborted(c: Call) -> None:
        ident = executor_task(c)
        if ident is not None:
            folder(c).mark(n(c), ident, "F", "Aborted by signal")

    def record_abort_blocker(c: Call) -> None:
        c.context["blockers"] = ["Aborted by signal"]
        c.context["blocked_reason"] = "aborted"

    def hold_pause(c: Call) -> None:
        c.context["pause_held"] = True
        c.context["held_message"] = (c.data or {}).get("message")

    def pause_is_held(c: Call) -> bool:
        return bool(c.context.get("pause_held"))

    def save_progress(c: Call) -> None:
        where, ident = folder(c), executor_task(c)
        tasks = [Task(t.id, t.title, " ") if t.id == ident and t.marker == "/" else t
                 for t in where.progress(n(c))]
        where.write_progress(n(c), tasks, "Paused by signal.")

    def record_step_failure(c: Call) -> None:
        data = dict(c.data or {})
        c.context["error"] = str(data.get("message") or data.get("error") or "a step failed")

    # -- gates --------------------------------------------------------------------------

    def is_executor(c: Call) -> bool:
        return c.context.get("role") == "executor"

    def needs_gates(c: Call) -> bool:
        answer = c.context.get("answer") or {}
        return (is_executor(c) and bool(config.gates)
                and str(answer.get("status", "done")) == "done")

    def gates_passed(c: Call) -> bool:
        return bool(((c.data or {}).get("answer") or {}).get("passed"))

    def record_gates(c: Call) -> None:
        c.context["gate_runs"] = int(c.context.get("gate_runs") or 0) + 1
        c.context["gate_reports"].append((c.data or {}).get("answer") or {"passed": False})

    def gate_attempts_left(c: Call) -> bool:
        report = GateReport.from_json((c.data or {}).get("answer") or {})
        runs = int(c.context.get("gate_runs") or 0) + 1  # this run is recorded after
        return gate_decision(report, runs, config.gate_attempts).action == "retry"

    def hold_gate_feedback(c: Call) -> None:
        report = GateReport.from_json((c.data or {}).get("answer") or {})
        c.context["gate_feedback"] = report.feedback()
        c.context["attempts"] = 0

    def fail_by_gates(c: Call) -> None:
        reports = c.context["gate_reports"]
        names = sorted({r["name"] for rep in reports for r in rep.get("results") or []
                        if not r.get("passed")})
        c.context["gates_failed"] = True
        c.context["error"] = (f"gates: gates failed {len(reports)} time(s): "
                              f"{', '.join(names) or 'the gates could not run'}")

    def record_gates_error(c: Call) -> None:
        c.context["gate_runs"] = int(c.context.get("gate_runs") or 0) + 1
        c.context["gate_reports"].append({"passed": False, "results": [],
                                          "error": _message(c)})

    def gates_failed(c: Call) -> bool:
        return bool(c.context.get("gates_failed"))

    # -- verify and the records ---------------------------------------------------------

    def verify(c: Call) -> None:
        ctx, where = c.context, folder(c)
        answer = ctx.get("answer") or {}
        ctx["verified"] = True
        node = staged_node(c)
        if ctx.get("correction") and staged is not None and node:
            staged.consume_staged_config(node)  # applied: taken once
        if ctx.get("role") == "reviewer" and task_id(c):
            write_text(where.iteration(n(c)) / "reviews" / f"{task_id(c)}.md",
                       yaml.safe_dump(answer, sort_keys=False, allow_unicode=True))
        ident = executor_task(c)
        if ident is None:
            return
        if ctx.get("steer_branch") is None and answer.get("steer") in BRANCHES:
            ctx["steer_branch"] = answer["steer"]
        if ctx.get("gates_failed"):
            where.mark(n(c), ident, "F", str(ctx["error"]))
        elif answer.get("status") == "blocked":
            blockers = [str(b) for b in answer.get("blockers") or ["blocked"]]
            ctx["blockers"] = blockers
            scope = any(b.startswith("STEER scope change:") for b in blockers)
            ctx["blocked_reason"] = "scope_change" if scope else "blocked"
            where.mark(n(c), ident, "F", blockers[0])
        else:
            where.mark(n(c), ident, "x")
        write_report(c)

    def answer_blocked(c: Call) -> bool:
        answer = c.context.get("answer") or {}
        return is_executor(c) and answer.get("status") == "blocked" \
            and not c.context.get("gates_failed")

    def mark_task_failed(c: Call) -> None:
        ident = executor_task(c)
        if ident is not None:
            folder(c).mark(n(c), ident, "F", str(c.context.get("error") or "failed"))
            write_report(c)

    def write_report(c: Call) -> None:
        """The Executor's report, iterations/<N>/tasks/<task>.md, with the branch taken."""
        ident = executor_task(c)
        if ident is None:
            return
        ctx = c.context
        answer = ctx.get("answer") or {}
        status = ("failed" if ctx.get("error") else
                  "blocked" if ctx.get("blockers") else "completed")
        lines = [f"# {ident}: {ctx['task'].get('title', ident)}", "", f"status: {status}",
                 "", str(answer.get("report") or ctx.get("error") or "")]
        if ctx["steer_messages"]:
            lines += ["", "## STEER", *(f"- {s}" for s in ctx["steer_messages"])]
            branch = BRANCHES.get(str(ctx.get("steer_branch")))
            lines.append(f"- branch taken: {branch or 'none reported by the agent'}")
        if ctx.get("restarts"):
            lines.append(f"- Implement restarted {ctx['restarts']} time(s) by STEER")
        if ctx.get("blockers"):
            lines += ["", "## Blockers", *(f"- {b}" for b in ctx["blockers"])]
        for k, report in enumerate(ctx.get("gate_reports") or [], start=1):
            results = report.get("results") or []
            lines += ["", f"## Gates, run {k}: {'passed' if report.get('passed') else 'failed'}"]
            lines += [f"- {r['name']}: exit {r['exit']}" for r in results]
            if report.get("error"):
                lines.append(f"- {report['error']}")
        write_text(folder(c).iteration(n(c)) / "tasks" / f"{ident}.md",
                   "\n".join(lines).rstrip() + "\n")

    def write_record(c: Call) -> None:
        """iterations/<N>/invocations/<seq>-<role>.md: every call's prompt, answer, usage."""
        ctx = c.context
        seq, role = int(ctx.get("seq") or 0), str(ctx.get("role"))
        final = c.target or "ended"  # the final state whose entry this is
        head = f"# Invocation {seq}: {ctx.get('agent')}" + (
            f" on {task_id(c)}" if task_id(c) else "")
        parts = [head, "", f"outcome: {final}" + (
            f" ({ctx['blocked_reason']})" if ctx.get("blocked_reason") else "")]
        for k, call in enumerate(ctx["calls"], start=1):
            usage = yaml.safe_dump(call.get("usage") or {}, default_flow_style=True).strip()
            elapsed = float(call.get("elapsed") or 0.0)
            ended = (f"exit {call['exit']}" if call.get("exit") is not None
                     else f"ended by {call.get('method') or 'a stop'}")
            parts += ["", f"## Call {k} (attempt {call.get('attempt', 1)}, {elapsed:.3f}s, "
                      f"{ended})", "", "### Prompt", "", "```",
                      str(call["prompt"]).rstrip(), "```", "", "### Answer", "", "```",
                      str(call.get("text") or "").rstrip(), "```", "", f"usage: {usage}"]
            if call.get("error"):
                parts.append(f"error: {call['error']}")
        if ctx.get("error") and not ctx["calls"]:
            parts += ["", f"error: {ctx['error']}"]
        write_text(folder(c).iteration(n(c)) / "invocations" / f"{seq:03d}-{role}.md",
                   "\n".join(parts) + "\n")

    return {
        "read_context": read_context, "mark_wip": mark_wip, "compose_prompt": compose_prompt,
        "record_call": record_call, "transient_failure": transient_failure,
        "record_stopped_call": record_stopped_call,
        "schedule_retry": schedule_retry, "record_call_failure": record_call_failure,
        "ingest_info": ingest_info, "ingest_steer": ingest_steer, "note_restart": note_restart,
        "steer_changes_scope": steer_changes_scope,
        "record_scope_blocker": record_scope_blocker, "mark_task_aborted": mark_task_aborted,
        "record_abort_blocker": record_abort_blocker, "hold_pause": hold_pause,
        "pause_is_held": pause_is_held, "save_progress": save_progress,
        "record_step_failure": record_step_failure, "is_executor": is_executor,
        "needs_gates": needs_gates, "gates_passed": gates_passed, "record_gates": record_gates,
        "gate_attempts_left": gate_attempts_left, "hold_gate_feedback": hold_gate_feedback,
        "fail_by_gates": fail_by_gates, "record_gates_error": record_gates_error,
        "gates_failed": gates_failed, "verify": verify, "answer_blocked": answer_blocked,
        "mark_task_failed": mark_task_failed, "write_report": write_report,
        "write_record": write_record,
    }


def _signals(ctx: Any) -> list[dict[str, Any]]:
    """The INFO and STEER messages this invocation's prompt shows."""
    infos = [*ctx.get("info_messages", []),
             *(i for i in ctx.get("learned", []) if i not in ctx.get("info_messages", []))]
    return ([{"type": "INFO", "message": m} for m in infos]
            + [{"type": "STEER", "message": m} for m in ctx.get("steer_messages", [])])
