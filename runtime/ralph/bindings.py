"""The orchestrator's guards and actions (specs/ralph_orchestrator.yaml).

They keep the session context and the session folder in step; they never run an agent.
An ``invoke_*`` entry action prepares the invocation its state makes
(``context.invocation``: its number, role, mode, task, the STEER and INFO it is given,
the role's brief); the state's ``invoke: machine: ralph_subagent`` runs it as a child
session, whose ending comes back as ``done.invoke.<role>.<final state>`` with the
subagent's context as ``output``.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from interlock.machines.bindings import Bindings, Call
from interlock.runtime.agents.base import MUST_FIX_REASONS
from interlock.runtime.ralph.config import IDENTITIES
from interlock.runtime.ralph.folder import RalphFolder, Task, now_iso, write_text

ORCHESTRATOR = IDENTITIES["orchestrator"]
Ctx = MutableMapping[str, Any]


def _for_orchestrator(data: Any) -> bool:
    target = (data or {}).get("target") or "ALL"
    return target in ("ALL", ORCHESTRATOR)


def make_bindings(folder: RalphFolder,
                  over_limit: Callable[[Ctx], bool] | None = None,
                  asks_corrections: Callable[[], bool] | None = None) -> Bindings:
    """The bindings of one Ralph session's orchestrator; ``over_limit`` says whether the
    engine's limits forbid another invocation (None: no limits), ``asks_corrections``
    whether rejected tasks wait for the human's correction (None: never)."""

    def iteration(c: Call) -> int:
        return int(c.context.get("iteration", 1))

    def invoke(c: Call, role: str, mode: str, task: Any = None,
               brief: dict[str, Any] | None = None) -> None:
        """Prepare the invocation the state's invoke makes (its input)."""
        ctx = c.context
        ctx["session_id"] = folder.id  # what the subagent's input names
        identity = IDENTITIES[role]
        buffered = ctx["buffered"].pop(identity, [])
        ctx["invocation_seq"] = int(ctx.get("invocation_seq", 0)) + 1
        ctx["invocation"] = {
            "seq": ctx["invocation_seq"], "role": role, "mode": mode, "task": task,
            "iteration": iteration(c),
            "steers": [*ctx["steer_messages"],
                       *(b["message"] for b in buffered if b["type"] == "STEER")],
            "infos": [*ctx["info_messages"],
                      *(b["message"] for b in buffered if b["type"] == "INFO")],
            "brief": brief or {}}

    def done_invoking(c: Call) -> None:
        c.context["invocation"] = None

    def absorb(c: Call) -> None:
        """What the subagent learned (INFO it took itself, for every later invocation)
        and spent."""
        out = _output(c)
        given = (c.context.get("invocation") or {}).get("infos") or []
        for info in [*given, *(out.get("learned") or [])]:
            if info not in c.context["info_messages"]:
                c.context["info_messages"].append(info)
        c.context["cost_usd"] = float(c.context.get("cost_usd") or 0.0) + float(
            out.get("cost_usd") or 0.0)

    # -- signals ------------------------------------------------------------------------

    def ingest_steer(c: Call) -> None:
        if not _for_orchestrator(c.data):
            c.context["buffered"].setdefault(c.data["target"], []).append(
                {"type": "STEER", "message": c.data.get("message")})
            return
        c.context["steer_messages"].append(c.data.get("message"))

    def ingest_info(c: Call) -> None:
        if not _for_orchestrator(c.data):
            c.context["buffered"].setdefault(c.data["target"], []).append(
                {"type": "INFO", "message": c.data.get("message")})
            return
        c.context["info_messages"].append(c.data.get("message"))

    def hold_pause_message(c: Call) -> None:
        """A PAUSE (its message goes to the invocation made on resume): a signal, the
        ``resume`` event's message, or the PAUSE a subagent took itself."""
        data = c.data or {}
        out = _output(c)
        message = out.get("held_message") if "output" in data else data.get("message")
        if folder.metadata().get("paused_for"):  # a failure's pause is over, or replaced
            folder.update_metadata(paused_for=None)
        if message:
            c.context["pause_message"] = message
        if "output" in data:
            if out.get("verified"):
                c.context["pause_pending"] = True  # its work is recorded: pause now
            else:
                absorb(c)
                done_invoking(c)

    def note_abort(c: Call) -> None:
        c.context["status"] = "aborted"

    def record_paused(c: Call) -> None:
        c.context["pause_pending"] = False
        c.context["invocation"] = None

    def aborted_by_signal(c: Call) -> bool:
        return _output(c).get("blocked_reason") == "aborted"

    def subagent_paused(c: Call) -> bool:
        return (c.data or {}).get("state") == "paused"

    def subagent_blocked(c: Call) -> bool:
        return (c.data or {}).get("state") == "blocked"

    def finished_work(c: Call) -> bool:
        return bool(_output(c).get("verified"))

    def agent_to_fix(c: Call) -> bool:
        """The subagent's agent failed in a way the human fixes first (not logged in, a
        refused permission, an unknown model): another try would fail the same way."""
        return _output(c).get("error_reason") in MUST_FIX_REASONS

    def pause_pending(c: Call) -> bool:
        return bool(c.context.get("pause_pending"))

    def for_current_iteration(c: Call) -> bool:
        wanted = (c.data or {}).get("iteration")
        return wanted is None or int(wanted) == iteration(c)

    def archive_stale_signal(c: Call) -> None:
        return None

    # -- planning -----------------------------------------------------------------------

    def invoke_planner(c: Call) -> None:
        folder.open_iteration(iteration(c))
        invoke(c, "planner", "plan")

    def invoke_replanner(c: Call) -> None:
        folder.open_iteration(iteration(c))
        replan = c.context.get("replan") or {"from": iteration(c), "remaining": [],
                                               "blockers": list(c.context["blockers"])}
        invoke(c, "planner", "replan", brief={"replan": replan,
                                               "answers": c.context.get("answers") or ""})

    def record_plan(c: Call) -> None:
        answer = _output(c).get("answer") or {}
        tasks = [{"id": str(t["id"]), "title": str(t.get("title", t["id"]))}
                 for t in answer.get("tasks", [])]
        batches = [list(map(str, b)) for b in answer.get("batches", [])] or [
            [t["id"] for t in tasks]]
        ctx = c.context
        ctx.update(plan_tasks=tasks, batches=batches, batch=0, results={}, rejected=[],
                   blockers=[], task_queue=list(batches[0]) if batches else [],
                   review_queue=[])
        absorb(c)
        done_invoking(c)
        folder.write_progress(iteration(c), [Task(t["id"], t["title"]) for t in tasks])
        write_text(folder.iteration(iteration(c)) / "plan.yaml", _plan_text(tasks, batches))

    # -- executing ----------------------------------------------------------------------

    def has_next_task(c: Call) -> bool:
        return bool(c.context["task_queue"])

    def take_next_task(c: Call) -> None:
        ident = c.context["task_queue"].pop(0)
        c.context["current_task"] = _task(c.context, ident)

    def invoke_executor(c: Call) -> None:
        invoke(c, "executor", "execute", c.context["current_task"])

    def record_task_result(c: Call) -> None:
        out = _output(c)
        task = c.context["current_task"] or {}
        c.context["results"][task.get("id", "?")] = {
            "status": "completed", "report": (out.get("answer") or {}).get("report"),
            "blockers": list(out.get("blockers") or [])}
        c.context["review_queue"].append(task.get("id"))
        c.context["steer_messages"] = []
        c.context["pause_message"] = None
        absorb(c)
        done_invoking(c)

    def record_blocker(c: Call) -> None:
        out = _output(c)
        blockers = list(out.get("blockers") or ["blocked"])
        c.context["blockers"].extend(blockers)
        task = c.context.get("current_task")
        if task and (c.context.get("invocation") or {}).get("role") == "executor":
            c.context["results"][task["id"]] = {
                "status": "blocked", "blockers": blockers,
                "report": (out.get("answer") or {}).get("report")}
            c.context["steer_messages"] = []
        absorb(c)
        done_invoking(c)

    def record_failure(c: Call) -> None:
        data = c.data or {}
        why = _output(c).get("error") or data.get("message") or data.get("reason")
        c.context["blockers"].append(f"invocation failed: {why}")
        role = (c.context.get("invocation") or {}).get("role")
        folder.update_metadata(paused_for=f"{IDENTITIES.get(str(role), 'a subagent')} "
                               f"failed: {why} — then `interlock ralph run {folder.id}`")
        absorb(c)
        done_invoking(c)

    def mark_task_failed(c: Call) -> None:
        task = c.context.get("current_task") or {}
        error = _output(c).get("error") or "the executor failed"
        c.context["results"][task.get("id", "?")] = {"status": "failed", "blockers": [error]}
        folder.mark(iteration(c), task.get("id", "?"), "F", str(error))
        absorb(c)
        done_invoking(c)

    # -- reviewing ----------------------------------------------------------------------

    def has_next_review(c: Call) -> bool:
        queue = c.context["review_queue"]
        while queue and c.context["results"].get(queue[0], {}).get("status") != "completed":
            queue.pop(0)  # only completed work is reviewed
        return bool(queue)

    def take_next_review(c: Call) -> None:
        c.context["current_task"] = _task(c.context, c.context["review_queue"].pop(0))

    def invoke_reviewer(c: Call) -> None:
        invoke(c, "reviewer", "review", c.context["current_task"])

    def record_review(c: Call) -> None:
        task = c.context.get("current_task") or {}
        verdict = str((_output(c).get("answer") or {}).get("verdict", "accept"))
        if verdict != "accept":
            c.context["rejected"].append(task.get("id"))
            folder.mark(iteration(c), task.get("id", "?"), "F", f"review: {verdict}")
        absorb(c)
        done_invoking(c)

    def record_review_failure(c: Call) -> None:
        task = c.context.get("current_task") or {}
        c.context["rejected"].append(task.get("id"))
        absorb(c)
        done_invoking(c)

    # -- questions ----------------------------------------------------------------------

    def has_open_blockers(c: Call) -> bool:
        return bool(_open_blockers(c.context)) and not c.context.get("answers")

    def invoke_questioner(c: Call) -> None:
        folder.open_iteration(iteration(c))
        invoke(c, "questioner", "ask", brief={"blockers": _open_blockers(c.context)})

    def record_questions(c: Call) -> None:
        answer = _output(c).get("answer") or {}
        questions = [q for q in answer.get("questions") or [] if isinstance(q, dict)]
        if not questions:  # the Questioner failed or asked nothing: ask the blockers
            questions = [{"id": f"q{k}", "kind": "text", "prompt": f"What about: {b}?",
                          "options": []}
                         for k, b in enumerate(_open_blockers(c.context), start=1)]
        c.context["questions"] = questions
        lines = [f"# Questions of iteration {iteration(c)}", "",
                 "Answer with: interlock ralph resume "
                 f"{folder.id} --message \"...\"", ""]
        for q in questions:
            lines.append(f"- {q.get('id')}: {q.get('prompt')}")
            lines += [f"  - {o.get('key')}: {o.get('label')}" for o in q.get("options") or []]
        write_text(folder.iteration(iteration(c)) / "questions.md", "\n".join(lines) + "\n")
        absorb(c)
        done_invoking(c)

    def note_questions(c: Call) -> None:
        folder.update_metadata(waiting_for="answers to iterations/"
                               f"{iteration(c)}/questions.md")

    def record_answers(c: Call) -> None:
        message = (c.data or {}).get("message") or "(no answer given)"
        c.context["answers"] = message
        folder.update_metadata(waiting_for=None)
        path = folder.iteration(iteration(c)) / "questions.md"
        if path.exists():
            write_text(path, path.read_text(encoding="utf-8") + f"\nAnswers: {message}\n")

    # -- corrections of rejected tasks (the review menu) ------------------------------

    def has_rejections_to_correct(c: Call) -> bool:
        return (asks_corrections is not None and asks_corrections()
                and bool(to_correct(c.context)))

    def note_corrections(c: Call) -> None:
        tasks = to_correct(c.context)
        folder.update_metadata(waiting_for="corrections of " + ", ".join(tasks)
                               + f" (interlock ralph review {folder.id} TASK)")

    def record_correction(c: Call) -> None:
        data = c.data or {}
        task = data.get("task")
        if task in to_correct(c.context):
            c.context["corrected"].append(task)
            folder.note_correction(iteration(c), str(task), str(data.get("resolution")
                                                                 or "corrected"))
        if not to_correct(c.context):
            folder.update_metadata(waiting_for=None)

    def skip_corrections(c: Call) -> None:
        why = (c.data or {}).get("reason") or "ralph resume"
        for task in to_correct(c.context):
            c.context["corrected"].append(task)
            folder.note_correction(iteration(c), task, f"none ({why})")
        folder.update_metadata(waiting_for=None)

    def needs_replanning(c: Call) -> bool:
        ctx = c.context
        failed = [i for i, r in ctx["results"].items() if r.get("status") != "completed"]
        return bool(failed or ctx["rejected"] or ctx["blockers"])

    def open_iteration(c: Call) -> None:
        ctx = c.context
        old = iteration(c)
        remaining = _remaining(ctx)
        folder.close_iteration(old)
        ctx["iteration"] = old + 1
        ctx["replan"] = {"from": old, "remaining": remaining, "blockers": list(ctx["blockers"]),
                         "rejected": list(dict.fromkeys(ctx["rejected"]))}
        ctx.update(blockers=[], rejected=[], results={}, task_queue=[], review_queue=[],
                   answers=None, questions=[], corrected=[])
        folder.open_iteration(old + 1)
        for name in folder.staged(old):  # knowledge not yet approved goes on, marked
            text = (folder.iteration(old) / "knowledge" / name).read_text(encoding="utf-8")
            carried = name
            if not text.startswith("---\ncarried_from:"):
                text = f"---\ncarried_from: iteration {old}\n---\n{text}"
                carried = f"carried-i{old}-{name}"
            target = folder.iteration(old + 1) / "knowledge" / carried
            if not target.exists():
                write_text(target, text)
        folder.update_metadata(iteration=old + 1)

    def has_next_batch(c: Call) -> bool:
        return int(c.context["batch"]) + 1 < len(c.context["batches"])

    def next_batch(c: Call) -> None:
        c.context["batch"] += 1
        c.context["task_queue"] = list(c.context["batches"][c.context["batch"]])

    # -- knowledge ----------------------------------------------------------------------

    def has_staged_knowledge(c: Call) -> bool:
        return bool(folder.staged(iteration(c)))

    def invoke_librarian_promote(c: Call) -> None:
        invoke(c, "librarian", "promote",
               brief={"approval": c.context.get("approval") or ""})

    def carry_forward_knowledge(c: Call) -> None:
        n = iteration(c)
        for name in folder.staged(n):
            path = folder.iteration(n) / "knowledge" / name
            text = path.read_text(encoding="utf-8")
            if not text.startswith("---\ncarried_from:"):
                write_text(path, f"---\ncarried_from: iteration {n}\n---\n{text}")
        c.context["knowledge"] = "carried_forward"

    def record_approval(c: Call) -> None:
        c.context["approval"] = (c.data or {}).get("message") or "approved"

    def record_promotion(c: Call) -> None:
        c.context["knowledge"] = "promoted"
        absorb(c)
        done_invoking(c)

    def keep_staged_knowledge(c: Call) -> None:
        c.context["knowledge"] = "skipped"

    # -- abort and completion -----------------------------------------------------------

    def cancel_running_subagents(c: Call) -> None:
        c.context["invocation"] = None  # the runner stops the process group it runs

    def mark_in_progress_tasks_failed(c: Call) -> None:
        n = iteration(c)
        tasks = [Task(t.id, t.title, "F", "Aborted by signal") if t.marker == "/" else t
                 for t in folder.progress(n)]
        folder.write_progress(n, tasks)

    def mark_session_aborted(c: Call) -> None:
        c.context["status"] = "aborted"
        folder.update_metadata(state="COMPLETE", status="aborted")

    def record_completed_at(c: Call) -> None:
        folder.close_iteration(iteration(c))

    def finalize_session(c: Call) -> None:
        status = "aborted" if c.context.get("status") == "aborted" else "completed"
        c.context["status"] = status
        folder.close_iteration(iteration(c))
        folder.update_metadata(state="COMPLETE", status=status, completed_at=now_iso())

    def noop(c: Call) -> None:
        return None

    def limit_reached(c: Call) -> bool:
        return over_limit is not None and over_limit(c.context)

    return {
        "record_state": noop, "ingest_steer": ingest_steer, "ingest_info": ingest_info,
        "hold_pause_message": hold_pause_message, "note_abort": note_abort,
        "record_paused": record_paused, "aborted_by_signal": aborted_by_signal,
        "subagent_paused": subagent_paused, "subagent_blocked": subagent_blocked,
        "finished_work": finished_work, "pause_pending": pause_pending,
        "agent_to_fix": agent_to_fix,
        "has_open_blockers": has_open_blockers, "over_limit": limit_reached,
        "invoke_questioner": invoke_questioner,
        "record_questions": record_questions, "note_questions": note_questions,
        "record_answers": record_answers,
        "has_rejections_to_correct": has_rejections_to_correct,
        "note_corrections": note_corrections, "record_correction": record_correction,
        "skip_corrections": skip_corrections,
        "for_current_iteration": for_current_iteration,
        "archive_stale_signal": archive_stale_signal,
        "invoke_planner": invoke_planner, "invoke_replanner": invoke_replanner,
        "record_plan": record_plan, "has_next_task": has_next_task,
        "take_next_task": take_next_task, "invoke_executor": invoke_executor,
        "record_task_result": record_task_result, "record_blocker": record_blocker,
        "record_failure": record_failure, "mark_task_failed": mark_task_failed,
        "has_next_review": has_next_review, "take_next_review": take_next_review,
        "invoke_reviewer": invoke_reviewer, "record_review": record_review,
        "record_review_failure": record_review_failure,
        "needs_replanning": needs_replanning, "open_iteration": open_iteration,
        "has_next_batch": has_next_batch, "next_batch": next_batch,
        "has_staged_knowledge": has_staged_knowledge,
        "invoke_librarian_promote": invoke_librarian_promote,
        "carry_forward_knowledge": carry_forward_knowledge,
        "keep_staged_knowledge": keep_staged_knowledge,
        "record_approval": record_approval, "record_promotion": record_promotion,
        "cancel_running_subagents": cancel_running_subagents,
        "mark_in_progress_tasks_failed": mark_in_progress_tasks_failed,
        "mark_session_aborted": mark_session_aborted,
        "record_completed_at": record_completed_at, "finalize_session": finalize_session,
    }


