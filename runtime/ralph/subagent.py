"""A subagent's lifecycle (specs/ralph_subagent.yaml), run in the runner's own process.

Step 0 poll, Read Context, (Executor: Mark WIP), Implement — the agent call, polled
mid-execution (Step 3.5) — and Verify, with a poll of ``signals/inputs/`` at every step
boundary for the universal signals targeted at ALL or this subagent's identity:

- ABORT: the agent's process group is stopped at once, an in-progress task becomes
  ``[F] Aborted by signal``, the subagent returns blocked (reason ``aborted``);
- PAUSE: the running agent finishes its step, progress.md says "Paused by signal", the
  subagent returns paused (re-invoked on resume with the pause message);
- STEER: the implementation step restarts with the message in the prompt; which branch of
  seed 004's decision tree applies (work invalidated, additive, scope change) is the
  agent's call, recorded in the report; a scope change returns blocked;
- INFO: added to the facts of this and every later invocation.

Running the lifecycle in-process (a coroutine, not a python process per subagent) keeps a
subagent invocation's overhead to a few milliseconds: see docs/ralph.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from interlock.runtime.agents.config import AgentConfig
from interlock.runtime.agents.prompts import render_prompt
from interlock.runtime.host.owners import default_owner
from interlock.runtime.ralph.agent_call import AgentCall, Caller, call_agent
from interlock.runtime.ralph.config import IDENTITIES, RalphConfig
from interlock.runtime.ralph.folder import RalphFolder, Task, now_iso, write_text
from interlock.runtime.ralph.gates import gate_decision, run_gates
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import UNIVERSAL_TYPES, Signal, SignalError, parse_signal

PROMPTS = Path(__file__).parent / "prompts"
POLL_EVERY = 0.02  # mid-execution poll (Step 3.5), seconds


def take_signals(mailbox: Mailbox, identity: str, owner: str,
                 types: tuple[str, ...] = UNIVERSAL_TYPES,
                 action: str = "taken by the subagent") -> list[Signal]:
    """Claim and archive (``processed/`` with handling metadata) the signals of ``types``
    targeted at ALL or ``identity``, oldest first; others stay in ``inputs/``."""
    taken: list[Signal] = []
    for name in mailbox.pending():
        raw = mailbox.peek(name, 64 * 1024)
        if raw is None:
            continue
        try:
            signal = parse_signal(raw, name)
        except SignalError:
            continue  # the orchestrator's poll quarantines malformed files
        if signal.type not in types or signal.target not in ("ALL", identity):
            continue
        claim = mailbox.claim(name, owner)
        if claim is None:
            continue
        mailbox.finish(claim, {"handled_by": identity, "handled_at": now_iso(),
                               "action_taken": _action(signal, action)})
        taken.append(signal)
    return taken


def _action(signal: Signal, default: str) -> str:
    return {"ABORT": "process group stopped; in-progress task marked [F]",
            "PAUSE": "step finished; progress saved (Paused by signal)",
            "STEER": "implementation step restarted with the message",
            "INFO": "added to the context of this and later invocations"}.get(
                signal.type, default)


@dataclass(slots=True)
class Outcome:
    """What the subagent returns to the orchestrator (the data of ``subagent.<status>``)."""

    status: str  # completed | blocked | paused | failed
    answer: dict[str, Any] | None = None
    report: str | None = None
    blockers: list[str] = field(default_factory=list)
    blocked_reason: str | None = None
    infos: list[str] = field(default_factory=list)
    error: str | None = None
    cost_usd: float = 0.0
    steer: str | None = None
    restarts: int = 0
    message: str | None = None  # a PAUSE signal's message

    def event(self) -> str:
        return f"subagent.{self.status}"

    def data(self, seq: int) -> dict[str, Any]:
        return {"seq": seq, "status": self.status, "answer": self.answer,
                "report": self.report, "blockers": self.blockers,
                "blocked_reason": self.blocked_reason, "infos": self.infos,
                "error": self.error, "cost_usd": self.cost_usd, "steer": self.steer,
                "restarts": self.restarts, "message": self.message}


class Subagent:
    """One invocation of one role for one orchestrator session."""

    def __init__(self, folder: RalphFolder, role: str, agent: AgentConfig,
                 config: RalphConfig, invocation: Mapping[str, Any],
                 context: Mapping[str, Any], caller: Caller | None = None,
                 on_note: Callable[[str], None] | None = None) -> None:
        self.folder = folder
        self.role = role
        self.identity = IDENTITIES[role]
        self.agent = agent
        self.config = config
        self.invocation = dict(invocation)
        self.context = context
        self.caller: Caller = caller or call_agent
        self.note = on_note or (lambda _text: None)
        self.mailbox = folder.mailbox()
        self.owner = default_owner(role)
        self.iteration = int(invocation.get("iteration") or context.get("iteration", 1))
        self.task: dict[str, Any] | None = invocation.get("task")
        buffered = list((context.get("buffered") or {}).get(self.identity, []))
        self.steers: list[str] = [*context.get("steer_messages", []),
                                  *(b["message"] for b in buffered if b["type"] == "STEER")]
        self.infos: list[str] = [*(b["message"] for b in buffered if b["type"] == "INFO")]
        self.known_infos: list[str] = list(context.get("info_messages", []))
        self.calls: list[AgentCall] = []
        self.pause_requested = False
        self.pause_message: str | None = None
        self.gate_runs = 0
        self.gate_feedback = ""
        self.gate_reports: list[dict[str, Any]] = []

    # -- signals ------------------------------------------------------------------------

    def poll(self) -> str | None:
        """A boundary poll; returns "abort", "pause" or "steer" when the path changes."""
        verdict = None
        for signal in take_signals(self.mailbox, self.identity, self.owner):
            self.note(f"{now_iso()}   {signal.type} {signal.message or ''}: taken by "
                      f"{self.identity} ({_action(signal, '')})")
            if signal.type == "ABORT":
                return "abort"
            if signal.type == "PAUSE":
                self.pause_requested = True
                self.pause_message = signal.message
                verdict = verdict or "pause"
            elif signal.type == "STEER":
                self.steers.append(signal.message or "")
                verdict = "steer" if verdict != "pause" else verdict
            elif signal.type == "INFO":
                self.infos.append(signal.message or "")
        return verdict

    def signal_list(self) -> list[dict[str, Any]]:
        infos = [*self.known_infos, *(i for i in self.infos if i not in self.known_infos)]
        return ([{"type": "INFO", "message": m} for m in infos]
                + [{"type": "STEER", "message": m} for m in self.steers])

    # -- the lifecycle ------------------------------------------------------------------

    async def run(self) -> Outcome:
        first = self.poll()  # Step 0
        if first == "abort":
            return self._aborted()
        if first == "pause":
            return self._paused()
        if self.role == "executor" and self.task:  # Step 2, Mark WIP
            self.folder.mark(self.iteration, self.task["id"], "/")
            boundary = self.poll()
            if boundary == "abort":
                return self._aborted()
            if boundary == "pause":
                return self._paused()
        restarts = 0
        while True:  # Step 3, Implement (the agent call), polled mid-execution
            call_task = asyncio.create_task(self.caller(
                self.agent, self.prompt(), self.config.invocation_timeout, self.config.retry))
            interrupted = await self._watch(call_task)
            if interrupted == "abort":
                return self._aborted()
            if interrupted == "steer":
                restarts += 1
                continue
            call = call_task.result()
            self.calls.append(call)
            if self.pause_requested:  # the atomic step is done; now pause
                return self._paused()
            after = self.poll()  # boundary between Implement and Verify
            if after == "abort":
                return self._aborted()
            if after == "steer":
                restarts += 1
                continue
            if after == "pause":
                return self._paused()
            gate = await self._gate(call)
            if gate == "retry":
                continue
            if gate is not None:
                return self._gate_failed(gate, restarts)
            break
        return self._verify(call, restarts)

    async def _gate(self, call: AgentCall) -> str | None:
        """Backpressure: the configured gates must pass before the task is ``[x]``;
        a failure goes back to the Executor with the gates' output until
        ``gate_attempts`` are spent. None (accept), "retry", or the failure's reason."""
        gates = getattr(self.config, "gates", ())
        if (self.role != "executor" or not gates or not call.ok
                or (call.answer or {}).get("status", "done") != "done"):
            return None
        self.gate_runs += 1
        report = await asyncio.to_thread(run_gates, gates, self.folder.root)
        self.gate_reports.append(report.to_json())
        decision = gate_decision(report, self.gate_runs, self.config.gate_attempts)
        if decision.action == "accept":
            return None
        if decision.action == "retry":
            self.gate_feedback = decision.feedback
            return "retry"
        return decision.reason or "gates failed"

    def _gate_failed(self, reason: str, restarts: int) -> Outcome:
        outcome = Outcome("failed", error=f"gates: {reason}", infos=self.infos,
                          restarts=restarts,
                          cost_usd=sum(c.usage.cost_usd or 0.0 for c in self.calls))
        self._write_report(Outcome("failed", report=f"gates failed: {reason}",
                                   blockers=[f"gates: {reason}"]))
        self._record(outcome)
        return outcome

    async def _watch(self, call_task: asyncio.Task[AgentCall]) -> str | None:
        """Wait for the call, polling the mailbox; a STEER or ABORT cancels the call."""
        while True:
            done, _ = await asyncio.wait([call_task], timeout=POLL_EVERY)
            if done:
                return None
            found = self.poll()
            if found in ("abort", "steer"):
                call_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await call_task
                return found

    def prompt(self) -> str:
        ctx = self.context
        n = self.iteration
        base: dict[str, Any] = {
            "session": self.folder.id, "mode": self.invocation.get("mode"),
            "task": self.task, "workdir": str(self.folder.workdir),
            "knowledge": str(self.folder.iteration(n) / "knowledge"),
            "docs": str(self.folder.docs), "resumed": ctx.get("pause_message") or "",
            "gate_feedback": self.gate_feedback,
        }
        if self.role == "planner":
            replan = ctx.get("replan") if base["mode"] == "replan" else None
            if replan:
                lines = [t["title"] for t in replan.get("remaining", [])]
                base.update(replan=replan, blockers=replan.get("blockers", []))
            else:
                lines = [ln for ln in self.folder.request().splitlines() if ln.strip()]
                base.update(blockers=[])
            base["request_lines"] = lines or ["(nothing left to do)"]
        if self.role == "reviewer" and self.task:
            report = self.folder.iteration(n) / "tasks" / f"{self.task['id']}.md"
            base["report"] = report.read_text(encoding="utf-8") if report.exists() else ""
        if self.role == "librarian":
            base["approval"] = ctx.get("approval") or ""
        if self.role == "questioner":
            base["blockers"] = list(ctx.get("blockers", []))
        return render_prompt(PROMPTS / f"{self.role}.j2", context=dict(ctx), input=base,
                             signals=self.signal_list())

    # -- endings ------------------------------------------------------------------------

    def _verify(self, call: AgentCall, restarts: int) -> Outcome:
        cost = sum(c.usage.cost_usd or 0.0 for c in self.calls)
        if not call.ok:
            outcome = Outcome("failed", error=call.error, infos=self.infos, cost_usd=cost,
                              restarts=restarts)
            self._record(outcome)
            return outcome
        answer = call.answer or {}
        if self.role != "executor":
            outcome = Outcome("completed", answer=answer, infos=self.infos, cost_usd=cost,
                              restarts=restarts)
            self._record(outcome)
            return outcome
        assert self.task is not None
        steer = answer.get("steer")
        report = str(answer.get("report") or "")
        if answer.get("status") == "blocked":
            blockers = [str(b) for b in answer.get("blockers") or ["blocked"]]
            scope = any(b.startswith("STEER scope change:") for b in blockers)
            outcome = Outcome("blocked", answer=answer, report=report, blockers=blockers,
                              blocked_reason="scope_change" if scope else "blocked",
                              infos=self.infos, cost_usd=cost, steer=steer,
                              restarts=restarts)
            self.folder.mark(self.iteration, self.task["id"], "F", blockers[0])
        else:
            outcome = Outcome("completed", answer=answer, report=report, infos=self.infos,
                              cost_usd=cost, steer=steer, restarts=restarts)
            self.folder.mark(self.iteration, self.task["id"], "x")
        self._write_report(outcome)
        self._record(outcome)
        return outcome

    def _aborted(self) -> Outcome:
        if self.task and self.role == "executor":
            self.folder.mark(self.iteration, self.task["id"], "F", "Aborted by signal")
        outcome = Outcome("blocked", blockers=["Aborted by signal"], blocked_reason="aborted",
                          infos=self.infos)
        self._record(outcome)
        return outcome

    def _paused(self) -> Outcome:
        n = self.iteration
        tasks = self.folder.progress(n)
        if self.task and self.role == "executor":
            tasks = [Task(t.id, t.title, " ") if t.id == self.task["id"] else t
                     for t in tasks]
        self.folder.write_progress(n, tasks, "Paused by signal.")
        outcome = Outcome("paused", infos=self.infos, message=self.pause_message)
        self._record(outcome)
        return outcome

    def _write_report(self, outcome: Outcome) -> None:
        assert self.task is not None
        branch = {"invalidated": "(a) work invalidated: Implement restarted",
                  "additive": "(b) additive: appended to the constraints",
                  "scope": "(c) scope change: blocked, escalated"}.get(outcome.steer or "")
        lines = [f"# {self.task['id']}: {self.task['title']}", "",
                 f"status: {outcome.status}", "", outcome.report or ""]
        if self.steers:
            lines += ["", "## STEER", *(f"- {s}" for s in self.steers)]
            lines.append(f"- branch taken: {branch or 'none reported by the agent'}")
        if outcome.restarts:
            lines.append(f"- Implement restarted {outcome.restarts} time(s) by STEER")
        if outcome.blockers:
            lines += ["", "## Blockers", *(f"- {b}" for b in outcome.blockers)]
        for k, gates in enumerate(self.gate_reports, start=1):
            results: list[dict[str, Any]] = gates.get("results") or []
            lines += ["", f"## Gates, run {k}: {'passed' if gates.get('passed') else 'failed'}"]
            lines += [f"- {r['name']}: exit {r['exit']}" for r in results]
        write_text(self.folder.iteration(self.iteration) / "tasks" / f"{self.task['id']}.md",
                   "\n".join(lines).rstrip() + "\n")

    def _record(self, outcome: Outcome) -> None:
        """iterations/<N>/invocations/<seq>-<role>.md: every call's prompt, answer, usage."""
        seq = int(self.invocation.get("seq", 0))
        parts = [f"# Invocation {seq}: {self.identity}"
                 + (f" on {self.task['id']}" if self.task else ""), "",
                 f"outcome: {outcome.status}"
                 + (f" ({outcome.blocked_reason})" if outcome.blocked_reason else "")]
        for k, call in enumerate(self.calls, start=1):
            usage = yaml.safe_dump(call.usage.to_json(), default_flow_style=True).strip()
            parts += ["", f"## Call {k} ({call.attempts} attempt(s), {call.elapsed:.3f}s, "
                      f"exit {call.exit_code})", "", "### Prompt", "", "```", call.prompt.rstrip(),
                      "```", "", "### Answer", "", "```", call.text.rstrip(), "```", "",
                      f"usage: {usage}"]
            if call.error:
                parts.append(f"error: {call.error}")
        if self.role == "reviewer" and self.task and self.calls and self.calls[-1].answer:
            write_text(self.folder.iteration(self.iteration) / "reviews" /
                       f"{self.task['id']}.md",
                       yaml.safe_dump(self.calls[-1].answer, sort_keys=False))
        write_text(self.folder.iteration(self.iteration) / "invocations" /
                   f"{seq:03d}-{self.role}.md", "\n".join(parts) + "\n")