def _output(c: Call) -> dict[str, Any]:
    """The subagent's final context, from its ``done.invoke`` event (empty otherwise)."""
    out = (c.data or {}).get("output")
    return dict(out) if isinstance(out, dict) else {}


def to_correct(ctx: Ctx) -> list[str]:
    """The tasks Reviewers rejected in the last iteration whose correction the human has
    not given yet (``corrected`` lists those done)."""
    done = set(ctx.get("corrected") or [])
    return [t for t in (ctx.get("replan") or {}).get("rejected") or [] if t not in done]


def _open_blockers(ctx: Ctx) -> list[str]:
    """Blockers the human has to answer: not a scope change (the replanner takes it), not
    an abort, not a failed call or gate (retried by replanning)."""
    found = [*ctx["blockers"], *((ctx.get("replan") or {}).get("blockers") or [])]
    return [b for b in dict.fromkeys(found)
            if not str(b).startswith(("STEER scope change:", "Aborted by signal",
                                      "invocation failed:", "gates:"))]


def _task(ctx: Ctx, ident: str) -> dict[str, Any]:
    for task in ctx["plan_tasks"]:
        if task["id"] == ident:
            return dict(task)
    return {"id": ident, "title": ident}


def _remaining(ctx: Ctx) -> list[dict[str, Any]]:
    """Tasks of the plan not completed and accepted, a scope change's new objective in
    place of its old title."""
    out = []
    for task in ctx["plan_tasks"]:
        result = ctx["results"].get(task["id"], {})
        if result.get("status") == "completed" and task["id"] not in ctx["rejected"]:
            continue
        title = task["title"]
        for blocker in result.get("blockers") or []:
            if str(blocker).startswith("STEER scope change:"):
                text = str(blocker).split(":", 1)[1].strip()
                title = text.split(":", 1)[1].strip() if text.lower().startswith(
                    "scope:") else text
        out.append({"id": task["id"], "title": title})
    return out


def _plan_text(tasks: list[dict[str, Any]], batches: list[list[str]]) -> str:
    import yaml

    return yaml.safe_dump({"tasks": tasks, "batches": batches}, sort_keys=False)
